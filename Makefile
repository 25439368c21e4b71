# The two commands of the README: `make demo` and `make test`.
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: venv demo test lint typecheck setup-check golden bench clean

# The browser tests' npm modules (tests/browser, from its lockfile). npm writes
# node_modules/.package-lock.json at every install: it is the stamp, older than the
# lockfile when the modules are stale (`npm ci` in .ci/run satisfies it too).
BROWSER := tests/browser
NPM_STAMP := $(BROWSER)/node_modules/.package-lock.json
# What the rest of the suite reads from beside the checkout (tests/conftest.py).
SHARED := $(abspath $(CURDIR)/../shared)

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

test: lint typecheck setup-check
	$(VENV)/bin/pytest -q --durations=25

# Fetch what can be fetched (the npm modules); say plainly what the suite will skip here
# (README, "Set-up"). Under CI=true those skips are failures.
$(NPM_STAMP): $(BROWSER)/package-lock.json
	@if command -v npm >/dev/null 2>&1; then \
		echo "npm ci --prefix $(BROWSER) (the browser tests' modules, from its lockfile)"; \
		PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm ci --prefix $(BROWSER) --ignore-scripts \
			--no-audit --no-fund --loglevel=error \
		|| echo "make: npm ci failed: the browser tests will be skipped (pytest says why)"; \
	else \
		echo "make: no npm here, so no npm modules in $(BROWSER): the browser tests will be" \
			"skipped (Debian: apt-get install nodejs npm chromium, then make test again)"; \
	fi

setup-check: $(NPM_STAMP)
	@chromium="$${CHROMIUM_PATH:-/usr/bin/chromium}"; \
	[ -x "$$chromium" ] || echo "make: no Chromium at $$chromium: the browser tests will be" \
		"skipped (Debian: apt-get install chromium; elsewhere set CHROMIUM_PATH)"; \
	command -v node >/dev/null 2>&1 || echo "make: no node here: the browser tests will be skipped"; \
	for d in corpus conformance; do \
		[ -d "$(SHARED)/$$d" ] || echo "make: $(SHARED)/$$d is missing: the tests that read" \
			"it will be skipped (README, Set-up)"; \
	done

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
