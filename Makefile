# Two commands matter: `make run` (set up, then index and stay up) and `make test`.
PYTHON ?= python3
VENV   ?= .venv
BIN     = $(VENV)/bin

.PHONY: run test install install-test bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

install: $(BIN)/python
	$(BIN)/pip install -q -e .

install-test: $(BIN)/python
	$(BIN)/pip install -q -e '.[test]'

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
