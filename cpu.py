"""
How a run shares the CPU with other programs: call cpu.fair_share() before the first `import torch`.

torch's CPU wheel parallelises with GNU OpenMP (libgomp). Between two parallel ops its worker threads
spin, by default for about 300,000 turns (a few milliseconds), before they sleep. On an idle machine that
saves a wake-up per op; on a machine whose cores are busy with a browser or a second run, the spinning
threads fight those programs for the cores, and a step cost 10x its idle time with three busy programs on
two cores (a fair share is about 2.5x). Waiting passively (OMP_WAIT_POLICY=PASSIVE) takes the fair share
but costs ~15% of an idle step, in wake-ups. A short spin is cheap on both: a thread that gets its next op
within SPINCOUNT turns never sleeps, one that does not stops spinning and yields the core.
studies/busy.py measures the options (RESULTS.md, "Sharing the CPU"). OpenMP reads its environment
once, when torch loads it, hence before the import; a user's own OMP_WAIT_POLICY or GOMP_SPINCOUNT wins.
"""

import os
import sys

SPINCOUNT = "3000"  # libgomp's turns of spinning before a waiting thread sleeps (its default: 300,000)
KEYS = ("OMP_NUM_THREADS", "OMP_WAIT_POLICY", "GOMP_SPINCOUNT")  # what metrics.json records


def fair_share(environ=os.environ):
    """Set GOMP_SPINCOUNT to SPINCOUNT unless the user chose OpenMP's way of waiting (OMP_WAIT_POLICY or
    GOMP_SPINCOUNT already set). Changes nothing once torch is loaded: OpenMP has read its settings then, and
    the environment must keep saying what they are. Returns them, as KEYS -> value or None."""
    if "torch" not in sys.modules and "OMP_WAIT_POLICY" not in environ:  # libgomp's GOMP_SPINCOUNT would overrule the user's policy
        environ.setdefault("GOMP_SPINCOUNT", SPINCOUNT)
    return openmp(environ)


def openmp(environ=os.environ):
    """The OpenMP settings this process runs with (None: the runtime's default)."""
    return {k: environ.get(k) for k in KEYS}
