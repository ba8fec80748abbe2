"""The command's process tree: spawn it, watch it, and leave nothing behind.

The launcher makes itself a *child subreaper* (Linux), so a grandchild that
daemonizes (double fork, ``setsid``) is reparented to the launcher instead of
to init. Then "the launcher's descendants" is exactly "what the command
started", and "the launcher has no children left" means the whole tree is gone
and reaped.

psutil is imported only when needed (memory sampling, or killing leftovers):
a command that exits cleanly never pays for the import.
"""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
import threading
import time

from trainyard.launch.marks import mark

PR_SET_CHILD_SUBREAPER = 36
# children whose exit status a Popen in another thread waits for (`trainyard exec`'s commands, py-spy): not
# orphans, though the main loop's reaping would otherwise take their status first (and Popen would read 0)
OWNED: set[int] = set()
_SPAWNING = threading.Lock()  # held from the fork of such a child until its pid is in OWNED
_subreaper_pid = 0  # the process that became one (a fork does not inherit it: its pid differs)


def become_subreaper() -> bool:
    """Ask the kernel to reparent orphaned descendants to this process (once: a launcher forked
    ahead asks while it waits for its attempt, off the path)."""
    global _subreaper_pid
    if _subreaper_pid == os.getpid():
        return True
    if not sys.platform.startswith("linux"):
        return False
    try:
        if load_prctl()(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
            return False
    except (OSError, AttributeError):
        return False
    _subreaper_pid = os.getpid()
    return True


_prctl = None  # libc's prctl, looked up once


def load_prctl():  # noqa: ANN201  (a ctypes function; ctypes is imported here)
    """libc's ``prctl``. The zygote looks it up before it forks: a CDLL made in each launcher (a class
    made per instance, dlopen, dlsym) cost ~60 copy-on-write faults there (~0.15 ms of CPU)."""
    global _prctl
    if _prctl is None:
        import ctypes

        _prctl = ctypes.CDLL(None, use_errno=True).prctl
    return _prctl


def spawn(argv: list[str], cwd: str, env: dict[str, str], log_path: str) -> "subprocess.Popen | Child":
    """Start the command in its own session, writing straight into the log file.

    A file handle rather than a pipe: the command keeps writing even if the
    launcher dies, and no thread has to copy bytes. ``os.posix_spawn`` where it
    does what Popen would (see :func:`_spawn_direct`): Popen's own Python (its
    handles, its error pipe, its object) cost ~0.15 ms and ~50 page copies in a
    launcher fresh from the zygote, on the path to the command's exec.
    """
    child = _spawn_direct(argv, cwd, env, log_path)
    if child is not None:
        return child
    with open(log_path, "ab") as log, open(os.devnull, "rb") as devnull:
        return subprocess.Popen(
            argv, cwd=cwd, env=env, stdin=devnull, stdout=log, stderr=subprocess.STDOUT,
            start_new_session=True, close_fds=True,
        )


class Child:
    """A command started by :func:`_spawn_direct`: the part of ``subprocess.Popen`` the launcher uses."""

    def __init__(self, argv: list[str], pid: int) -> None:
        self.args, self.pid, self.returncode = argv, pid, None

    def poll(self) -> int | None:
        if self.returncode is None:
            try:
                pid, status = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:  # reaped elsewhere: its status is gone (Popen says 0 too)
                self.returncode = 0
            else:
                if pid == self.pid:
                    self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if timeout is not None:
            end = time.monotonic() + timeout
            while self.poll() is None:
                if time.monotonic() >= end:
                    raise subprocess.TimeoutExpired(self.args, timeout)
                time.sleep(0.005)
        while self.returncode is None:
            try:
                _, status = os.waitpid(self.pid, 0)
            except ChildProcessError:
                self.returncode = 0
            else:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode


_SIGNALS_RESET = tuple(getattr(signal, name) for name in ("SIGPIPE", "SIGXFZ", "SIGXFSZ") if hasattr(signal, name))


def _spawn_direct(argv: list[str], cwd: str, env: dict[str, str], log_path: str) -> Child | None:
    """``os.posix_spawn`` (a vfork and exec, as Popen's) with what Popen does around it: its own session,
    stdin from /dev/null, stdout and stderr to the log, SIGPIPE and SIGXFSZ back to their defaults,
    the command looked up along its own PATH, in ``cwd``. None where that would not be the same,
    for Popen to do: another thread (the launcher's cwd is changed for the spawn: posix_spawn has
    no chdir here), an fd the command would inherit (Popen closes them all; Python makes its own
    close on exec), or no candidate that looks executable (Popen then raises exec's own error)."""
    if not hasattr(os, "posix_spawn") or not sys.platform.startswith("linux") or threading.active_count() != 1:
        return None
    if not nothing_inherited():
        return None
    program = argv[0]
    candidates = [program] if "/" in program else on_path(program, env)
    actions = [(os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
               (os.POSIX_SPAWN_OPEN, 1, log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666),
               (os.POSIX_SPAWN_DUP2, 1, 2)]
    here = os.open(".", os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.chdir(cwd)  # its error is Popen's, raised the same way
        for path in candidates:  # relative ones are the command's cwd's, as exec takes them after Popen's chdir
            if not (os.access(path, os.X_OK) and not os.path.isdir(path)):
                continue
            try:
                return Child(argv, os.posix_spawn(path, argv, env, file_actions=actions, setsid=True,
                                                  setsigdef=_SIGNALS_RESET))
            except (FileNotFoundError, NotADirectoryError, PermissionError):
                continue  # as execvp: the next one on the PATH
        return None
    finally:
        os.fchdir(here)
        os.close(here)


def nothing_inherited() -> bool:
    """Whether every fd past stderr is close-on-exec, as Popen's close_fds would leave the command."""
    try:
        names = os.listdir("/proc/self/fd")
    except OSError:
        return False
    for name in names:
        fd = int(name)
        if fd > 2:
            try:
                if os.get_inheritable(fd):
                    return False
            except OSError:  # the listing's own fd, closed since
                pass
    return True


def on_path(program: str, env: dict[str, str]) -> list[str]:
    """Where exec looks for a bare ``program`` name: each folder of the command's own PATH, in order."""
    return [os.path.join(d or ".", program) for d in os.get_exec_path(env)]


def check_executable(program: str, cwd: str, env: dict[str, str]) -> None:
    """Raise the ``OSError`` that exec'ing ``program`` would, as :func:`spawn` itself does.

    For a command started through a shim (``launch.cgroup``): there the exec
    happens in the shim, too late for the launcher to tell "cannot start" from
    the command's own failure. Same lookup as subprocess: relative to ``cwd``
    when the name has a slash, else along the command's own PATH.
    """
    candidates = [os.path.join(cwd, program)] if "/" in program else on_path(program, env)
    denied = None  # like execvp: a file we may not run is reported only if no later one will do
    for path in candidates:
        if os.path.isfile(path):
            if os.access(path, os.X_OK):
                return
            denied = denied or path
    if denied:
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), denied)
    raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), program)


