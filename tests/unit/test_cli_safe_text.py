"""What a job or a teammate wrote, shown by the CLI: as text in every table (no markup read, no control character
passed on), and a job's own output on a terminal without what would make the terminal act (title, clipboard,
reports typed back), its colours and progress bars kept."""

from __future__ import annotations

import io

from rich.console import Console

from trainyard.cli.render import job_detail, metrics_table
from trainyard.cli.safe_text import for_terminal

OSC52 = "\x1b]52;c;ZWNobyBwd25lZA==\x07"  # writes the clipboard
TITLE = "\x1b]0;owned\x1b\\"
LINK = "[link=https://evil.example/login]docs[/link]"


def _shown(renderable) -> str:  # noqa: ANN001
    out = io.StringIO()
    Console(file=out, force_terminal=True, width=200, color_system="truecolor").print(renderable)
    return out.getvalue()


def _job() -> dict:
    return {"id": "j-1", "name": "train", "status": "failed", "reason": f"Error {LINK}", "queue": "default",
            "priority": 0, "created_at": 0.0, "attempts": [
                {"number": 1, "status": "failed", "reason": "Error(exit 1)", "message": f"bye{OSC52}[/]"}],
            "spec": {"command": ["python", "-c", f"print(1) # {LINK}{TITLE}"], "params": {},
                     "resources": {"cpu": 1, "memory": None, "gpu": 0}}}


def test_a_jobs_own_words_are_shown_as_text_in_show():
    shown = _shown(job_detail(_job()))
    assert LINK in shown  # as written, not a link
    assert "\x1b]8;" not in shown and "\x1b]52" not in shown and "\x1b]0;" not in shown
    assert "bye\ufffd]52;c;ZWNobyBwd25lZA==\ufffd[/]" in shown


def test_a_metric_named_as_markup_is_shown_not_read():
    shown = _shown(metrics_table([{"name": "acc[/]", "value": 0.5}, {"name": f"loss{OSC52}", "value": 1.0}]))
    assert "acc[/]" in shown and "\x1b]52" not in shown


def test_a_jobs_output_on_a_terminal_keeps_colours_and_progress_but_not_what_makes_it_act():
    colour, bar = "\x1b[31mred\x1b[0m", "\r 50%\x1b[K\r100%\x1b[2A"
    text = f"{colour}\n{bar}\n{OSC52}{TITLE}\x1bP+q544e\x1b\\\x1b[6n\x1b[21t\x1b[?1049h\x07\x1bcdone\tok\n"
    assert for_terminal(text) == f"{colour}\n{bar}\ndone\tok\n"
    assert for_terminal("plain words\n") == "plain words\n"
    # a sequence cut by the end of a chunk is dropped, the rest of it comes as plain words
    assert for_terminal("a\x1b]52;c;ZW") == "a" and for_terminal("\x1b[3") == ""
