"""``/metrics``: one prometheus-client collector computing every family from the store's aggregates.

Names follow Kueue's (``kueue_pending_workloads``, ``kueue_admission_wait_time_seconds``…) with
``trainyard_`` in front, so the queries a Kueue or Ray user already has carry over. Gauges are
computed at scrape time, so a job's series vanish from the scrape after it ends and the series
count stays bounded by what is live.
"""

from __future__ import annotations

import time
from collections import Counter
from typing import Callable, Iterable

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector, CollectorRegistry

from trainyard.scheduler.stats import CycleStats
from trainyard.spec.records import NodeInfo
from trainyard.status import JobStatus
from trainyard.store import Store
from trainyard.store.archive_counts import WAIT_BOUNDS, reason_kind
from trainyard.store.dependencies import DependencyStore

ADMITTED = (JobStatus.STARTING.value, JobStatus.RUNNING.value, JobStatus.CANCELLING.value)
JOB = ["job_id", "job_name", "queue", "replica"]


class TrainyardCollector(Collector):
    def __init__(self, store: Store, nodes: Callable[[], list[NodeInfo]], stats: CycleStats) -> None:
        self.store = store
        self.nodes = nodes
        self.stats = stats

    def collect(self) -> Iterable[Metric]:
        yield from self._jobs()
        yield from self._attempts()
        yield from self.stats.cycles.collect()
        yield from self._nodes()
        yield from self._running()
        yield from self._schedules()

    def _jobs(self) -> Iterable[Metric]:
        counts = self.store.queue_counts()
        queues = sorted(set(counts) | {q.name for q in self.store.queues()})
        by_status = GaugeMetricFamily("trainyard_jobs", "Jobs in the store by queue and status",
                                      labels=["queue", "status"])
        pending = GaugeMetricFamily("trainyard_pending_jobs", "Pending jobs by queue and kind of reason they wait "
                                    "(the scheduler's last cycle; 'unplanned' before it saw them; 'dependency': "
                                    "waiting for other jobs to end)",
                                    labels=["queue", "reason"])
        admitted = GaugeMetricFamily("trainyard_admitted_active_jobs", "Admitted jobs not yet ended "
                                     "(starting, running, cancelling)", labels=["queue"])
        running = GaugeMetricFamily("trainyard_running_jobs", "Running jobs", labels=["queue"])
        waiting = self.stats.waiting
        planned = Counter()
        for (queue, why), n in waiting.items():
            planned[queue] += n
        blocked = DependencyStore(self.store).by_queue()  # out of the scheduler's line: waiting for other jobs
        for queue in queues:
            c = counts.get(queue, {})
            for status in JobStatus:
                by_status.add_metric([queue, status.value], c.get(status.value, 0))
            for (q, why), n in waiting.items():
                if q == queue:
                    pending.add_metric([queue, why], n)
            if blocked.get(queue):
                pending.add_metric([queue, "dependency"], blocked[queue])
            left = c.get(JobStatus.PENDING.value, 0) - planned[queue] - blocked.get(queue, 0)
            if left > 0:
                pending.add_metric([queue, "unplanned"], left)
            admitted.add_metric([queue], sum(c.get(s, 0) for s in ADMITTED))
            running.add_metric([queue], c.get(JobStatus.RUNNING.value, 0))
        oldest = GaugeMetricFamily("trainyard_pending_oldest_wait_seconds", "How long the longest-waiting "
                                   "pending job of each queue has waited since it was submitted", labels=["queue"])
        now = time.time()
        for queue, since in sorted(self.store.oldest_pending().items()):
            oldest.add_metric([queue], max(0.0, now - since))
        yield from (by_status, pending, admitted, running, oldest)

    def _attempts(self) -> Iterable[Metric]:
        waits = HistogramMetricFamily("trainyard_admission_wait_time_seconds",
                                      "Time from submission to first admission",
                                      labels=["queue"])
        for queue, w in sorted(self.store.admission_waits().items()):
            buckets = [(f"{b:g}", n) for b, n in zip(WAIT_BOUNDS, w.buckets)] + [("+Inf", w.count)]
            waits.add_metric([queue], buckets, w.total)
        yield waits
        ended = CounterMetricFamily("trainyard_attempts_ended", "Attempts ended, by queue and reason",
                                    labels=["queue", "reason"])
        totals: Counter[tuple[str, str]] = Counter()
        outcomes = self.store.attempt_outcomes()
        for queue, reason, n in outcomes.ended:
            totals[(queue, reason_kind(reason))] += n  # Error(exit 3) counts as Error
        for key, n in sorted(totals.items()):
            ended.add_metric(list(key), n)
        yield ended
        preempted = CounterMetricFamily("trainyard_preemptions", "Attempts preempted to make room for other work",
                                        labels=["queue"])
        for queue, n in sorted(outcomes.preempted.items()):
            preempted.add_metric([queue], n)
        yield preempted

    def _nodes(self) -> Iterable[Metric]:
        labels = ["node", "resource", "gpu_type"]
        capacity = GaugeMetricFamily("trainyard_node_capacity", "Allocatable resources of each node "
                                     "(cpu: cores, memory: bytes, gpu: devices)", labels=labels)
        used = GaugeMetricFamily("trainyard_node_used", "Resources of each node held by live attempts", labels=labels)
        # kube-state-metrics' kube_node_spec_unschedulable, for a cordon forgotten after maintenance
        cordoned = GaugeMetricFamily("trainyard_node_unschedulable", "1 while an admin keeps new work off the node "
                                     "(cordoned or drained)", labels=["node"])
        for n in self.nodes():
            cordoned.add_metric([n.name], 1 if n.cordon else 0)
            kind = n.gpu_type or ""
            for resource, cap, use in (("cpu", n.cpu, n.cpu_used), ("memory", n.memory, n.memory_used),
                                       ("gpu", n.gpu, len(n.gpus_used))):
                capacity.add_metric([n.name, resource, kind], cap)
                used.add_metric([n.name, resource, kind], use)
        yield from (capacity, used, cordoned)

    def _running(self) -> Iterable[Metric]:
        cpu = GaugeMetricFamily("trainyard_job_cpu_usage_percent", "CPU use of a running replica's processes "
                                "(100 = one core)", labels=JOB)
        mem = GaugeMetricFamily("trainyard_job_memory_usage_bytes", "Resident memory of a running replica's "
                                "processes", labels=JOB)
        gpu = GaugeMetricFamily("trainyard_job_gpu_utilization_percent", "GPU utilisation of a running replica, "
                                "mean over its GPUs", labels=JOB)
        gmem = GaugeMetricFamily("trainyard_job_gpu_memory_usage_bytes", "GPU memory used by a running replica",
                                 labels=JOB)
        idle = GaugeMetricFamily("trainyard_job_gpu_idle", "1 while a running replica's GPUs are flagged idle",
                                 labels=JOB)
        for r in self.store.running_usage():
            key = [r.job_id, r.name, r.queue, str(r.replica)]
            if r.cpu_percent is not None:
                cpu.add_metric(key, r.cpu_percent)
            if r.memory_bytes is not None:
                mem.add_metric(key, r.memory_bytes)
            if r.gpu_util is not None:
                gpu.add_metric(key, r.gpu_util)
                gmem.add_metric(key, r.gpu_memory_bytes or 0)
                idle.add_metric(key, 1 if r.idle else 0)
        yield from (cpu, mem, gpu, gmem, idle)


    def _schedules(self) -> Iterable[Metric]:
        """kube-state-metrics' CronJob series, for schedules: next and last fire, paused, runs going, and the
        latest fire's outcome as a state set (an alert on ``failed``/``missed`` says a schedule stopped working)."""
        from trainyard.services.schedules import shown
        from trainyard.spec.schedule import OUTCOMES
        from trainyard.store.schedules import ScheduleStore

        labels = ["schedule", "team"]
        nxt = GaugeMetricFamily("trainyard_schedule_next_fire_timestamp_seconds", "When a schedule fires next "
                                "(absent while paused)", labels=labels)
        last = GaugeMetricFamily("trainyard_schedule_last_fire_timestamp_seconds", "When a schedule's latest "
                                 "fire by its cron was due", labels=labels)
        paused = GaugeMetricFamily("trainyard_schedule_suspended", "1 while a schedule is paused", labels=labels)
        active = GaugeMetricFamily("trainyard_schedule_active_runs", "Jobs or pipeline runs a schedule started "
                                   "that have not ended", labels=labels)
        outcome = GaugeMetricFamily("trainyard_schedule_last_outcome", "1 for the outcome of a schedule's latest "
                                    "fire (started, skipped, missed, failed), 0 for the others",
                                    labels=[*labels, "outcome"])
        store = ScheduleStore(self.store)
        rows = store.list()
        ids = [r["id"] for r in rows]
        runs, going = store.runs_of(ids, limit=1), store.active(ids)
        for r in rows:
            key, pause = [r["name"], r["team"] or ""], shown(r)  # a held schedule reads paused, as the API says
            if pause.next_at is not None:
                nxt.add_metric(key, pause.next_at)
            if r["last_at"] is not None:
                last.add_metric(key, r["last_at"])
            paused.add_metric(key, 1.0 if pause.suspended else 0.0)
            active.add_metric(key, len(going[r["id"]]))
            if runs[r["id"]]:
                for o in OUTCOMES:
                    outcome.add_metric([*key, o], 1.0 if runs[r["id"]][0].outcome == o else 0.0)
        yield from (nxt, last, paused, active, outcome)


def registry(collector: TrainyardCollector) -> CollectorRegistry:
    """A registry of its own per server (not the process-wide default), holding only ``collector``."""
    reg = CollectorRegistry(auto_describe=False)
    reg.register(collector)
    return reg
