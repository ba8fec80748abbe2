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


def test_sources_are_read_off_the_table_per_enum():
    from trainyard.status import sources

    assert sources(JobStatus.STARTING) == ["pending"]
    assert sources(AttemptStatus.STARTING) == []  # a job may start, an attempt is only created so
    assert set(sources(JobStatus.CANCELLED)) == {"pending", "cancelling"}
    for new in [*JobStatus, *AttemptStatus]:
        table = JOB_TRANSITIONS if isinstance(new, JobStatus) else ATTEMPT_TRANSITIONS
        assert set(sources(new)) == {old.value for old in table if new in table[old]}
