"""
What building the masks of all layers costs on a GPU under --compile, timed interleaved, with the compile time
of each way and the kernels of one call (BERT-base's shape: 12 layers of batch 32 x 128, 12 heads, 8 of 32 rows
half padding; p = 0.7, q = 0.1, the RTE setting). Every way but the first builds all layers' masks in one graph,
the layers' scores joined into one batch as addrop.layer_masks joins them (train.py --compile):

    python studies/mask_graphs.py                  # every way below, in one process
    python studies/mask_graphs.py --ways layer_masks,bisect   # only those (a GPU session runs each way in
                                                   # a process of its own, under a time limit: see WAYS)

WAYS: per-layer, a compiled graph per layer (the way before layer_masks); layer_masks, what train.py runs
(each row sorted, b^[idx] gathered); sort-max, b^[idx] read as the largest entry at idx (the sorted rows need
not be stored); bisect, no sort: b^[idx] found by 32 halvings of the floats' bits; count, no sort: a key is a
candidate when at least int(n (1 - p)) + 1 real keys score at most its score. Those four are each compiled
alone first and checked equal to the sort's candidates on every real pair. kernel-sort and kernel-bisect:
studies/mask_kernel.py's hand-written Triton kernel, b^[idx] by the sort or by bisection, each row in registers
(--rows rows per program on --warps warps), checked equal to drop_mask's masks at q = 1 (a launch per layer,
eagerly); timed as a user's mask runs, an entry of addrop.MASKS that layer_masks compiles as it compiles
train.py's: the layers joined, one launch in the graph. (RESULTS.md's kernel figures of 2026-11-27 were
measured with a launch per layer and no join, before the kernel became a mask of addrop.MASKS.)

Needs a CUDA GPU (--device cpu runs it in miniature, without the kernel ways). --machine-code needs none: it
prints the kernel's registers and instructions as Triton compiles it for a GPU (--arch), for a few shapes.
RESULTS.md (Compiled and sync-free; Other ways to find b^[idx]) gives what GPUs printed: on two H200s bisect took 1.16x the sort, and sort-max, which inductor fuses
into one kernel, 0.96x, so layer_masks keeps the sort.
"""
import argparse, functools, re, statistics, sys, time, torch
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import addrop
from torch._inductor.utils import run_and_get_code
from timing import gpu_kernels  # torch's profiler over one call (timing.py, bench.py's)

P, Q, BATCH, H, T = 0.7, 0.1, 32, 12, 128  # BERT-base's shape, the RTE setting
KEEP = round((1 - P) * 10**6)


def thr_sort(s, real, n, idx):  # drop_mask's: each row sorted, b^[idx] gathered
    B, H, T, _ = s.size()
    b_hat = s.masked_fill(~real, float("inf")).sort(-1).values
    thr = b_hat.gather(-1, idx.clamp(max=T - 1).view(B, 1, 1, 1).expand(B, H, T, 1))
    return thr.masked_fill((idx == n).view(B, 1, 1, 1), float("inf"))


def thr_sort_max(s, real, n, idx):  # b^[idx] as the largest entry at idx of the sorted row: no gather
    b_hat = s.masked_fill(~real, float("inf")).sort(-1).values
    thr = b_hat.masked_fill(torch.arange(s.size(-1), device=s.device) != idx.view(-1, 1, 1, 1), float("-inf"))
    return thr.amax(-1, keepdim=True).masked_fill((idx == n).view(-1, 1, 1, 1), float("inf"))


