"""
Exercise 6 of 11: _real_rows, Eq. 6-7's edge cases: real pairs only, never a whole row.

What both masks (drop_mask, with exercise 5's threshold, and exercise 9's) do last: keep their drops to where dropping is allowed and safe.

drop             (B, H, T, T) bool, True where a position would be dropped (you may change it in place)
attention_mask   (B, T) 1 on real tokens, 0 on padding
returns          the mask, (B, H, T, T) bool: drop, changed only where these require it:

- only (real query, real key) pairs are ever dropped: a padding key has no attention to lose, and a
  padding query's output reaches no real token, so a drop there would drop nothing;
- no real query may be left with no real key to attend to: Eq. 1 would give it a row of -inf, NaN
  after the softmax. Such a query's attention comes out as the unmasked model's.

The lessons check both on rows worked by hand and on whole masks.

Write the body below. It runs inside addrop.py, so torch, F (torch.nn.functional) and addrop.py's
functions are at hand. Check it alone, with the real code for everything else:

    python -m pytest test_addrop.py --impl exercises/06_real_rows.py

Stuck? python exercises/hint.py 6 gives a hint, one more each time (3 in all).
"""


def _real_rows(drop, attention_mask):
    raise NotImplementedError(
        "Exercise 6 (Eq. 6-7's edge cases: real pairs only, never a whole row): write _real_rows in exercises/06_real_rows.py\n"
        "  checked by test_addrop.py's lessons 6, 7, 7b, 9, 13 and 17, with the real code for everything else:\n"
        "  python -m pytest test_addrop.py --impl exercises/06_real_rows.py"
    )
