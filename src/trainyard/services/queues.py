"""Queue rules shared by the API and the scheduler: define, list with usage, check a job's queue.

The planner reads :meth:`QueueService.models` every cycle, so the queues are
kept in memory and re-read only when this process changes them.
"""

from __future__ import annotations

from pathlib import Path

from trainyard.auth.permissions import Action, Caller, visible
from trainyard.errors import Forbidden, InvalidSpec, QueueNotFound
from trainyard.scheduler.model import Queue
from trainyard.services.audit import AuditLog
from trainyard.services.cluster import Cluster
from trainyard.services.scheduling import Scheduler
from trainyard.spec.lines import suggestion
from trainyard.spec.job import PRIORITY_CLASSES, JobSpec, priority_text
from trainyard.spec.job_query import JobFilter
from trainyard.spec.queue import QueueSpec, load_queues
from trainyard.spec.records import AttemptInfo, JobInfo, NodeInfo, QueueInfo, QueueUsage, TeamShare
from trainyard.spec.units import format_memory
from trainyard.status import JobStatus
from trainyard.store import Store

DEFAULT = "default"  # always accepted: jobs that name no queue land here, unlimited unless defined
# the highest priority a non-admin's job may have on a queue without max_priority (the default queue too):
# priority orders jobs before fair share and preempts, so raising it is a right an admin grants
CEILING = PRIORITY_CLASSES["normal"]


def planner_queue(spec: QueueSpec) -> Queue:
    """The planner's view of a queue (spec sits below the scheduler, so the conversion lives here)."""
    q = spec.quota
    return Queue(name=spec.name, team=spec.team, priority=spec.priority, cpu=q.cpu,
                 memory=q.memory, gpus=dict(q.gpu) if q.gpu is not None else None, max_running=q.jobs,
                 borrowing=spec.borrowing)


