# The two commands of the README: `make demo` and `make test`.
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: venv demo test lint typecheck golden bench clean

$(STAMP): pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

venv: $(STAMP)

demo: $(STAMP)
	$(PY) -m mindory.cli.demo

lint: $(STAMP)
	$(VENV)/bin/ruff check mindory tests bench
	$(VENV)/bin/ruff format --check mindory tests bench
	$(VENV)/bin/lint-imports

typecheck: $(STAMP)
	$(VENV)/bin/mypy

test: lint typecheck
	$(VENV)/bin/pytest -q

# Rewrite tests/golden/*.json on purpose (review the diff before committing).
golden: $(STAMP)
	MINDORY_UPDATE_GOLDEN=1 $(VENV)/bin/pytest -q tests/text/test_golden.py

# Benchmarks live here, not in the test suite; figures go to docs/benchmarks.md.
bench: $(STAMP)
	$(PY) -m pip install --quiet -e '.[dev,bench]'
	$(PY) bench/bench_chunk.py
	$(PY) bench/bench_epub.py
	$(PY) bench/bench_import.py
	$(PY) bench/bench_search.py
	$(PY) bench/bench_startup.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
