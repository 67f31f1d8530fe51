"""
What bench.py prints, apart from how it builds and times the steps (bench.py, timing.py): each function takes
the figures by step name (medians in ms, ratios to the plain step of its kind) and prints one table.
print_methods: the methods against their floors, targets and the paper's Table 7 (bench.summarise's rows);
print_parts: where a GA or AA step's time goes (--parts); print_busy: the GPU's time of each step in one call
(--parts on a GPU); print_kernel: the Triton kernel's masks against train.py's (--kernel); print_hf: our steps
against Hugging Face's; print_data: the data pipeline's throughput beside a training step's (data_throughput
times tokenising and batching).
"""

import statistics
import time

import data
from support import checkpoint
from timing import cudagraph_counts, gpu_kernels, issue_ms, neighbour

# what a user pays: each step against the plain step of Hugging Face's BertForSequenceClassification (eager)
TARGETS_HF = {"plain": 0.80, "ga-first": 1.30, "ga-all": 1.35, "aa-all": 1.15, "rd-all": 0.85}


def ms(x):
    """Peak MiB as the tables print it: n/a where unknown."""
    return "n/a" if x is None else f"{x:.0f}"


def print_methods(rows, med, ratio, L, device):
    """The table of methods, what its columns mean, and what the masks alone cost."""
    F_here = ratio["forward"]
    print(f"\nratio: median over rounds of a step's time over its two neighbouring plain steps (not ms / plain ms;\n"
          f"a compiled step's neighbours are compiled plain steps, plain+c's eager ones),\n"
          f"and its lowest and highest round: how much the machine moved it;\n"
          f"per AD-DROP step: with cross-tuning a run costs (1 + ratio) / 2.\n"
          f"floor: 1 + (extra forwards) / 3, the paper-style count with a plain step = 3F; floor here: the same extra\n"
          f"forwards at the measured F = {med['forward']:.0f} ms (eval, no grad), a plain step being {1 / F_here:.1f}F here"
          + (f" (compiled: F = {med['forward+c']:.1f} ms, {1 / ratio['forward+c']:.1f}F)" if "forward+c" in med else "") + ";\n"
          "+ masks: that plus building the method's masks (Eq. 6-7) from scores at hand, timed alone.\n"
          "peak MiB: " + ("torch.cuda.max_memory_allocated during the step, above what is held between steps"
                          if device.type == "cuda" else "the process's peak RSS during the step above its RSS before it"
                          " (CPU; whole process, coarse)"))
    if any(n.endswith("+c") for n in rows):
        print("NAME+c: the same step compiled (train.py --compile); its ratio and target are against the compiled "
              "plain step, and its floors count compiled forwards and masks")
    gpu = device.type == "cuda"
    print(f"{'method':9} | {'ms/step':>8} | {'n':>2} | {'ratio':>6} | {'rounds':>11} | {'peak MiB':>8} | {'target':>6} | "
          f"{'paper (Table 7)':>15} | {'floor':>5} | {'floor here':>10} | {'+ masks':>7} | vs target"
          + (" | x own plain | host syncs | MFU" if gpu else ""))
    for n, r in rows.items():
        lo, hi = r["range"]
        print(f"{n:9} | {r['ms']:8.1f} | {r['steps']:2} | {r['ratio']:6.2f} | {f'{lo:.2f}-{hi:.2f}':>11} | "
              f"{ms(r['peak_MiB']):>8} | {r['target']:6.3g} | "
              f"{r['paper']:>15} | {r['floor']:5.2f} | {r['floor_here']:10.2f} | {r['floor_here_masks']:7.2f} | "
              + ("    " if n.startswith("plain") else "pass" if r["pass"] else
                 "FAIL*" if r["floor_here_masks"] > r["target"] else "FAIL")
              + (f" | {r['x_plain']:11.2f} | {r['host_syncs']:10} | {r['mfu']:.1%}" if gpu else ""))
    if any(not n.startswith("plain") and not r["pass"] and r["floor_here_masks"] > r["target"]
           for n, r in rows.items()):
        print("FAIL*: even the floor here with the masks is above the target: the extra passes, each timed as this "
              "machine's forward, already pass it. Such a step passes only if its extra passes run faster than the "
              "forward timed alone (--parts shows at what rate they run: RESULTS.md, Cost)")
    print(f"masks of all {L} layers from scores at hand (Eq. 6-7): drop_mask {med['drop_mask']:.1f} ms "
          f"({ratio['drop_mask']:.2f} of a plain step), of which the selection (kthvalue) {med['select']:.1f} ms; "
          f"random_mask {med['random_mask']:.1f} ms ({ratio['random_mask']:.2f})")
    if "drop_mask+c" in med:
        print(f"compiled, all layers in one graph (addrop.layer_masks): drop_mask {med['drop_mask+c']:.2f} ms, "
              f"{ratio['drop_mask+c']:.2f} of a compiled plain step; one graph per layer "
              f"{med['drop_mask/layer+c']:.2f} ms, {ratio['drop_mask/layer+c']:.2f}")


