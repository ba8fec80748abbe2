from trainyard.services.retry import decide
from trainyard.spec.job import Retry
from trainyard.status import AttemptStatus, JobStatus, Reason


def test_error_is_retried_with_doubling_backoff_then_fails():
    policy = Retry(max=2, backoff=10)
    first = decide(policy, tries=1, exit_code=1, reason=Reason.error(1), cancel_requested=False, now=100)
    second = decide(policy, tries=2, exit_code=1, reason=Reason.error(1), cancel_requested=False, now=100)
    third = decide(policy, tries=3, exit_code=1, reason=Reason.error(1), cancel_requested=False, now=100)
    assert (first.job_status, first.not_before) == (JobStatus.PENDING, 110)
    assert (second.job_status, second.not_before) == (JobStatus.PENDING, 120)
    assert third.job_status == JobStatus.FAILED and "after 3 attempts" in third.job_reason


def test_permanent_exit_codes_and_unlisted_kinds_are_not_retried():
    policy = Retry(max=5, on=["error"])
    assert decide(policy, tries=1, exit_code=127, reason=Reason.error(127), cancel_requested=False,
                  now=0).job_status == JobStatus.FAILED
    assert decide(policy, tries=1, exit_code=-9, reason=Reason.OOM, cancel_requested=False,
                  now=0).job_status == JobStatus.FAILED


def test_success_and_cancel():
    policy = Retry(max=5)
    ok = decide(policy, tries=1, exit_code=0, reason=Reason.SUCCEEDED, cancel_requested=True, now=0)
    assert (ok.attempt_status, ok.job_status) == (AttemptStatus.SUCCEEDED, JobStatus.SUCCEEDED)
    cancelled = decide(policy, tries=1, exit_code=-15, reason=Reason.error(-15), cancel_requested=True, now=0)
    assert (cancelled.attempt_status, cancelled.job_status) == (AttemptStatus.CANCELLED, JobStatus.CANCELLED)


def test_a_lost_node_is_retried_like_lost_contact():
    retried = decide(Retry(max=1, backoff=0), tries=1, exit_code=None, reason=Reason.NODE_LOST,
                     cancel_requested=False, now=0)
    assert retried.job_status == JobStatus.PENDING
    not_asked = decide(Retry(max=1, on=["error"]), tries=1, exit_code=None, reason=Reason.NODE_LOST,
                       cancel_requested=False, now=0)
    assert not_asked.job_status == JobStatus.FAILED
