"""
Hints for exercise N, one more each call, as rustlings keeps its hints behind `rustlings hint`: the first a
nudge, the next more, the last the recipe. The hints shown so far are counted in exercises/.hints.json
(ignored by git), so that a trial can report how many each exercise took.

    python exercises/hint.py 5          # the next hint of exercise 5 (and those before it)
    python exercises/hint.py --count    # the hints asked so far, per exercise
    python exercises/hint.py --reset    # start the count again
"""

import json
import sys
from pathlib import Path

import make

COUNT = Path(__file__).resolve().parent / ".hints.json"


def counts():
    """The hints shown so far, per exercise; a count file that no longer reads (cut by a crash, edited by hand)
    is said so and starts again, rather than stopping the hints."""
    if not COUNT.is_file():
        return {}
    try:
        return {int(n): int(k) for n, k in json.loads(COUNT.read_text()).items()}
    except (ValueError, AttributeError, TypeError) as e:
        print(f"({COUNT} does not read as a hint count ({type(e).__name__}); the count starts again)\n")
        return {}


def main(argv):
    if argv == ["--count"]:
        seen = counts()
        for e in make.EXERCISES:
            print(f"exercise {e.number:2d} {e.name:22s} {seen.get(e.number, 0)} of {len(e.hints)} hints")
        return
    if argv == ["--reset"]:
        COUNT.unlink(missing_ok=True)
        print("the hint count starts again")
        return
    if len(argv) != 1 or not argv[0].isdigit() or int(argv[0]) not in make.BY_NUMBER:
        sys.exit(f"usage: python exercises/hint.py N, N one of 1 to {len(make.EXERCISES)} (or --count, --reset)")
    e, seen = make.BY_NUMBER[int(argv[0])], counts()
    k = min(seen.get(e.number, 0) + 1, len(e.hints))
    seen[e.number] = k
    tmp = COUNT.with_name(COUNT.name + ".tmp")  # written whole, then renamed: a crash leaves the old count
    tmp.write_text(json.dumps({str(n): seen[n] for n in sorted(seen)}) + "\n")
    tmp.replace(COUNT)
    print(f"Exercise {e.number} ({e.name}, {e.equation}): hint {k} of {len(e.hints)}"
          f"{', the recipe' if k == len(e.hints) else ''}\n")
    for i, hint in enumerate(e.hints[:k], 1):
        print(f"{i}. " + hint.replace("\n", "\n   ") + "\n")
    if k < len(e.hints):
        print(f"(python exercises/hint.py {e.number} again for the next one)")


if __name__ == "__main__":
    main(sys.argv[1:])
