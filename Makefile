# The same targets a new user types and CI runs (.ci/run calls `make test`).
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python

.PHONY: setup example test test-fast lint clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[test,lint]"
	touch $@

setup: $(VENV)/.installed          ## create .venv and install lk-eval with test tools

example: setup                     ## run the example eval (no API key needed)
	$(PY) examples/hotel/run_example.py

test: setup                        ## the whole test suite, end-to-end tests included
	$(PY) -m pytest

test-fast: setup                   ## unit tests only (no agent processes)
	$(PY) -m pytest -m "not e2e"

lint: setup                        ## ruff and mypy
	$(VENV)/bin/ruff check lkeval tests examples bench entrypoint.py
	$(VENV)/bin/mypy
	$(VENV)/bin/mypy entrypoint.py

clean:
	rm -rf $(VENV) lkeval-results .pytest_cache .mypy_cache .ruff_cache
