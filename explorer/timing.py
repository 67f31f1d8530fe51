"""
How fast the explorer answers, as figures (not a test): python explorer/timing.py [--reps 5] [--no-browser]

For a 30-token sentence, GA and IGA: a new sentence (the attribution computed) and a p or q move (only the mask
redrawn and the masked forward), first in process (session.explore), then as a student waits for it: in chromium,
from the value typed and committed to the page showing it (the server's work, gradio's round trip and the drawing).
"""

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from support import cpu

cpu.fair_share()
import torch  # noqa: E402  (after fair_share, which must come before torch loads OpenMP)

from explorer import session  # noqa: E402

WORDS = [  # one token each, so that the page shows each word as typed
    "sweet", "dull", "clever", "boring", "warm", "cold", "bright", "slow", "funny", "grim"]


def sentence(k):
    """A 30-token sentence (with [CLS] and [SEP]); k picks its adjective, so that each k is a new sentence."""
    return (f"the story is {WORDS[k % len(WORDS)]} and often affecting , though the second half drags a little "
            "and the ending feels rushed to most of us , sadly .")


def figures(xs):
    return f"{statistics.median(xs):.3f} / {max(xs):.3f} s"


def in_process(m, reps):
    print(f"in process (session.explore), median / max of {reps}:")
    for method in ("ga", "iga"):
        new, move = [], []
        for k in range(reps):
            m.cache.clear()
            t = time.perf_counter()
            session.explore(m, sentence(k), "", method, False, 0, 5, 0, 0.6, 0.8, 0)
            new.append(time.perf_counter() - t)
            for p, q in ((0.3, 0.8), (0.3, 0.5)):
                t = time.perf_counter()
                session.explore(m, sentence(k), "", method, False, 0, 5, 0, p, q, 0)
                move.append(time.perf_counter() - t)
        print(f"  {method:4s} new sentence {figures(new)}   p or q move {figures(move)}")


# Timed inside the page (performance.now()), so that playwright's own round trips do not count: a change is made
# as the browser makes it when a student drags a slider or presses Enter, then the page is polled every 2 ms.
MOVE = """async ([sel, value, want]) => {
  const box = document.querySelector(sel), t0 = performance.now();
  box.value = value;
  box.dispatchEvent(new Event('input', {bubbles: true}));
  const shown = () => (document.querySelector('#stamp') || {}).textContent?.includes(want);
  while (!shown()) await new Promise(r => setTimeout(r, 2));
  return (performance.now() - t0) / 1000;
}"""
TYPE = """async ([text, word]) => {
  const box = document.querySelector('#text-a textarea'), t0 = performance.now();
  box.value = text;
  box.dispatchEvent(new Event('input', {bubbles: true}));
  box.dispatchEvent(new KeyboardEvent('keypress', {key: 'Enter', code: 'Enter', keyCode: 13, bubbles: true}));
  const shown = () => document.querySelector('#maps').textContent.includes(word)
    && !document.querySelector('#message').textContent.includes('Computing');
  while (!shown()) await new Promise(r => setTimeout(r, 2));
  return (performance.now() - t0) / 1000;
}"""


def in_browser(reps):
    from explorer import browser
    print(f"in chromium (a slider moved or Enter pressed -> the page shows the answer), median / max of {reps}:")
    with browser.serve() as (url, _), browser.page(url) as (page, _):
        for name, label in (("ga", "GA: gradient, Eq. 5"), ("iga", "IGA: integrated gradients, Eq. 3")):
            page.get_by_label(label).check()
            new, move = [], []
            for k in range(reps):
                k2 = k + (5 if name == "iga" else 0)  # a sentence not seen before, told apart by its adjective
                new.append(page.evaluate(TYPE, [sentence(k2), WORDS[k2 % len(WORDS)]]))
                for sel, value in (("#p", 0.3), ("#q", 0.5), ("#p", 0.6), ("#q", 0.8)):
                    want = f"{sel[1]} = {value:.2f}"
                    move.append(page.evaluate(MOVE, [f"{sel} input[type=range]", str(value), want]))
            print(f"  {name:4s} new sentence {figures(new)}   p or q move {figures(move)}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--no-browser", action="store_true")
    args = ap.parse_args()
    m = session.load("")
    n = len(m.tok.encode(sentence(0)).ids)
    print(f"{os.cpu_count()} CPUs, torch {torch.__version__} ({torch.get_num_threads()} threads), load "
          f"{os.getloadavg()[0]:.2f}; model {m.name}; a sentence of {n} tokens")
    in_process(m, args.reps)
    if not args.no_browser:
        in_browser(args.reps)


if __name__ == "__main__":
    main()
