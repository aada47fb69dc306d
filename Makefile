# Two commands matter: `make run` (set up, then index and stay up) and `make test`.
PYTHON ?= python3
VENV   ?= .venv
BIN     = $(VENV)/bin

.PHONY: run test install install-test bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

# Strict editable mode: a tree of links (build/) on sys.path. The default mode's import hook costs
# 8 ms at every start of the deskdex command, as much as a whole search (docs/search.md).
EDITABLE = --config-settings editable_mode=strict

install: $(BIN)/python
	$(BIN)/pip install -q -e . $(EDITABLE)

install-test: $(BIN)/python
	$(BIN)/pip install -q -e '.[test]' $(EDITABLE)

run: install
	$(BIN)/deskdex daemon

# pytest exits 5 when it collected no test: that must fail, not pass.
test: install-test
	$(BIN)/python -m pytest; rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "pytest ran no test: failing" >&2; exit 1; fi; exit $$rc

bench: install
	$(BIN)/python benchmarks/index_corpus.py

clean:
	rm -rf $(VENV) build *.egg-info
