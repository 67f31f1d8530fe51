"""
Exercise 9 of 11: random_mask, Table 2's RD, the random baseline.

RD, Table 2's random baseline: Eq. 6's candidate region randomly generated instead of read from an
attribution (Section 3.4), each real position a candidate with probability p, independently of the
others; then Eq. 7: each candidate dropped with probability q. (The paper says only "randomly generating the discard
region"; this reading is the authors' code's.)

scores           (B, H, T, T), read for their shape only: RD has no attribution (addrop.py hands on equal
                 scores of a map's shape, so that every mask takes the same arguments)
attention_mask   (B, T) 1 on real tokens, 0 on padding
p, q             Eq. 6's candidate fraction and Eq. 7's drop rate
generator        the random stream (None: torch's default)
returns          M (B, H, T, T) bool, True where dropped, keeping exercise 6's rules

The coins are yours to draw: one independent coin per position, from `generator` when one is given
(generators seeded alike give the same mask, whatever torch's default stream holds).

The lessons check the rate of drops, that no example, head, query or key shares its coins with a
neighbour, where the coins come from, that the scores' values change nothing, and the edge cases.

Write the body below. It runs inside addrop.py, so torch, F (torch.nn.functional) and addrop.py's
functions are at hand. Check it alone, with the real code for everything else:

    python -m pytest test_addrop.py --impl exercises/09_random_mask.py

Stuck? python exercises/hint.py 9 gives a hint, one more each time (3 in all).
"""


def random_mask(scores, attention_mask, p, q, generator=None):
    raise NotImplementedError(
        "Exercise 9 (Table 2's RD, the random baseline): write random_mask in exercises/09_random_mask.py\n"
        "  checked by test_addrop.py's lessons 13, 13b and 17, with the real code for everything else:\n"
        "  python -m pytest test_addrop.py --impl exercises/09_random_mask.py"
    )
