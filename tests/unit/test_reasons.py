"""One Reason enum: every member's consequences are in one table, and the launcher's strings agree with it."""

from __future__ import annotations

from typing import get_args

from trainyard.launch import reasons as launcher_reasons
from trainyard.spec.job import RetryOn
from trainyard.status import ALWAYS, CONSEQUENCES, NEVER, AttemptStatus, Reason


def test_every_reason_has_its_consequences_and_every_retry_category_is_used():
    assert set(CONSEQUENCES) == set(Reason)
    categories = {c.retry_on for c in CONSEQUENCES.values()}
    assert categories - {NEVER, ALWAYS} == set(get_args(RetryOn))


def test_the_launchers_strings_are_reasons_with_the_same_values():
    written = {name: value for name, value in vars(launcher_reasons).items() if name.isupper()}
    assert written and all(Reason[name].value == value for name, value in written.items())
    assert launcher_reasons.error(-9) == Reason.error(-9) == "Error(exit -9)"


def test_a_stored_text_reads_back_as_its_reason():
    assert Reason.of(Reason.error(3)) is Reason.ERROR and Reason.of("OOMKilled") is Reason.OOM
    assert Reason.of("Error(exit x)") is None and Reason.of("Errors") is None and Reason.of(None) is None
    assert f"{Reason.NODE_LOST}" == "NodeLost"  # shown and stored as its value


def test_reasons_lead_to_the_attempt_statuses_they_always_did():
    assert Reason.SUCCEEDED.to_status() == AttemptStatus.SUCCEEDED
    assert {r for r in Reason if r.to_status() == AttemptStatus.CANCELLED} == {Reason.CANCELLED, Reason.PREEMPTED,
                                                                                  Reason.DRAINED}
    assert Reason.PREEMPTED.retry_on == ALWAYS and Reason.SETUP.retry_on == NEVER
    assert Reason.NODE_LOST.retry_on == Reason.LOST.retry_on == "lost_contact"
