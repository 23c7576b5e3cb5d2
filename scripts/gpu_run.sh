#!/usr/bin/env bash
# Run the GPU part of the CIFAR-10 chapter within a wall-clock budget.
#
#   scripts/gpu_run.sh OUT_DIR DATA_ROOT BUDGET_SECONDS
#
# 1. checks the GPU (nvidia-smi, torch.cuda);
# 2. runs the CUDA-only engine tests (when pytest is installed);
# 3. benchmarks the per-client eager loop against the stacked engine at width 1, bf16,
#    CUDA graph (OUT_DIR/bench_cifar10.json; eager bf16 if the graph path fails);
# 4. runs `python -m fedlib table1` with what is left of the budget, writing one result
#    file per (cell, seed) to OUT_DIR/cifar10 (no run is started that its estimate says
#    cannot finish in time).
# Everything is logged to OUT_DIR/log.txt. Each step is wrapped in `timeout`, so the
# script ends on its own within BUDGET_SECONDS (plus a few seconds of kill grace).
# Environment: PYTHON (default .venv/bin/python if present, else python3),
# BENCH_STEPS (default 40), TABLE1_STACK (default 6), TABLE1_ROUNDS (default 100).
set -u -o pipefail

if [ $# -ne 3 ]; then
    echo "usage: $0 OUT_DIR DATA_ROOT BUDGET_SECONDS" >&2
    exit 2
fi
OUT_DIR=$1
DATA_ROOT=$2
BUDGET=$3
case $BUDGET in ''|*[!0-9]*) echo "BUDGET_SECONDS must be a whole number of seconds, got '$BUDGET'" >&2; exit 2;; esac

cd "$(dirname "$0")/.."
if [ -z "${PYTHON:-}" ]; then
    if [ -x .venv/bin/python ]; then PYTHON=.venv/bin/python; else PYTHON=python3; fi
fi
mkdir -p "$OUT_DIR/cifar10"
LOG=$OUT_DIR/log.txt
START=$(date +%s)
left() { echo $(( BUDGET - ($(date +%s) - START) )); }
log() { echo "[$(date -u +%H:%M:%S) +$(( $(date +%s) - START ))s] $*" | tee -a "$LOG"; }

log "gpu_run.sh: out=$OUT_DIR data=$DATA_ROOT budget=${BUDGET}s python=$PYTHON commit=$(git rev-parse HEAD 2>/dev/null || echo unknown)"

# --------------------------------------------------------------------- 1. the GPU
{ timeout 30 nvidia-smi || echo "nvidia-smi failed or missing"; } 2>&1 | tee -a "$LOG"
if ! timeout 120 "$PYTHON" -c "
import torch, sys
print('torch', torch.__version__, 'cuda', torch.version.cuda, 'available', torch.cuda.is_available())
if not torch.cuda.is_available():
    sys.exit(3)
print('device', torch.cuda.get_device_name(0), 'bf16', torch.cuda.is_bf16_supported())
" 2>&1 | tee -a "$LOG"; then
    log "no usable CUDA GPU: stopping"
    exit 3
fi
if [ ! -d "$DATA_ROOT" ]; then
    log "DATA_ROOT $DATA_ROOT does not exist: stopping"
    exit 2
fi

# --------------------------------------------------------------------- 2. CUDA checks
# The CUDA paths (grouped channels-last convolutions, bf16, CUDA graphs) were written and
# tested on CPUs only: run the CUDA-only tests first when pytest is there (engine on CUDA
# = engine on CPU to 1e-9 in float64, graph = eager), at most 90 s.
if "$PYTHON" -c "import pytest" 2>/dev/null; then
    log "CUDA tests of the stacked engine"
    timeout -k 5 90 "$PYTHON" -m pytest -q -p no:cacheprovider tests/test_stacked_engine.py -k "device or cuda" 2>&1 \
        | tail -n 30 | tee -a "$LOG"
    log "CUDA tests exit status ${PIPESTATUS[0]}"
else
    log "pytest not installed: CUDA tests skipped"
fi

# --------------------------------------------------------------------- 3. benchmark
# at most a fifth of the budget, at most 180 s. If the CUDA-graph step fails, measure the
# eager bf16 step instead, and run Table 1 in the mode that worked.
GRAPH_FLAG=--cuda-graph
BENCH_LIMIT=$(( BUDGET / 5 < 180 ? BUDGET / 5 : 180 ))
if [ "$BENCH_LIMIT" -ge 30 ]; then
    log "bench cifar10 (width 1, bf16, CUDA graph), limit ${BENCH_LIMIT}s"
    timeout -k 5 "$BENCH_LIMIT" "$PYTHON" -m fedlib bench cifar10 --data-root "$DATA_ROOT" --width 1 \
        --precision bf16 --cuda-graph --device cuda --steps "${BENCH_STEPS:-40}" --repeat 2 \
        --json "$OUT_DIR/bench_cifar10.json" 2>&1 | tee -a "$LOG"
    status=${PIPESTATUS[0]}
    log "bench exit status $status"
    if [ "$status" -ne 0 ] && [ "$status" -ne 124 ] && [ "$status" -ne 137 ]; then
        GRAPH_FLAG=
        log "bench cifar10 without CUDA graph (eager bf16), limit ${BENCH_LIMIT}s"
        timeout -k 5 "$BENCH_LIMIT" "$PYTHON" -m fedlib bench cifar10 --data-root "$DATA_ROOT" --width 1 \
            --precision bf16 --device cuda --steps "${BENCH_STEPS:-40}" --repeat 2 \
            --json "$OUT_DIR/bench_cifar10_eager.json" 2>&1 | tee -a "$LOG"
        log "eager bench exit status ${PIPESTATUS[0]}"
    fi
else
    log "budget too small for the benchmark: skipped"
fi

# --------------------------------------------------------------------- 4. Table 1
# keep 20 s for interpreter start + data loading, 15 s of margin before the hard limit
REMAIN=$(left)
HARD=$(( REMAIN - 10 ))
INNER=$(( REMAIN - 45 ))
if [ "$INNER" -lt 30 ]; then
    log "only ${REMAIN}s left: Table 1 not started"
else
    log "table1 with --budget-seconds $INNER (hard limit ${HARD}s) ${GRAPH_FLAG:-(eager)}"
    timeout -k 5 "$HARD" "$PYTHON" -m fedlib table1 --results "$OUT_DIR/cifar10" --budget-seconds "$INNER" \
        --data-root "$DATA_ROOT" --width 1 --precision bf16 $GRAPH_FLAG --device cuda \
        --stack "${TABLE1_STACK:-6}" --rounds "${TABLE1_ROUNDS:-100}" 2>&1 | tee -a "$LOG"
    log "table1 exit status ${PIPESTATUS[0]}"
fi
ls -l "$OUT_DIR/cifar10" 2>&1 | tee -a "$LOG"
log "done after $(( $(date +%s) - START ))s of ${BUDGET}s"
