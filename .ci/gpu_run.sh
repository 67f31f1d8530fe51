#!/usr/bin/env bash
# Development only: what a GPU session measures of the compiled step and its masks, in one call of the device tool,
# after `bash .ci/gpu_kit.sh` here: run(command="bash .ci/gpu_run.sh", carry=[".gpu"], timeout_s=600). Every output
# goes to $OUT (studies/results/ takes it from there). Each step runs under a time limit, with Python's stacks
# printed if it stalls (SIGABRT, PYTHONFAULTHANDLER), so that one stall cannot spend the others' time.
#   1. the compiled GA-all step of BERT-base size with --parts: where its time goes (the attribution ran its
#      products at 0.74 of a plain step's rate on an H200), each part's and each compiled step's GPU time against
#      its wall time and the CPU's time to hand it over (which of the two sets the pace), CUDA graphs skipped, and the
#      hand-written mask kernel (studies/mask_kernel.py, the sort: the faster way on an H200) beside train.py's
#      masks in the same rounds;
#   2. the same for all-MiniLM-L6-v2 (bf16 copy);
#   3. the masks alone: train.py's (inductor's sort) beside the kernel by the sort and by bisection.
# `bash .ci/gpu_run.sh masks` runs step 3 alone, then the kernel's other shapes, 1 row on 1 warp and 4 on 4
# (mask_graphs.py --machine-code: 1.4-2x the instructions a row). On an H200 step 1 took 210 s, step 3 71-100+ s
# (its compiles about 80); step 2 had not finished its rounds at 130 s.
set -uo pipefail
export PYTHONPATH=$PWD/.gpu/pkg PYTHONFAULTHANDLER=1 GLUE_DIR=$PWD/.gpu/glue
OUT=${OUT:-/tmp/gpu-out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
python -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" | tee -a "$OUT/gpu.txt"
step() {  # step SECONDS NAME COMMAND...
  local limit=$1 name=$2; shift 2
  echo "== $name: $* (limit $limit s)"; local t0=$SECONDS
  timeout -s ABRT "$limit" "$@" > "$OUT/$name.txt" 2>&1; echo "rc $? in $((SECONDS - t0)) s" | tee -a "$OUT/$name.txt"
  grep -E "equal|median|kernels|its FLOPs|= attribution|CUDA graphs|rror|no CUDA" "$OUT/$name.txt" | tail -40
}
if [ "${1:-}" = masks ]; then  # the masks alone, with time for every compile (about 90 s) and the rounds
  step 170 masks_2x1 python studies/mask_graphs.py --ways layer_masks,kernel-sort,kernel-bisect
  for rw in 1x1 4x4; do step 45 "masks_$rw" python studies/mask_graphs.py --ways kernel-sort --rows "${rw%x*}" --warps "${rw#*x}"; done
  exit
fi
common=(--batch-size 32 --seq-len 128 --dtype bf16 --compile --kernel sort --parts --no-hf --steps 5 --warmup 3)
step 260 bench_base python studies/bench.py --config base --methods ga-all "${common[@]}" --json "$OUT/bench_base.json"
step 170 bench_minilm python studies/bench.py --config minilm --methods ga-all "${common[@]}" --json "$OUT/bench_minilm.json"
step 130 masks_2x1 python studies/mask_graphs.py --ways layer_masks,kernel-sort,kernel-bisect