class QueueService:
    def __init__(self, store: Store, cluster: Cluster, scheduler: Scheduler, audit: AuditLog) -> None:
        self.store = store
        self.audit = audit
        self.cluster = cluster
        self.scheduler = scheduler
        self._specs: list[QueueSpec] | None = None
        self._models: list[Queue] | None = None

    def specs(self) -> list[QueueSpec]:
        if self._specs is None:
            self._specs = self.store.queues()
        return self._specs

    def models(self) -> list[Queue]:
        if self._models is None:
            self._models = [planner_queue(q) for q in self.specs()]
        return self._models

    def _changed(self) -> None:
        self._specs = self._models = None

    def load_file(self, path: Path) -> list[QueueSpec]:
        specs = load_queues(path)
        self.store.load_file_queues(specs)
        self._changed()
        return specs

    def create(self, spec: QueueSpec, *, replace: bool = False, caller: Caller | None = None) -> QueueInfo:
        if caller is not None:
            if spec.name == DEFAULT and not caller.admin:
                # every team's jobs that name no queue land there: a team's maintainer would make them its own
                raise Forbidden(f"name: only an admin defines queue {DEFAULT!r}, which takes every team's jobs that "
                                "name no queue", field="name")
            if not caller.may(Action.MANAGE_QUEUES, spec.team):
                raise Forbidden(f"team: you do not maintain team {spec.team!r}, so you may not define its queues",
                                field="team")
            if replace:
                self._managed(caller, spec.name)
            if not caller.admin:
                self._keeps_the_admins_terms(spec, replace)
        self.store.create_queue(spec, replace=replace)
        self._changed()
        self.scheduler.wake()  # a new quota may let jobs start, or hold them back
        if caller is not None:
            self.audit.record(caller, "queue.replace" if replace else "queue.create", spec.name,
                              **spec.model_dump(mode="json", exclude={"name"}))
        return self.get(spec.name)

    def delete(self, name: str, caller: Caller | None = None) -> None:
        if caller is not None:
            if name == DEFAULT and not caller.admin:
                raise Forbidden(f"only an admin changes queue {DEFAULT!r}", queue=name)
            self._managed(caller, name)
        self.store.delete_queue(name)
        self._changed()
        self.scheduler.wake()
        if caller is not None:
            self.audit.record(caller, "queue.delete", name)

    def _keeps_the_admins_terms(self, spec: QueueSpec, replace: bool) -> None:
        """A maintainer's queue keeps the quota, priority, max_priority and borrowing an admin gave it (a new one:
        none, 0, none, and allowed): they divide the cluster between teams (a quota is a guarantee other teams'
        work yields to, a queue's priority wins ties against theirs, its max_priority lets its jobs go ahead of
        theirs and preempt them), so a team's own maintainer may not raise them."""
        old = self._spec(spec.name) if replace else None
        was, now = _terms(old or QueueSpec(name=spec.name, team=spec.team)), _terms(spec)
        field = next((f for f in was if was[f] != now[f]), None)
        if field is not None:
            keeps = f"what the admin gave it (trainyard queue show {spec.name})" if old else "none of them: no " \
                f"quota, priority 0, no max_priority (others' jobs go up to {priority_text(CEILING)}), borrowing on"
            raise Forbidden(f"{field}: only an admin sets a queue's quota, priority, max_priority and borrowing, "
                            f"which divide the cluster between teams; a maintainer's queue keeps {keeps}", field=field)

    def _spec(self, name: str) -> QueueSpec | None:
        return next((q for q in self.specs() if q.name == name), None)

    def ceiling(self, name: str) -> int:
        """The highest priority a non-admin's job on queue ``name`` may have: its max_priority, else normal."""
        q = self._spec(name)
        return CEILING if q is None or q.max_priority is None else q.max_priority

    def check_priority(self, caller: Caller, spec: JobSpec, *, owner: str | None = None) -> None:
        """Refuse (403, naming ``priority``) a non-admin's job above its queue's ceiling (:meth:`ceiling`), as
        Slurm lets a user only lower a job's priority: jobs are ordered by priority before fair share, and
        priority preempts, so any member would otherwise put theirs ahead of every team's. An admin's are not
        held (nor anything where auth is off: every caller is the local admin). ``owner``: the job is made
        later in their name (``caller``), which the refusal says."""
        top = self.ceiling(spec.queue)
        if caller.admin or spec.priority <= top:
            return
        q = self._spec(spec.queue)
        if q is not None and q.max_priority is not None:
            where = f"queue {spec.queue!r}'s max_priority: the most a job of anyone but an admin may have there"
            how = "an admin raises it"
        else:
            where = f"the most a job of anyone but an admin may have on queue {spec.queue!r}, which has no max_priority"
            how = "an admin raises it by giving the queue one"
        whose = f"its owner {owner} may no longer give it that: " if owner else ""
        raise Forbidden(f"priority: {whose}{priority_text(spec.priority)} is above {priority_text(top)}, {where}; "
                        f"{how}", field="priority", queue=spec.queue, max_priority=top)

    def _managed(self, caller: Caller, name: str) -> None:
        """A queue the caller may change: another team's is not found, its own team's needs a maintainer."""
        q = next((q for q in self.models() if q.name == name), None)
        if q is None or not caller.sees(q.team, None):
            raise QueueNotFound(f"no such queue: {name}", queue=name)
        if not caller.may(Action.MANAGE_QUEUES, q.team):
            raise Forbidden(f"only a maintainer of team {q.team} changes queue {name}", queue=name)

    def team_for(self, caller: Caller, name: str) -> str | None:
        """The team a job of ``caller`` on queue ``name`` belongs to, once the caller may submit there.

        A defined queue gives its team. The implicit default queue (and any queue while none is
        defined) takes the caller's own team: the first, by name, where it may submit."""
        q = next((q for q in self.models() if q.name == name), None)
        if q is not None and name != DEFAULT and not caller.sees(q.team, None):
            q = None  # refused as a queue never defined: the two answers must not tell another team's apart
        if q is None and name != DEFAULT and self.models():
            mine = sorted({x.name for x in self.models() if caller.sees(x.team, None)} | {DEFAULT})
            raise InvalidSpec(errors=[{"field": "queue", "line": None, "where": "queue",
                                       "message": f"unknown queue {name!r}{suggestion(name, mine)} "
                                                  f"(defined: {', '.join(mine)})"}])
        if q is not None:
            if caller.may(Action.SUBMIT, q.team):
                return q.team
            if caller.sees(q.team, None):
                raise Forbidden(f"queue: your role in team {q.team} does not allow submitting", field="queue")
            mine = ", ".join(caller.submit_teams()) or "none"
            raise InvalidSpec(errors=[{"field": "queue", "line": None, "where": "queue",
                                       "message": f"queue {name!r} is not one of your teams' queues "
                                                  f"(teams you submit to: {mine})"}])
        teams = caller.submit_teams()
        if teams:
            return teams[0]
        if caller.admin:
            return None
        raise Forbidden("your role does not allow submitting (a viewer reads only)" if caller.teams
                        else "you belong to no team: an admin adds you to one", field="queue")

    def unmeasured(self, spec: JobSpec) -> tuple[str, str] | None:
        """(field, why) when ``spec`` leaves out what its queue's quota counts: a job naming no memory held
        none by the quota's count while its processes took what they liked (Kubernetes refuses such a pod
        in a namespace with a memory quota). ``cpu: 0`` likewise."""
        q = next((q for q in self.models() if q.name == spec.queue), None)
        if q is None:
            return None
        if q.memory is not None and spec.resources.memory is None:
            return ("resources.memory", f"queue {q.name!r} has a memory quota ({format_memory(q.memory)}), so a "
                    "job on it says how much memory it needs, e.g. memory: 4Gi (its processes are held to it)")
        if q.cpu is not None and spec.resources.cpu <= 0:
            return ("resources.cpu", f"queue {q.name!r} has a cpu quota ({q.cpu:g} cores), so a job on it asks "
                    "for more than 0 cores")
        return None

    def list(self, caller: Caller | None = None) -> list[QueueInfo]:
        """Every queue, or those of the caller's teams (and the implicit default queue)."""
        shown = visible(caller).teams if caller is not None else None
        specs = {q.name: q for q in self.store.queues()}
        counts = self.store.queue_counts()
        for name in counts:
            specs.setdefault(name, QueueSpec(name=name))  # jobs in the implicit default queue
        usage, seen, nodes = self._usage(caller)
        # ranked among every team, whichever the caller sees
        shares = team_shares(usage, {n: q.team for n, q in specs.items()}, nodes)
        if shown is not None:
            specs = {n: q for n, q in specs.items() if q.team in shown or n == DEFAULT}
            if DEFAULT in specs:  # every team's jobs may be there: the row counts only those the caller sees
                usage = {**usage, DEFAULT: seen}
                pending = JobFilter(queue=DEFAULT, status=(JobStatus.PENDING.value,))
                counts = {**counts, DEFAULT: self.store.job_counts(pending, visible(caller))}
        return [QueueInfo(queue=q, usage=usage.get(n, QueueUsage()), pending=counts.get(n, {}).get("pending", 0),
                          fair_share=shares.get(q.team or n))
                for n, q in sorted(specs.items())]

    def get(self, name: str, caller: Caller | None = None) -> QueueInfo:
        found = next((q for q in self.list(caller) if q.queue.name == name), None)
        if found is None:  # another team's queue too, answered as one never defined
            raise QueueNotFound(f"no such queue: {name}", queue=name)
        return found

    def _usage(self, caller: Caller | None) -> tuple[dict[str, QueueUsage], QueueUsage, list[NodeInfo]]:
        """What each queue's running jobs hold, what those on the default queue that ``caller`` may see hold
        (all of them without a caller), and the nodes (the cluster's capacity)."""
        live = self.cluster.live()
        nodes = self.cluster.nodes(live)
        gpu_type = {n.name: n.gpu_type or "gpu" for n in nodes}
        out: dict[str, QueueUsage] = {}
        seen = QueueUsage()
        for job, a in live:
            _hold(out.setdefault(job.queue, QueueUsage()), job, a, gpu_type)
            if job.queue == DEFAULT and (caller is None or caller.sees(job.team, job.owner)):
                _hold(seen, job, a, gpu_type)
        return out, seen, nodes


