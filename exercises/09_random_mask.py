"""
Exercise 9 of 11: random_mask, Table 2's RD, the random baseline.

RD, Table 2's random baseline: a mask of exercise 5's kind without the attribution: its candidates a
random p-fraction of each row, each dropped with probability q; no first pass.

attention_mask   (B, T) 1 on real tokens, 0 on padding
H                the number of heads
generator        the random stream (None: torch's default)
returns          M (B, H, T, T) bool, True where dropped, with exercise 5's edge cases: real pairs
                 only, and a row that would lose every real key keeps them all

What must hold: every real (query, key) position of every head is dropped independently, all with the
same probability (which one, in p and q?). The coin flips are one field over the whole mask, drawn from
`generator` as exercise 5 draws its own. The lessons check the rate, that the heads differ, the edge
cases, and that for the same seed your mask is the real one's.

Write the body below. It runs inside addrop.py, so torch, F (torch.nn.functional) and addrop.py's
functions are at hand. Check it alone, with the real code for everything else:

    python -m pytest exercises/test_addrop.py --impl exercises/09_random_mask.py

Stuck? python exercises/hint.py 9 gives a hint, one more each time (3 in all).
"""


def random_mask(attention_mask, H, p, q, generator=None):
    raise NotImplementedError(
        "Exercise 9 (Table 2's RD, the random baseline): write random_mask in exercises/09_random_mask.py\n"
        "  checked by test_addrop.py's lessons 13, 13b and 17, with the real code for everything else:\n"
        "  python -m pytest exercises/test_addrop.py --impl exercises/09_random_mask.py"
    )
