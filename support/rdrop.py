"""
R-Drop (Liang et al., NeurIPS 2021), the regularizer the paper's Table 1 compares with AD-DROP, and
studies/compare.py here (train.py --rdrop ALPHA): each batch forwards twice, each copy with its own dropout,
and the loss adds alpha times the disagreement of the two predictions. Not part of AD-DROP: kept out of
train.py's loop, which calls twice() for the forward and loss_sum() for the loss.
"""

import torch

from addrop import IGNORE  # -100, the label of a sub-token no loss scores


def twice(ids, pad, types, masks):
    """The model's inputs with the batch stacked on itself, (2B, T), the masks too (None stays None)."""
    ids, pad, types = torch.cat([ids, ids]), torch.cat([pad, pad]), torch.cat([types, types])
    return ids, pad, types, None if masks is None else [None if M is None else torch.cat([M, M]) for M in masks]


def loss_sum(logits, y, regression, alpha, single, real=None):
    """logits of two forwards of the same examples, stacked (2B, ...); single(logits, y, regression, real) the
    task's loss summed over units (train.loss_sum), real (B,) the rows that count (None: all). The mean of the
    two copies' losses plus alpha times the symmetric KL divergence between their predicted distributions,
    1/2 (KL(P1||P2) + KL(P2||P1)) per unit (for regression, the squared difference of the two scores), summed
    over units."""
    a, b = logits.float().chunk(2)
    loss = (single(a, y, regression, real) + single(b, y, regression, real)) / 2
    if regression:
        gap = (a - b).squeeze(-1) ** 2
    else:
        la, lb = a.log_softmax(-1), b.log_softmax(-1)
        gap = 0.5 * ((la.exp() * (la - lb)).sum(-1) + (lb.exp() * (lb - la)).sum(-1))  # (B,) or (B, T)
    if gap.dim() == 2:  # a token task: the tokens no loss reads add nothing (a mask, not an index: no sync)
        gap = gap.masked_fill(y == IGNORE, 0)
    elif real is not None:
        gap = gap * real
    return loss + alpha * gap.sum()
