# The same targets a new user types and CI runs (.ci/run calls `make test`).
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
PY_SOURCES := lkeval lkeval_action tests examples bench entrypoint.py .ci/image_check.py

.PHONY: setup speech-voice example test test-fast lint lock image-check wheel-check clean

# Two steps, so `make example` installs only what the example runs (lk-eval and its
# dependencies); `make test` and `make lint` add the test and lint tools on top.
$(VENV)/.runtime: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e .
	touch $@

$(VENV)/.installed: $(VENV)/.runtime
	$(PY) -m pip install --quiet -e ".[test,lint,speech]"
	touch $@

setup: $(VENV)/.installed          ## create .venv and install lk-eval with test and lint tools

example: $(VENV)/.runtime          ## run the example eval (no API key needed)
	$(PY) examples/hotel/run_example.py

# No test shares a port (each server binds port 0), a file (tmp_path, a private TMPDIR) or a
# process with another, so the whole suite, end-to-end tests included, runs on every core
# (pytest-xdist) in one session: an agent test's waits overlap other tests' work. --dist
# loadfile keeps each test module on one worker, so a module-scoped fixture (the false-pass
# matrix: one lk-eval run that a dozen tests read) runs once, not once per worker. Modules go
# out in collection order (--no-loadscope-reorder), which tests/conftest.py makes the modules
# that boot agents first: a long module handed out last would leave the other workers idle.
# Bytecode is cached (under the venv, not in the tree) even where PYTHONDONTWRITEBYTECODE is
# set, as in .ci/run: every lk-eval, fork server and agent process the suite starts would
# otherwise compile lk-eval's editable sources and the test agents again (~10% of its CPU).
# The audio tests speak the caller's lines with espeak-ng, a system package (not on PyPI).
speech-voice:
	@command -v espeak-ng >/dev/null || { echo "make: the audio tests need espeak-ng:" \
	    "apt-get install espeak-ng (Debian, Ubuntu) or brew install espeak-ng (macOS)"; exit 2; }

test: setup speech-voice           ## the whole test suite, end-to-end tests included
	env -u PYTHONDONTWRITEBYTECODE PYTHONPYCACHEPREFIX=$(abspath $(VENV))/pycache \
	    $(PY) -m pytest -m "not exhaustive" -n auto --dist loadfile --no-loadscope-reorder

test-exhaustive: setup speech-voice ## the proofs too dear for every `make test` (CI runs them)
	env -u PYTHONDONTWRITEBYTECODE PYTHONPYCACHEPREFIX=$(abspath $(VENV))/pycache \
	    $(PY) -m pytest -m exhaustive -n auto --dist load

test-fast: setup                   ## unit tests only (no agent processes)
	$(PY) -m pytest -m "not e2e" -n auto

lint: setup                        ## ruff, mypy, actionlint, zizmor and the action/workflow schemas
	$(VENV)/bin/ruff check $(PY_SOURCES)
	$(VENV)/bin/ruff format --check $(PY_SOURCES)
	$(VENV)/bin/mypy
	$(VENV)/bin/mypy entrypoint.py lkeval_action .ci/image_check.py
	$(VENV)/bin/actionlint -shellcheck= .github/workflows/*.yml examples/workflows/*.yml
	$(VENV)/bin/check-jsonschema --builtin-schema vendor.github-workflows \
		.github/workflows/*.yml examples/workflows/*.yml
	$(VENV)/bin/check-jsonschema --builtin-schema vendor.github-actions action.yml
	$(VENV)/bin/zizmor --offline --no-progress --config .github/zizmor.yml \
		.github/workflows/*.yml examples/workflows/*.yml action.yml

# The image's Python dependencies, pinned with hashes from pyproject.toml (lk-eval's own plus the
# `image` extra). The Dockerfile installs exactly these (--require-hashes --no-deps); run this
# after changing a dependency (it keeps the other pins), `make lock LOCK_FLAGS=--upgrade` to take
# in new releases on purpose.
LOCK_FLAGS ?=
LOCK_PLATFORM := --python-version 3.11 --python-platform x86_64-manylinux_2_28
lock: setup                        ## refresh requirements/image.lock from pyproject.toml
	$(VENV)/bin/uv pip compile pyproject.toml --extra image --generate-hashes $(LOCK_PLATFORM) \
		--custom-compile-command "make lock" $(LOCK_FLAGS) -o requirements/image.lock

image-check:                       ## build the image with podman and run it as a Docker action
	.ci/image-check

wheel-check:                       ## build the sdist and wheel; the wheel in a fresh venv
	.ci/wheel-check

clean:
	rm -rf $(VENV) lkeval-results .pytest_cache .mypy_cache .ruff_cache
