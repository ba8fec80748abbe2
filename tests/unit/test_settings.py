"""The timing table in trainyard.config's docstring says what the code does."""

import importlib
import re

import trainyard.config

ROW = re.compile(r"^``(trainyard(?:\.\w+)+)\.([A-Z_]+)``\s+([0-9.]+)\s", re.M)


def test_every_timing_constant_in_the_table_has_its_value_in_the_code():
    rows = ROW.findall(trainyard.config.__doc__)
    assert len(rows) >= 15
    for module, name, seconds in rows:
        if module.startswith("trainyard.engines.ray"):
            continue  # needs trainyard[ray]; checked where Ray is installed
        assert getattr(importlib.import_module(module), name) == float(seconds), f"{module}.{name}"
