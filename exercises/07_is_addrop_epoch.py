"""
Exercise 7 of 11: is_addrop_epoch, Algorithm 1, cross-tuning.

Algorithm 1, cross-tuning (Section 2.4): whether training epoch `epoch` runs AD-DROP (Algorithm 1's
lines 7-9) rather than the original fine-tuning (lines 3-5), a bool. Epochs count as Algorithm 1's do.

cross_tuning   True: Algorithm 1's schedule. False: Table 2's ablation "w/o cross-tuning" (Section 3.4).

The lessons check the first epochs of both schedules, and the epochs in which train.py's loop then
runs AD-DROP steps (train.py --no-cross-tuning for the ablation).

Write the body below. It runs inside addrop.py, so torch, F (torch.nn.functional) and addrop.py's
functions are at hand. Check it alone, with the real code for everything else:

    python -m pytest test_addrop.py --impl exercises/07_is_addrop_epoch.py

Stuck? python exercises/hint.py 7 gives a hint, one more each time (3 in all).
"""


def is_addrop_epoch(epoch, cross_tuning=True):
    raise NotImplementedError(
        "Exercise 7 (Algorithm 1, cross-tuning): write is_addrop_epoch in exercises/07_is_addrop_epoch.py\n"
        "  checked by test_addrop.py's lessons 10 and 10b, with the real code for everything else:\n"
        "  python -m pytest test_addrop.py --impl exercises/07_is_addrop_epoch.py"
    )
