#!/usr/bin/env bash
# Test both ends of pyproject.toml's version ranges (README, "Requirements"): the lowest versions they
# allow on the oldest Python they admit, and the newest pip chooses on a recent Python.
#
#   scripts/check_ranges.sh WORKDIR [lowest] [newest]      (default: both)
#
# For each end: a clone of this checkout's HEAD in WORKDIR/<end>/tree, a venv in WORKDIR/<end>/venv with
# '.[book,test]' installed editable from that clone (lowest: uv's lowest-direct resolution, every direct
# requirement at its lower bound; newest: plain pip), then the test suite without the browser tests
# (`-m "not serial"`, as `make test`'s parallel part) and the book's ci build (scripts/build_book.py: every
# chapter executed, its asserts included, and rendered). Nothing outside WORKDIR is written.
#
# Environment: PYTHON_LOWEST (default: pyenv's 3.10.13), PYTHON_NEWEST (default: pyenv's 3.13.0),
# TEST_JOBS (2), DRY_RUN=1 prints the commands instead of running them.
# Needs the network (PyPI): torch's wheels are large (a CUDA build, several GB per venv).
# Last run: 2026-12-04 (README gives the versions it installed).
set -euo pipefail

if [[ $# -lt 1 || "$1" == -* ]]; then
    echo "usage: scripts/check_ranges.sh WORKDIR [lowest] [newest]" >&2
    exit 2
fi
WORK=$1
shift
ENDS=("$@")
[[ ${#ENDS[@]} -eq 0 ]] && ENDS=(lowest newest)
for end in "${ENDS[@]}"; do
    if [[ "$end" != lowest && "$end" != newest ]]; then
        echo "check_ranges.sh: unknown end '$end' (lowest or newest)" >&2
        exit 2
    fi
done
PYTHON_LOWEST=${PYTHON_LOWEST:-/root/.pyenv/versions/3.10.13/bin/python3}
PYTHON_NEWEST=${PYTHON_NEWEST:-/root/.pyenv/versions/3.13.0/bin/python3}
TEST_JOBS=${TEST_JOBS:-2}
ROOT=$(cd "$(dirname "$0")/.." && pwd)

run() {
    if [[ "${DRY_RUN:-0}" == 1 ]]; then
        printf '%q ' "$@"
        echo
    else
        "$@"
    fi
}

status=0
for end in "${ENDS[@]}"; do
    dir=$WORK/$end
    if [[ "$end" == lowest ]]; then python=$PYTHON_LOWEST; else python=$PYTHON_NEWEST; fi
    if [[ "${DRY_RUN:-0}" != 1 && ! -x "$python" ]]; then
        echo "check_ranges.sh: no interpreter at $python (set PYTHON_${end^^})" >&2
        exit 2
    fi
    echo "== $end: $python"
    run rm -rf "$dir"
    run mkdir -p "$dir"
    run git clone -q "$ROOT" "$dir/tree"
    run "$python" -m venv "$dir/venv"
    if [[ "$end" == lowest ]]; then
        run "$dir/venv/bin/pip" install -q uv
        run "$dir/venv/bin/uv" pip install -q --python "$dir/venv/bin/python" --resolution lowest-direct \
            -e "$dir/tree[book,test]"
    else
        run "$dir/venv/bin/pip" install -q -e "$dir/tree[book,test]"
    fi
    run "$dir/venv/bin/python" -c "import sys, numpy, scipy, torch, torchvision, matplotlib; \
print('python', sys.version.split()[0], 'numpy', numpy.__version__, 'scipy', scipy.__version__, \
'torch', torch.__version__, 'torchvision', torchvision.__version__, 'matplotlib', matplotlib.__version__)"
    # in the clone: its fedlib is the one the editable install points to, and its _build is its own
    run env -C "$dir/tree" OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1 \
        "$dir/venv/bin/python" -m pytest -q -n "$TEST_JOBS" --dist loadfile -m "not serial" -p no:cacheprovider \
        || { echo "== $end: the test suite failed" >&2; status=1; }
    run env -C "$dir/tree" "$dir/venv/bin/python" scripts/build_book.py --profile ci \
        || { echo "== $end: the book's ci build failed" >&2; status=1; }
done
exit $status