def print_parts(L, med, ratio, methods, flops=None):
    """--parts: each GA and AA step (eager and compiled) as the sum of its parts, each timed apart and given as x
    the plain step of its kind (medians over the rounds): the attribution, the masks from scores at hand (a
    first-layer method's, as bench.METHODS, `methods`, gives its layers, one layer's share), the masked step with
    every layer's masks; the rest is what the whole step takes beyond those (the seams between graphs, the count
    of dropped positions). flops: counted_flops of the eager steps by name (plain, masked-all, NAME:attribution),
    to give the attribution's and the masked step's FLOPs as x a plain step's beside their times: where time runs
    above FLOPs, that part runs its products slower than a plain step does. Returns them by step name."""
    out = {}
    for n in [n for n in med if n.endswith(":attribution") or n.endswith(":attribution+c")]:
        c = "+c" if n.endswith("+c") else ""
        whole = n.replace(":attribution", "")
        base = whole.removesuffix("+c")
        share = 1 if methods[base][1] == "all" else 1 / L  # the masks of one layer for ga-first
        part = {"attribution": ratio[n], "masks": ratio["drop_mask" + c] * share, "masked step": ratio["masked-all" + c]}
        out[whole] = {"x_plain": ratio[whole], "ms": med[whole], **part, "rest": ratio[whole] - sum(part.values())}
        if flops:
            out[whole]["flops"] = {"attribution": flops[base + ":attribution"] / flops["plain"],
                                   "masked step": flops["masked-all"] / flops["plain"]}
    if out:
        print("\nparts, each timed apart, x the plain step of its kind (medians over the rounds; the masked step with "
              "every layer's masks, the rest what the whole step takes beyond its parts):")
    for n, r in out.items():
        print(f"  {n:10} {r['x_plain']:.2f} ({r['ms']:.1f} ms) = attribution {r['attribution']:.2f} + masks "
              f"{r['masks']:.2f} + masked step {r['masked step']:.2f} + the rest {r['rest']:+.2f}")
        if "flops" in r:
            f = r["flops"]
            print(f"  {'':10} its FLOPs, x a plain step's: attribution {f['attribution']:.2f}, masked step "
                  f"{f['masked step']:.2f} (the masks none): the attribution runs its products at "
                  f"{f['attribution'] / r['attribution']:.2f} of a plain step's rate")
    return out


def print_busy(steps, med, device):
    """--parts on a GPU: for the plain step, the parts and the whole compiled steps, the kernels of one call (torch's
    profiler) and their GPU time against the step's median wall time, and how long the CPU took to hand one call
    over (timing.issue_ms). Busy well under 100% with the CPU's time near the wall: the step waits on the CPU
    (Python, guards, launches); busy near 100%: on its kernels. Then what torch.compile counted of its CUDA
    graphs: any it skipped or recorded anew."""
    print("\nthe GPU's time in one call of each (torch's profiler; wall: the median over the rounds; CPU: the time "
          "to hand one call to the GPU):")
    for n in [n for n in steps if busy_line(n)]:
        count, ms, longest = gpu_kernels(steps[n], device)
        print(f"  {n:24} {count:5} kernels, {ms:6.2f} ms of GPU time in {med[n]:6.2f} ms wall "
              f"({ms / med[n]:.0%} busy), CPU {issue_ms(steps[n], device):6.2f} ms; "
              f"longest: {longest[0][0][:50] if longest else '-'}")
    counts = cudagraph_counts()
    print("CUDA graphs: " + (", ".join(f"{k} {v}" for k, v in counts.items()) if counts else
                             "none skipped or re-recorded") + " (TORCH_LOGS=cudagraphs says why)")


def busy_line(n):
    """Whether print_busy gives step n a line: the plain steps, the forward, the parts, and the compiled steps
    whole (the masks among them: eagerly their time is the CPU's anyway)."""
    return n.startswith(("plain", "forward", "masked-all")) or ":attribution" in n or n.endswith("+c")


def print_kernel(args, med, ratios, syncs):
    """--kernel: each compiled step with the Triton kernel's masks (NAME/kernel+c) beside the same step as
    train.py runs it (NAME+c), ms and x a compiled plain step (median and the rounds' spread), and host syncs.
    Returns them by step name (None without --kernel)."""
    if not args.kernel:
        return None
    out = {}
    print(f"the masks by studies/mask_kernel.py's Triton kernel (b^[idx] by {args.kernel}) against train.py's "
          "(inductor's sort), compiled; ms and x a compiled plain step (median, rounds):")
    for k in [k for k in med if k.endswith("/kernel+c")]:
        n = k.replace("/kernel", "")
        out[n] = {way: {"ms": med[s], "x_plain": statistics.median(ratios[s]), "rounds": [min(ratios[s]), max(ratios[s])],
                        "host_syncs": syncs.get(s)} for way, s in (("inductor", n), ("kernel", k))}
        print(f"  {n:14} " + " | ".join(f"{way} {r['ms']:.2f} ms, {r['x_plain']:.2f} ({r['rounds'][0]:.2f}-"
                                         f"{r['rounds'][1]:.2f}), {r['host_syncs']} host syncs" for way, r in out[n].items()))
    return out


