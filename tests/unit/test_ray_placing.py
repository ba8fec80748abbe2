"""What a job says while Ray has not placed its placement group, from Ray's own table (no cluster needed)."""

from __future__ import annotations

from types import SimpleNamespace

from trainyard.engines.ray import placing
from trainyard.spec.records import AttemptInfo, ReplicaInfo
from trainyard.status import AttemptStatus


def attempt(attempt_id: str, status: AttemptStatus, created_at: float = 1000.0) -> AttemptInfo:
    return AttemptInfo(id=attempt_id, job_id=attempt_id[:-2], number=1, status=status, created_at=created_at,
                       replicas=[ReplicaInfo(index=0, node="abc123", status=status)])


def entry(name: str, state: str = "PENDING", scheduling: str = "NO_RESOURCES") -> dict:
    return {"name": name, "state": state, "bundles": {0: {"CPU": 1.0, "memory": 2.0 * 2**30}},
            "stats": {"scheduling_state": scheduling, "scheduling_attempt": 7}}


def ray_with(table: dict) -> SimpleNamespace:
    calls = []

    def placement_group_table():
        calls.append(1)
        return table
    return SimpleNamespace(util=SimpleNamespace(placement_group_table=placement_group_table), calls=calls)


def test_only_the_starting_attempts_pending_groups_of_this_namespace_are_found_and_only_while_any_starts():
    ray = ray_with({"1": entry("ty-j-1"), "2": entry("ty-k-1", state="CREATED"), "3": entry("other-j-1"),
                    "4": entry("ty-r-1")})
    found = placing.pending(ray, "ty", [attempt("j-1", AttemptStatus.STARTING), attempt("k-1", AttemptStatus.STARTING),
                                        attempt("r-1", AttemptStatus.RUNNING)])
    assert list(found) == ["j-1"]
    placing.pending(ray, "ty", [attempt("r-1", AttemptStatus.RUNNING)])
    assert len(ray.calls) == 1  # nothing starting: Ray is not asked


def test_the_reason_says_what_ray_says_and_what_the_group_asks_once_it_has_waited_a_while():
    a = attempt("j-1", AttemptStatus.STARTING)
    assert placing.reason(entry("ty-j-1"), a, now=1000.0 + placing.SAY_AFTER - 1) == ""
    said = placing.reason(entry("ty-j-1"), a, now=1000.0 + 95)
    assert said.startswith("Ray has not placed the placement group ty-j-1 for 1 min: Ray says NO_RESOURCES after 7 "
                           "tries (the node does not have that much free; something outside trainyard")
    assert "it asks CPU 1, memory 2Gi on node abc123" in said
