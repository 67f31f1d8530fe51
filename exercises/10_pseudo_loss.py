"""
Exercise 10 of 11: pseudo_loss, Appendix A Eq. 2, the pseudo loss of token tasks.

Appendix A, Eq. 2: the pseudo loss of a token task,

    L = -sum_i log P(c~_i | x, i)

over the scored tokens i of the whole batch, P(. | x, i) the softmax of token i's logits.

logits   (B, T, K) each token's logits
labels   (B, T) each token's label c~_i, IGNORE (-100) where a token is not scored (word
         continuations, special tokens, padding): those are not in the sum
returns  L, a 0-dim tensor

The lessons check its gradient against Eq. 3 summed token by token, and that IGNORE tokens move
nothing.

Write the body below. It runs inside addrop.py, so torch, F (torch.nn.functional) and addrop.py's
functions are at hand. Check it alone, with the real code for everything else:

    python -m pytest exercises/test_addrop.py --impl exercises/10_pseudo_loss.py

Stuck? python exercises/hint.py 10 gives a hint, one more each time (3 in all).
"""


def pseudo_loss(logits, labels):
    raise NotImplementedError(
        "Exercise 10 (Appendix A Eq. 2, the pseudo loss of token tasks): write pseudo_loss in exercises/10_pseudo_loss.py\n"
        "  checked by test_addrop.py's lessons 15, 16 and 17, with the real code for everything else:\n"
        "  python -m pytest exercises/test_addrop.py --impl exercises/10_pseudo_loss.py"
    )
