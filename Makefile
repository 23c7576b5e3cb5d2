# fednova-book: `make test`, `make book` (PROFILE=ci|full), `make clean`.
#
#   make env               create .venv (if missing) and install '.[book,test]';
#                          a no-op while .venv/.stamp is newer than pyproject.toml
#   make test              run the test suite (tests/test_browser.py needs `make book` first):
#                          TEST_JOBS (2) processes, then the tests marked `serial` (browser) alone
#   make book              execute every chapter of _toc.yml with papermill and render
#                          the executed notebooks to _build/html (see scripts/build_book.py)
#   PROFILE=full make book the same with the paper's full-size settings
#   make clean             remove _build/ and caches (never .venv/, data/ or figures/)

PYTHON  ?= python3
VENV    := .venv
PY      := $(VENV)/bin/python
STAMP   := $(VENV)/.stamp
PROFILE ?= ci
TEST_JOBS ?= 2

.PHONY: env test book clean

env: $(STAMP)

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -e '.[book,test]'
	@touch $(STAMP)

test: env
	$(PY) -m pytest -q -n $(TEST_JOBS) --dist loadfile -m "not serial"
	$(PY) -m pytest -q -m serial

book: env
	$(PY) scripts/build_book.py --profile $(PROFILE)

clean:
	rm -rf _build .pytest_cache
	find . -path ./.venv -prune -o -name __pycache__ -type d -prune -exec rm -rf {} +
	find . -path ./.venv -prune -o -name .ipynb_checkpoints -type d -prune -exec rm -rf {} +