def print_hf(args, rows, hf, med, ratio, mib, times):
    """Our plain step against Hugging Face's, and each method against HF's eager plain step (added to rows).
    Returns the figures for the JSON by step name."""
    out = {}
    if hf:
        print("\nplain fine-tuning step, ours vs Hugging Face BertForSequenceClassification of the same config")
        for n in ["plain", *hf]:
            x = ratio[n] * (ratio["plain+c"] if neighbour(n) == "plain+c" else 1)  # over our eager plain
            print(f"{n:9} | {med[n]:8.0f} ms | n={len(times[n])} | {ms(mib[n]):>5} MiB | ours takes {1 / x:.2f}x this")
            out[n] = {"ms": med[n], "ours_over_this": 1 / x, "peak_MiB": mib[n]}
        if "hf-sdpa+c" in hf and "plain+c" in med:
            out["hf-sdpa+c"]["ours_c_over_this"] = 1 / ratio["hf-sdpa+c"]  # its neighbours: our plain+c
            print(f"compiled, both: ours plain+c takes {out['hf-sdpa+c']['ours_c_over_this']:.2f}x hf-sdpa+c")
    if "hf-eager" in hf:
        # both ratios are to the same neighbouring plain steps of ours, so their quotient is method / HF plain
        print("\nx HF plain: each step over Hugging Face's eager plain step (median ratio over rounds, "
              "ours over HF's), against the target a user would ask for")
        for n, r in rows.items():
            over_plain = r["ratio"] * (ratio["plain+c"] if neighbour(n) == "plain+c" else 1)
            r["x_hf"], r["target_hf"] = over_plain / ratio["hf-eager"], TARGETS_HF.get(n)
            verdict = "" if r["target_hf"] is None else "pass" if r["x_hf"] <= r["target_hf"] else "FAIL"
            target = "-" if r["target_hf"] is None else f"{r['target_hf']:.2f}"
            print(f"{n:9} | {r['x_hf']:6.2f} x HF plain | target {target:>5} | {verdict}")
    else:
        print("\n(Hugging Face comparison skipped: " + ("--no-hf)" if args.no_hf else "transformers is not installed)"))
    return out


def data_throughput(args, weights, max_len):
    """examples/s of tokenising (load_tokenizer + encode) and of data.batches on RTE (else SST-2) train, at most
    its first 4000 examples; None where neither is in the data folder."""
    d = data.resolve_data_dir(args.data_dir)
    for task in ("rte", "sst2"):
        try:
            ex = data.load_split(task, "train", d)[:4000]
        except data.DataError:
            continue
        t0 = time.perf_counter()
        tok = data.load_tokenizer(weights, max_len)
        encoded, labels = data.encode(tok, ex)
        t1 = time.perf_counter()
        for _ in data.batches(encoded, labels, args.batch_size, data.pad_token_id(tok), shuffle=True):
            pass
        t2 = time.perf_counter()
        return {"task": task, "dir": str(d), "examples": len(ex),
                "tokenise_per_s": len(ex) / (t1 - t0), "batch_per_s": len(ex) / (t2 - t1)}
    return None


def print_data(args, weights, B, T, med):
    """data_throughput beside training's examples per second; None where it was skipped."""
    try:
        d = data_throughput(args, weights or checkpoint.default_weights_dir(), T)
    except checkpoint.WeightsError:  # --config base without the MiniLM package: no tokenizer at hand
        d = None
    if d is None:
        print("\ndata throughput: skipped, no RTE or SST-2 train.tsv (pass --data-dir) or no tokenizer")
        return None
    line = f"\ndata ({d['task']} train, {d['examples']} examples, max_len {T}): tokenise {d['tokenise_per_s']:.0f} " \
           f"ex/s, batch {d['batch_per_s']:.0f} ex/s"
    if "plain" in med:  # --methods may leave out plain or ga-all
        d["train_plain_per_s"] = B / med["plain"] * 1e3
        line += (f" | training: plain {d['train_plain_per_s']:.1f} ex/s | tokenising and batching add "
                 f"{d['train_plain_per_s'] * (1 / d['tokenise_per_s'] + 1 / d['batch_per_s']):.2%} to a plain epoch")
    if "ga-all" in med:
        d["train_ga_all_per_s"] = B / med["ga-all"] * 1e3
        line += f" | GA all {d['train_ga_all_per_s']:.1f} ex/s"
    print(line)
    return d
