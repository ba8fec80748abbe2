"""A job's ``after``: short and long forms, each condition against each end, and bad ones named."""

import pytest
from pydantic import ValidationError

from trainyard.spec.job import JobSpec
from trainyard.spec.loader import parse_job


def test_short_and_long_forms_and_what_each_condition_makes_of_each_end():
    spec = JobSpec.model_validate({"command": "x", "after": ["j-a", "j-b:failed", {"job": "j-c", "when": "ended"}]})
    assert [(d.job, d.when) for d in spec.after] == [("j-a", "succeeded"), ("j-b", "failed"), ("j-c", "ended")]
    met = {d.when: [d.met_by(s) for s in ("pending", "running", "cancelling", "succeeded", "failed", "cancelled")]
           for d in spec.after}
    assert met == {"succeeded": [None, None, None, True, False, False],
                   "failed": [None, None, None, False, True, True],
                   "ended": [None, None, None, True, True, True]}


def test_yaml_takes_the_long_form_with_when_unquoted():
    spec = parse_job("command: x\nafter:\n  - {job: j-a, when: ended}\n  - j-b\n")
    assert [(d.job, d.when) for d in spec.after] == [("j-a", "ended"), ("j-b", "succeeded")]


@pytest.mark.parametrize("after, field", [(["j-a:ok"], "after.0.when"), (["../etc"], "after.0.job"),
                                          ([{"job": "j-a", "on": "ended"}], "after.0.on"),
                                          (["j-a", "j-a:ended"], "after"), ([f"j-{i}" for i in range(65)], "after")])
def test_a_bad_after_is_named(after, field):
    with pytest.raises(ValidationError) as e:
        JobSpec.model_validate({"command": "x", "after": after})
    where = {".".join(str(p) for p in err["loc"]) for err in e.value.errors()}
    assert field in where or (field == "after" and where == {""}), where


def test_a_dependency_deleted_while_a_job_waits_for_it_means_it_can_never_start():
    from trainyard.services.dependencies import never, waits_for

    deps = JobSpec.model_validate({"command": "x", "after": ["j-a:ended", "j-b"]}).after
    assert never(deps, {"j-a": "running", "j-b": "succeeded"}) is None
    assert waits_for(deps, {"j-a": "running", "j-b": "succeeded"}) == "waits for j-a (running) to end"
    assert never(deps, {"j-b": "succeeded"}) == (0, "job j-a was deleted; this one was to start only once it ended")
