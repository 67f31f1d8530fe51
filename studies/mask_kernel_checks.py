"""
The checks of studies/mask_kernel.py, the hand-written Triton kernel for a GPU's masks, on a CPU: Triton's
interpreter runs the kernel's own code on numpy. Its masks must equal addrop.drop_mask's wherever the coins do
not enter (q = 1), by both ways of finding b^[idx], on rows built to break a threshold; its coins must fall on
candidates only, fairly; and dynamo must capture its launches in one graph (fullgraph=True), as torch.compile
takes addrop.layer_masks' compiled path.

test_mask_kernel.py runs this file with pytest in a process of its own, with TRITON_INTERPRET=1 set before triton
is first imported (triton.jit reads it then, for Triton's own library too): a test process may already hold
triton for a GPU, through torch.compile. By hand: TRITON_INTERPRET=1 python -m pytest -q studies/mask_kernel_checks.py
"""

import math
import os

import pytest
import torch

assert os.environ.get("TRITON_INTERPRET") == "1", "run with TRITON_INTERPRET=1 (see the docstring)"

import addrop  # noqa: E402
import mask_graphs  # noqa: E402
import mask_kernel  # noqa: E402

WAYS = {"sort": False, "bisect": True}


def test_the_kernel_runs_in_the_interpreter():
    """Every other test here means something only if the kernel ran as Triton code, on numpy."""
    assert type(mask_kernel._masks_kernel).__name__ == "InterpretedFunction"


def hard_rows():
    """Two layers' scores (3, 2, 12, 12), T = 12 not a power of two (the kernel pads its keys to 16), and
    attention masks with a full row, right padding, and one real key amid padding on both sides. The scores
    include ties across the threshold, -0.0 beside 0.0, float32's ends (+-3.4e38) and its least
    subnormals (+-1e-45)."""
    g = torch.Generator().manual_seed(0)
    B, H, T = 3, 2, 12
    am = torch.ones(B, T, dtype=torch.long)
    am[1, 7:] = 0
    am[2, :] = 0
    am[2, 4] = 1  # one real key, in the middle: padding is not always at the end
    scores = [torch.randn(B, H, T, T, generator=g) for _ in range(2)]
    s = scores[0]
    s[0, 0, :, :6] = 0.5  # ties: half a row scores the same
    s[0, 1, 0, :] = 0.0
    s[0, 1, 0, ::2] = -0.0
    s[1, 0, :, 0], s[1, 0, :, 1] = 3.4e38, -3.4e38
    s[1, 1, :, 2], s[1, 1, :, 3] = 1e-45, -1e-45
    scores[1][:, :, :, 5] = scores[1][:, :, :, 6]  # ties in the other layer too
    return scores, am


@pytest.mark.parametrize("way", WAYS)
@pytest.mark.parametrize("p,low", [(0.7, False), (0.7, True), (0.05, False), (0.5, False), (1.0, False)])
def test_kernel_masks_equal_drop_masks_where_no_coin_enters(way, p, low):
    """At q = 1 every candidate is dropped, so the masks are a function of the scores alone: Eq. 6's
    candidates, real pairs only, and the guard (p = 1: every real key a candidate, so every row keeps all).
    The kernel's must be addrop.drop_mask's, layer by layer, exactly."""
    scores, am = hard_rows()
    want = addrop.layer_masks(scores, [0, 1], am, p, 1.0, low=low)
    got = mask_kernel.kernel_masks(scores, am, p, 1.0, low, bisect=WAYS[way], rows=8)
    for layer, (w, k) in enumerate(zip(want, got)):
        assert k.dtype == torch.bool and k.shape == w.shape
        assert torch.equal(k, w), f"layer {layer}: {(k != w).sum()} of {w.numel()} entries differ"
    if p < 1:
        assert sum(int(w.sum()) for w in want) > 50  # the comparison is not between two empty masks


def test_nothing_is_dropped_at_q_0_or_p_0():
    scores, am = hard_rows()
    for p, q in ((0.7, 0.0), (0.0, 0.5)):
        assert not any(M.any() for M in mask_kernel.kernel_masks(scores, am, p, q))


