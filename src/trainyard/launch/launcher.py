"""One attempt from start to end: set up, run, watch, clean up, upload, report.

The main thread owns the command; the reporter thread owns the HTTP side. The
main thread sleeps until an event wakes it (:mod:`trainyard.launch.wakeups`):
threads with nothing to do yet are started from those waits once due, so a
command over before its first report is reported from the main thread, and its
launcher never starts a thread.
"""

from __future__ import annotations

import functools
import os
import signal
import time
from pathlib import Path

from trainyard import envvars
from trainyard.launch import cgroup, cpulimit, devices, handoff, leftover_tree, pidlimit, procs, reasons, setup_beat
from trainyard.launch.config import LOG_NAME, METRICS_NAME, RESULT_NAME, LaunchConfig
from trainyard.launch.attempt_io import AttemptIO
from trainyard.launch.emptydirs import Pool
from trainyard.launch.files import append_log, atomic_write_json, real_dir
from trainyard.launch.marks import dump as dump_marks, mark
from trainyard.launch.prepare import INHERITED_SECRETS, SetupError
from trainyard.launch.seat import Seat
from trainyard.launch.wakeups import Wakeups

MEMORY_TICK = 0.1  # how often the tree's memory is sampled when it is near its limit
CALM_TICK = 0.5    # ... and when it is under half of it: walking the tree costs CPU the job wants;
                   # with a cgroup (the kernel enforces), how often its OOM kills are read
IDLE_TICK = 1.0    # with no limit, how often orphaned zombies are reaped


