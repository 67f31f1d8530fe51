"""
How a run shares the CPU with other programs: call cpu.fair_share() before the first `import torch`.

torch's CPU wheel parallelises with GNU OpenMP (libgomp). Between two parallel ops its worker threads
spin, by default for about 300,000 turns (a few milliseconds), before they sleep. On an idle machine that
saves a wake-up per op; on a machine whose cores are busy with a browser or a second run, the spinning
threads fight those programs for the cores, and a step cost 10x its idle time with three busy programs on
two cores (a fair share is about 2.5x). Waiting passively (OMP_WAIT_POLICY=PASSIVE) takes the fair share
but costs a few percent of an idle step, in wake-ups; a short spin (GOMP_SPINCOUNT) costs nothing idle and
a little more than the fair share when busy. So fair_share() looks at the CPUs first: if other programs
keep some of them busy, the threads wait passively, otherwise they spin briefly. studies/busy.py measures
the options (RESULTS.md, "Sharing the CPU"). OpenMP reads its environment once, when torch loads it, hence
before the import; a user's own OMP_WAIT_POLICY or GOMP_SPINCOUNT wins, and a child process inherits the
choice with the environment.
"""

import os
import sys
import time

SPINCOUNT = "3000"  # libgomp's turns of spinning before a waiting thread sleeps (its default: 300,000)
BUSY = 0.5          # other programs keep more than this many of our CPUs busy: wait passively
KEYS = ("OMP_NUM_THREADS", "OMP_WAIT_POLICY", "GOMP_SPINCOUNT")  # what metrics.json records
busy_at_start = None  # what fair_share() measured (CPUs kept busy by other programs), for metrics.json


def fair_share(environ=os.environ, busy=None):
    """Choose OpenMP's way of waiting by the load: OMP_WAIT_POLICY=PASSIVE if other programs keep more than
    BUSY of this process's CPUs busy (busy: that measure, else others_busy() takes it), else GOMP_SPINCOUNT =
    SPINCOUNT. Does nothing if the user chose (OMP_WAIT_POLICY or GOMP_SPINCOUNT already set) or once torch
    is loaded: OpenMP has read its settings then, and the environment must keep saying what they are.
    Returns the settings, as KEYS -> value or None."""
    global busy_at_start
    if "torch" not in sys.modules and not {"OMP_WAIT_POLICY", "GOMP_SPINCOUNT"} & environ.keys():
        busy_at_start = others_busy() if busy is None else busy
        if busy_at_start is not None and busy_at_start > BUSY:
            environ["OMP_WAIT_POLICY"] = "PASSIVE"
        else:
            environ["GOMP_SPINCOUNT"] = SPINCOUNT
    return openmp(environ)


def others_busy(seconds=0.1, stat="/proc/stat"):
    """How many of this process's CPUs other programs keep busy: their busy time over `seconds` (this process
    sleeps meanwhile), from the kernel's per-CPU time counters. None where there are none (not Linux)."""
    try:
        mine = {f"cpu{i}" for i in os.sched_getaffinity(0)}
        before = _cpu_times(stat, mine)
        time.sleep(seconds)
        after = _cpu_times(stat, mine)
    except (OSError, AttributeError, ValueError, IndexError):  # no /proc/stat, or no sched_getaffinity
        return None
    busy, total = after[0] - before[0], after[1] - before[1]
    return round(len(mine) * busy / total, 2) if total > 0 else None


def _cpu_times(stat, cpus):
    """Summed (busy, total) clock ticks of those CPUs: /proc/stat's user nice system idle iowait irq softirq
    steal columns, of which idle and iowait are not busy."""
    busy = total = 0
    with open(stat) as f:
        for line in f:
            name, *ticks = line.split()
            if name in cpus:
                t = [int(x) for x in ticks[:8]]
                busy, total = busy + sum(t) - t[3] - t[4], total + sum(t)
    return busy, total


def openmp(environ=os.environ):
    """The OpenMP settings this process runs with (None: the runtime's default)."""
    return {k: environ.get(k) for k in KEYS}
