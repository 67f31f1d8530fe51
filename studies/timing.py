"""
How bench.py measures, apart from what it measures: a step's wall time with the GPU synchronised, its peak
memory above what was held before, each step timed between two plain steps of its kind (time_rounds), the
host synchronisations of one call, and the matmul peak that MFU is over.
"""

import math
import statistics
import time
import warnings
from pathlib import Path

import torch


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def mem_start(device):
    """Reset the peak and return the bytes held now: torch's CUDA allocator, or on CPU the process's RSS,
    its high-water mark reset through /proc (Linux; None elsewhere)."""
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
        return torch.cuda.memory_allocated(device)
    try:
        Path("/proc/self/clear_refs").write_text("5")  # 5: reset VmHWM, the peak RSS
        return _proc_status("VmRSS")
    except OSError:
        return None


def mem_peak(device, start):
    """Peak bytes above `start` since mem_start."""
    if start is not None:
        return (torch.cuda.max_memory_allocated(device) if device.type == "cuda" else _proc_status("VmHWM")) - start


def _proc_status(key):
    line = next(l for l in Path("/proc/self/status").read_text().splitlines() if l.startswith(key + ":"))
    return int(line.split()[1]) * 1024  # kB -> bytes


def timed(step, device):
    """One call of step: its seconds and its peak memory above what was held before (None where unknown)."""
    start = mem_start(device)
    sync(device)
    t0 = time.perf_counter()
    step()
    sync(device)
    dt = time.perf_counter() - t0
    return dt, mem_peak(device, start)


def neighbour(n):
    """The plain step that step n runs between and is a ratio of: the compiled plain step for a compiled
    step (NAME+c, so that its ratio is over the plain step of its own kind, directly), the eager one else."""
    return "plain+c" if n.endswith("+c") and n != "plain+c" else "plain"


def time_rounds(args, steps, device):
    """Warm-up, then --steps rounds: each step between two plain ones of its kind (neighbour), its ratio to
    their mean. Returns name -> [seconds], [peak bytes] and [ratio], over the rounds."""
    times, mems, ratios = ({n: [] for n in steps} for _ in range(3))

    def run(n):
        dt, peak = timed(steps[n], device)
        times[n].append(dt)
        mems[n].append(peak)
        return dt

    for r in range(args.warmup):  # IGA skips warm-up: at 15-50x a step its first-call costs vanish
        first = " (a compiled step's first call compiles)" if r == 0 and any(n.endswith("+c") for n in steps) else ""
        print(f"warm-up {r + 1}/{args.warmup}, seconds a step{first}:", end="", flush=True)
        for n in steps:
            if not n.startswith("iga"):
                print(f" {n}", end="", flush=True)  # printed before the call: a stall names its step
                print(f" {timed(steps[n], device)[0]:.1f}", end="", flush=True)
        print(flush=True)
    # Each method runs between two plain steps and its ratio is to their mean, so that the machine's
    # speed drifting (other jobs on a shared CPU) cancels; a method's figure is its median over rounds.
    before = {p: run(p) for p in ("plain", "plain+c") if p in steps}
    for r in range(args.steps):
        for n in steps:
            if n == "plain" or (n.startswith("iga") and r < args.steps - args.iga_steps):
                continue
            t = run(n)
            after = run(neighbour(n))
            ratios[n].append(2 * t / (before[neighbour(n)] + after))
            before[neighbour(n)] = after
        print(f"round {r + 1}/{args.steps}: plain {times['plain'][-1] * 1e3:.0f} ms, then x plain (NAME+c: x plain+c): "
              + " ".join(f"{n} {ratios[n][-1]:.2f}" for n in steps if len(ratios[n]) == r + 1), flush=True)
    return times, mems, ratios


def host_syncs(step, device):
    """How many times one call of step makes the CPU wait for the GPU (.item(), int(tensor), a data-dependent
    shape): torch.cuda.set_sync_debug_mode warns at each. None on a CPU, where nothing waits."""
    if device.type != "cuda":
        return None
    step()  # once uncounted: a first call may wait for what it sets up once
    sync(device)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        try:
            step()
        finally:
            torch.cuda.set_sync_debug_mode(0)
    return sum("synchroniz" in str(w.message) for w in caught)


def matmul_peak(device, dtype):
    """What this machine's matmuls reach, FLOP/s: the best of 5 timings of a square product (8192 on a GPU,
    1024 on a CPU), the peak that MFU is over."""
    n = 8192 if device.type == "cuda" else 1024
    a, b = (torch.randn(n, n, device=device, dtype=dtype) for _ in range(2))
    best = math.inf
    for _ in range(6):
        sync(device)
        t0 = time.perf_counter()
        for _ in range(4):
            a @ b
        sync(device)
        best = min(best, (time.perf_counter() - t0) / 4)
    return 2 * n**3 / best


def issue_ms(step, device, calls=3):
    """How long the CPU takes to hand one call of step to the GPU: the median over `calls` of the time until step
    returns, the GPU idle at the call and waited for only after it returns. Near the step's wall time, the CPU
    (Python, guards, launches) sets the pace; well under it, the GPU's kernels do."""
    times = []
    for _ in range(calls):
        sync(device)
        t0 = time.perf_counter()
        step()
        times.append((time.perf_counter() - t0) * 1e3)
        sync(device)
    return statistics.median(times)


def cudagraph_counts():
    """torch.compile's CUDA graph counters so far (inductor's): graphs it skipped (set TORCH_LOGS=cudagraphs for
    the reasons) and inputs it had to record anew; {} where nothing was counted."""
    from torch._dynamo.utils import counters
    return {k: v for k, v in counters["inductor"].items() if "cudagraph" in k}


def gpu_kernels(step, device):
    """One call of step under torch's profiler on a CUDA device: the kernels it ran, their GPU time in ms in
    all, and the three longest as (name, µs a launch)."""
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        step()
        sync(device)
    ks = sorted((e for e in prof.key_averages() if e.device_time_total > 0), key=lambda e: -e.device_time_total)
    return (sum(e.count for e in ks), sum(e.device_time_total for e in ks) / 1e3,
            [(e.key, e.device_time_total / e.count) for e in ks[:3]])


def counted_flops(step):
    """The FLOPs of one call of step as torch's FlopCounterMode counts them: its matrix products (mm, bmm,
    addmm, attention), forward and backward, run eagerly (a compiled step runs the same products)."""
    from torch.utils.flop_counter import FlopCounterMode
    with FlopCounterMode(display=False) as counter:
        step()
    return counter.get_total_flops()


def model_flops(net, B, T):
    """FLOPs of one plain training step by the usual count (nanoGPT's, after PaLM's appendix B): 6 per
    parameter and token for the matmuls forward and backward, the embeddings (looked up, not multiplied)
    left out, and 12 L T C per token for attention's two T x T products."""
    cfg = net.cfg
    N = sum(w.numel() for name, w in net.named_parameters() if not name.startswith(("encoder.word", "encoder.pos",
                                                                                    "encoder.token_type")))
    return 6 * N * B * T + 12 * cfg.num_hidden_layers * B * T * T * cfg.hidden_size
