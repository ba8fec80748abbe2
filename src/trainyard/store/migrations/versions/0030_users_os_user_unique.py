"""A Unix account (users.os_user) is one user's: a unique index (NULLs many: users with no account)

The API's check reads the users, then inserts: two creates at once both passed it, and two users' jobs ran as one
account, each able to read the other's environment (secrets included) and files. The index refuses the second.

A database where users already share an account (made before the check, or by that race) is not upgraded: which
user keeps the account, and what the others' jobs run as, is an admin's choice, not this migration's. The error
names each account and its users, and how to give all but one of them another account, or none (disabled).

Revision ID: 0030_users_os_user_unique
Revises: 0029_queue_max_priority
"""

import sqlalchemy as sa
from alembic import op

from trainyard.errors import TrainyardError

revision = "0030_users_os_user_unique"
down_revision = "0029_queue_max_priority"
branch_labels = None
depends_on = None

_SHARED = """
SELECT os_user, name FROM users
WHERE os_user IN (SELECT os_user FROM users WHERE os_user IS NOT NULL GROUP BY os_user HAVING count(*) > 1)
ORDER BY os_user, name
"""


def shared_accounts(conn: sa.Connection) -> dict[str, list[str]]:
    """Each Unix account more than one user has, and those users by name."""
    shared: dict[str, list[str]] = {}
    for account, name in conn.execute(sa.text(_SHARED)):
        shared.setdefault(account, []).append(name)
    return shared


def upgrade() -> None:
    shared = shared_accounts(op.get_bind())
    if shared:
        each = "; ".join(f"account {a!r}: users {', '.join(names)}" for a, names in shared.items())
        raise TrainyardError(
            f"the database's users share Unix accounts ({each}): their jobs can read each other's, secrets "
            "included, and this version keeps each account to one user. Give all but one user of each account "
            "another account (UPDATE users SET os_user = 'ACCOUNT' WHERE name = 'USER'), or none and disable them "
            "(SET os_user = NULL, disabled = true: make them a new user with an account of its own), then start "
            "again; the schema is left at revision 0029_queue_max_priority")
    op.create_index("ix_users_os_user", "users", ["os_user"], unique=True)


def downgrade() -> None:
    op.drop_index("ix_users_os_user", table_name="users")
