# Two commands work on a fresh machine: `make demo` and `make test` (see README).
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
SRC    := dcop agents coordinator protocol gpu tests benchmarks

.PHONY: demo test lint typecheck fmt install fuzz soak clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q -e .
	touch $@

$(VENV)/.installed-test: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q -e '.[test]'
	touch $@ $(VENV)/.installed

install: $(VENV)/.installed

demo: $(VENV)/.installed
	$(BIN)/python -m dcop.demo

lint: $(VENV)/.installed-test
	$(BIN)/ruff check $(SRC)
	$(BIN)/ruff format --check $(SRC)

typecheck: $(VENV)/.installed-test
	$(BIN)/mypy

fmt: $(VENV)/.installed-test
	$(BIN)/ruff check --fix $(SRC)
	$(BIN)/ruff format $(SRC)

test: $(VENV)/.installed-test lint typecheck
	$(BIN)/python -m pytest --cov --cov-report=term:skip-covered $(PYTEST_ARGS)

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .coverage
