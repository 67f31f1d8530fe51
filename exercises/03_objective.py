"""
Exercise 3 of 11: objective, Eq. 5's F: the label's logit; -L for regression and tokens.

Eq. 5's F, the scalar whose gradient dF/dA_l is the attribution B_l.

logits, labels   one of three kinds:
  classification   logits (B, K), labels (B,) classes:  F = sum_i F_c~i(x_i), the logit of each
                   example's label, summed over the batch
  regression       regression=True, logits (B, 1), labels (B,) gold scores y_i:  F = -L,
                   L = 1/2 sum_i (y^_i - y_i)^2, y^_i the predicted scores
  token task       logits (B, T, K), labels (B, T), IGNORE where a token is not scored:  F = -L,
                   L the pseudo loss of Appendix A Eq. 2 (exercise 10): the cross-entropy of each
                   scored token with its label, summed
returns          F, a 0-dim tensor

The lessons compare dF/dA with finite differences of the model's logits (to 1e-6) and with the
loss of a regression head.

Write the body below. It runs inside addrop.py, so torch, F (torch.nn.functional) and addrop.py's
functions are at hand. Check it alone, with the real code for everything else:

    python -m pytest exercises/test_addrop.py --impl exercises/03_objective.py

Stuck? python exercises/hint.py 3 gives a hint, one more each time (3 in all).
"""


def objective(logits, labels, regression):
    raise NotImplementedError(
        "Exercise 3 (Eq. 5's F: the label's logit; -L for regression and tokens): write objective in exercises/03_objective.py\n"
        "  checked by test_addrop.py's lessons 1, 2, 11, 12, 15 and 16, with the real code for everything else:\n"
        "  python -m pytest exercises/test_addrop.py --impl exercises/03_objective.py"
    )
