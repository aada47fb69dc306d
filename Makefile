# Two commands matter: `make run` (set up, then index and stay up) and `make test`; `make test-quick`
# is the development lane (docs/development.md).
PYTHON ?= python3
VENV   ?= .venv
BIN     = $(VENV)/bin
# `make test SYSTEM_DEPS="pkg ..."` checks those Debian packages instead of packaging/system-deps.sh's
# list (tests/test_installed.py passes a made-up one); PYTEST_ARGS narrows the run (`-k service`).
# PYTEST_MARKS selects by marker: test-quick leaves out the slow end-to-end tests and the corpus's.
SYSTEM_DEPS ?=
PYTEST_ARGS ?=
# Two pytest processes: the suite mostly waits on daemons and workers (docs/development.md, "How long
# it takes"); the groups that keep account tests in one process are in tests/conftest.py. TEST_PROCESSES=0
# runs it in one process.
TEST_PROCESSES ?= 2
PYTEST_MARKS ?=

# The lowest mode (docs/development.md, "Dependency ranges"): a venv of its own where every
# dependency is at the lowest version pyproject.toml allows.
LOWEST ?= .venv-lowest
LOWEST_SLOW ?= tests/test_watch.py tests/test_live_burst.py tests/test_tray.py tests/test_cluster.py \
	tests/test_cluster_crawl.py tests/test_cluster_trust.py tests/test_web_api.py

.PHONY: run test test-quick test-lowest check system-deps install install-test install-tray install-cluster \
	install-bench install-lowest bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

# Strict editable mode: a tree of links (build/) on sys.path. The default mode's import hook costs
# 8 ms at every start of the deskdex command, as much as a whole search (docs/search.md).
EDITABLE = --config-settings editable_mode=strict
# setuptools ends every editable install with an "Editable installation." notice that it can only
# send as a warning (its InformationOnly class: a build backend has no other way to talk to the user),
# and pip 26 prints a local build's warnings even with -q: a 12-line "!!" block at every `make run`.
# That one notice is dropped by its text; any other warning of the build still shows.
PIP = PYTHONWARNINGS="ignore:Editable installation" $(BIN)/python -m pip

install: $(BIN)/python
	$(PIP) install -q -e . $(EDITABLE)

# `make test` takes the newest release of every dependency that pyproject.toml allows, each time (a
# fresh resolve, as a new user gets): eager, so that an older version already in the venv is not kept.
# It asks the index about each one (a minute on a busy machine): test-quick keeps what the venv has.
UPGRADE =
install-test: $(BIN)/python
	$(PIP) install -q $(UPGRADE) -e '.[test]' $(EDITABLE)

# The README's optional parts, in the same strict editable mode: the tray (Qt), the cluster (Celery
# and Redis) and the benchmarks' peers.
install-tray install-cluster install-bench: $(BIN)/python
	$(PIP) install -q -e '.[$(@:install-%=%)]' $(EDITABLE)

# The lowest versions: uv resolves our direct dependencies (the test, tray and cluster extras too) at
# their lower bounds and theirs at the newest that fit (--resolution lowest-direct); pip then adds
# deskdex alone. Made anew each time, so nothing of an earlier resolve stays.
install-lowest:
	rm -rf $(LOWEST)
	$(PYTHON) -m venv $(LOWEST)
	$(LOWEST)/bin/python -m pip install -q --upgrade pip 'uv>=0.5'
	$(LOWEST)/bin/uv pip compile --quiet pyproject.toml --extra test --extra tray --extra cluster \
	  --resolution lowest-direct --python $(LOWEST)/bin/python -o $(LOWEST)/requirements.txt
	$(LOWEST)/bin/uv pip install --quiet --python $(LOWEST)/bin/python -r $(LOWEST)/requirements.txt
	PIP_NO_DEPS=1 $(MAKE) --no-print-directory VENV=$(LOWEST) install

run: install
	$(BIN)/deskdex daemon

# As root: installs the Debian packages the tests need. As another user: names the missing ones and
# fails, before anything is created or run. $(PYTHON) is checked only while it still has a venv to make.
system-deps:
	@PYTHON_FOR_VENV=$(if $(wildcard $(BIN)/python),,$(PYTHON)) bash packaging/system-deps.sh $(SYSTEM_DEPS)

# In steps, each by itself (sub-makes), so that even `make -j test` checks the system first.
test: system-deps
	@$(MAKE) --no-print-directory install-test UPGRADE="--upgrade --upgrade-strategy eager"
	@$(MAKE) --no-print-directory check

# The same, without the tests marked slow (daemons, workers, accounts, other programs) or corpus:
# a few minutes instead of a quarter of an hour. CI runs `make test`, everything.
test-quick: system-deps
	@$(MAKE) --no-print-directory install-test
	@$(MAKE) --no-print-directory check PYTEST_MARKS='-m "not slow and not corpus"'

# The second CI mode: the tests against the lowest versions pyproject.toml allows (install-lowest), so
# that a lower bound that no longer works fails here, not for a user whose machine has that version.
# DESKDEX_DEPENDENCIES=lowest: tests/test_dependency_ranges.py checks each is at its bound exactly.
# What it runs: the quick lane, then the slow tests of the parts whose libraries are the likeliest to
# break them (live watching, the tray's Qt, Celery and Redis): docs/development.md says why not all.
test-lowest: system-deps
	@$(MAKE) --no-print-directory install-lowest
	@DESKDEX_DEPENDENCIES=lowest $(MAKE) --no-print-directory check VENV=$(LOWEST) \
	  PYTEST_MARKS='-m "not slow and not corpus"'
	@DESKDEX_DEPENDENCIES=lowest $(MAKE) --no-print-directory check VENV=$(LOWEST) \
	  PYTEST_MARKS='-m "slow and not corpus"' PYTEST_ARGS='$(LOWEST_SLOW)'

# The suite as installed, without installing. pytest exits 5 when it collected no test: that fails.
# Every process the suite starts inherits DESKDEX_TEST_RUN; one still carrying it once pytest has
# exited (a daemon or worker a failed test did not stop) is named, killed, and fails the run, so
# `make test` leaves nothing behind. The INT trap keeps this shell alive through Ctrl-C, which pytest
# gets too, so the sweep still runs.
check:
	@run="$$$$.$$(date +%s%N)"; named=; trap : INT; \
	DESKDEX_TEST_RUN="$$run" $(BIN)/python -m pytest -n $(TEST_PROCESSES) --dist loadgroup $(PYTEST_MARKS) $(PYTEST_ARGS); rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "pytest ran no test: failing" >&2; rc=1; fi; \
	for sig in TERM TERM KILL KILL; do \
	  left=$$(grep -lsxzF "DESKDEX_TEST_RUN=$$run" /proc/[0-9]*/environ | cut -d/ -f3); \
	  [ -n "$$left" ] || break; \
	  if [ -z "$$named" ]; then \
	    echo "make: the tests left these processes behind; killing them:" >&2; \
	    ps -o pid=,args= -p "$$(echo $$left | tr ' ' ,)" >&2; named=1; [ $$rc -ne 0 ] || rc=1; \
	  fi; \
	  kill -$$sig $$left 2>/dev/null; sleep 1; \
	done; exit $$rc

bench: install
	$(BIN)/python benchmarks/index_corpus.py

clean:
	rm -rf $(VENV) build *.egg-info
