"""
Exercise 10 of 11: pseudo_loss, Appendix A Eq. 2, the pseudo loss of token tasks.

Appendix A, Eq. 2: the pseudo loss of a token task. With token i's pseudo label c~_i written as a
one-hot vector y_i of the K classes,

    L = sum_i L_i = -sum_i sum_c y_{i,c} log P_F(c | x, i)

P_F(c | x, i) the softmax output of class c for token i; i runs over the scored tokens of the whole
batch.

logits   (B, T, K) each token's logits
labels   (B, T) each token's pseudo label c~_i; IGNORE (-100) marks a token that is not scored (a word
         continuation, a special token, padding): it has no label and is no term of L
returns  L, a 0-dim tensor

The lessons check L's gradient against Appendix A's Eq. 3 token by token, and that IGNORE tokens
move nothing.

Write the body below. It runs inside addrop.py, so torch, F (torch.nn.functional) and addrop.py's
functions are at hand. Check it alone, with the real code for everything else:

    python -m pytest test_addrop.py --impl exercises/10_pseudo_loss.py

Stuck? python exercises/hint.py 10 gives a hint, one more each time (3 in all).
"""


def pseudo_loss(logits, labels):
    raise NotImplementedError(
        "Exercise 10 (Appendix A Eq. 2, the pseudo loss of token tasks): write pseudo_loss in exercises/10_pseudo_loss.py\n"
        "  checked by test_addrop.py's lessons 15, 16 and 17, with the real code for everything else:\n"
        "  python -m pytest test_addrop.py --impl exercises/10_pseudo_loss.py"
    )
