"""Labels on a job spec, and a listing's label filters: shaped as Kubernetes labels, bad ones named."""

import pytest

from trainyard.errors import InvalidSpec
from trainyard.spec import parse_job
from trainyard.spec.labels import MAX_LABELS, parse_selector


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


def test_a_selector_is_pairs_checked_as_labels_are():
    assert parse_selector(["a=b", "x.io/y=", "a=c"], "label") == {"a": "c", "x.io/y": ""}
    for bad, said in [("novalue", "expected KEY=VALUE"), ("bad key=x", "label key"), ("k=a b", "label value")]:
        with pytest.raises(ValueError, match=said):
            parse_selector([bad], "label")
