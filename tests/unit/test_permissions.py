"""The one table of who may do what, and what a caller sees."""

import pytest

from trainyard.auth.permissions import ALLOWED, LOCAL_ADMIN, Action, Caller, Role, visible
from trainyard.spec.identity import ROLES, parse_duration

ALICE = Caller("alice", teams={"vision": Role.MEMBER})
DAVE = Caller("dave", teams={"vision": Role.MAINTAINER})
CAROL = Caller("carol", teams={"vision": Role.VIEWER, "nlp": Role.MEMBER})


def test_the_spec_names_the_same_roles_as_the_table():
    assert set(ROLES) == {r.value for r in Role} == {r.value for r in ALLOWED}


@pytest.mark.parametrize("caller, action, team, owner, allowed", [
    (ALICE, Action.SUBMIT, "vision", None, True),
    (ALICE, Action.SUBMIT, "nlp", None, False),          # another team's queue
    (ALICE, Action.CANCEL_OWN, "vision", "alice", True),
    (ALICE, Action.CANCEL_OWN, "vision", "dave", False),  # a teammate's job
    (DAVE, Action.CANCEL_OWN, "vision", "alice", True),   # a maintainer cancels the team's
    (DAVE, Action.CANCEL_OWN, "nlp", "bob", False),
    (DAVE, Action.MANAGE_QUEUES, "vision", None, True),
    (ALICE, Action.MANAGE_QUEUES, "vision", None, False),
    (DAVE, Action.MANAGE_SECRETS, "vision", None, True),  # a maintainer sets the team's secrets
    (ALICE, Action.MANAGE_SECRETS, "vision", None, False),  # a member only uses them
    (DAVE, Action.MANAGE_SECRETS, "nlp", None, False),
    (CAROL, Action.SUBMIT, "vision", None, False),        # a viewer reads
    (CAROL, Action.READ, "vision", None, True),
    (CAROL, Action.SUBMIT, "nlp", None, True),            # roles are per team
    (ALICE, Action.MANAGE_USERS, None, None, False),
    (LOCAL_ADMIN, Action.MANAGE_USERS, None, None, True),
    (LOCAL_ADMIN, Action.CANCEL_OWN, "nlp", "bob", True),
])
def test_may(caller, action, team, owner, allowed):
    assert caller.may(action, team, owner) is allowed


def test_what_a_caller_sees():
    assert ALICE.sees("vision", "dave") and ALICE.sees(None, "alice") and not ALICE.sees("nlp", "bob")
    assert not ALICE.sees(None, None) and LOCAL_ADMIN.sees("nlp", "bob")
    assert visible(CAROL).teams == {"vision", "nlp"} and visible(LOCAL_ADMIN).teams is None
    assert CAROL.submit_teams() == ["nlp"]


def test_durations():
    assert parse_duration("90d") == 90 * 86400 and parse_duration("12h") == 43200 and parse_duration("2w") == 1209600
    for bad in ("90", "d", "-1d", "1y", "1.5h"):
        with pytest.raises(ValueError):
            parse_duration(bad)
