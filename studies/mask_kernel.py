"""
A hand-written Triton kernel for the masks of a compiled AD-DROP step on a GPU: a candidate, timed against what
train.py --compile runs (addrop.layer_masks: inductor's kernels for the layers' scores joined, sorted, gathered,
compared, flipped and guarded), not a part of it. RESULTS.md measured those masks at 0.16 of a compiled plain
step on two H200s against a target of 0.10, after inductor had already fused the sort into one kernel.

It plugs in as a user adds a mask: kernel_mask() is a function of addrop.MASKS' signature, and one entry names it,

    addrop.MASKS["kernel-sort"] = mask_kernel.kernel_mask()                # or kernel_mask(bisect=True)
    addrop.addrop_masks(model, batch, layers, p, q, mask="kernel-sort")   # eagerly, or with GRAPH_BACKEND set

so that the kernel's masks and train.py's ("high") come from the same code but for that one function. Eagerly
layer_masks calls it once per layer; under compile (addrop.GRAPH_BACKEND) it gets the layers' scores joined into
one batch, as every mask does there, and the kernel runs one launch over all of them, inside the compiled graph.

One program takes ROWS rows (example, head, query) of the scores, every key of a row in registers, and writes
their masks: Eq. 6's threshold b^[idx], the coin flips of Eq. 7 (Philox, drawn in the kernel, never stored),
the padding pairs and the guard, in one pass over the scores. b^[idx] is found one of two ways (BISECT):
- the sort: each row sorted ascending (padding last), entry idx read, as addrop.drop_mask reads Eq. 6;
- bisection: no sort; b^[idx] is the largest t with at most idx real scores below it, built from the floats'
  bits one bit at a time from the top (32 counts of the row, like studies/mask_graphs.py's bisect, but on
  uint32 and with the row in registers instead of inductor's looped reductions).

    python studies/mask_graphs.py --ways layer_masks,kernel-sort,kernel-bisect   # on a GPU: the masks alone
    python studies/bench.py --compile --kernel ...                              # the whole compiled step

Its masks equal addrop.drop_mask's for the same scores wherever the coins do not enter (q = 1), edge cases
included, and its coins are fair; checked on a CPU by Triton's interpreter (studies/mask_kernel_checks.py).
Needs the triton package (it comes with torch's CUDA builds; CI installs it for the interpreter).
"""
import functools
import os
import re
import subprocess
import tempfile

import torch
import triton
import triton.language as tl


