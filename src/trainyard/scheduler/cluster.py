"""Free room on every node during one planning cycle, indexed so placing is cheap.

GPU nodes sit in buckets by (GPU type, free GPUs); every node also sits in a
bucket by (tier, whole free cores). A GPU request scans from the smallest free
count that could hold it, so GPU work is packed best-fit and whole nodes stay
free for big jobs. A CPU-only request prefers nodes without GPUs, then GPU
nodes whose GPUs are all taken (their cores are otherwise stranded), then the
rest, each best-fit on cores. Buckets are lists with swap-remove, so moving a
node after an allocation is O(1). Giving room back puts each node back where it
sat, so a try that admits nothing changes no later choice of node. Each bucket
keeps upper bounds on the cores and memory of its nodes, tightened whenever a
scan of it fails, so a bucket of nodes with free GPUs (or cores) but no memory
left is skipped in O(1) instead of being scanned again by every job.
"""

from __future__ import annotations

from dataclasses import dataclass

from trainyard.scheduler.model import INF, Node, PendingJob

EPS = 1e-9


class Slot:
    """One node's mutable free room for the length of a cycle."""

    __slots__ = ("name", "cpu", "mem", "g", "gids", "type", "labels", "cap_cpu", "cap_mem", "cap_g",
                 "gkey", "gpos", "ctier", "ckey", "cpos", "soon", "resv")

    def __init__(self, n: Node) -> None:
        self.name, self.type, self.labels = n.name, n.gpu_type if n.gpus else None, n.labels
        self.cap_cpu, self.cap_mem, self.cap_g = n.cpu, n.memory, n.gpus
        self.cpu, self.mem = float(n.cpu_free), int(n.memory_free)
        self.gids = list(n.free_gpu_ids)[: n.gpus]  # never more than the node has, whatever we are told
        self.g = len(self.gids)
        self.gkey = self.gpos = 0  # read by take() on every node; a GPU-less node never moves in a GPU bucket
        self.soon: list | None = None  # [cpu, mem, gpus] held by stopping attempts
        self.resv: list | None = None  # [start, cpu, mem, gpus] left beyond a reservation


@dataclass(slots=True)
class Take:
    """Room one replica took on one node, and where the node sat in its buckets before:
    :meth:`Cluster.give` hands exactly this back and puts the node back there."""

    slot: Slot
    cpu: float
    memory: int
    gpus: int
    gpu_ids: list[str]
    charged: bool  # also taken from what the node's reservation leaves over
    gkey: int
    gpos: int
    ctier: int
    ckey: int
    cpos: int


def selector_ok(labels: dict[str, str], sel: tuple) -> bool:
    for k, v in sel:
        if labels.get(k) != v:
            return False
    return True


