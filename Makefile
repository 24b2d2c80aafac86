# The two commands of the book: `make book` and `make test`.
# Each bootstraps .venv itself (Python >= 3.11 and pip are all a machine needs) and reinstalls
# only when requirements.txt or pyproject.toml changed since the last install.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-requirements
# What the installed environment was made from; a change to either file triggers a reinstall.
REQ_HASH := $(shell cat requirements.txt pyproject.toml 2>/dev/null | sha256sum | cut -c1-16)

.PHONY: book test check nbval fast pdf format clean venv help

help:
	@echo "make book   - re-execute changed chapters, write book/claims.json, build the HTML book"
	@echo "make test   - the whole test suite (unit, notebooks with nbval, book build, browser)"
	@echo "make check  - unit tests of the package only (quick, for day-to-day work)"
	@echo "make fast   - smoke run of every chapter at reduced size into build/runs/scale-fast/"
	@echo "make format - format the chapters' code cells (ruff, 100 characters a line)"
	@echo "make pdf    - the book as one PDF (_build/pdf/book.pdf) from committed outputs, headless Chromium"

venv: $(STAMP)

$(STAMP): requirements.txt pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "Python >= 3.11 is required, found " + sys.version.split()[0])'
	@if [ -f "$@" ] && [ "$$(cat $@)" = "$(REQ_HASH)" ]; then touch $@; exit 0; fi; \
	 set -e; \
	 [ -x $(PY) ] || $(PYTHON) -m venv $(VENV); \
	 echo "Installing the pinned environment into $(VENV) ..."; \
	 $(PY) -m pip install --quiet --upgrade pip; \
	 $(PY) -m pip install --quiet -r requirements.txt; \
	 echo "$(REQ_HASH)" > $@

book: venv
	$(PY) -m attention_dynamics reproduce

fast: venv
	$(PY) -m attention_dynamics reproduce --scale fast --no-build

pdf: venv
	$(PY) -m attention_dynamics pdf

format: venv
	$(PY) -m attention_dynamics format

# The unit tests run under the same perturbed numerics as nbval below (another machine's kernel dispatch
# level and thread count), so that a test that holds only with this machine's numerics fails here first;
# `make test PERTURBED=` and `make check PERTURBED=` use this machine's own numerics.
PERTURBED ?= 1
PERTURBED_ENV = $$(if [ -n "$(PERTURBED)" ]; then $(PY) -m attention_dynamics perturbed-env; fi)

check: venv
	@perturbed="$(PERTURBED_ENV)"; \
	 echo "unit tests $${perturbed:+with $$perturbed}"; \
	 env $$perturbed $(PY) -m pytest -m "not slow" -q

# nbval re-executes every chapter once and compares its outputs with the committed ones, numbers
# by tolerance per kind (attention_dynamics.book.nbval_plugin); the claims of that same re-execution
# are then checked against book/claims.json, each within its cross-machine tolerance.
# It runs under perturbed numerics, as on another machine (`python -m attention_dynamics
# perturbed-env`: a lower ATen kernel dispatch level than this CPU's and another thread count than
# the chapters were executed with), as the unit tests do; `make nbval PERTURBED=` uses this machine's own numerics.
NBVAL_DIR := build/nbval
nbval: venv
	@perturbed="$(PERTURBED_ENV)"; \
	 echo "nbval: re-executing every chapter $${perturbed:+with $$perturbed}"; \
	 rm -rf $(NBVAL_DIR); \
	 env $$perturbed $(PY) -m pytest -q -p no:cacheprovider -p attention_dynamics.book.nbval_plugin \
	    --nbval $$($(PY) -m attention_dynamics chapters --paths) --nbval-current-env \
	    --nbval-sanitize-with tests/nbval_sanitize.cfg --nbval-cell-timeout=1200 \
	    --book-executed-dir $(NBVAL_DIR); \
	 status=$$?; \
	 if [ -f $(NBVAL_DIR)/claims.json ]; then \
	   $(PY) -m attention_dynamics ledger --compare $(NBVAL_DIR)/claims.json || status=1; \
	 else echo "error: nbval wrote no re-executed ledger" >&2; status=1; fi; \
	 exit $$status

# The whole suite: the unit tests (with the book build and the browser checks) under the perturbed numerics
# (PERTURBED above), then nbval under the same.
test: venv
	@perturbed="$(PERTURBED_ENV)"; \
	 echo "unit tests $${perturbed:+with $$perturbed}"; \
	 env $$perturbed $(PY) -m pytest -q
	$(MAKE) --no-print-directory nbval

clean:
	rm -rf _build build .pytest_cache