def cand_bisect(s, real, n, idx):  # no sort: b^[idx] found by 32 halvings of the range of the floats' bits
    # The scores' bits as int32 that order as the floats do (-0 made 0, negatives' magnitude bits flipped);
    # b^[idx] is the least key t with at least idx + 1 real keys at or below it. Compiled, the 32 counts of a
    # row are reductions over the same row, like softmax's two, that inductor can fuse: every per-key
    # operation is on int32 (a GPU's int64 takes two), and only the row's bounds lo, hi are int64.
    bits = torch.where(s == 0, torch.zeros_like(s), s).float().view(torch.int32)
    key = torch.where(bits < 0, bits ^ 0x7FFFFFFF, bits)
    need = (idx + 1).view(-1, 1, 1, 1)
    lo = torch.full(s.shape[:-1] + (1,), -2**31, dtype=torch.long, device=s.device)
    hi = torch.full_like(lo, 2**31 - 1)
    for _ in range(32):
        mid = (lo + hi) >> 1  # within int32's range, as lo and hi are
        enough = ((key <= mid.int()) & real).sum(-1, keepdim=True, dtype=torch.int32) >= need
        lo, hi = torch.where(enough, lo, mid + 1), torch.where(enough, mid, hi)
    return key >= lo  # the candidates (idx = n: none real, as lo ends at 2^31 - 1, NaN's bits, above every real key)


def cand_count(s, real, n, idx):  # no threshold, no sort: the candidates of Eq. 6 by counting, ties included
    # b^[idx] <= s_k exactly when at least idx + 1 real scores are <= s_k (idx = n: never, no candidates);
    # compiled, the (B, H, T, T, T) comparison is a reduction fused in registers, never stored
    at_most = ((s[..., None, :] <= s[..., :, None]) & real[..., None, :]).sum(-1)  # (B, H, T, T)
    return at_most > idx.view(-1, 1, 1, 1)


def timed(ways, dev, rounds=15):
    """Each way called in turn, rounds times; the median and spread of its wall time, synchronised. On a GPU
    also the kernels of one call, by torch's profiler: how many, and the three that take longest."""
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
    times = {k: [] for k in ways}
    for _ in range(rounds):
        for k, f in ways.items():
            sync()
            t0 = time.perf_counter()
            f()
            sync()
            times[k].append((time.perf_counter() - t0) * 1e3)
    for k, t in times.items():
        print(f"{k:44} median {statistics.median(t):.3f} ms (rounds {min(t):.3f}-{max(t):.3f})", flush=True)
    if dev.type == "cuda":
        for k, f in ways.items():
            count, ms, longest = gpu_kernels(f, dev)
            print(f"{k}: {count} kernels, {ms * 1e3:.0f} us of GPU time in all; longest: " +
                  "; ".join(f"{name[:60]} {us:.0f} us" for name, us in longest), flush=True)


def launches(code):
    """What inductor's code for a graph runs, from its call(): the kernels it generated (triton_... on a GPU,
    cpp_... on a CPU) and the library calls (aten.sort where it did not generate the sort)."""
    calls = re.findall(r"^ +(?:\w+ = )?((?:torch\.ops\.)?aten\.\w+|extern_kernels\.\w+|\w+_fused_\w+)", "\n".join(code), re.M)
    library = [c.replace("torch.ops.", "") for c in calls if "_fused_" not in c]
    return f"its graph runs {len(calls) - len(library)} generated kernels and the library calls {', '.join(library) or 'none'}"


CANDIDATES = {"layer_masks": lambda s, *a: s >= thr_sort(s, *a), "sort-max": lambda s, *a: s >= thr_sort_max(s, *a),
              "bisect": cand_bisect, "count": cand_count}
KERNELS = {"kernel-sort": False, "kernel-bisect": True}  # name: bisect, studies/mask_kernel.py
WAYS = ("per-layer",) + tuple(CANDIDATES) + tuple(KERNELS)


