"""
What building the masks of all layers costs on a GPU under --compile, three ways, timed interleaved with
CUDA events (BERT-base's shape: 12 layers of batch 32 x 128, 12 heads, 8 of 32 rows half padding; p = 0.7,
q = 0.1, the RTE setting):

    python studies/mask_graphs.py                  # one compiled graph per layer, one for all layers
                                                   # (addrop.layer_masks, train.py --compile), and that
                                                   # one under CUDA graphs (mode reduce-overhead)
    python studies/mask_graphs.py --thresholds     # the masks with Eq. 6's candidates found other ways
                                                   # than a sort: kthvalue and topk at a fixed k, and by
                                                   # counting (no sort: a key is a candidate when at least
                                                   # int(n (1 - p)) + 1 real keys score at most its score),
                                                   # each checked equal to the sort's first (one graph)

Needs a CUDA GPU. RESULTS.md (Compiled and sync-free) gives what an H100 printed.
"""
import argparse, statistics, sys, time, torch
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import addrop

P, Q, BATCH, H, T = 0.7, 0.1, 32, 12, 128  # BERT-base's shape, the RTE setting
KEEP = round((1 - P) * 10**6)


def thr_sort(s, real, n, idx):  # drop_mask's: each row sorted, b^[idx] read
    B, H, T, _ = s.size()
    b_hat = s.masked_fill(~real, float("inf")).sort(-1).values
    thr = b_hat.gather(-1, idx.clamp(max=T - 1).view(B, 1, 1, 1).expand(B, H, T, 1))
    return thr.masked_fill((idx == n).view(B, 1, 1, 1), float("inf"))


def thr_kthvalue(s, real, n, idx):  # addrop._select_threshold with a fixed k: the most candidates a row can have
    B, H, T, _ = s.size()
    count, K = n - idx, T - T * KEEP // 10**6
    lift = ~real & ((~real).cumsum(-1) <= (K - count).view(B, 1, 1, 1))
    bias = torch.zeros(B, 1, 1, T, dtype=s.dtype, device=s.device)
    bias = bias.masked_fill(~real, float("-inf")).masked_fill(lift, float("inf"))
    return (s + bias).kthvalue(T - K + 1, dim=-1, keepdim=True).values


def thr_topk(s, real, n, idx):  # the count-th largest real score, from the top K
    B, H, T, _ = s.size()
    count, K = n - idx, T - T * KEEP // 10**6
    top = s.masked_fill(~real, float("-inf")).topk(K, -1).values
    thr = top.gather(-1, (count - 1).clamp(min=0).view(B, 1, 1, 1).expand(B, H, T, 1))
    return thr.masked_fill((count == 0).view(B, 1, 1, 1), float("inf"))


def cand_count(s, real, n, idx):  # no threshold, no sort: the candidates of Eq. 6 by counting, ties included
    # b^[idx] <= s_k exactly when at least idx + 1 real scores are <= s_k (idx = n: never, no candidates);
    # compiled, the (B, H, T, T, T) comparison is a reduction fused in registers, never stored
    at_most = ((s[..., None, :] <= s[..., :, None]) & real[..., None, :]).sum(-1)  # (B, H, T, T)
    return at_most > idx.view(-1, 1, 1, 1)


def timed(ways, dev, rounds=15):
    """Each way called in turn, rounds times; the median and spread of its wall time, synchronised."""
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
        print(f"{k:32} median {statistics.median(t):.3f} ms (rounds {min(t):.3f}-{max(t):.3f})", flush=True)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--thresholds", action="store_true", help="time Eq. 6's threshold found other ways")
    ap.add_argument("--device", default="cuda", help="cuda (what it is for), or cpu to try it in miniature")
    ap.add_argument("--batch-size", type=int, default=BATCH)
    args = ap.parse_args(argv)
    if args.device == "cuda" and not torch.cuda.is_available():
        sys.exit("studies/mask_graphs.py: no CUDA GPU here (--device cpu runs it in miniature)")
    B = args.batch_size
    torch.manual_seed(0)
    dev = torch.device(args.device)
    am = torch.ones(B, T, dtype=torch.long, device=dev)
    am[: B // 4, T // 2:] = 0
    scores = [torch.randn(B, H, T, T, device=dev) for _ in range(args.layers)]
    L = args.layers
    if args.thresholds:
        real, n = am.bool()[:, None, None, :], am.sum(-1)
        idx = n * KEEP // 10**6
        pairs = am.bool()[:, None, :, None] & real  # (B, 1, T, T) real pairs, where candidates are compared
        ref = scores[0] >= thr_sort(scores[0], real, n, idx)

        def masks(cand):  # drop_mask with the candidates of cand, every layer, as one graph
            def all_layers(ss):
                return [addrop._real_rows(cand(s, real, n, idx) & (torch.rand(s.shape, device=dev) < Q), am)
                        for s in ss]
            return torch.compile(all_layers, fullgraph=True, dynamic=False)
        ways = {}
        for name, cand in [("sort", lambda s, *a: s >= thr_sort(s, *a)), ("kthvalue", lambda s, *a: s >= thr_kthvalue(s, *a)),
                           ("topk", lambda s, *a: s >= thr_topk(s, *a)), ("count", cand_count)]:
            c = torch.compile(cand, fullgraph=True, dynamic=False)(scores[0], real, n, idx)
            same = torch.equal((c & pairs), (ref & pairs))
            print(f"{name}: its candidates equal the sort's on every real pair:", same, flush=True)
            ways[f"{name}, {L} layers in one graph"] = (lambda f: lambda: f(scores))(masks(cand))
        for f in ways.values():
            for _ in range(3):
                f()
        timed(ways, dev)
        return
    per_layer = addrop.whole_graph(addrop.drop_mask, "inductor")
    cuda_graphs = torch.compile(addrop._stacked_masks, mode="reduce-overhead", fullgraph=True, dynamic=False)

    def with_cuda_graphs():
        torch.compiler.cudagraph_mark_step_begin()
        return cuda_graphs(scores, am, P, Q, False)
    ways = {"one graph per layer": lambda: [per_layer(s, am, P, Q) for s in scores],
            "one graph (layer_masks)": lambda: addrop.layer_masks(scores, range(L), am, P, Q, compile="inductor"),
            "one graph + CUDA graphs": with_cuda_graphs}
    for f in ways.values():
        for _ in range(3):
            f()
    print(f"{L} layers of ({B}, {H}, {T}, {T}) scores, p = {P}, q = {Q}, {dev}")
    timed(ways, dev)


if __name__ == "__main__":
    main()