class Launcher(AttemptIO, Wakeups):
    def __init__(self, attempt_dir: Path, seat: "Seat | None" = None):
        self.dir = real_dir(attempt_dir)
        self.config = LaunchConfig.read(self.dir)
        self.dirs = Pool(self.config.venv_cache)
        self.log = self.dir / LOG_NAME
        self.metrics = self.dir / METRICS_NAME
        self.proc = None
        self.group: cgroup.MemoryGroup | None = None  # the replica's memory cgroup, if the host offers one
        self.pids_group: pidlimit.PidsGroup | None = None  # ... and its pids cgroup (the same group on cgroup v2)
        self.cpu_group: cpulimit.CpuGroup | None = None  # ... and its cpu cgroup (the same group on cgroup v2)
        self.devices_group: devices.DevicesGroup | None = None  # ... and the one denying the node's other GPUs
        self.seat = seat  # a child already in the groups the attempt likely needs (launch.seat), if idle before
        self.spare: tuple[cgroup.Group, ...] = ()  # the seat's groups the attempt did not need: removed at the end
        self.container = None  # a launch.container.Container when the job runs in an image
        self.reporter = None  # started once the command runs (or setup failed)
        self.beat = None  # a launch.setup_beat.SetupBeat while a setup that may take long lasts
        self.inputs: dict[str, str] = {}  # input name -> local path, once resolved
        self.readonly: list[str] = []  # the node's cache entries those inputs are in: the job sees them read-only
        self.checkpoints = None  # a launch.checkpoint_sync.CheckpointSync when checkpoints go to an object store
        self.niced = False
        Wakeups.__init__(self)
        mark("launch.json read")

    # -- the attempt -------------------------------------------------------------

    def run(self) -> dict:
        for name in INHERITED_SECRETS:  # not for the command, nor for a venv build (pip runs packages' code)
            os.environ.pop(name, None)
        pid, _, tid = os.environ.pop(envvars.LAUNCHER_STARTER, "").partition(":")
        self._starter = int(pid) if pid.isdigit() else None
        self._starter_thread = int(tid) if tid.isdigit() else None
        self._install_signals()
        procs.become_subreaper()
        mark("signals, subreaper")
        if self.config.storage:  # the server's endpoint for s3:// snapshots, inputs and outputs
            from trainyard.artifacts.transfer import use_storage

            use_storage(self.config.storage)
        try:
            result = self._attempt()
            if self.config.log_url:
                from trainyard.launch.outputs import keep_log

                if problem := keep_log(self.log, self.config.log_url, self.config.masks):
                    result["message"] = "; ".join(m for m in (result["message"], problem) if m)
        finally:
            self._setup_over()
            if self.proc is not None and self.proc.returncode is None:  # crashed mid-run
                procs.kill_tree(self.proc.pid)
            if self.checkpoints is not None:
                self.checkpoints.close()
            if self.container is not None:
                self.container.remove()
            self._drop_seat()  # one the attempt did not use: an early end, or an image
        procs.reap_all(None)  # whatever setup (a killed venv build) may have left
        self._remove_groups()  # normally gone already, right after the tree was reaped
        reporter = self._reporter()
        if reporter.running:
            reporter.deliver(result)  # on its thread, while result.json is written: engines read it after the exit
            self._write_result(result)
        elif not reporter.final_inline(result, lambda: self._write_result(result)):  # written while the server works
            reporter.deliver(result)  # on the thread after all, which sends again
        reporter.wait()
        mark("exit report acknowledged")
        if self.config.venv == "overlay" and not self.config.container:  # the next attempt's, off its path
            from trainyard.launch.scratchenv import recycle, refill

            if recycle(self.config, self.dir / "venv", self.overlay_seen):
                mark("overlay put back")
            else:
                refill(self.config, before_build=self._behind)
                mark("spare overlay built")
        if self.dirs.wanted():
            self.dirs.refill()
            mark("empty folders made")
        dump_marks(self.dir)
        return result

    def _behind(self) -> None:
        """All that is left of this launcher (a spare overlay, a copy of a venv) goes behind the jobs and
        the server on a busy node: for good, so it takes no other attempt (:meth:`kept`)."""
        os.nice(10)
        self.niced = True

    def kept(self) -> bool:
        """Whether this process may take another attempt (:mod:`trainyard.launch.handoff`): nothing
        of this one is left in it (an image's client, another account, an object store's options,
        a lowered priority, a thread or a child)."""
        cfg = self.config
        return not (cfg.container or cfg.run_as or cfg.storage or self.readonly or self.checkpoints is not None
                    or self.niced) and handoff.alone()

    def leave(self) -> None:
        """Go from this attempt for the next (see :meth:`kept`)."""
        handoff.leave(self.dir, (self._wake_r, self._wake_w))

    def _write_result(self, result: dict) -> None:
        atomic_write_json(self.dir / RESULT_NAME, result)
        mark("result.json written")

    def _reporter(self):
        """The reporter, made on first need (once the command runs, or setup failed); its thread is
        started only when its first report is due (see :mod:`trainyard.launch.reporter`)."""
        if self.reporter is None:
            from trainyard.launch.reporter import Reporter

            self.reporter = Reporter(self.config, str(self.log), str(self.metrics), self._cancel_from_server,
                                     lambda: self._cancel_from_server("the server has ended this attempt"))
        return self.reporter

    def _setup_over(self) -> None:
        if self.beat is not None:
            self.beat.stop()
            self.beat = None

    def _attempt(self) -> dict:
        cfg = self.config
        if setup_beat.may_take_long(cfg):  # the server hears it is alive; it ends a starting replica that is silent
            self.beat = setup_beat.SetupBeat(cfg, str(self.dir), self._cancel_from_server,
                                             lambda: self._cancel_from_server("the server has ended this attempt"))
            self.beat.start()
        try:
            env, work = self._prepare()
        except (SetupError, OSError) as e:
            if self.cancelled:
                return _result(None, self._stop_reason(), f"cancelled during setup: {self.cancelled}")
            append_log(self.log, f"setup failed: {e}")
            # a fetch run as the job, or a build, may quote the job's secrets, which are known by now
            return _result(None, reasons.SETUP, cfg.masks.text(str(e)) if cfg.masks else str(e))
        command = cfg.command
        if self.inputs or any("{{" in part for part in command):
            from trainyard.launch.named import substitute

            command = substitute(command, self.inputs, self.dir / "outputs")
        if cfg.container:
            from trainyard.launch import container

            try:
                self.container, command = container.start(cfg, self.dir, self.inputs, command, work, self.log,
                                                          lambda: self.cancelled is not None, self.readonly)
            except container.PullError as e:
                if self.cancelled:
                    return _result(None, self._stop_reason(), f"cancelled while pulling the image: {self.cancelled}")
                append_log(self.log, str(e))
                return _result(None, reasons.IMAGE_PULL, str(e))
            except (OSError, SetupError) as e:  # the runtime's own failure, or a secret it may not be given
                text = f"container runtime: {e}" if isinstance(e, OSError) else str(e)
                append_log(self.log, text)
                return _result(None, reasons.SETUP, text)
        # made right before the spawn, so a group is empty only for the moment between the two (cgroup.sweep),
        # or those of the seat, with its child in them; in a container the runtime enforces the limits
        seated = None
        if self.container is None:
            name = f"{cfg.attempt_id}-r{cfg.replica}"
            if self.seat is not None and (seated := self.seat.take(cfg, name, env)) is not None:
                self.group, self.pids_group, self.cpu_group = seated.memory, seated.pids, seated.cpu
                self.devices_group, self.spare = seated.devices, seated.spare
            else:
                say = functools.partial(append_log, self.log)
                self.group = cgroup.for_replica(cfg.cgroup_root, cfg.memory_limit, name, say)
                self.pids_group = pidlimit.for_replica(cfg.cgroup_root, cfg.pids_max, name, self.group)
                self.devices_group = devices.for_replica(cfg.cgroup_root, cfg, name, say, (self.group, self.pids_group))
                self.cpu_group = cpulimit.for_replica(cfg.cgroup_root, cfg, name,
                                                      (self.group, self.pids_group, self.devices_group))
        spaces = None  # (the cached inputs mounted read-only, an IPC of its own) where it gets namespaces of its own
        try:
            argv, start_env = command, env
            if cfg.run_as:  # hand the job its folders; the command drops to the account after the cgroup shim
                from trainyard.launch.runas import RunAs

                run_as = RunAs(cfg.run_as)
                self.metrics.touch(exist_ok=True)
                run_as.hand_over(work, self.dir / "outputs", Path(env[envvars.CHECKPOINT_DIR]), self.metrics)
                env = run_as.env(env)
                if self.container is None:
                    drop, start_env = run_as.drop(env)  # root's part of the chain starts without the job's loader vars
                    argv = drop + argv
            if self.container is not None:  # root's client; an account's job drops inside (--user): one store
                start_env = self.container.client_env(env)
            if (self.readonly or cfg.run_as) and self.container is None:  # by root, before the drop to the account
                from trainyard.launch import readonly

                shm = readonly.own_shm(cfg)
                if mounts := readonly.mount_prefix(self.readonly, shm):
                    argv, spaces = mounts + argv, (tuple(self.readonly), shm is not None)
            if self.groups():
                procs.check_executable(command[0], str(work), env)  # the shim would exec it too late to tell
                argv = cgroup.wrap(argv, self.groups()) if seated is None else argv
            if "OPTIND" in env and self.container is None and (seated is not None or len(argv) > len(command)):
                from trainyard.launch import optind  # a shell of ours is before the command, or seats it

                argv, start_env = optind.past_shells(argv[:len(argv) - len(command)], command, env["OPTIND"], start_env)
            mark("memory group, argv")  # the name bench/RESULTS.md compares across sessions; the pids group too
            self.dirs.place_file(self.log)
            if seated is not None:
                self.proc = self.seat.spawn(argv, str(work), start_env, str(self.log))
            else:
                self.proc = procs.spawn(argv, str(work), start_env, str(self.log))
            mark("spawned (exec done)")
            self._setup_over()  # the reporter says the rest
        except OSError as e:
            self._drop_seat()
            self._remove_groups()
            message = f"cannot start {cfg.command[0]!r}: {e.strerror or e}"
            append_log(self.log, message)
            return _result(None, reasons.SETUP, message)
        self._drop_seat()  # not taken: off the path now
        try:  # for the engine, should this launcher die: the command, in a session of its own, would run on
            leftover_tree.record(str(self.dir), self.proc.pid,
                                 list(dict.fromkeys(g.path for g in (*self.groups(), *self.spare))))
        except OSError as e:
            append_log(self.log, f"cannot record the command for the engine: {e}")
        reporter = self._reporter()
        # plain values (nothing is imported or done unless `trainyard exec` asks): a command run beside this one
        # runs where it does, as whom, bounded as it is, in its namespaces, found through its pid (launch.execs)
        reporter.asks.exec_in = (self.container, cfg.run_as, str(work), env, self.groups(),
                                 (self.proc.pid, *spaces) if spaces else None)
        # a command over by then is reported from this thread, and no thread is ever started
        self._when_due(reporter.started(self.proc.pid), reporter.start)
        mark("reporter due")
        from trainyard.launch import sampling  # after the spawn: nothing on the path to the command's start

        # in an image: the container's processes, not the runtime's client that is the launcher's child
        sampler = sampling.make(str(self.metrics), cfg.gpus, cfg.sample_every,
                                root=self.container.pid if self.container is not None else None)
        if sampler is not None:
            self._when_due(sampler.first_after, lambda: sampler.start(first_wait=0))
        mark("sampler due")
        reporter.connect()  # while the command starts: not after its exit
        mark("report connection opened")
        exit_code, reason, message = self._supervise(self.proc)
        mark("supervise returned")
        if self.container is not None:
            from trainyard.launch import container

            reason, message = container.outcome(self.container, exit_code, reason, message, cfg.memory_limit,
                                                self.log, stopped=self.cancelled is not None or reason == reasons.TIMEOUT)
        if sampler is not None:
            # its summary (peak memory, mean GPU use) is what `trainyard show` prints from the samples;
            # not a line in the job's log, which is the job's own output
            sampler.stop()
            mark("sampler stopped")
        reporter.exited()
        if self.checkpoints is not None:  # what the job left in its checkpoint dir, once it can write no more
            if problem := self.checkpoints.final():
                append_log(self.log, problem)
                message = "; ".join(m for m in (message, problem) if m)
        if reason == reasons.SUCCEEDED and cfg.env.get(envvars.OUTPUT_NAMES):
            reason, message = self._check_named_outputs(reason, message)
        result = _result(exit_code, reason, message)
        try:
            return self._finish_outputs(work, result)
        except Exception as e:  # the attempt's outcome matters more than its outputs
            result["message"] = "; ".join(m for m in (result["message"], f"outputs: {e}") if m)
            return result

    def groups(self) -> tuple[cgroup.Group, ...]:
        """The replica's cgroups, which its command joins before it starts."""
        return tuple(g for g in (self.group, self.pids_group, self.cpu_group, self.devices_group) if g is not None)

    def _remove_groups(self) -> None:
        for group in (*self.groups(), *self.spare):
            group.remove()
        self.group = self.pids_group = self.cpu_group = self.devices_group = None
        self.spare = ()

    def _drop_seat(self) -> None:
        if self.seat is not None:
            self.seat.discard()
            self.seat = None

    def _supervise(self, proc) -> tuple[int | None, str, str]:
        """Wait for the command, enforcing cancel, timeout and memory limit; reap the tree."""
        cfg = self.config
        waiter = procs.watch(proc, self._wake_w)
        mark("waiter started")
        deadline = time.monotonic() + cfg.timeout if cfg.timeout else None
        tick = MEMORY_TICK if cfg.memory_limit else IDLE_TICK  # adapted to the tree's size once sampled
        reason = message = None
        while not waiter.exited:  # checked first: a command that exited on its own keeps its result
            now = time.monotonic()
            timed_out = deadline is not None and now >= deadline
            if (self.cancelled or timed_out) and procs.has_exited(proc.pid):
                break  # exited on its own a moment ago; the waiter has yet to notice
            if self.cancelled:
                self._stop(waiter, f"cancelled: {self.cancelled}")
                reason = self._stop_reason()  # after the grace period: a dying starter is gone by then
                message = f"cancelled: {self.cancelled}"
                break
            if timed_out:
                reason, message = reasons.TIMEOUT, f"timed out after {cfg.timeout:g} s"
                self._stop(waiter, message)
                break
            if self.group is not None:
                # The kernel enforces the limit; a kill of some process other than
                # the command (v1 kills one process, v2 the whole group) ends the replica.
                tick = CALM_TICK
                if self.group.oom_kills():
                    procs.kill_tree(proc.pid)
                    reason, message = reasons.OOM, self._oom_message()
                    break
            elif cfg.memory_limit and self.container is None:
                rss = procs.tree_rss()
                tick = MEMORY_TICK if rss > cfg.memory_limit / 2 else CALM_TICK
                if rss > cfg.memory_limit:
                    procs.kill_tree(proc.pid)
                    reason = reasons.OOM
                    message = f"memory use {cgroup.mib(rss)} passed the limit of {cgroup.mib(cfg.memory_limit)}"
                    append_log(self.log, f"{message}: killed")
                    break
            procs.reap_orphans(keep=proc.pid)
            self._sleep(tick if deadline is None else min(tick, deadline - now), waiter.fds())
        mark("main loop woke")
        waiter.join()
        procs.reap_all(proc.pid)
        mark("tree reaped")
        rc = proc.returncode
        if self.group is not None:
            # any OOM kill in the group fails the replica, even one the command survived,
            # as the sampled limit kills the whole tree once it is passed
            if reason is None and self.group.oom_killed(rc):
                reason, message = reasons.OOM, self._oom_message()
        if reason is None and rc != 0 and self.pids_group is not None and self.pids_group.refused():
            message = self.pids_group.message()  # a fork failed (EAGAIN), and then so did the command
            append_log(self.log, message)
        self._remove_groups()
        if reason is None:
            reason = reasons.SUCCEEDED if rc == 0 else reasons.error(rc)
        return rc, reason, message or ""

    def _oom_message(self) -> str:
        message = self.group.oom_message()
        append_log(self.log, message)
        return message

    def _stop(self, waiter: procs.ExitFd | procs.Waiter, why: str) -> None:
        """SIGTERM the group, give it the grace period, then SIGKILL the whole tree."""
        pgid, grace = waiter.proc.pid, self.config.grace_period
        append_log(self.log, f"{why}: stopping (SIGTERM, then SIGKILL after {grace:g} s)")
        procs.signal_group(pgid, signal.SIGTERM)
        end = time.monotonic() + grace
        while time.monotonic() < end:
            procs.reap_orphans(keep=pgid)
            if waiter.exited and not procs.group_alive(pgid):
                break
            self._sleep(min(0.05, end - time.monotonic()), waiter.fds())
        procs.kill_tree(pgid)



def _result(exit_code: int | None, reason: str, message: str) -> dict:
    """A plain dict in the shape of :class:`trainyard.spec.reports.LaunchResult` (no pydantic here: start-up time)."""
    return {"exit_code": exit_code, "reason": reason, "message": message, "outputs": []}