def joined(cand, scores, attention_mask):  # addrop.layer_masks with the candidates of cand: the layers'
    L = len(scores)  # scores joined into one batch, candidates, coin flips, the guard; a mask per layer
    s, am = torch.cat(scores), attention_mask.repeat(L, 1)
    real, n = am.bool()[:, None, None, :], am.sum(-1)
    drop = cand(s, real, n, n * KEEP // 10**6) & (torch.rand(s.shape, device=s.device) < Q)
    return guarded(drop, am).chunk(L)


def guarded(drop, attention_mask):
    """What every mask of addrop does last (drop_mask's docstring), in the form a GPU and a compiled graph run:
    real (query, key) pairs only, and a row that would lose every real key keeps them all."""
    real = attention_mask.bool()
    drop = drop & real[:, None, :, None] & real[:, None, None, :]
    return drop & ~(drop | ~real[:, None, None, :]).all(-1, keepdim=True)


def compiled(fn, *args):
    """A call of no arguments: fn(*args) with addrop.GRAPH_BACKEND inductor, as train.py --compile sets it (the
    masks of all layers as one compiled graph, addrop.layer_masks), for that call alone."""
    def call():
        old, addrop.GRAPH_BACKEND = addrop.GRAPH_BACKEND, "inductor"
        try:
            return fn(*args)
        finally:
            addrop.GRAPH_BACKEND = old
    return call


def kernel():
    """studies/mask_kernel.py, imported only where a kernel way or --machine-code asks for it: it needs triton."""
    try:
        import mask_kernel
    except ImportError as e:
        sys.exit(f"studies/mask_graphs.py: the kernel ways need the triton package ({e}); pip install triton")
    return mask_kernel


def kernel_is_drop_mask(name, scores, am, rows, warps):
    """Whether the kernel way `name` (KERNELS) gives addrop.drop_mask's masks at q = 1, where no coin enters:
    the masks are then the scores' alone (Eq. 6's candidates, real pairs, the guard). Each layer's alone,
    eagerly: the kernel's launch per layer against MASKS["high"]."""
    k = kernel().kernel_masks(scores, am, P, 1.0, bisect=KERNELS[name], rows=rows, warps=warps)
    return all(torch.equal(a, b) for a, b in zip(k, addrop.layer_masks(scores, am, P, 1.0)))


def machine_code(arch, L, B):
    """--machine-code: the kernel ways as Triton compiles them for a GPU of compute capability arch (90: H100,
    H200), made here with no GPU: registers a thread and bytes spilled (ptxas), and the instructions a warp runs
    (its SASS, which has no loop), a row, and for L layers of B x H x T rows. Counts, not times: a GPU issues
    about one instruction a cycle per scheduler when nothing waits."""
    mask_kernel = kernel()
    print(f"the kernel for sm_{arch}, T = {T}; instructions for {L} layers of ({B}, {H}, {T}) rows:")
    for name, bisect in KERNELS.items():
        for rows, warps in ((1, 1), (2, 1), (4, 1), (4, 4), (8, 8)):
            c = mask_kernel.machine_code(bisect, rows, warps, arch)
            (regs, spilled), n = mask_kernel.registers(c, arch), mask_kernel.instructions(c)
            print(f"{name:14} {rows} rows on {warps} warps: {regs:3} registers, {spilled} bytes spilled, {n:5} "
                  f"instructions a warp, {n * warps / rows:5.0f} a row, {L * B * H * T * n * warps / rows / 1e9:.2f} G in all", flush=True)


def build(name, scores, am, rows=None, warps=1):
    """The way `name` (WAYS) as a call of no arguments that builds all layers' masks."""
    if name in KERNELS:  # the kernel as a user adds a mask: an entry of addrop.MASKS, by its way's name, that
        # addrop.layer_masks compiles as it compiles train.py's (the layers joined, the kernel's launch in its graph)
        addrop.MASKS[name] = kernel().kernel_mask(KERNELS[name], rows=rows, warps=warps)
        return compiled(addrop.layer_masks, scores, am, P, Q, name)
    if name == "per-layer":
        per_layer = addrop.whole_graph(addrop.drop_mask, "inductor")
        return lambda: [per_layer(s, am, P, Q) for s in scores]
    if name == "layer_masks":
        return compiled(addrop.layer_masks, scores, am, P, Q)
    f = torch.compile(functools.partial(joined, CANDIDATES[name]), fullgraph=True, dynamic=False)
    return lambda: f(scores, am)


def chosen_ways(ap, args):
    """The names of --ways (default: all, on a CPU all but the kernel ways); a bad way, a kernel way off a GPU
    or a --rows/--warps that is not a power of two stops with a message that names it."""
    chosen = args.ways or ",".join(w for w in WAYS if args.device == "cuda" or w not in KERNELS)
    names = [w.strip() for w in chosen.split(",") if w.strip()]
    for w in names:
        if w not in WAYS:
            ap.error(f"--ways: unknown way {w!r}; choose from " + ", ".join(WAYS))
        if w in KERNELS and args.device != "cuda":
            ap.error(f"--ways: {w} runs a Triton kernel, which needs --device cuda (studies/mask_kernel_checks.py "
                     "checks it on a CPU in Triton's interpreter)")
    for flag, n in (("rows", args.rows), ("warps", args.warps)):
        if n is not None and (n < 1 or n & (n - 1)):
            ap.error(f"--{flag}: {n} is not a power of two")
    return names


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--ways", default=None, help="which ways, comma-separated: " + ", ".join(WAYS) +
                    " (default: all; on a CPU all but the kernel ways)")
    ap.add_argument("--rows", type=int, default=None, help="the kernel ways' rows per program, a power of two (default: "
                    "8 keys a thread on one warp, 2 rows at T = 128)")
    ap.add_argument("--warps", type=int, default=1, help="the kernel ways' warps per program, a power of two (default 1)")
    ap.add_argument("--machine-code", action="store_true", help="no timing, no GPU: the kernel's registers and "
                    "instructions as Triton compiles it for a GPU of compute capability --arch, for a few shapes")
    ap.add_argument("--arch", type=int, default=90, choices=(80, 86, 89, 90),
                    help="--machine-code: the GPU's compute capability: 90 (H100, H200; the default), 80 (A100), 86, 89")
    ap.add_argument("--device", default="cuda", help="cuda (what it is for), or cpu to try it in miniature")
    ap.add_argument("--batch-size", type=int, default=BATCH)
    args = ap.parse_args(argv)
    if args.machine_code:
        return machine_code(args.arch, args.layers, args.batch_size)
    names = chosen_ways(ap, args)
    if args.device == "cuda" and not torch.cuda.is_available():
        sys.exit("studies/mask_graphs.py: no CUDA GPU here (--device cpu runs it in miniature)")
    B, L = args.batch_size, args.layers
    torch.manual_seed(0)
    dev = torch.device(args.device)
    am = torch.ones(B, T, dtype=torch.long, device=dev)
    am[: B // 4, T // 2:] = 0
    scores = [torch.randn(B, H, T, T, device=dev) for _ in range(L)]
    print(f"{L} layers of ({B}, {H}, {T}, {T}) scores, p = {P}, q = {Q}, {dev}, torch {torch.__version__}", flush=True)
    real, n = am.bool()[:, None, None, :], am.sum(-1)
    idx = n * KEEP // 10**6
    pairs = am.bool()[:, None, :, None] & real  # (B, 1, T, T) real pairs, where candidates are compared
    ref = torch.cat(scores) >= thr_sort(torch.cat(scores), real.repeat(L, 1, 1, 1), n.repeat(L), idx.repeat(L))
    ways = {}
    for name in names:
        print(f"{name}: compiling", flush=True)  # before the compile: a stall names its way
        if name in CANDIDATES:  # compiled alone first, at the joined shape, and compared with the sort's
            t0 = time.perf_counter()
            c = torch.compile(CANDIDATES[name], fullgraph=True, dynamic=False)(
                torch.cat(scores), real.repeat(L, 1, 1, 1), n.repeat(L), idx.repeat(L))
            same = torch.equal(c & pairs.repeat(L, 1, 1, 1), ref & pairs.repeat(L, 1, 1, 1))
            print(f"{name}: its candidates equal the sort's on every real pair: {same} "
                  f"(compiled in {time.perf_counter() - t0:.0f} s)", flush=True)
        if name in KERNELS:
            t0 = time.perf_counter()
            same = kernel_is_drop_mask(name, scores, am, args.rows, args.warps)
            print(f"{name}: its masks at q = 1 equal drop_mask's: {same} ({args.rows or 'default'} rows on {args.warps} warps, "
                  f"Triton compiled in {time.perf_counter() - t0:.0f} s)", flush=True)
        t0 = time.perf_counter()
        ways[name] = build(name, scores, am, args.rows, args.warps)
        _, code = run_and_get_code(ways[name])
        for _ in range(2):
            ways[name]()
        print(f"{name}: compiled and warmed up in {time.perf_counter() - t0:.0f} s; {launches(code)}", flush=True)
    timed(ways, dev)


if __name__ == "__main__":
    main()
