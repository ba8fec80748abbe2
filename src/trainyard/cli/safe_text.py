"""Text a server sent, shown in a terminal as text: a job's code, or a teammate, wrote much of it (commands, metric
names, reasons, messages, log lines).

Rich reads a plain string as markup (``[link=…]`` makes a link; ``[/]`` out of place raises) and passes ESC on, so
a table cell of a job's metric name could plant a link, set the window's title, write the viewer's clipboard (OSC 52)
or stop ``trainyard show``. Every CLI table is this module's :class:`Table`: a string cell is shown as it is, its
control characters replaced. A job's output (``logs``, ``exec``), shown raw on purpose (colours, progress bars),
goes through :func:`for_terminal` when it reaches a terminal: what makes a terminal act rather than draw is dropped.
"""

from __future__ import annotations

import re
from typing import Any

from rich.markup import escape
from rich.table import Table as _Table
from rich.text import Text

__all__ = ["Table", "escape", "for_terminal", "plain"]

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
# OSC, DCS, SOS, PM, APC (titles, clipboard, hyperlinks, …) up to their end, or the text's; CSI; any other escape;
# C0 controls but tab, newline, carriage return and backspace; DEL; C1 controls
_ACTING = re.compile(r"\x1b[\]PX^_][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b\[[0-?]*[ -/]*[@-~]?|\x1b.?"
                     r"|[\x00-\x07\x0b\x0c\x0e-\x1a\x1c-\x1f\x7f-\x9f]", re.S)
_DRAWING = frozenset("mKJABCDEFGHf")  # CSI finals that only draw: colours, erasing, cursor moves (progress bars)


def plain(s: str) -> Text:
    """``s`` as text: no markup, its control characters shown as U+FFFD."""
    return Text(_CONTROL.sub("\ufffd", s))


def for_terminal(s: str) -> str:
    """``s`` with what would make a terminal act removed: all but the CSI sequences that draw (see module)."""
    if "\x1b" not in s and not _CONTROL.search(s):
        return s
    return _ACTING.sub(_kept, s)


def _kept(m: re.Match) -> str:
    seq = m.group()
    return seq if seq.startswith("\x1b[") and len(seq) > 2 and seq[-1] in _DRAWING and "?" not in seq else ""


class Table(_Table):
    """rich's Table whose string cells are :func:`plain` (a cell made a :class:`Text` keeps its own styles)."""

    def add_row(self, *renderables: Any, **kwargs: Any) -> None:
        super().add_row(*(plain(r) if isinstance(r, str) else r for r in renderables), **kwargs)
