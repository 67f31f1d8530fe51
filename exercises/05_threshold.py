"""
Exercise 5 of 11: threshold, Eq. 6, the threshold of each row.

Step 3 of AD-DROP, Eq. 6: the threshold of each row of scores, the cut at and above which a row's keys are
candidates. drop_mask calls it for a layer's mask, then draws Eq. 7's coins (each candidate dropped with
probability q) and keeps exercise 6's rules; a new mask may call it too.

scores   (..., T) rows of scores (a layer's attribution B_l is (B, H, T, T): a row per example, head and
         query)
real     bool, broadcastable to scores ((B, 1, 1, T) for a layer): True at a row's real keys, False at
         padding, which is neither counted in n nor ever a candidate
p        Eq. 6's candidate fraction, 0 <= p <= 1
returns  (..., 1) the threshold of each row: b^[int(n (1 - p))], b^ the row's n real scores in ascending
         order, counted from 0; +inf where the index is n, past the end (p = 0: no candidate)

Conventions the lessons compare against: int(n (1 - p)) is the integer that exact arithmetic gives, for
every n and every p given to 6 decimals (in floating point 10 * (1 - 0.9) is 0.99999..., whose int() is 0).
drop_mask makes every key at or above your threshold a candidate: keys that tie it are all candidates.

On a GPU and under torch.compile, code may read no number back to the CPU (no .item(), no int(tensor)).
A threshold written with a second path for that case must take the same decisions on both: the lessons run
both, forcing model.py's choice of path each way.

The lessons check it through drop_mask: rows worked by hand, p at 0 and at 1, long rows, every row of a
batch against Eq. 6 taken literally on both paths, the count of candidates, and the masked forward.

Write the body below. It runs inside addrop.py, so torch, F (torch.nn.functional) and addrop.py's
functions are at hand. Check it alone, with the real code for everything else:

    python -m pytest test_addrop.py --impl exercises/05_threshold.py

Stuck? python exercises/hint.py 5 gives a hint, one more each time (3 in all).
"""


def threshold(scores, real, p):
    raise NotImplementedError(
        "Exercise 5 (Eq. 6, the threshold of each row): write threshold in exercises/05_threshold.py\n"
        "  checked by test_addrop.py's lessons 6, 6b, 7, 7b, 8 and 9, with the real code for everything else:\n"
        "  python -m pytest test_addrop.py --impl exercises/05_threshold.py"
    )
