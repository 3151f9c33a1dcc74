# Ruyi: `make run` installs and serves; `make test` installs test deps and runs the suite.
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
export UV_COMPILE_BYTECODE := 1

.PHONY: install install-test browser agents run test lint bench clean

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q uv

install: $(BIN)/python
	$(BIN)/uv pip install -q --python $(BIN)/python -e .

install-test: $(BIN)/python browser agents
	$(BIN)/uv pip install -q --python $(BIN)/python -e '.[test]'

# The agents suite drives real agent CLIs through Ruyi: the pinned versions of tests/agents/package-lock.json, installed
# into .agents/ (no network at test time; the tests skip and say why when npm is missing). `npm install` on a copy of
# the lock, not `npm ci`: npm 11's ci refuses Qwen Code's lock (optional platform packages with no version, npm bug).
agents: .agents/node_modules/.package-lock.json
.agents/node_modules/.package-lock.json: tests/agents/package.json tests/agents/package-lock.json
	@mkdir -p .agents && cp tests/agents/package.json tests/agents/package-lock.json .agents/
	@command -v npm >/dev/null 2>&1 && (cd .agents && npm install --no-audit --no-fund --loglevel=error >/dev/null) \
		|| echo "npm not found or failed: the agents suite will skip"

# The dashboard's browser tests drive Debian's chromium (browsers cannot be downloaded by playwright here); as root with
# apt-get it is installed, elsewhere the tests skip and say why.
browser:
	@command -v chromium >/dev/null 2>&1 || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 && \
		(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium fonts-noto-cjk >/dev/null) \
		|| echo "chromium not installed: the dashboard's browser tests will skip"; }

run: install
	$(BIN)/ruyi serve $(ARGS)

# Lint and types first (seconds; mypy keeps its cache in .mypy_cache), then the suite. `make lint` runs the first two
# alone; `ruff format --check` joins them once the tree has been formatted.
test: install-test lint
	$(BIN)/python -m pytest -q -m 'not slow' $(PYTEST_ARGS)

lint: install-test
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

bench: install-test
	$(BIN)/python bench/serve/overhead.py
	$(BIN)/python bench/savings/savings.py

clean:
	rm -rf $(VENV) .ruyi .pytest_cache .mypy_cache .ruff_cache build *.egg-info .agents .artifacts
