# Ruyi: `make run` installs and serves; `make test` installs test deps and runs the suite.
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
export UV_COMPILE_BYTECODE := 1

.PHONY: install install-test run test bench clean

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q uv

install: $(BIN)/python
	$(BIN)/uv pip install -q --python $(BIN)/python -e .

install-test: $(BIN)/python
	$(BIN)/uv pip install -q --python $(BIN)/python -e '.[test]'

run: install
	$(BIN)/ruyi serve $(ARGS)

test: install-test
	$(BIN)/python -m pytest -q -m 'not slow' $(PYTEST_ARGS)

bench: install-test
	$(BIN)/python bench/overhead.py
	$(BIN)/python bench/savings.py

clean:
	rm -rf $(VENV) .ruyi .pytest_cache build *.egg-info
