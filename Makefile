# Two commands work on a fresh machine: `make demo` and `make test` (see README).
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
SRC    := dcop agents coordinator protocol gpu deploy tests benchmarks fuzz

.PHONY: demo test test-slow test-scale lint typecheck fmt install fuzz soak clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

# Bytecode is compiled at install, as pip does for a regular install: an editable install does not,
# and where PYTHONDONTWRITEBYTECODE is set every command would compile dcop again (~0.1 s a start).
# The search's numba loops are compiled once here too (their cache sits beside the modules).
COMPILE := $(BIN)/python -m compileall -q dcop agents coordinator protocol gpu deploy > /dev/null \
	&& $(BIN)/python -m dcop.search.warm

$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q -e .
	$(COMPILE)
	touch $@

$(VENV)/.installed-test: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q -e '.[test]'
	$(COMPILE)
	touch $@ $(VENV)/.installed

install: $(VENV)/.installed

demo: $(VENV)/.installed
	$(BIN)/python -m dcop.cli.demo

lint: $(VENV)/.installed-test
	$(BIN)/ruff check $(SRC)
	$(BIN)/ruff format --check $(SRC)

# mypy cannot follow setuptools' package-dir mapping, so it checks a tree of links that puts
# agents/, coordinator/, protocol/, gpu/ and deploy/ where their import names say (dcop.agents, ...).
typecheck: $(VENV)/.installed-test
	rm -rf .mypy-tree && mkdir -p .mypy-tree/dcop
	for f in dcop/*; do ln -s "$$PWD/$$f" .mypy-tree/dcop/; done
	for p in agents coordinator protocol gpu deploy; do ln -s "$$PWD/$$p" .mypy-tree/dcop/$$p; done
	cd .mypy-tree && ../$(BIN)/mypy --config-file ../pyproject.toml --cache-dir ../.mypy_cache -p dcop

fmt: $(VENV)/.installed-test
	$(BIN)/ruff check --fix $(SRC)
	$(BIN)/ruff format $(SRC)

# pytest runs on one xdist worker per CPU (TEST_WORKERS=0: all in one process); tests marked
# `serial` run alone (tests/serial.py). `make test` leaves out the end-to-end sweeps (marker
# `slow`: soak and bench smoke runs, hundreds of agents, Docker, network namespaces);
# `make test-slow` runs them, and CI runs both (.ci/run). `pytest FILE` runs its slow tests too.
TEST_WORKERS ?= logical
XDIST := -n $(TEST_WORKERS)
test: $(VENV)/.installed-test lint typecheck
	$(BIN)/python -m pytest $(XDIST) -m 'not soak and not scale and not slow' \
	  --cov --cov-report=term:skip-covered --durations=15 $(PYTEST_ARGS)

test-slow: $(VENV)/.installed-test
	$(BIN)/python -m pytest $(XDIST) -m slow --durations=15 $(PYTEST_ARGS)

# Coverage-guided fuzzing with atheris (not in CI): FUZZ_SECONDS per target; new inputs and
# crash artifacts go to FUZZ_WORK (outside the repo); fuzz/corpus holds the committed seeds.
FUZZ_SECONDS ?= 60
FUZZ_TARGETS ?= wcsp uai yaml xml protocol
FUZZ_WORK    ?= /tmp/dcop-fuzz
fuzz: $(VENV)/.installed-test
	@$(BIN)/python -c "import atheris" 2>/dev/null || $(BIN)/python -m pip install -q atheris
	@status=0; for t in $(FUZZ_TARGETS); do \
	  mkdir -p $(FUZZ_WORK)/corpus/$$t $(FUZZ_WORK)/crashes; \
	  echo "== fuzz $$t for $(FUZZ_SECONDS) s"; \
	  $(BIN)/python fuzz/run.py $$t $(FUZZ_WORK)/corpus/$$t fuzz/corpus/$$t \
	    -max_total_time=$(FUZZ_SECONDS) -timeout=10 -rss_limit_mb=3072 \
	    -artifact_prefix=$(FUZZ_WORK)/crashes/$$t- -print_final_stats=1 \
	    $$([ -f fuzz/dicts/$$t.dict ] && echo -dict=fuzz/dicts/$$t.dict) || status=1; \
	done; \
	if [ $$status -ne 0 ]; then echo "fuzz: crashes in $(FUZZ_WORK)/crashes"; fi; exit $$status

# The soak suite (tests/soak, pytest marker `soak`, not in CI): tests/soak/soak.py's distributed
# solves with kills, SIGTERM, forged frames and self-connect attempts checked against BE
# (SOAK_RUNS of them), the wire attacks of issue 33 in both modes, and the expansion files
# against --max-memory (SOAK_ARITY). The soak script alone: python tests/soak/soak.py --help.
SOAK_RUNS ?= 200
SOAK_ARITY ?= 25
soak: $(VENV)/.installed-test
	SOAK_RUNS=$(SOAK_RUNS) SOAK_ARITY=$(SOAK_ARITY) $(BIN)/python -m pytest -m soak tests/soak -q $(PYTEST_ARGS)

# The thousand-agent runs (pytest marker `scale`, not in CI; the 200-agent run is): each agent
# its own process, so on 2 cores they take minutes and most of the machine.
test-scale: $(VENV)/.installed-test
	$(BIN)/python -m pytest -m scale tests -q $(PYTEST_ARGS)

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .coverage
