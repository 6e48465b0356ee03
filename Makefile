# The two commands of the README's quick start: `make run` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
UV_VERSION := 0.13.9
export INSPECT_DATA_DIR ?= $(CURDIR)/var

.PHONY: run test lint format vulture system-packages clean bench-sandbox bench-stream bench-page \
	bench-metrics bench-gateway bench-load bench-refresh bench-start bench-density

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# Locked install: every dependency pinned with hashes in requirements.lock.
$(VENV)/.installed: requirements.lock pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q --disable-pip-version-check uv==$(UV_VERSION)
	$(BIN)/uv pip sync -q --python $(BIN)/python --require-hashes requirements.lock
	$(BIN)/uv pip install -q --python $(BIN)/python --no-deps --no-build-isolation -e .
	touch $@

system-packages:
	@scripts/system-packages

run: $(VENV)/.installed system-packages
	$(BIN)/python -m inspect_web.supervisor

test: $(VENV)/.installed system-packages
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports --no-cache
	$(BIN)/python scripts/function-imports --strict
	PYTHON=$(BIN)/python scripts/security-checks
	INSPECT_DATA_DIR=$(CURDIR)/var/test $(BIN)/python -m pytest $(PYTEST_ARGS)

lint: $(VENV)/.installed
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports --no-cache
	# Lists imports inside a function without a `# why`; add --strict once the list is empty.
	$(BIN)/python scripts/function-imports --strict

# Dead code in the apps (what is used by name only is in vulture_allowlist.py, with why).
vulture: $(VENV)/.installed
	scripts/dead-code

format: $(VENV)/.installed
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

# Regenerate requirements.lock after changing dependencies in pyproject.toml.
lock: $(VENV)/.installed
	$(BIN)/uv pip compile pyproject.toml --extra dev --generate-hashes --python-version 3.11 \
		--no-header -q -o requirements.lock

clean:
	rm -rf $(VENV)

bench-sandbox: $(VENV)/.installed system-packages
	$(BIN)/python bench/sandbox.py

bench-stream: $(VENV)/.installed
	$(BIN)/python bench/stream.py

bench-page: $(VENV)/.installed
	$(BIN)/python bench/page.py

bench-metrics: $(VENV)/.installed
	$(BIN)/python bench/metrics.py

bench-gateway: $(VENV)/.installed
	$(BIN)/python bench/gateway.py

# Faults under load (issue 19); BENCH_LOAD_ARGS="--minutes 2" for a short run.
bench-load: $(VENV)/.installed system-packages
	$(BIN)/python bench/load.py $(BENCH_LOAD_ARGS)

bench-refresh: $(VENV)/.installed system-packages
	$(BIN)/python bench/refresh.py

bench-start: $(VENV)/.installed system-packages
	$(BIN)/python bench/start.py

bench-density: $(VENV)/.installed system-packages
	$(BIN)/python bench/density.py
