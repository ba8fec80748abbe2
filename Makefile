# Everything installs into .venv; nothing is needed beforehand but Python 3.10+.
PY ?= python3
VENV := .venv
BIN := $(CURDIR)/$(VENV)/bin
STAMP := $(VENV)/.installed-dev

.PHONY: install demo test bench clean

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	PATH="$(BIN):$$PATH" bash scripts/demo.sh

# three workers on two cores: the suite mostly waits on processes it started (two kept the cores 68 % busy, and took
# 1,328 s against three's 1,131 s: bench/RESULTS.md, session 50); TEST_WORKERS=0 runs it in one process
TEST_WORKERS ?= 3

# compileall: where PYTHONDONTWRITEBYTECODE is set (as on these VMs) every process compiled our sources anew
test: $(STAMP)
	$(BIN)/python -m compileall -q src
	$(BIN)/python -m pytest -q -p no:cacheprovider --durations=30 -n $(TEST_WORKERS) --dist loadgroup $(PYTEST_ARGS)

bench: $(STAMP)
	$(BIN)/python bench/latency.py

clean:
	rm -rf $(VENV) .trainyard-demo demo-output
