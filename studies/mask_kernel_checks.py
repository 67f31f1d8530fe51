"""
The checks of studies/mask_kernel.py, the hand-written Triton kernel for a GPU's masks, on a CPU: Triton's
interpreter runs the kernel's own code on numpy. Its masks, a mask of addrop.MASKS' signature (kernel_mask)
registered as a user registers one, must equal addrop's own ("high", "low") wherever the coins do not enter
(q = 1), by both ways of finding b^[idx], on rows built to break a threshold, eagerly and with the layers joined
as layer_masks' compiled path joins them; its coins must fall on candidates only, fairly; and dynamo must capture
its launch in one graph (fullgraph=True) when addrop.layer_masks compiles it (addrop.GRAPH_BACKEND set).

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
def test_kernel_masks_equal_drop_masks_where_no_coin_enters(way, p, low, monkeypatch):
    """At q = 1 every candidate is dropped, so the masks are a function of the scores alone: Eq. 6's
    candidates, real pairs only, and the guard (p = 1: every real key a candidate, so every row keeps all).
    The kernel's, as a mask of addrop.MASKS (eagerly: a launch per layer), must be addrop's own, "high" or
    "low", layer by layer, exactly."""
    monkeypatch.setitem(addrop.MASKS, "kernel", mask_kernel.kernel_mask(WAYS[way], low, rows=8))
    scores, am = hard_rows()
    want = addrop.layer_masks(scores, am, p, 1.0, "low" if low else "high")
    got = addrop.layer_masks(scores, am, p, 1.0, "kernel")
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
    """p = 0.7, q = 0.1: every dropped pair is a candidate of Eq. 6 (addrop.threshold's) on a real
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
        cand = (s >= addrop.threshold(s, real, p)) & pairs
        assert not (M & ~cand).any(), "a pair that is not a candidate was dropped"
        assert not ((M | ~real).all(-1) & pairs.any(-1)).any(), "a real query lost every real key"
        N, k = int(cand.sum()), int(M.sum())
        assert abs(k - q * N) <= 6 * math.sqrt(N * q * (1 - q)), f"{k} of {N} candidates dropped at q = {q}"
    twins = mask_kernel.kernel_masks([scores[0], scores[0]], am, p, q, bisect=WAYS[way])
    assert not torch.equal(twins[0], twins[1]) and not torch.equal(first[0], second[0])


def test_compile_takes_the_kernel_into_layer_masks_graph(monkeypatch):
    """With the kernel registered as a mask and addrop.GRAPH_BACKEND set (as train.py --compile sets it),
    addrop.layer_masks compiles it as it compiles train.py's masks: dynamo must capture the layers' scores joined
    and the kernel's one launch over them as Triton kernel calls in ONE graph, with no break. On a CPU dynamo
    handles Triton kernels only when it believes a GPU could run them (has_triton), so that check is set true,
    the kernel is compiled Triton's (a JITFunction of its code, not the interpreter's), and the backend stops at
    the graph it is handed: it runs nothing."""
    monkeypatch.setattr("torch.utils._triton.has_triton", lambda: True)
    monkeypatch.setattr(mask_kernel, "_masks_kernel", mask_kernel.jit_kernel())

    class Traced(Exception):
        pass

    def backend(gm, example_inputs):
        raise Traced(gm)

    monkeypatch.setitem(addrop.MASKS, "kernel", mask_kernel.kernel_mask())
    monkeypatch.setattr(addrop, "GRAPH_BACKEND", backend)
    scores, am = hard_rows()
    torch._dynamo.reset()
    with pytest.raises(Exception) as raised:
        addrop.layer_masks(scores, am, 0.7, 0.1, "kernel")
    traced = getattr(raised.value, "inner_exception", raised.value)
    assert isinstance(traced, Traced), f"dynamo did not hand over one whole graph: {raised.value}"
    ops = [str(n.target) for n in traced.args[0].graph.nodes if n.op == "call_function"]
    assert sum("triton_kernel_wrapper" in o for o in ops) == 1 and any("cat" in o for o in ops), ops


@pytest.mark.parametrize("way", mask_graphs.KERNELS)
def test_mask_graphs_kernel_ways_run(way, monkeypatch):
    """What mask_graphs.py runs of the kernel on a GPU, run here in the interpreter (not compiled: dynamo cannot
    trace the interpreter): its check at q = 1 says True, and its timed call builds a bool mask per layer with
    drops at q = 0.1. A wrong check would say False here (a GPU session must not spend its time on that)."""
    monkeypatch.setattr(addrop, "whole_graph", lambda fn, backend: fn)
    monkeypatch.setattr(addrop, "MASKS", dict(addrop.MASKS))  # build registers the way's mask: undone after
    scores, am = hard_rows()
    assert mask_graphs.kernel_is_drop_mask(way, scores, am, rows=8, warps=4)
    masks = mask_graphs.build(way, scores, am, rows=8)()
    assert len(masks) == len(scores) and all(M.dtype == torch.bool and M.shape == s.shape for M, s in zip(masks, scores))
    assert 0 < sum(int(M.sum()) for M in masks)


def test_mask_graphs_other_ways_are_layer_masks_where_no_coin_enters(monkeypatch):
    """mask_graphs.py's other ways of finding Eq. 6's candidates end as addrop's masks end (its guarded: real
    pairs, the guard): at q = 1 each way's masks, the layers joined, are addrop.layer_masks' ("high"), layer by
    layer."""
    monkeypatch.setattr(mask_graphs, "Q", 1.0)
    scores, am = hard_rows()
    want = addrop.layer_masks(scores, am, mask_graphs.P, 1.0)
    for name, cand in mask_graphs.CANDIDATES.items():
        got = mask_graphs.joined(cand, scores, am)
        assert all(torch.equal(g, w) for g, w in zip(got, want)), name
    assert sum(int(w.sum()) for w in want) > 50


@pytest.mark.parametrize("way", WAYS)
def test_the_kernel_is_a_mask_of_addrops_on_every_path(way, monkeypatch):
    """The kernel plugs in as a user's mask: one entry of addrop.MASKS. addrop_masks then builds its masks from a
    model's scores, and layer_masks' compiled path (GRAPH_BACKEND set; whole_graph taken out, as the interpreter
    cannot be compiled) hands it the layers joined into one batch, each row with its example's real length: at
    q = 1 each layer's mask is drop_mask's of that layer alone; at q = 0.1 each drops, and the layers differ.
    An entry under a name of its own leaves train.py's "high" as it was."""
    import test_compile  # tests/test_compile.py's tiny model and batch (conftest puts tests/ on the path)
    monkeypatch.setitem(addrop.MASKS, "kernel", mask_kernel.kernel_mask(WAYS[way], rows=8))
    net, b = test_compile.tiny(dropout=0.0), test_compile.tiny_batch()
    masks = addrop.addrop_masks(net, b, [0, 2], 0.5, 1.0, mask="kernel")
    assert masks[1] is None and torch.equal(masks[0], addrop.addrop_masks(net, b, [0, 2], 0.5, 1.0)[0])
    scores, am = hard_rows()
    monkeypatch.setattr(addrop, "whole_graph", lambda fn, backend: fn)
    monkeypatch.setattr(addrop, "GRAPH_BACKEND", "inductor")
    joined = addrop.layer_masks(scores, am, 0.7, 1.0, "kernel")
    assert all(torch.equal(k, addrop.drop_mask(s, am, 0.7, 1.0)) for k, s in zip(joined, scores))
    drawn = addrop.layer_masks(scores, am, 0.7, 0.1, "kernel")
    assert all(M.any() for M in drawn) and not torch.equal(drawn[0], drawn[1])
    assert addrop.MASKS["high"] is addrop.drop_mask


def test_bench_refuses_the_kernel_without_compile_or_a_gpu():
    """bench.py --kernel times the kernel's masks in a compiled step on a GPU: without --compile there is nothing
    to time it against, and off a GPU it cannot run."""
    import bench
    with pytest.raises(SystemExit):
        bench.parse_args(["--kernel", "sort"])
    with pytest.raises(SystemExit, match="needs a CUDA GPU"):
        bench.build(bench.parse_args(["--kernel", "sort", "--compile", "--device", "cpu"]))