def _terms(spec: QueueSpec) -> dict[str, tuple]:
    """What of a queue is an admin's to set (:meth:`QueueService._keeps_the_admins_terms`), by field."""
    q = planner_queue(spec)
    return {"quota": (q.cpu, q.memory, q.gpus, q.max_running), "priority": (q.priority,),
            "max_priority": (spec.max_priority,), "borrowing": (q.borrowing,)}


def _hold(u: QueueUsage, job: JobInfo, a: AttemptInfo, gpu_type: dict[str, str]) -> None:
    """Add what the attempt ``a`` of ``job`` holds to ``u``."""
    u.running += 1
    u.borrowed += bool(a.borrowed)
    r = job.spec.resources
    for rep in a.replicas:
        u.cpu += r.cpu
        u.memory += r.memory or 0
        if rep.gpus:
            kind = gpu_type.get(rep.node, "gpu")
            u.gpu[kind] = u.gpu.get(kind, 0) + len(rep.gpus)


def team_shares(usage: dict[str, QueueUsage], team_of: dict[str, str | None],
                nodes: list[NodeInfo]) -> dict[str, TeamShare]:
    """Each team's dominant resource share of the cluster (DRF, as the scheduler orders teams), ranked.

    A team holds what its queues' running jobs hold; the implicit default queue counts for a team of its name,
    as the scheduler counts it."""
    cap: dict[str, float] = {"cpu": sum(n.cpu for n in nodes), "memory": float(sum(n.memory for n in nodes))}
    for n in nodes:
        if n.gpu:
            cap[f"gpu:{n.gpu_type or 'gpu'}"] = cap.get(f"gpu:{n.gpu_type or 'gpu'}", 0) + n.gpu
    held: dict[str, dict[str, float]] = {team or name: {} for name, team in team_of.items()}
    for name, u in usage.items():
        h = held.setdefault(team_of.get(name) or name, {})
        for kind, amount in (("cpu", u.cpu), ("memory", u.memory), *((f"gpu:{t}", g) for t, g in u.gpu.items())):
            h[kind] = h.get(kind, 0) + amount
    out: dict[str, TeamShare] = {}
    for team, h in held.items():
        share, dominant = max(((amount / cap[kind], kind) for kind, amount in h.items() if cap.get(kind) and amount),
                              default=(0.0, None))
        out[team] = TeamShare(team=team, share=round(min(share, 1.0), 4), dominant=dominant)
    ranked = sorted(out.values(), key=lambda s: (s.share, s.team))
    for i, s in enumerate(ranked, 1):
        s.rank, s.teams = i, len(ranked)
    return out
