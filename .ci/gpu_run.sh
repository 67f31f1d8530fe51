#!/usr/bin/env bash
# Development only: what a GPU session measures of --compile, in one call of the device tool, after
# `bash .ci/gpu_kit.sh` here: run(command="bash .ci/gpu_run.sh", carry=[".gpu"], timeout_s=600). Every output goes
# to $OUT. Each step runs under a time limit, with Python's stacks printed if it stalls (SIGABRT,
# PYTHONFAULTHANDLER), so that one stall cannot spend the others' time.
#   1. the README's RTE command (all-MiniLM-L6-v2, bf16 copy; 3 epochs) end to end (studies/whole_run.py): eager,
#      then --compile with an empty compile cache (cold), then again with the cache it left (warm), each with the
#      seconds its first passes took to compile and the recompiles logged after the first AD-DROP step;
#   2. BERT-base 32 x 128 bf16 (random weights): the compiled plain and GA-all steps beside compiled Hugging Face
#      (sdpa), each compiled step's GPU time against its wall time (studies/bench.py --parts).
# `bash .ci/gpu_run.sh masks` runs the masks alone: train.py's (inductor's sort) beside the hand-written kernel.
set -uo pipefail
export PYTHONPATH=$PWD/.gpu/pkg PYTHONFAULTHANDLER=1 GLUE_DIR=$PWD/.gpu/glue
OUT=${OUT:-/tmp/gpu-out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
python -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" | tee -a "$OUT/gpu.txt"
step() {  # step SECONDS NAME COMMAND...
  local limit=$1 name=$2; shift 2
  echo "== $name: $* (limit $limit s)"; local t0=$SECONDS
  timeout -s ABRT "$limit" "$@" > "$OUT/$name.txt" 2>&1; echo "rc $? in $((SECONDS - t0)) s" | tee -a "$OUT/$name.txt"
  grep -E "eager|cache|median|x the|busy|rror|no CUDA|^rc" "$OUT/$name.txt" | tail -30
}
if [ "${1:-}" = masks ]; then
  step 170 masks_2x1 python studies/mask_graphs.py --ways layer_masks,kernel-sort,kernel-bisect
  exit
fi
step 400 whole_run python studies/whole_run.py   # eager, compiled cold, compiled warm: the README's RTE command
step 200 bench_base python studies/bench.py --config base --methods plain,ga-all --batch-size 32 --seq-len 128 \
  --dtype bf16 --compile --parts --steps 5 --warmup 3 --json "$OUT/bench_base.json"