@pytest.mark.parametrize("way", WAYS)
def test_kernel_coins_are_fair_and_fall_on_candidates_only(way):
    """p = 0.7, q = 0.1: every dropped pair is a candidate of Eq. 6 (the sort's, mask_graphs.thr_sort) on a real
    pair, no row loses all its real keys, and each layer drops a count of its candidates within 6 binomial
    sigma of q times them. Two layers of the same scores, and two calls, draw different coins (a seed per layer
    and call)."""
    g = torch.Generator().manual_seed(1)
    B, H, T, p, q = 4, 2, 16, 0.7, 0.1
    am = torch.ones(B, T, dtype=torch.long)
    am[2:, 10:] = 0
    scores = [torch.randn(B, H, T, T, generator=g) for _ in range(2)]
    torch.manual_seed(0)
    first = mask_kernel.kernel_masks(scores, am, p, q, bisect=WAYS[way])
    second = mask_kernel.kernel_masks(scores, am, p, q, bisect=WAYS[way])
    real = am.bool()[:, None, None, :]
    n = am.sum(-1)
    pairs = am.bool()[:, None, :, None] & real
    for s, M in zip(scores, first):
        cand = (s >= mask_graphs.thr_sort(s, real, n, n * round((1 - p) * 10**6) // 10**6)) & pairs
        assert not (M & ~cand).any(), "a pair that is not a candidate was dropped"
        assert not ((M | ~real).all(-1) & pairs.any(-1)).any(), "a real query lost every real key"
        N, k = int(cand.sum()), int(M.sum())
        assert abs(k - q * N) <= 6 * math.sqrt(N * q * (1 - q)), f"{k} of {N} candidates dropped at q = {q}"
    twins = mask_kernel.kernel_masks([scores[0], scores[0]], am, p, q, bisect=WAYS[way])
    assert not torch.equal(twins[0], twins[1]) and not torch.equal(first[0], second[0])


def test_compile_takes_every_launch_into_one_graph(monkeypatch):
    """torch.compile(fullgraph=True) of the kernel's masks, as addrop.whole_graph compiles addrop.layer_masks'
    path: dynamo must capture each layer's launch as Triton kernel calls in ONE graph, with no break. On a CPU
    dynamo handles Triton kernels only when it believes a GPU could run them (has_triton), so that check is
    set true, the kernel is compiled Triton's (a JITFunction of its code, not the interpreter's), and the
    backend stops at the graph it is handed: it runs nothing."""
    monkeypatch.setattr("torch.utils._triton.has_triton", lambda: True)
    monkeypatch.setattr(mask_kernel, "_masks_kernel", mask_kernel.jit_kernel())

    class Traced(Exception):
        pass

    def backend(gm, example_inputs):
        raise Traced(gm)

    scores, am = hard_rows()
    torch._dynamo.reset()
    f = torch.compile(mask_kernel.stacked(), backend=backend, fullgraph=True, dynamic=False)
    with pytest.raises(Exception) as raised:
        f(scores, am, 0.7, 0.1, False)
    traced = getattr(raised.value, "inner_exception", raised.value)
    assert isinstance(traced, Traced), f"dynamo did not hand over one whole graph: {raised.value}"
    ops = [str(n.target) for n in traced.args[0].graph.nodes if n.op == "call_function"]
    assert sum("triton_kernel_wrapper" in o for o in ops) == len(scores), ops


@pytest.mark.parametrize("way", mask_graphs.KERNELS)
def test_mask_graphs_kernel_ways_run(way, monkeypatch):
    """What mask_graphs.py runs of the kernel on a GPU, run here in the interpreter (not compiled: dynamo cannot
    trace the interpreter): its check at q = 1 says True, and its timed call builds a bool mask per layer with
    drops at q = 0.1. A wrong check would say False here (a GPU session must not spend its time on that)."""
    monkeypatch.setattr(addrop, "whole_graph", lambda fn, backend: fn)
    scores, am = hard_rows()
    assert mask_graphs.kernel_is_drop_mask(way, scores, am, rows=8, warps=4)
    masks = mask_graphs.build(way, scores, am, rows=8)()
    assert len(masks) == len(scores) and all(M.dtype == torch.bool and M.shape == s.shape for M, s in zip(masks, scores))
    assert 0 < sum(int(M.sum()) for M in masks)


def test_bench_kernel_stands_in_for_the_compiled_masks_for_one_step(monkeypatch):
    """bench.py --kernel times a compiled step with addrop._stacked_masks swapped for the kernel's for that call
    alone: inside it, addrop.layer_masks' compiled path (here with whole_graph taken out, as the interpreter
    cannot be compiled) returns the kernel's masks, and afterwards addrop's own function is back."""
    import bench
    monkeypatch.setattr(addrop, "whole_graph", lambda fn, backend: fn)
    own = addrop._stacked_masks
    calls = []
    kernel = mask_kernel.stacked(bisect=True, rows=8)
    counted = lambda *a: calls.append(a) or kernel(*a)  # noqa: E731
    scores, am = hard_rows()
    got = []
    bench.with_kernel(lambda: got.extend(addrop.layer_masks(scores, [0, 1], am, 0.7, 1.0, compile="inductor")), counted)
    assert len(calls) == 1 and addrop._stacked_masks is own
    assert all(torch.equal(k, w) for k, w in zip(got, addrop.layer_masks(scores, [0, 1], am, 0.7, 1.0)))
    with pytest.raises(SystemExit):
        bench.parse_args(["--kernel", "sort"])  # without --compile there is nothing to stand in for
    with pytest.raises(SystemExit, match="needs a CUDA GPU"):
        bench.build(bench.parse_args(["--kernel", "sort", "--compile", "--device", "cpu"]))
