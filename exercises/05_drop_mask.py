"""
Exercise 5 of 11: drop_mask, Eq. 6-7, the mask.

Step 3 of AD-DROP, for one layer: the mask M_l of Eq. 6-7.

scores           (B, H, T, T) the attribution B_l
attention_mask   (B, T) 1 on real tokens, 0 on padding
p, q             Eq. 6's candidate fraction and Eq. 7's drop rate
low              True: the mirror strategy of Section 2.2, the LOWEST scores are the candidates, as many
                 as the highest would be
generator        the random stream of Eq. 7's coin flips (None: torch's default)
returns          M (B, H, T, T) bool, True where M_l = -inf: the position is dropped

Eq. 6 reads each row (example, head, query) over its real keys: n the example's real length, b^ the
row's n real scores in ascending order, a key is a candidate when it scores at least b^[int(n (1 - p))].
Eq. 7: each candidate is dropped with probability q. M also keeps exercise 6's rules.

Conventions the lessons compare against: int(n (1 - p)) is the integer that exact arithmetic gives, for
every n and every p given to 6 decimals; keys that tie b^[int(n (1 - p))] are all candidates (with low
too, whose cut is the highest score among the low candidates: every key that ties it is one).

Eq. 7's coin flips are yours to draw: one independent coin per position, from `generator` when one is
given (generators seeded alike give the same mask, whatever torch's default stream holds).

On a GPU and under torch.compile, code may read no number back to the CPU (no .item(), no int(tensor):
model.sync_free(device) is True there). A mask written with a second path for that case must take the same
decisions on both: the lessons run both.

The lessons check Eq. 6-7 on rows worked by hand, p and q at 0 and at 1, every row of a batch against
Eq. 6 taken literally on both paths, the rate of drops, that no two positions share a coin, and where
the coins come from.

Write the body below. It runs inside addrop.py, so torch, F (torch.nn.functional) and addrop.py's
functions are at hand. Check it alone, with the real code for everything else:

    python -m pytest test_addrop.py --impl exercises/05_drop_mask.py

Stuck? python exercises/hint.py 5 gives a hint, one more each time (3 in all).
"""


def drop_mask(scores, attention_mask, p, q, low=False, generator=None):
    raise NotImplementedError(
        "Exercise 5 (Eq. 6-7, the mask): write drop_mask in exercises/05_drop_mask.py\n"
        "  checked by test_addrop.py's lessons 6, 6b, 7, 7b, 8, 8b and 9, with the real code for everything else:\n"
        "  python -m pytest test_addrop.py --impl exercises/05_drop_mask.py"
    )
