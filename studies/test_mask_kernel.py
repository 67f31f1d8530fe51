"""
studies/mask_kernel.py, the hand-written Triton kernel for a GPU's masks, checked on a CPU in Triton's interpreter:
mask_kernel_checks.py, run here by pytest in a process of its own with TRITON_INTERPRET=1 (this process may already
hold triton compiled for a GPU). And what the interpreter cannot show: that Triton compiles the kernel for the GPUs
it is for, down to machine code, which needs no GPU. Needs the triton package (CI installs it); without it these
skip, unless MASK_KERNEL_REQUIRED=1 makes that a failure.
"""

import importlib
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # the interpreter runs each program in Python: about half a minute

HERE = Path(__file__).resolve().parent


def need_triton():
    if os.environ.get("MASK_KERNEL_REQUIRED"):
        return importlib.import_module("triton")  # a missing package fails here, in CI
    return pytest.importorskip("triton", reason="the kernel's checks need the triton package (pip install triton)")


def test_the_kernel_in_tritons_interpreter():
    need_triton()
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "", "mask_kernel_checks.py"],
                       cwd=HERE, env={**os.environ, "TRITON_INTERPRET": "1"}, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-6000:] + r.stderr[-2000:]
    passed = re.search(r"(\d+) passed", r.stdout)
    assert passed and int(passed.group(1)) >= 21 and "skipped" not in r.stdout, r.stdout[-3000:]


@pytest.mark.parametrize("arch", [80, 90])  # an A100; an H100 or H200
def test_the_kernel_compiles_to_machine_code_for_a_gpu(arch, capsys):
    """Triton compiles the kernel, both ways and the low strategy, for fp32 and bf16 scores, through its IRs to PTX
    and to a cubin (its own ptxas), as a GPU's first launch would: a type or a layout the interpreter lets pass
    (it runs on numpy) fails here, without a GPU. No shape that mask_graphs.py --machine-code lists spills, and
    the default (2 rows on one warp) runs fewer instructions a row than rows spread over 4 warps."""
    need_triton()
    sys.path.insert(0, str(HERE))
    import mask_graphs
    import mask_kernel
    for bisect, low, scores in ((False, False, "*fp32"), (True, False, "*fp32"), (False, True, "*bf16"), (True, True, "*bf16")):
        compiled = mask_kernel.machine_code(bisect, arch=arch, low=low, scores=scores)
        assert len(compiled.asm["cubin"]) > 1000 and ".entry _masks_kernel" in compiled.asm["ptx"]
    mask_graphs.main(["--machine-code", "--arch", str(arch)])
    out = capsys.readouterr().out
    shapes = re.findall(r"^(kernel-\w+) +(\d+) rows on (\d+) warps: +(\d+) registers, (\d+) bytes spilled, +(\d+) "
                        r"instructions a warp, +(\d+) a row", out, re.M)
    assert len(shapes) == 10 and all(spilled == "0" for *_, spilled, _, _ in shapes), out
    per_row = {(way, int(r), int(w)): int(row) for way, r, w, _, _, _, row in shapes}
    for way in ("kernel-sort", "kernel-bisect"):
        assert per_row[way, 2, 1] < per_row[way, 4, 4], out


def test_torch_sees_the_kernel_write_its_mask_alone(monkeypatch):
    """torch.compile reads which tensors a Triton kernel writes from its TTIR; a tensor it cannot tell about it
    takes as written, and copies it first to keep the input whole: on a GPU that would be a copy of every layer's
    scores in each step, charged to the kernel. Given a GPU's target (named only: the analysis compiles to TTIR,
    which needs no GPU), both ways must be found to write the mask alone and to read the scores, the attention
    mask and the seeds."""
    triton = need_triton()
    import torch
    from triton.backends.compiler import GPUTarget
    from torch._higher_order_ops.triton_kernel_wrap import identify_accessed_tensors
    sys.path.insert(0, str(HERE))
    import mask_kernel

    class Hopper:  # a driver that only names its target
        def get_current_target(self):
            return GPUTarget("cuda", 90, 32)

        def get_active_torch_device(self):
            return torch.device("cpu")

    monkeypatch.setattr(triton.runtime.driver, "_active", Hopper())
    B, H, T = 2, 2, 128
    kwargs = dict(s_ptr=torch.randn(B, H, T, T), am_ptr=torch.ones(B, T, dtype=torch.long),
                  out_ptr=torch.empty(B, H, T, T, dtype=torch.bool), seeds_ptr=torch.zeros(2, dtype=torch.long), layer=0,
                  q=0.1, R=B * H * T, H=H, T=T, KEEP=300000, LOW=False, ROWS=2, BLOCK_T=128)
    for bisect in (False, True):
        seen = identify_accessed_tensors(mask_kernel._masks_kernel, {**kwargs, "BISECT": bisect}, {}).read_writes
        assert [d.name for d in seen.writes] == ["out_ptr"], seen.writes
        assert sorted(d.name for d in seen.reads) == ["am_ptr", "s_ptr", "seeds_ptr"], seen.reads
