"""
Exercise 3 of 11: objective, Eq. 5's F: the label's logit; -L for regression and tokens.

Eq. 5's F: the scalar whose gradient dF/dA_l is the attribution B_l.

logits, labels, regression   one of three kinds of head:
  classification   logits (B, K), labels (B,) the classes c~ to attribute
  regression       regression=True, logits (B, 1), labels (B,) gold scores y
  token task       logits (B, T, K), labels (B, T), IGNORE where a token is not scored
returns          F, a 0-dim tensor

What F is, in the paper's terms:
  classification   F_c~(A), the logit of class c~ before the softmax (Eq. 4-5)
  regression       no class to attribute (Appendix A): F = -L, L the squared error 1/2 (y^ - y)^2
                   (the training loss halved: a factor that changes no ranking of B)
  token task       F = -L, L the pseudo loss of Appendix A Eq. 2 (exercise 10)

One F serves a whole batch, whose examples do not interact: F's gradient with respect to example i's
attention must be example i's own dF/dA, exactly, whatever else the batch holds.

The lessons compare dF/dA with finite differences of the model's logits (to 1e-6), and the regression
case with the gradient of a regression head's loss.

Write the body below. It runs inside addrop.py, so torch, F (torch.nn.functional) and addrop.py's
functions are at hand. Check it alone, with the real code for everything else:

    python -m pytest test_addrop.py --impl exercises/03_objective.py

Stuck? python exercises/hint.py 3 gives a hint, one more each time (3 in all).
"""


def objective(logits, labels, regression):
    raise NotImplementedError(
        "Exercise 3 (Eq. 5's F: the label's logit; -L for regression and tokens): write objective in exercises/03_objective.py\n"
        "  checked by test_addrop.py's lessons 1, 2, 11, 12, 15 and 16, with the real code for everything else:\n"
        "  python -m pytest test_addrop.py --impl exercises/03_objective.py"
    )
