"""procs.spawn: what the command gets is the same whether posix_spawn or Popen started it.

Each case runs in a process of its own started with close_fds, as the zygote is (the test runner's
may hold inherited fds, which send every spawn to Popen)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="posix_spawn's setsid and /proc")

# what the command sees: its cwd, session, stdin, fds past stderr, an env variable
SHOW = ("import os, sys; print(os.getcwd(), os.getsid(0) == os.getpid(), os.readlink('/proc/self/fd/0'),"
        " len([f for f in os.listdir('/proc/self/fd') if int(f) > 2]), os.environ.get('SPAWN_TEST'));"
        " print('err', file=sys.stderr)")
# the signals a shell got ignored (Python ignores SIGPIPE itself, so a Python command cannot tell)
IGNORED = ["/bin/sh", "-c", "grep SigIgn /proc/$$/status"]
PIPE_XFSZ = 1 << 12 | 1 << 24


def in_clean_process(tmp_path, body: str) -> dict:
    """Run ``body`` (with ``procs``, ``work``, ``log``, ``env`` and ``out``, a dict it fills) in a fresh process."""
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    script = "import json, os, subprocess, sys\nfrom trainyard.launch import procs\n" \
             f"work, log, out = {str(work)!r}, {str(tmp_path / 'output.log')!r}, {{}}\n" \
             "env = {**os.environ, 'SPAWN_TEST': 'x'}\nhere = os.getcwd()\n" + textwrap.dedent(body) + \
             "\nout['cwd_kept'] = os.getcwd() == here\nprint(json.dumps(out))\n"
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out.pop("cwd_kept")  # the launcher's own cwd is left as it was
    return out


def test_spawned_directly_the_command_gets_what_popen_would_give_it(tmp_path):
    out = in_clean_process(tmp_path, f"""
        proc = procs.spawn([sys.executable, "-c", {SHOW!r}], work, env, log)
        out.update(kind=type(proc).__name__, rc=proc.wait(), poll=proc.poll())
    """)
    assert out == {"kind": "Child", "rc": 0, "poll": 0}  # no thread, no inheritable fd: posix_spawn
    # one fd past stderr: the one listdir itself opens
    assert (tmp_path / "output.log").read_text() == f"{tmp_path / 'work'} True /dev/null 1 x\nerr\n"


def test_an_inheritable_fd_sends_the_spawn_to_popen_which_closes_it(tmp_path):
    out = in_clean_process(tmp_path, f"""
        r, w = os.pipe()
        os.set_inheritable(w, True)
        proc = procs.spawn([sys.executable, "-c", {SHOW!r}], work, env, log)
        out.update(kind=type(proc).__name__, rc=proc.wait())
    """)
    assert out == {"kind": "Popen", "rc": 0}
    assert (tmp_path / "output.log").read_text() == f"{tmp_path / 'work'} True /dev/null 1 x\nerr\n"


def test_the_command_is_looked_up_along_its_own_path_and_a_missing_one_fails_as_exec(tmp_path):
    bindir, other = tmp_path / "bin", tmp_path / "bin2"
    bindir.mkdir()
    other.mkdir()
    (bindir / "spawn-test-tool").write_text("#!/bin/sh\necho tool \"$@\" \"$PWD\"\n")
    (bindir / "spawn-test-tool").chmod(0o755)
    (other / "spawn-test-tool").write_text("not executable")  # skipped, as execvp skips it
    out = in_clean_process(tmp_path, f"""
        env["PATH"] = {f"{other}:{bindir}:/usr/bin:/bin"!r}
        proc = procs.spawn(["spawn-test-tool", "a"], work, env, log)
        out.update(kind=type(proc).__name__, rc=proc.wait())
        for argv, cwd in ((["no-such-command-xyz"], work), (["true"], work + "/no-such-dir")):
            try:
                procs.spawn(argv, cwd, env, log)
            except OSError as e:
                out[argv[0]] = type(e).__name__
    """)
    assert out == {"kind": "Child", "rc": 0, "no-such-command-xyz": "FileNotFoundError", "true": "FileNotFoundError"}
    assert (tmp_path / "output.log").read_text() == f"tool a {tmp_path / 'work'}\n"


def test_a_child_reports_its_signal_and_times_out_as_popen(tmp_path):
    out = in_clean_process(tmp_path, """
        proc = procs.spawn([sys.executable, "-c", "import time; time.sleep(30)"], work, env, log)
        out.update(kind=type(proc).__name__, running=proc.poll() is None)
        try:
            proc.wait(0.05)
        except subprocess.TimeoutExpired:
            out["timed_out"] = True
        os.kill(proc.pid, 9)
        out.update(rc=proc.wait(), returncode=proc.returncode)
    """)
    assert out == {"kind": "Child", "running": True, "timed_out": True, "rc": -9, "returncode": -9}


@pytest.mark.parametrize("inherited", [False, True])
def test_sigpipe_and_sigxfsz_are_back_to_their_defaults_for_the_command(tmp_path, inherited):
    out = in_clean_process(tmp_path, f"""
        if {inherited}:
            os.set_inheritable(os.pipe()[1], True)  # Popen's way
        proc = procs.spawn({IGNORED!r}, work, env, log)
        out.update(kind=type(proc).__name__, rc=proc.wait())
    """)
    assert out == {"kind": "Popen" if inherited else "Child", "rc": 0}
    mask = int((tmp_path / "output.log").read_text().split()[1], 16)
    assert mask & PIPE_XFSZ == 0
