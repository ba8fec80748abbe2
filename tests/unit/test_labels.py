"""Labels on a job spec, and a listing's label filters: shaped as Kubernetes labels, bad ones named."""

import pytest

from trainyard.errors import InvalidSpec
from trainyard.spec import parse_job
from trainyard.spec.label_selector import Requirement, matches, parse_selector, selector_text
from trainyard.spec.labels import MAX_LABELS


def test_labels_are_kept_as_given():
    spec = parse_job("command: x\nlabels: {experiment: baseline, team.example.com/owner: ann, note: ''}")
    assert spec.labels == {"experiment": "baseline", "team.example.com/owner": "ann", "note": ""}
    assert parse_job("command: x").labels == {}


@pytest.mark.parametrize("labels, named", [
    ("{'bad key': x}", "labels.bad key"),
    ("{k: 'a b'}", "labels.k"),
    ("{k: 3}", "labels.k"),                      # a value is a string: quote numbers, as Kubernetes wants
    ("{-k: x}", "labels.-k"),
    (f"{{k: {'v' * 64}}}", "labels.k"),
    (f"{{{'k' * 64}: v}}", "labels." + "k" * 64),
    ("[a]", "labels"),
    ("{" + ", ".join(f"k{i}: v" for i in range(MAX_LABELS + 1)) + "}", "labels"),
])
def test_a_bad_label_is_refused_naming_it_and_its_line(labels, named):
    with pytest.raises(InvalidSpec) as e:
        parse_job(f"name: x\ncommand: x\nlabels: {labels}\n")
    (err,) = e.value.errors
    assert err["field"] == named and err["line"] == 3, err


@pytest.mark.parametrize("text, labels, kept", [
    ("a=b", {"a": "b"}, True), ("a==b", {"a": "b"}, True), ("a=b", {"a": "c"}, False), ("a=b", {}, False),
    ("a!=b", {"a": "c"}, True), ("a!=b", {}, True), ("a!=b", {"a": "b"}, False),
    ("a in (b, c)", {"a": "c"}, True), ("a in (b,c)", {"a": "d"}, False), ("a in (b,c)", {}, False),
    ("a notin (b,c)", {"a": "d"}, True), ("a notin (b,c)", {}, True), ("a notin (b,c)", {"a": "b"}, False),
    ("a", {"a": ""}, True), ("a", {"b": "a"}, False), ("!a", {}, True), ("! a", {"a": "x"}, False),
    ("a=", {"a": ""}, True), ("a=", {"a": "x"}, False),
    ("a=b, c in (d,e),!f", {"a": "b", "c": "e"}, True), ("a=b,c in (d,e),!f", {"a": "b", "c": "e", "f": ""}, False),
])
def test_a_selector_keeps_what_kubernetes_would(text, labels, kept):
    assert matches(labels, parse_selector(text, "label")) is kept


def test_a_selector_reads_back_as_written_and_several_texts_are_all_met():
    sel = parse_selector(["x.io/y in (a, b)", "c!=d,!e", "f", "g=h", "g=h"], "label")
    assert selector_text(sel) == "x.io/y in (a,b),c!=d,!e,f,g=h"
    assert parse_selector(selector_text(sel), "label") == sel
    assert parse_selector([], "label") == ()


@pytest.mark.parametrize("bad, said", [
    ("-k=x", "label key"), ("bad key=x", "label key"), ("k=a b", "label value"),
    ("k=a-", "label value"), ("k in (a,b", "parenth"),
    ("k in ((a))", "parenth"), ("a=b,,c=d", "empty requirement"), ("", "empty requirement"), ("k in a,b", "label key"),
    ("k == ", None), ("x" * 2001, "2000 characters"), ("k in (" + ",".join(f"v{i}" for i in range(33)) + ")", "32"),
    (",".join(f"k{i}" for i in range(MAX_LABELS + 1)), "requirements"), ("k=(a)", "expected"),
])
def test_a_bad_selector_is_refused_naming_the_field(bad, said):
    if said is None:  # an empty value is a value
        assert parse_selector(bad, "label") == (Requirement("k", "=", ("",)),)
        return
    with pytest.raises(ValueError, match=said) as e:
        parse_selector(["a=b", bad], "--label")
    assert str(e.value).startswith("--label: ")