class Cluster:
    def __init__(self, nodes: list[Node]) -> None:
        # A cordoned node is no slot: nothing is placed there, nor preempted to make room there. Its
        # attempts still count against their queues' quotas by its GPU type, and it names the nodes a
        # job could run on once uncordoned.
        self.type_of = {n.name: n.gpu_type if n.gpus else None for n in nodes}
        self.cordoned = [Slot(n) for n in nodes if n.cordoned]
        self.slots = [Slot(n) for n in nodes if not n.cordoned]
        self.by_name = {s.name: s for s in self.slots}
        self.typed: dict[str, list[Slot]] = {}
        for s in self.slots:
            if s.type:
                self.typed.setdefault(s.type, []).append(s)
        self.top_g = top_g = {t: max(s.cap_g for s in ss) for t, ss in self.typed.items()}  # GPUs of the biggest node
        self.gb = {t: [[] for _ in range(top_g[t] + 1)] for t in self.typed}
        self.gbound = {t: [[0.0, 0] for _ in range(top_g[t] + 1)] for t in self.typed}  # [cpu, mem] upper bounds
        top_c = int(max((s.cap_cpu for s in self.slots), default=0) + EPS)
        self.cb = [[[] for _ in range(top_c + 1)] for _ in range(3)]
        self.nc = top_c + 1
        self.cbound = [[0] * (top_c + 1) for _ in range(3)]  # memory upper bound per CPU bucket
        self.ctop = [top_c] * 3  # upper bound on the highest non-empty CPU bucket per tier
        self.gfree = {t: 0 for t in self.typed}
        self.cpu_free = self.mem_free = 0.0
        self.mem_top = max((s.mem for s in self.slots), default=0)  # upper bound, never tightened
        self.soon_any = False
        self._holders: dict[tuple, list] = {}
        self.soon_g: dict[str, int] = {}  # GPUs of stopping attempts per type, and their cores: gates only
        self.soon_cpu = 0.0
        self.cpu_total = sum(s.cap_cpu for s in self.slots)
        self.mem_total = sum(s.cap_mem for s in self.slots)
        self.gpu_cap = {t: sum(s.cap_g for s in ss) for t, ss in self.typed.items()}
        self.gpu_total = sum(self.gpu_cap.values())
        for s in self.slots:
            self.cpu_free += s.cpu
            self.mem_free += s.mem
            if s.type:
                self.gfree[s.type] += s.g
                s.gkey = s.g
                self._gput(s)
            s.ctier, s.ckey = self._ckey(s)
            self._cput(s)
        # distinct node shapes: static feasibility checks scan these, not every node
        self.classes = list({(s.cap_cpu, s.cap_mem, s.cap_g, s.type, tuple(sorted(s.labels.items()))): s
                             for s in self.slots}.values())

    def _ckey(self, s: Slot) -> tuple[int, int]:
        tier = 0 if not s.cap_g else (1 if s.g == 0 else 2)
        return tier, max(0, min(int(s.cpu + EPS), len(self.cb[0]) - 1))

    def _gput(self, s: Slot) -> None:
        b = self.gb[s.type][s.gkey]
        s.gpos = len(b)
        b.append(s)
        bound = self.gbound[s.type][s.gkey]
        if s.cpu > bound[0]:
            bound[0] = s.cpu
        if s.mem > bound[1]:
            bound[1] = s.mem

    def _cput(self, s: Slot) -> None:
        b = self.cb[s.ctier][s.ckey]
        s.cpos = len(b)
        b.append(s)
        bound = self.cbound[s.ctier]
        if s.mem > bound[s.ckey]:
            bound[s.ckey] = s.mem
        if s.ckey > self.ctop[s.ctier]:
            self.ctop[s.ctier] = s.ckey

    def _rebucket(self, s: Slot) -> None:
        t = s.type
        if t:
            if s.gkey != s.g:
                b = self.gb[t][s.gkey]
                last = b.pop()
                if last is not s:
                    b[s.gpos] = last
                    last.gpos = s.gpos
                s.gkey = s.g
                self._gput(s)
            else:  # a rollback can give room back in place: keep the bounds upper bounds
                bound = self.gbound[t][s.gkey]
                if s.cpu > bound[0]:
                    bound[0] = s.cpu
                if s.mem > bound[1]:
                    bound[1] = s.mem
        tier = 0 if not s.cap_g else (1 if s.g == 0 else 2)
        key = int(s.cpu + EPS)
        if key >= self.nc:
            key = self.nc - 1
        elif key < 0:
            key = 0
        if tier != s.ctier or key != s.ckey:
            b = self.cb[s.ctier][s.ckey]
            last = b.pop()
            if last is not s:
                b[s.cpos] = last
                last.cpos = s.cpos
            s.ctier, s.ckey = tier, key
            self._cput(s)
        elif s.mem > self.cbound[tier][key]:
            self.cbound[tier][key] = s.mem

    # -- static checks -------------------------------------------------------

    def holds(self, s: Slot, job: PendingJob, t: str | None, sel: tuple) -> bool:
        """Could ``s`` ever hold one replica of ``job`` on GPU type ``t``?"""
        return (s.cap_cpu + EPS >= job.cpu and s.cap_mem >= job.memory and (not job.gpu or (
            s.type == t and s.cap_g >= job.gpu)) and selector_ok(s.labels, sel))

    def holders(self, job: PendingJob, t: str | None, sel: tuple) -> list[Slot]:
        """Every node that could ever hold one replica of ``job`` on type ``t`` (cached per shape)."""
        key = (job.cpu, job.memory, job.gpu, t, sel)
        out = self._holders.get(key)
        if out is None:
            out = self._holders[key] = [s for s in (self.typed.get(t, []) if job.gpu else self.slots)
                                        if self.holds(s, job, t, sel)]
        return out

    def static_types(self, job: PendingJob, sel: tuple) -> tuple:
        """GPU types (preference order) some node could ever hold a replica on; (None,) for CPU jobs."""
        if not job.gpu:
            ok = any(self.holds(s, job, None, sel) for s in self.classes)
            if ok and job.replicas > 1:
                ok = self.capacity(job, None, sel) >= job.replicas
            return (None,) if ok else ()
        wanted = job.gpu_types or tuple(sorted(self.typed))
        types = tuple(t for t in wanted if any(self.holds(s, job, t, sel) for s in self.classes))
        if job.replicas > 1:  # a gang also needs room for every replica on an empty cluster
            types = tuple(t for t in types if self.capacity(job, t, sel) >= job.replicas)
        return types

    def capacity(self, job: PendingJob, t: str | None, sel: tuple) -> int:
        """How many replicas of ``job`` the whole cluster could hold if it were empty."""
        if job.placement == "spread":
            return len(self.holders(job, t, sel))
        c, m, g = job.cpu, job.memory, job.gpu
        return sum(min(int((s.cap_cpu + EPS) / c) if c > 0 else 1 << 30, s.cap_mem // m if m > 0 else 1 << 30,
                       s.cap_g // g if g > 0 else 1 << 30) for s in self.holders(job, t, sel))

    # -- finding and taking room --------------------------------------------

    def find(self, c: float, m: int, g: int, t: str | None, sel: tuple, end: float, exclude: set | None) -> Slot | None:
        """A node with room now for one replica, honouring reservations; best fit first."""
        ce = c - EPS
        if g:
            buckets = self.gb.get(t)
            if not buckets:
                return None
            bounds = self.gbound[t]
            for k in range(g, len(buckets)):
                bound = bounds[k]
                if bound[0] < ce or bound[1] < m:
                    continue
                for s in buckets[k]:
                    if s.cpu >= ce and s.mem >= m and (not sel or selector_ok(s.labels, sel)) and (
                            exclude is None or s not in exclude):
                        r = s.resv
                        if r is None or end <= r[0] or (c <= r[1] + EPS and m <= r[2] and g <= r[3]):
                            return s
                b = buckets[k]  # nothing here: tighten the bounds to what the bucket really holds
                bound[0] = max((s.cpu for s in b), default=0.0)
                bound[1] = max((s.mem for s in b), default=0)
            return None
        start = int(c)
        for tier in (0, 1, 2):
            bl, bounds = self.cb[tier], self.cbound[tier]
            top = self.ctop[tier]
            while top > 0 and not bl[top]:
                top -= 1
            self.ctop[tier] = top
            for k in range(start, top + 1):
                if bounds[k] < m:
                    continue
                b = bl[k]
                for s in b:
                    if s.cpu >= ce and s.mem >= m and (not sel or selector_ok(s.labels, sel)) and (
                            exclude is None or s not in exclude):
                        r = s.resv
                        if r is None or end <= r[0] or (c <= r[1] + EPS and m <= r[2]):
                            return s
                bounds[k] = max((s.mem for s in b), default=0)
        return None

    def take(self, s: Slot, c: float, m: int, g: int, end: float) -> Take:
        was = (s.gkey, s.gpos, s.ctier, s.ckey, s.cpos)
        s.cpu -= c
        s.mem -= m
        ids = s.gids[:g]
        del s.gids[:g]
        s.g -= g
        self.cpu_free -= c
        self.mem_free -= m
        if g:
            self.gfree[s.type] -= g
        r = s.resv
        charged = r is not None and end > r[0]
        if charged:
            r[1] -= c
            r[2] -= m
            r[3] -= g
        self._rebucket(s)
        return Take(s, c, m, g, ids, charged, *was)

    def give(self, t: Take) -> None:
        """Undo the latest :meth:`take` still in force (a gang rolls back in reverse order), leaving
        the room and the buckets' order as they were before it."""
        s, c, m, g, ids = t.slot, t.cpu, t.memory, t.gpus, t.gpu_ids
        s.cpu += c
        s.mem += m
        s.gids[0:0] = ids
        s.g += g
        self.cpu_free += c
        self.mem_free += m
        if g:
            self.gfree[s.type] += g
        if t.charged:
            r = s.resv
            r[1] += c
            r[2] += m
            r[3] += g
        self._unbucket(s, t)

    def _unbucket(self, s: Slot, t: Take) -> None:
        """Put ``s`` back at the bucket positions ``t`` recorded. The take appended it to its new
        buckets and moved each old bucket's last node into its place; undone last-first, ``s`` is
        again the last of its new bucket and that node sits at the recorded position."""
        if s.type and s.gkey != t.gkey:
            b = self.gb[s.type][s.gkey]
            if b[-1] is not s:  # not the latest take: keep the room right, if not the order
                return self._rebucket(s)
            b.pop()
            s.gkey = t.gkey
            _put_back(self.gb[s.type][t.gkey], s, t.gpos, "gpos")
        if s.type:
            bound = self.gbound[s.type][s.gkey]
            if s.cpu > bound[0]:
                bound[0] = s.cpu
            if s.mem > bound[1]:
                bound[1] = s.mem
        if s.ctier != t.ctier or s.ckey != t.ckey:
            b = self.cb[s.ctier][s.ckey]
            if b[-1] is not s:
                return self._rebucket(s)
            b.pop()
            s.ctier, s.ckey = t.ctier, t.ckey
            _put_back(self.cb[t.ctier][t.ckey], s, t.cpos, "cpos")
            if s.ckey > self.ctop[s.ctier]:
                self.ctop[s.ctier] = s.ckey
        if s.mem > self.cbound[s.ctier][s.ckey]:
            self.cbound[s.ctier][s.ckey] = s.mem

    def place(self, job: PendingJob, t: str | None, sel: tuple, end: float) -> list[Take] | None:
        """Every replica of ``job`` on type ``t``, or nothing at all (a gang starts whole)."""
        c, m, g, n = job.cpu, job.memory, job.gpu, job.replicas
        if (g and self.gfree.get(t, 0) < g * n) or self.cpu_free + EPS < c * n or self.mem_free < m * n \
                or m > self.mem_top:
            return None
        exclude = set() if n > 1 and job.placement == "spread" else None
        taken: list[Take] = []
        for _ in range(n):
            s = self.find(c, m, g, t, sel, end, exclude)
            if s is None:
                for rec in reversed(taken):
                    self.give(rec)
                return None
            taken.append(self.take(s, c, m, g, end))
            if exclude is not None:
                exclude.add(s)
        return taken

    # -- room that stopping attempts will hand back ---------------------------

    def add_soon(self, s: Slot, c: float, m: int, g: int) -> None:
        if s.soon is None:
            s.soon = [0.0, 0, 0]
        s.soon[0] += c
        s.soon[1] += m
        s.soon[2] += g
        self.soon_any = True
        self.soon_cpu += c
        if g:
            self.soon_g[s.type] = self.soon_g.get(s.type, 0) + g

    def claim(self, s: Slot, c: float, m: int, g: int, end: float) -> None:
        """Hold room for a job that starts once stopping attempts exit: their room first, then free room."""
        sc = s.soon or [0.0, 0, 0]
        uc, um, ug = min(c, sc[0]), min(m, sc[1]), min(g, sc[2])
        if s.soon is not None:
            sc[0] -= uc
            sc[1] -= um
            sc[2] -= ug
        r = s.resv
        if r is not None and end > r[0]:  # the held share counted that room too (take charges the rest)
            r[1] -= uc
            r[2] -= um
            r[3] -= ug
        rest = (max(0.0, c - uc), max(0, m - um), max(0, g - ug))
        if any(rest):
            self.take(s, *rest, end)

    def max_free(self, t: str | None) -> float:
        """Most free GPUs of type ``t`` on one node (cores when ``t`` is None)."""
        if t is None:
            return max((s.cpu for s in self.slots), default=0.0)
        buckets = self.gb.get(t, [])
        return next((k for k in range(len(buckets) - 1, -1, -1) if buckets[k]), 0)


def _put_back(b: list[Slot], s: Slot, pos: int, attr: str) -> None:
    """Undo a swap-remove: the node now at ``pos`` goes back to the end, ``s`` to ``pos``."""
    if pos < len(b):
        moved = b[pos]
        setattr(moved, attr, len(b))
        b.append(moved)
        b[pos] = s
    else:
        b.append(s)
    setattr(s, attr, pos)


def end_of(job: PendingJob, now: float) -> float:
    return now + job.timeout if job.timeout is not None else INF
