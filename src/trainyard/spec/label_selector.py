"""Label selectors, as Kubernetes writes them: which jobs (or which subscriptions' jobs) a filter keeps.

``experiment=baseline,stage!=dev,gpu in (a100,h100),owner,!scratch``: requirements separated by commas, a job
matches when it meets every one. ``k=v`` (or ``k==v``) has the label with that value; ``k!=v`` has it with
another value or not at all; ``k in (a,b)`` has one of them; ``k notin (a,b)`` has none of them, or no ``k``;
``k`` has the label, whatever its value; ``!k`` has not. Keys and values are checked as labels are.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from trainyard.spec.labels import MAX_LABELS, check_key, check_value

MAX_TEXT = 2_000  # characters of one selector: a query string or a subscription's column holds it
MAX_REQUIREMENTS = MAX_LABELS
MAX_VALUES = 32  # in one ``in (…)``

_SET = re.compile(r"^(?P<key>[^\s!=(),]+)\s+(?P<op>in|notin)\s*\((?P<values>[^()]*)\)$")
_EQ = re.compile(r"^(?P<key>[^!=(),]+)(?P<op>==|=|!=)(?P<value>[^!=(),]*)$")
_HAS = re.compile(r"^(?P<neg>!?)(?P<key>[^!=(),]+)$")


class SelectorError(ValueError):
    """A selector that is not valid: its text ``field: problem``; a caller that names the field itself says
    ``problem`` alone."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"{field}: {problem}")
        self.field, self.problem = field, problem


class Requirement(NamedTuple):
    key: str
    op: str  # "=", "!=", "in", "notin", "exists", "!exists"
    values: tuple[str, ...] = ()

    def matches(self, labels: dict[str, str]) -> bool:
        v = labels.get(self.key)
        if self.op in ("=", "in"):
            return v is not None and v in self.values
        if self.op in ("!=", "notin"):
            return v is None or v not in self.values
        return (v is not None) == (self.op == "exists")

    def __str__(self) -> str:
        if self.op in ("exists", "!exists"):
            return ("!" if self.op == "!exists" else "") + self.key
        if self.op in ("in", "notin"):
            return f"{self.key} {self.op} ({','.join(self.values)})"
        return f"{self.key}{self.op}{self.values[0]}"


Selector = tuple[Requirement, ...]


def _split(text: str) -> list[str]:
    """``text`` cut at the commas outside parentheses."""
    parts, depth, start = [], 0, 0
    for i, c in enumerate(text):
        depth += (c == "(") - (c == ")")
        if depth < 0 or depth > 1:
            raise ValueError(f"{text!r}: unbalanced parentheses")
        if c == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    if depth:
        raise ValueError(f"{text!r}: unbalanced parentheses")
    return [*parts, text[start:]]


def _requirement(item: str) -> Requirement:
    if m := _SET.match(item):
        values = tuple(dict.fromkeys(check_value(v.strip()) for v in m["values"].split(",")))
        if len(values) > MAX_VALUES:
            raise ValueError(f"{item!r}: at most {MAX_VALUES} values in a set")
        return Requirement(check_key(m["key"]), m["op"], values)
    if m := _EQ.match(item):
        op = "!=" if m["op"] == "!=" else "="
        return Requirement(check_key(m["key"].strip()), op, (check_value(m["value"].strip()),))
    if m := _HAS.match(item):
        return Requirement(check_key(m["key"].strip()), "!exists" if m["neg"] else "exists")
    raise ValueError(f"{item!r}: expected KEY=VALUE, KEY!=VALUE, KEY in (V1,V2), KEY notin (V1,V2), KEY or !KEY")


def parse_selector(texts: str | list[str], field: str) -> Selector:
    """Each of ``texts`` a selector (one requirement, or several separated by commas), all of them met together.
    :class:`SelectorError` (a ValueError starting with ``field``) for a bad one."""
    out: list[Requirement] = []
    for text in [texts] if isinstance(texts, str) else texts:
        try:
            if len(text) > MAX_TEXT:
                raise ValueError(f"at most {MAX_TEXT} characters")
            for item in _split(text):
                if not item.strip():
                    raise ValueError(f"{text!r}: an empty requirement")
                out.append(_requirement(item.strip()))
        except ValueError as e:
            raise SelectorError(field, str(e)) from None
    if len(out) > MAX_REQUIREMENTS:
        raise SelectorError(field, f"at most {MAX_REQUIREMENTS} requirements")
    return tuple(dict.fromkeys(out))


def matches(labels: dict[str, str] | None, selector: Selector) -> bool:
    return all(r.matches(labels or {}) for r in selector)


def selector_text(selector: Selector) -> str:
    """``selector`` written back as one string, that :func:`parse_selector` reads as it."""
    return ",".join(map(str, selector))
