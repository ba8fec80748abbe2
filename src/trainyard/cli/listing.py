"""`trainyard ls`: its filters read from the command line, and the pages of a long history walked."""

from __future__ import annotations

import time
from datetime import datetime

from trainyard.errors import InvalidSpec
from trainyard.spec.units import parse_duration
from trainyard.status import JobStatus

PAGE = 500  # the most the API gives in one page


def _bad(flag: str, message: str) -> InvalidSpec:
    from trainyard.spec.lines import error_entry  # yaml and pydantic's errors: for a bad flag only

    return InvalidSpec(errors=[error_entry(flag, None, "", message)])


def check_statuses(statuses: list[str]) -> None:
    known = [s.value for s in JobStatus]
    for s in statuses:
        if s not in known:
            from trainyard.spec.lines import suggestion

            raise _bad("--status", f"unknown status {s!r}{suggestion(s, known)} (one of {', '.join(known)})")


def check_sort(sort: str, after: str | None) -> bool:
    """Whether ``--sort`` pages by offset (any order but submit order's, which pages by cursor)."""
    from trainyard.spec.job_query import SORT_COLUMNS  # the server's own list of sorts

    if sort.lstrip("-") not in SORT_COLUMNS or sort.count("-") > 1:
        from trainyard.spec.lines import suggestion

        raise _bad("--sort", f"{sort!r}{suggestion(sort.lstrip('-'), list(SORT_COLUMNS))}: one of "
                   f"{', '.join(SORT_COLUMNS)}, "
                   "with '-' first for descending")
    if sort.lstrip("-") != "created" and after is not None:
        raise _bad("--after", f"continues a listing in submit order, not --sort {sort}")
    return sort.lstrip("-") != "created"


def parse_since(text: str | None, flag: str = "--since") -> float | None:
    """A Unix time from ``2h`` / ``3d`` (that long ago) or an ISO date or time (local time unless it says)."""
    if text is None:
        return None
    try:
        return time.time() - parse_duration(text)
    except ValueError:
        pass
    try:
        return datetime.fromisoformat(text).timestamp()
    except ValueError:
        raise _bad(flag, f"{text!r}: give a duration (30m, 2h, 3d) or a date (2024-05-01, "
                   "2024-05-01T12:00)") from None


def pages(fetch, *, limit: int | None, cursor: str | None) -> tuple[list, str | None]:  # noqa: ANN001
    """Up to ``limit`` items (all with None), fetched page by page by ``fetch(want, cursor)``, which answers
    ``(items, next cursor)``; and the cursor where more begin."""
    items: list = []
    while limit is None or len(items) < limit:
        found, cursor = fetch(PAGE if limit is None else min(PAGE, limit - len(items)), cursor)
        items += found
        if cursor is None:
            return items, None
    return items, cursor


def labels_of(items: list[str]) -> list[str] | None:
    """``--label`` selectors, checked as the server checks them (the error names the flag); None for none."""
    if not items:
        return None
    from trainyard.spec.label_selector import parse_selector

    try:
        parse_selector(items, "--label")
        return items
    except ValueError as e:
        raise _bad("--label", str(e).removeprefix("--label: ")) from None


def paged_list(page, *, limit: int | None, after: str | None, raise_hint: str = "--all") -> list:  # noqa: ANN001
    """Up to ``limit`` items (all with None) of a listing that pages newest first, ``page(limit=, cursor=)``
    answering an :class:`~trainyard.spec.paging.Page`; past them, a line on stderr saying how to see more."""
    from trainyard.cli.common import err_console

    def fetch(want: int, cursor: str | None) -> tuple[list, str | None]:
        got = page(limit=want, cursor=cursor)
        return got.items, got.next_cursor

    items, more = pages(fetch, limit=limit, cursor=after)
    if more:
        err_console.print(f"{len(items)} shown; more: add --after {more} (or {raise_hint})", highlight=False)
    return items


def said_empty(items: list, noun: str, filters: dict[str, object] | None = None, hint: str = "") -> bool:
    """Whether ``items`` is empty; if so, a line on stderr says so (``no jobs``, ``no jobs match --queue x``):
    a lone header says nothing. ``filters``: each flag given with its value (a flag given alone: True; a
    repeated one: its list); ``hint``: how to see more (``--all shows stopped ones too``). For a table only: JSON
    and ``--ids`` print their empty answer on stdout, as scripts read it, and nothing on stderr."""
    if items:
        return False
    from trainyard.cli.output import err_console

    given = " ".join(flag if value is True else " ".join(f"{flag} {v}" for v in
                                                           (value if isinstance(value, list) else [value]))
                     for flag, value in (filters or {}).items() if value not in (None, False, [], ""))
    err_console.print(f"no {noun}" + (f" match {given}" if given else "") + (f" ({hint})" if hint else ""),
                      highlight=False, markup=False)
    return True


def check_queue(queue: str | None) -> None:
    """A warning on stderr where ``--queue`` names no queue the caller sees (as ``run`` refuses one): a listing
    filtered by a typo is empty, not wrong. Nothing while no queue is defined: then any name is a queue."""
    if queue is None:
        return
    from rich.markup import escape

    from trainyard.cli.common import client
    from trainyard.cli.output import err_console
    from trainyard.spec.lines import suggestion

    known = {q.queue.name for q in client().queues()}
    if known and queue not in known | {"default"}:
        mine = sorted(known | {"default"})
        said = f"unknown queue {queue!r}{suggestion(queue, mine)} (defined: {', '.join(mine)})"
        err_console.print(f"[yellow]warning:[/yellow] {escape(said)}", highlight=False)
