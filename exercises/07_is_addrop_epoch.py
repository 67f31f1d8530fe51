"""
Exercise 7 of 11: is_addrop_epoch, Algorithm 1, cross-tuning.

Algorithm 1, cross-tuning: whether epoch `epoch` (counted from 1) runs AD-DROP, a bool.

cross_tuning   True: plain fine-tuning and AD-DROP take turns, epoch by epoch, and training starts
               plain; False (Table 2's ablation): no epoch is plain.

The lessons check the first epochs of both schedules.

Write the body below. It runs inside addrop.py, so torch, F (torch.nn.functional) and addrop.py's
functions are at hand. Check it alone, with the real code for everything else:

    python -m pytest exercises/test_addrop.py --impl exercises/07_is_addrop_epoch.py

Stuck? python exercises/hint.py 7 gives a hint, one more each time (3 in all).
"""


def is_addrop_epoch(epoch, cross_tuning=True):
    raise NotImplementedError(
        "Exercise 7 (Algorithm 1, cross-tuning): write is_addrop_epoch in exercises/07_is_addrop_epoch.py\n"
        "  checked by test_addrop.py's lesson 10, with the real code for everything else:\n"
        "  python -m pytest exercises/test_addrop.py --impl exercises/07_is_addrop_epoch.py"
    )
