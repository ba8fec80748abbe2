"""What goes into an attempt before its command runs, and what comes out after it: the work dir, the
virtualenv, inputs, the restored checkpoint and the environment; declared outputs, collected and uploaded.

A part of :class:`trainyard.launch.launcher.Launcher` (its base), kept apart so that the launcher's own
file is about running and watching the command.
"""

from __future__ import annotations

import os
from pathlib import Path

from trainyard import envvars
from trainyard.launch import reasons
from trainyard.launch.config import LaunchConfig
from trainyard.launch.files import append_log
from trainyard.launch.marks import mark
from trainyard.launch.prepare import (SetupError, build_env, cache_entries, checkpoint_folder, job_env, prepare_workdir,
                                      resolve_inputs)


class AttemptIO:
    config: LaunchConfig
    dir: Path
    log: Path
    cancelled: str | None
    overlay_seen: dict | None = None  # the overlay as the command got it (launch.scratchenv.recycle)
    dirs = None  # a launch.emptydirs.Pool: the attempt's folders, made ahead

    def _prepare(self) -> tuple[dict, Path]:
        cfg = self.config
        if not cfg.command:
            raise SetupError("the command is empty")
        if cfg.run_as:  # before root makes or hands over anything in the account's folders
            from trainyard.launch.runas import node_problem

            if problem := node_problem():
                raise SetupError(problem)
        work = prepare_workdir(cfg.snapshot, self.dir / "work", self.dirs)
        mark("work dir")
        venv = None
        if cfg.python_env:
            from trainyard.launch.pyenv import ensure_venv

            self._check_cancel()
            cache = Path(cfg.venv_cache) if cfg.venv_cache else self.dir / "venvs"
            if cfg.run_as:  # the build runs as the job's account, in its work dir (local packages: ./pkg)
                from trainyard.launch.runas import RunAs

                RunAs(cfg.run_as).hand_over(work)
            venv = ensure_venv(cfg.python_env, cache, work, self.log, lambda: self.cancelled is not None,
                               cfg.run_as)
        elif cfg.venv and not cfg.container:  # pip installs in the job must not reach the server's env
            from trainyard.launch.scratchenv import make, seen, spares as scratchenv_spares

            # an overlay already there is a relaunch's, changed or not by the launch before: never put back
            relaunch = (self.dir / "venv" / "pyvenv.cfg").exists()
            venv = make(cfg.venv, self.dir / "venv", work, self.log, lambda: self.cancelled is not None,
                        spares=scratchenv_spares(cfg))
            if cfg.venv == "overlay" and not relaunch:
                self.overlay_seen = seen(venv)
        mark("venv")
        if cfg.secrets:  # after the venv build: pip runs packages' code, which must not see them
            from trainyard.launch.secrets import Masks, fetch

            self._check_cancel()
            values = fetch(cfg, lambda: self.cancelled is not None, self.dir)
            cfg.env = {**cfg.env, **values}  # in memory only: build_env (and a container's) read it from here
            cfg.masks = Masks(list(values.values()))
        self._check_cancel()
        cache = Path(cfg.input_cache) if cfg.input_cache else self.dir / "input_cache"
        inputs = resolve_inputs(cfg.inputs, cache, work, *self._as_job()) if cfg.inputs else {}
        self.inputs, self.readonly = inputs, cache_entries(inputs, cache)
        if cfg.checkpoint_url:
            self._check_cancel()
            self._restore_checkpoint()
        env = build_env(cfg, self.dir, inputs, venv, dirs=self.dirs)
        mark("inputs, env")
        self._check_cancel()
        return env, work

    def _as_job(self) -> tuple:
        """What :func:`resolve_inputs` needs to fetch an input as the job: a JobFetch with the job's environment and
        account (None when both are the launcher's: the fetch is then the same in this process, without a child's
        start, ~0.5 s with s3fs), and the store's URL (what is under it is fetched with the launcher's keys)."""
        from trainyard.launch.fetch_as_job import JobFetch
        from trainyard.launch.runas import RunAs

        cfg = self.config
        account = RunAs(cfg.run_as) if cfg.run_as else None
        if account is None and not cfg.inputs_as_job:  # the job's environment is the launcher's: no child needed
            return None, cfg.store_url
        env = job_env(cfg)
        return (JobFetch(env if account is None else account.env(env), account, cfg.storage,
                         lambda: self.cancelled is not None), cfg.store_url)

    def _restore_checkpoint(self) -> None:
        """The job's last complete checkpoint set into its checkpoint dir; on replica 0, the sync started
        (the master saves, as rank 0 does in torch; every replica restores the master's set)."""
        from trainyard.launch.checkpoint_sync import CheckpointSync
        from trainyard.launch.checkpoints import CheckpointError, Store

        cfg = self.config
        folder = checkpoint_folder(cfg, self.dir)
        try:
            store = Store(cfg.checkpoint_url, cfg.storage)
            restored = store.restore(folder, cfg.attempt_id)
        except CheckpointError as e:
            raise SetupError(str(e)) from None
        except ImportError as e:  # s3fs, gcsfs, adlfs: not on this node
            raise SetupError(f"checkpoints at {cfg.checkpoint_url}: {e} (install 'trainyard[s3]' on every node)") from None
        if restored is not None:
            append_log(self.log, f"checkpoint restored from {cfg.checkpoint_url} "
                                 f"({len(restored['files'])} files, saved by attempt {restored.get('attempt')})")
        if cfg.replica == 0:
            self.checkpoints = CheckpointSync(folder, store, cfg.attempt, self.dir / "checkpoint-sets", restored)
            owner = (int(cfg.run_as["uid"]), int(cfg.run_as["gid"])) if cfg.run_as else None
            cfg.env[envvars.CHECKPOINT_SOCKET] = self.checkpoints.listen(owner)

    def _check_named_outputs(self, reason: str, message: str) -> tuple[str, str]:
        """A pipeline step that exited 0 without writing a declared output has failed."""
        from trainyard.launch.named import missing_outputs

        missing = missing_outputs(self.config.env, self.dir / "outputs")
        if not missing:
            return reason, message
        text = "; ".join(f"output {n!r} was not written (at {{{{outputs.{n}}}}} = $TRAINYARD_OUTPUT_DIR/{n})"
                         for n in missing)
        append_log(self.log, text)
        return reasons.MISSING_OUTPUT, text

    def _check_cancel(self) -> None:
        if self.cancelled:
            raise SetupError("cancelled")

    def _finish_outputs(self, work: Path, result: dict) -> dict:
        if not self.config.outputs and _empty(self.dir / "outputs"):
            return result  # the common case, without importing hashlib
        from trainyard.launch import outputs

        files, problems = outputs.collect(self.dir / "outputs", work, self.config.outputs)
        if not files and not problems:
            return result
        for problem in problems:  # in the attempt's log too, where the user looks for why a file is missing
            append_log(self.log, problem)
        if too_big := outputs.over_bound(files, self.config.outputs_max):
            append_log(self.log, too_big)
            if result["reason"] == reasons.SUCCEEDED:  # a failure keeps its own reason: its retries depend on it
                result["reason"] = reasons.OUTPUTS_TOO_LARGE
            result["message"] = "; ".join(m for m in [result["message"], *problems, too_big] if m)
            return result
        records, errors = outputs.upload(files, self.config.output_url, (self.dir / "outputs", work),
                                         self.config.outputs_max)
        result["outputs"] = records
        notes = [m for m in [result["message"], *problems, *errors] if m]
        result["message"] = "; ".join(notes)
        return result


def _empty(folder: Path) -> bool:
    try:
        with os.scandir(folder) as entries:
            return next(entries, None) is None
    except FileNotFoundError:
        return True
