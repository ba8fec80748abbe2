"""The launcher: the small process that wraps one attempt's command on a node.

Run as ``python -m trainyard.launch ATTEMPT_DIR``. It imports only the standard
library and psutil, so it starts fast and runs inside any engine.

Contract (the engine and the API server rely on every line of it):

Input: ``ATTEMPT_DIR/launch.json`` — see :class:`trainyard.launch.config.LaunchConfig`.

Files it writes in ATTEMPT_DIR:
  ``output.log``     the command's stdout and stderr, merged, as written
  ``metrics.jsonl``  the in-job SDK appends here (``TRAINYARD_METRICS_FILE``)
  ``result.json``    written once, last, when the attempt is over:
                     ``{"exit_code": int|null, "reason": str, "message": str,
                     "outputs": [{"path", "size", "digest"}]}`` (the server reads it as
                     :class:`trainyard.spec.reports.LaunchResult`); its presence
                     means the launcher is done, so an engine that finds it
                     after a control-plane restart knows the true final state.

Reports to the API (``POST {server}/internal/attempts/{attempt_id}/replicas/{replica}/report``,
JSON, one request carries whatever is new; see :mod:`trainyard.launch.reporter`):
  ``{"phase": "running"|"exited", "pid": int,
     "log": {"offset": int, "data": str}?,       # bytes of output.log from offset
     "metrics": {"offset": int, "lines": [str]}?, # lines of metrics.jsonl from offset
     "result": {...}?}``                          # only with phase "exited", after all logs
  (the server reads it as :class:`trainyard.spec.reports.LauncherReport`)
  While a setup that may take long lasts (an env build, an image pull), ``{"pid": int}`` with no
  phase every ``SETUP_BEAT`` seconds: contact only, so the server does not end a replica that
  sets up for longer than its ``start_deadline`` (:mod:`trainyard.launch.setup_beat`).
  Each carries ``Authorization: Bearer <token>``, the attempt's own credential
  from launch.json (401 without it; 410 once the attempt has ended, and the
  report changes nothing). Output paths are relative posix paths with no
  ``..``; links that lead out of the job are not uploaded.
  The server answers ``{"cancel": bool}``; ``cancel`` true stops the attempt as
  SIGTERM would. Offsets make every report idempotent, so the reporter resends
  after any failure. When the server cannot be reached it re-reads
  ``address_file`` (the server may come back on another port) and retries
  with backoff, forever while the command runs and for ``exit_report_deadline``
  seconds after; nothing is lost, because the files are the buffer.

Signals: on SIGTERM it sends SIGTERM to the command's process group, waits
``grace_period`` seconds, then SIGKILLs every descendant (it is a child
subreaper, so grandchildren that daemonized are still its descendants), reaps
them all, and ends with reason ``Cancelled``.

Reasons: ``Succeeded``, ``Error(exit N)``, ``OOMKilled`` (the kernel's OOM
killer acted in the replica's memory cgroup, or, where the host offers none, the
whole tree's sampled RSS passed ``memory_limit``; see
:mod:`trainyard.launch.cgroup`), ``Timeout``, ``Cancelled``, ``SetupFailed``
(the environment, snapshot or an input could not be prepared, or the container
runtime could not start the container), ``ImagePullFailed`` (the job's image is
not here and could not be pulled; :mod:`trainyard.launch.container`), ``MissingOutput``
(a pipeline step exited 0 without writing a declared output), ``OutputsTooLarge`` (the outputs passed the
server's ``outputs_max``: none were uploaded); the strings are in
:mod:`trainyard.launch.reasons`, what each leads to in :class:`trainyard.status.Reason`.
"""