@triton.jit
def _masks_kernel(s_ptr, am_ptr, out_ptr, seeds_ptr, layer, q, R, H, T, KEEP: tl.constexpr, LOW: tl.constexpr,
                  BISECT: tl.constexpr, ROWS: tl.constexpr, BLOCK_T: tl.constexpr):
    row = tl.program_id(0) * ROWS + tl.arange(0, ROWS)  # (ROWS,) rows of the layer's flat (B H T) rows
    key = tl.arange(0, BLOCK_T)  # (BLOCK_T,) keys; BLOCK_T is T's next power of two, the rest padding
    b, i = row // (H * T), row % T  # the row's example and query
    inside = (row < R)[:, None] & (key < T)[None, :]  # (ROWS, BLOCK_T)
    real = tl.load(am_ptr + b[:, None] * T + key[None, :], mask=inside, other=0) != 0  # real keys
    real_query = tl.load(am_ptr + b * T + i, mask=row < R, other=0) != 0  # (ROWS,)
    n = tl.sum(real.to(tl.int32), 1)  # (ROWS,) real lengths
    # int(n (1 - p)) in exact integers, as drop_mask. Always below n where a row has a real key: p = 0 (KEEP =
    # 10^6, idx = n, no candidates) never reaches the kernel (kernel_masks returns first)
    idx = (n.to(tl.int64) * KEEP // 1000000).to(tl.int32)
    offs = row[:, None].to(tl.int64) * T + key[None, :]
    s = tl.load(s_ptr + offs, mask=inside, other=0.0).to(tl.float32)
    if LOW:  # the mirror strategy: candidates are the lowest scores
        s = -s
    if BISECT:
        # the scores' bits as uint32 that order as the floats do: -0 made 0, a negative's bits all flipped, a
        # positive's sign bit set
        bits = tl.where(s == 0, 0.0, s).to(tl.int32, bitcast=True)
        k = tl.where(bits < 0, ~bits, bits ^ -2147483648).to(tl.uint32, bitcast=True)
        # b^[idx] is the largest t with at most idx real keys below it: built bit by bit from the top, each bit
        # kept where the keys below t with it set are still at most idx (32 counts of the row, in registers)
        t = tl.zeros([ROWS], tl.uint32)
        for j in tl.static_range(32):
            trial = t | (tl.full([ROWS], 1, tl.uint32) << (31 - j))
            below = tl.sum(((k < trial[:, None]) & real).to(tl.int32), 1)
            t = tl.where(below <= idx, trial, t)
        cand = k >= t[:, None]
    else:
        # Eq. 6 as written: each row sorted ascending, padding last, and its entry idx read
        b_hat = tl.sort(tl.where(real, s, float("inf")), 1)
        thr = tl.max(tl.where(key[None, :] == idx[:, None], b_hat, float("-inf")), 1)  # b^[idx]
        cand = s >= thr[:, None]
    coin = tl.rand(tl.load(seeds_ptr + layer), offs.to(tl.int32)) < q  # Eq. 7: dropped where u < q
    drop = cand & coin & real & real_query[:, None]  # real (query, key) pairs only
    lost = tl.sum(drop.to(tl.int32), 1) == n  # the guard: a row that would lose every real key keeps them all
    tl.store(out_ptr + offs, drop & ~lost[:, None], mask=inside)


def default_rows(T):
    """Rows a program by default: 8 keys a thread on one warp (2 rows at T = 128, one from T = 256). At T = 512
    two rows took 168-236 registers a thread against one row's 95-113 (machine_code, sm_90), and the more a
    thread holds, the fewer threads a GPU runs at once."""
    return max(1, 256 // triton.next_power_of_2(T))


def kernel_masks(scores, attention_mask, p, q, low=False, bisect=False, rows=None, warps=1, generator=None):
    """The kernel's masks of a list of L layers' (B, H, T, T) attribution scores, one launch each: attention_mask
    (B, T) 1 real, 0 padding, p, q, low and generator as in addrop.drop_mask. Returns a tuple of L bool masks
    (B, H, T, T), True where dropped. bisect: find b^[idx] by bisection instead of the sort; rows: rows per
    program, a power of two (None: default_rows); warps: Triton's num_warps. Each launch draws its own seed from
    torch's stream (or generator's). The default, 2 rows on one warp at T = 128, keeps each row's counts and
    exchanges inside a warp: spread over 4 warps they pass through shared memory, behind barriers, and the machine
    code runs 1.4-2x the instructions a row (mask_graphs.py --machine-code)."""
    B, H, T, _ = scores[0].size()
    if B * H * T * T >= 2**31:  # the coins' offsets within a launch are int32
        raise ValueError(f"kernel_masks: {B} x {H} x {T} x {T} scores in one launch are over 2^31 entries")
    keep = round((1 - p) * 10**6)  # 1 - p to 6 decimals, times 10^6, as drop_mask
    if q == 0 or keep == 10**6:  # nothing is dropped, no coin flips are drawn
        return tuple(torch.zeros(B, H, T, T, dtype=torch.bool, device=s.device) for s in scores)
    rows = rows or default_rows(T)
    am = attention_mask.contiguous()
    seeds = torch.randint(2**31 - 1, (len(scores),), device=am.device, generator=generator)
    out = []
    for layer, s in enumerate(scores):
        M = torch.empty(B, H, T, T, dtype=torch.bool, device=s.device)
        _masks_kernel[(triton.cdiv(B * H * T, rows),)](s.contiguous(), am, M, seeds, layer, q, B * H * T, H, T, KEEP=keep,
                                                       LOW=low, BISECT=bisect, ROWS=rows,
                                                       BLOCK_T=triton.next_power_of_2(T), num_warps=warps)
        out.append(M)
    return tuple(out)


@functools.cache
def kernel_mask(bisect=False, low=False, rows=None, warps=1):
    """The kernel as a mask of addrop.MASKS' signature, (scores (B, H, T, T), attention_mask (B, T), p, q,
    generator=None) -> M (B, H, T, T) bool: register it under a name of its own (addrop.MASKS["kernel-sort"] =
    kernel_mask()) and pass that name as addrop_masks' or layer_masks' mask. low: the mirror strategy (as
    MASKS["low"]); bisect, rows, warps: as in kernel_masks. The same settings give the same function (cached),
    so a compiled graph made with it is found again."""
    def mask(scores, attention_mask, p, q, generator=None):
        return kernel_masks([scores], attention_mask, p, q, low, bisect, rows, warps, generator)[0]
    return mask


def jit_kernel():
    """The kernel as Triton compiles it for a GPU, also where TRITON_INTERPRET=1 made _masks_kernel the
    interpreter's (the checks): machine_code compiles it, and dynamo traces only this kind."""
    from triton.runtime.jit import JITFunction
    return _masks_kernel if isinstance(_masks_kernel, JITFunction) else JITFunction(_masks_kernel.fn)


def machine_code(bisect=False, rows=None, warps=1, arch=90, low=False, scores="*fp32", T=128):
    """The kernel as Triton compiles it for a CUDA GPU of compute capability arch (80: A100; 90: H100, H200),
    through its IRs to PTX and a cubin: no GPU is needed. scores: the scores' pointer type (*fp32, *bf16)."""
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    signature = {"s_ptr": scores, "am_ptr": "*i64", "out_ptr": "*i1", "seeds_ptr": "*i64", "layer": "i32", "q": "fp32",
                 "R": "i32", "H": "i32", "T": "i32", **dict.fromkeys(("KEEP", "LOW", "BISECT", "ROWS", "BLOCK_T"), "constexpr")}
    constexprs = {"KEEP": 300000, "LOW": low, "BISECT": bisect, "ROWS": rows or default_rows(T),
                  "BLOCK_T": triton.next_power_of_2(T)}
    return triton.compile(ASTSource(jit_kernel(), signature, constexprs), target=GPUTarget("cuda", arch, 32),
                          options={"num_warps": warps})


def registers(compiled, arch=90):
    """(registers a thread, bytes spilled) of a machine_code, from ptxas -v on its PTX (Triton's own ptxas)."""
    from triton.backends.nvidia.compiler import get_ptxas
    with tempfile.NamedTemporaryFile("w", suffix=".ptx") as f:
        f.write(compiled.asm["ptx"])
        f.flush()
        out = subprocess.run([get_ptxas(arch).path, "-v", f"--gpu-name=sm_{arch}" + ("a" if arch >= 90 else ""), f.name, "-o", os.devnull],
                             capture_output=True, text=True, check=True)
    text = out.stdout + out.stderr
    return int(re.search(r"Used (\d+) registers", text).group(1)), int(re.search(r"(\d+) bytes spill stores", text).group(1))


def instructions(compiled):
    """The SASS instructions of a machine_code, from cuobjdump: what one warp runs for its ROWS rows, as the code
    has no loop (the bisection's 32 steps are unrolled; checked: no branch goes back)."""
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(compiled.asm["cubin"])
        f.flush()
        sass = subprocess.run([os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "cuobjdump"),
                               "-sass", f.name], capture_output=True, text=True, check=True).stdout
    code = [(int(a, 16), op) for a, op in re.findall(r"/\*([0-9a-f]{4,})\*/\s+([^;]*);", sass)]
    back = [a for a, op in code if (to := re.search(r"BRA 0x([0-9a-f]+)", op)) and int(to.group(1), 16) < a]
    assert not back, f"a loop in the kernel's machine code (branches back at {back}): counts are not per warp"
    return len(code)
