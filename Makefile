# The README's two commands: `make run` and `make test`. Both set everything up themselves.
SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-$(shell sha1sum pyproject.toml | cut -c1-12)
HOST ?= 127.0.0.1
PORT ?= 8000
PYTEST_ARGS ?=

.PHONY: run demo test lint format vendor bench clean-venv system-deps real-llm

run: $(STAMP)
	$(PY) manage.py up --host $(HOST) --port $(PORT)

demo: $(STAMP)
	$(PY) manage.py up --host $(HOST) --port $(PORT) --demo

# Three workers on two cores: with two, a whole run kept the CPUs half busy (11 min of CPU in a
# 12-minute run), the workers waiting on their servers, browsers and the real model.
test: $(STAMP) system-deps real-llm lint
	$(PY) -m pytest -n 3 --dist loadfile --no-loadscope-reorder --durations=15 $(PYTEST_ARGS)

# The real llama.cpp server and SmolLM2-135M-Instruct the real-server tests run against, built
# once into ~/.cache/thalamus/real-llm (THALAMUS_REAL_LLM_DIR), outside the checkout.
real-llm: $(STAMP)
	PYTHON=$(PY) bash scripts/real_llm.sh

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/lint-imports

format: $(STAMP)
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .

vendor:
	bash scripts/vendor_assets.sh

bench: $(STAMP) real-llm
	$(PY) -m bench.startup
	$(PY) -m bench.turn_overhead
	$(PY) -m bench.pipeline
	$(PY) -m bench.load
	$(PY) -m bench.real_llm_turn

$(STAMP): pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $@

# Browser tests drive Debian's Chromium; install it when it is missing (needs root, as on CI).
system-deps:
	@command -v chromium >/dev/null || { \
		SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
		$$SUDO apt-get update -qq && $$SUDO apt-get install -y -qq chromium; }

clean-venv:
	rm -rf $(VENV)
