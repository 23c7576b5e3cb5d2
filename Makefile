# fednova-book: `make test`, `make book` (PROFILE=ci|full), `make clean`.
#
#   make env               create .venv (if missing) and install '.[book,test]' at the versions
#                          pinned in constraints.txt (CONSTRAINTS= make env: let pip choose),
#                          without byte-compiling (a minute less on two cores: modules compile when
#                          first imported, their bytecode kept under .venv/pycache, see below);
#                          a no-op while .venv/.stamp is newer than pyproject.toml and constraints.txt
#   make lock              rewrite constraints.txt from what .venv holds (after a deliberate upgrade)
#   make test              run the test suite (tests/test_browser.py needs `make book` first):
#                          TEST_JOBS (2) processes of one BLAS thread each, then the tests
#                          marked `serial` (browser) alone
#   make book              execute every chapter of _toc.yml with papermill and render
#                          the executed notebooks to _build/html (see scripts/build_book.py)
#   PROFILE=full make book the same with the chapters' full-size settings (README.md says what they are)
#   CHAPTERS="02 10" make book  execute only those chapters, keep the others' executed copies from the
#                          last build of the same profile, and render (build_book.py --chapters)
#   make clean             remove _build/ and caches (never .venv/, data/ or figures/)

PYTHON  ?= python3
VENV    := .venv
PY      := $(VENV)/bin/python
STAMP   := $(VENV)/.stamp
PROFILE ?= ci
CHAPTERS ?=
TEST_JOBS ?= 2
CONSTRAINTS ?= constraints.txt
# one BLAS/OpenMP/torch thread per test process when several run (unless OMP_NUM_THREADS is set):
# two processes of two threads each on two cores spin against each other (a torch-heavy test
# measured 63 s that way, 21 s with one thread each)
TEST_THREADS := $(if $(filter-out 1,$(TEST_JOBS)),$(if $(OMP_NUM_THREADS),,OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1))

# Bytecode: where PYTHONDONTWRITEBYTECODE is set (this project's development machines set it) no .pyc is kept,
# and with pip's --no-compile every new interpreter (a chapter's kernel, a test's subprocess) compiled what it
# imported from source: `import torch, fedlib` 3.1 s each time, 1.5 s from a cache. make's commands keep the
# bytecode of what they import under .venv/pycache (PYTHONPYCACHEPREFIX: nothing written beside the sources),
# unless PYTHONPYCACHEPREFIX is set already
unexport PYTHONDONTWRITEBYTECODE
export PYTHONPYCACHEPREFIX ?= $(CURDIR)/$(VENV)/pycache

.PHONY: env lock test book clean

env: $(STAMP)

$(STAMP): pyproject.toml $(CONSTRAINTS)
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --no-compile $(if $(CONSTRAINTS),-c $(CONSTRAINTS)) -e '.[book,test]'
	@touch $(STAMP)

lock: env
	@{ sed -n '/^#/p' constraints.txt; $(PY) -m pip freeze --exclude-editable | grep -v '^#' | LC_ALL=C sort -f; } > constraints.txt.new
	@mv constraints.txt.new constraints.txt
	@touch $(STAMP)
	@echo "constraints.txt: $$(grep -vc '^#' constraints.txt) packages pinned"

test: env
	$(TEST_THREADS) $(PY) -m pytest -q -n $(TEST_JOBS) --dist loadfile -m "not serial"
	$(PY) -m pytest -q -m serial

book: env
	$(PY) scripts/build_book.py --profile $(PROFILE) $(if $(strip $(CHAPTERS)),--chapters $(CHAPTERS))

clean:
	rm -rf _build .pytest_cache
	find . -path ./.venv -prune -o -name __pycache__ -type d -prune -exec rm -rf {} +
	find . -path ./.venv -prune -o -name .ipynb_checkpoints -type d -prune -exec rm -rf {} +
