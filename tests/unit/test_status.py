from trainyard.status import ATTEMPT_TRANSITIONS, JOB_TRANSITIONS, AttemptStatus, JobStatus, allowed


def test_terminal_states_are_final():
    for s in JobStatus:
        if s.is_terminal():
            assert JOB_TRANSITIONS[s] == set()
    for s in AttemptStatus:
        if s.is_terminal():
            assert ATTEMPT_TRANSITIONS[s] == set()


def test_every_status_has_a_row_and_pending_cannot_skip_to_running():
    assert set(JOB_TRANSITIONS) == set(JobStatus)
    assert set(ATTEMPT_TRANSITIONS) == set(AttemptStatus)
    assert not allowed(JobStatus.PENDING, JobStatus.RUNNING)
    assert allowed(JobStatus.RUNNING, JobStatus.PENDING)  # a retry
    assert not allowed(JobStatus.CANCELLING, JobStatus.PENDING)  # a cancelled job is never retried
