# The two commands of the book: `make book` and `make test`.
# Each bootstraps .venv itself (Python >= 3.11 and pip are all a machine needs) and reinstalls
# only when requirements.txt or pyproject.toml changed since the last install.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-requirements
# What the installed environment was made from; a change to either file triggers a reinstall.
REQ_HASH := $(shell cat requirements.txt pyproject.toml 2>/dev/null | sha256sum | cut -c1-16)

.PHONY: book test check nbval fast clean venv help

help:
	@echo "make book   - re-execute changed chapters, write book/claims.json, build the HTML book"
	@echo "make test   - the whole test suite (unit, notebooks with nbval, book build, browser)"
	@echo "make check  - unit tests of the package only (quick, for day-to-day work)"
	@echo "make fast   - smoke run of every chapter at reduced size into build/fast/"

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
	$(PY) -m attention_dynamics reproduce --fast --no-build

check: venv
	$(PY) -m pytest -m "not slow" -q

nbval: venv
	$(PY) -m pytest -q -p no:cacheprovider --nbval $$($(PY) -m attention_dynamics chapters --paths) \
	    --nbval-current-env --nbval-sanitize-with tests/nbval_sanitize.cfg --nbval-cell-timeout=1200

test: venv
	$(PY) -m pytest -q
	$(MAKE) --no-print-directory nbval

clean:
	rm -rf _build build .pytest_cache
