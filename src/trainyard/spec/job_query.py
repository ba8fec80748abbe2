"""Which jobs a listing shows and in what order: one shape for the API, the service and the store."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from trainyard.spec.label_selector import Selector

# The sorts a listing offers: a column, "-" for descending. Ties go by submit order in the same
# direction, so each sort is one index scan (forwards or backwards) over (column, seq).
JobSort = Literal["-created", "created", "name", "-name", "status", "-status", "queue", "-queue"]
SORT_COLUMNS = {"created": "seq", "name": "name", "status": "status", "queue": "queue"}

# A listing counts matching jobs up to this many: an exact count of 100,000 rows costs more than the page,
# and a search counts by reading rows: "1–50 of 1,000+" says enough
TOTAL_CAP = 1_000


@dataclass(frozen=True, slots=True)
class JobFilter:
    """Each field narrows the listing; None (or empty) leaves it open."""

    status: tuple[str, ...] = ()
    queue: str | None = None
    team: str | None = None
    owner: str | None = None
    name: str | None = None  # exactly this name
    q: str | None = None  # a substring of the name, or the start of the id
    since: float | None = None  # submitted at or after (Unix time)
    until: float | None = None  # submitted before (Unix time)
    labels: Selector = ()  # a label selector's requirements, every one of them met
