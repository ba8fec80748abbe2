"""Which part of an output file a ``Range`` header asks for (resumed downloads)."""

from __future__ import annotations

import pytest

from trainyard.errors import RangeNotSatisfiable
from trainyard.services.job_outputs import parse_range


@pytest.mark.parametrize(("header", "part"), [
    ("bytes=0-", (0, 99)), ("bytes=40-", (40, 99)), ("bytes=40-59", (40, 59)), ("bytes=40-500", (40, 99)),
    ("bytes=-10", (90, 99)), ("bytes=-500", (0, 99)), ("bytes=99-", (99, 99)),
])
def test_a_single_range_is_served(header, part):
    assert parse_range(header, 100) == part


@pytest.mark.parametrize("header", [None, "", "items=0-", "bytes=0-1,5-6", "bytes=x-", "bytes=-", "bytes=1-y", "bytes=5"])
def test_what_is_not_one_byte_range_sends_the_whole_file(header):
    assert parse_range(header, 100) is None


@pytest.mark.parametrize("header", ["bytes=100-", "bytes=150-200", "bytes=50-10", "bytes=-0"])
def test_a_range_outside_the_file_is_not_satisfiable(header):
    with pytest.raises(RangeNotSatisfiable, match="100 bytes|no bytes") as e:
        parse_range(header, 100)
    assert e.value.details["size"] == 100