def watch(proc: subprocess.Popen, wake_fd: int) -> "ExitFd | Waiter":
    """What tells the main loop that the command exited: a pidfd where the kernel has them, else a thread."""
    if hasattr(os, "pidfd_open"):
        try:
            return ExitFd(proc)
        except OSError:  # a kernel before 5.3, or seccomp refusing the call
            pass
    return Waiter(proc, wake_fd)


class ExitFd:
    """The command's pidfd, readable once it exits (Linux 5.3+): the main loop selects on it beside
    its wake pipe, so the exit wakes it directly, with no thread started nor handed the news."""

    def __init__(self, proc: subprocess.Popen):
        self.proc = proc
        self._fd: int | None = os.pidfd_open(proc.pid)

    @property
    def exited(self) -> bool:
        """Whether the command exited; reaps it if so (its status goes to Popen, as with :class:`Waiter`)."""
        return self.proc.poll() is not None

    def fds(self) -> list[int]:
        """What to select on: nothing once the command is reaped (a pidfd stays readable)."""
        return [] if self._fd is None or self.proc.returncode is not None else [self._fd]

    def join(self, timeout: float | None = None) -> None:
        try:
            self.proc.wait(timeout)
        finally:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None


class Waiter:
    """Blocks in ``wait()`` on a thread and pokes ``wake_fd`` when the command exits.

    The main loop then learns of the exit at once instead of on its next tick.
    """

    def __init__(self, proc: subprocess.Popen, wake_fd: int):
        self.proc = proc
        self._wake_fd = wake_fd
        self.exited = False
        self._thread = threading.Thread(target=self._run, name="trainyard-waiter", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        self.proc.wait()
        mark("waiter: command reaped")
        self.exited = True  # before the poke, so the woken main loop sees it
        try:
            os.write(self._wake_fd, b"x")
        except OSError:
            pass

    def fds(self) -> list[int]:
        return []  # the thread pokes the launcher's wake pipe instead

    def join(self, timeout: float | None = None) -> None:
        self._thread.join(timeout)


def signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def group_alive(pgid: int) -> bool:
    """Whether any process (zombies included) is still in the process group."""
    try:
        os.killpg(pgid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


def has_exited(pid: int) -> bool:
    """Whether child ``pid`` has exited, without reaping it (its status stays for Popen)."""
    try:
        return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:
        return True  # already reaped


class Owned:
    """``with Owned(argv, **popen_args) as proc:`` a child whose exit status only its Popen takes: the launcher's
    reaping (:func:`reap_orphans`, :func:`reap_all`) leaves it alone from its fork until the block's end."""

    def __init__(self, argv: list[str], **popen_args: object) -> None:
        with _SPAWNING:  # a quick command may have exited before Popen returns
            self.proc = subprocess.Popen(argv, **popen_args)
            OWNED.add(self.proc.pid)

    def __enter__(self) -> subprocess.Popen:
        return self.proc

    def __exit__(self, *exc: object) -> None:
        try:
            self.proc.__exit__(*exc)  # waits for it
        finally:
            OWNED.discard(self.proc.pid)


def reap_orphans(keep: int | None) -> bool:
    """Reap exited children other than ``keep`` (whose status belongs to Popen).

    Returns whether the launcher still has any child at all.
    """
    if not _SPAWNING.acquire(blocking=False):
        return True  # an Owned child is being started: its pid is not known yet; the next tick
    try:
        while True:
            try:
                info = os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
            except ChildProcessError:
                return False
            if info is None or info.si_pid == keep or info.si_pid in OWNED:
                return True
            try:
                os.waitpid(info.si_pid, 0)
            except ChildProcessError:
                pass
    finally:
        _SPAWNING.release()


def descendants() -> list:
    import psutil

    try:
        return psutil.Process(os.getpid()).children(recursive=True)
    except psutil.Error:
        return []


def tree_rss() -> int:
    """Resident memory of every descendant, summed (shared pages count twice)."""
    import psutil

    total = 0
    for p in descendants():
        try:
            total += p.memory_info().rss
        except psutil.Error:
            pass
    return total


def kill_tree(pgid: int | None) -> None:
    """SIGKILL the process group and every descendant of the launcher."""
    import psutil

    if pgid is not None:
        signal_group(pgid, signal.SIGKILL)
    for p in descendants():
        try:
            p.kill()
        except psutil.Error:
            pass


def reap_all(pgid: int | None, timeout: float = 10.0) -> None:
    """Kill and reap every remaining descendant; returns when none is left.

    Call only after Popen has collected the command's own status. New orphans
    (children of processes just killed) are reparented here and get killed on
    the next round, so the loop converges even against a fork bomb.
    """
    end = time.monotonic() + timeout
    killed = False
    while reap_orphans(keep=None):  # an Owned child's status stays its Popen's
        if killed and time.monotonic() > end:
            return
        kill_tree(pgid)
        killed = True
        time.sleep(0.01)
