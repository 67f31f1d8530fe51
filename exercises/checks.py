"""
The lessons' checks (test_model.py, test_addrop.py), said in words. A check that fails raises
Wrong, an AssertionError whose message says what was measured and what was expected and, where
numbers are compared, by how much they differ, as CS231n checks each piece of an assignment, with

    relative error = max |actual - expected| / max |expected|

(CS231n's is entry by entry, |x - y| / max(1e-8, |x| + |y|)), and the pattern the numbers show, as
measured, not as a fix: every sign opposite, every entry the same factor off (a mean for a sum shows as
1/N), the sizes in another order (a transpose), integers off by one. (torch.testing.assert_close's
message speaks of indices and dtypes instead.) Under --impl it is printed alone, after its exercise.
"""

import math

import torch


class Wrong(AssertionError):
    """A lesson's check that failed; the message says what, in words."""


def true(condition, message):
    """A property that must hold; message says what was seen instead and what was expected."""
    if not condition:
        raise Wrong(message)


def _differences(actual, expected, what):
    """max |actual - expected|, its size relative to max |expected|, and the two as float64 tensors."""
    a = torch.as_tensor(actual).detach().double()
    e = torch.as_tensor(expected).detach().double()
    if a.shape != e.shape:
        turned = "; the same sizes in another order" if sorted(a.shape) == sorted(e.shape) else ""
        raise Wrong(f"{what}: shape {tuple(a.shape)}, expected {tuple(e.shape)}{turned}")
    if a.numel() == 0:
        return 0.0, 0.0, a, e
    if not torch.isfinite(a).all() and torch.isfinite(e).all():
        raise Wrong(f"{what}: {int((~torch.isfinite(a)).sum())} of {a.numel()} values are NaN or infinite, "
                    "expected none")
    diff = (a - e).abs().nan_to_num(0.0).max().item()  # where both are the same infinity: no difference
    size = e.abs().nan_to_num(0.0, posinf=0.0).max().item()
    return diff, diff / size if size > 0 else (0.0 if diff == 0 else math.inf), a, e


def _slip(a, e):
    """The pattern that actual a and expected e (float64, one shape, not equal) show, in words, or '':
    what was measured (a sign, a factor, an off-by-one), for the student to trace to its cause."""
    if not (torch.isfinite(a).all() and torch.isfinite(e).all()) or e.abs().max() == 0:
        return ""
    if torch.equal(a, a.round()) and torch.equal(e, e.round()) and e.abs().max() > 1 and (a - e).abs().max() == 1:
        return "; integers off by exactly one"
    c = ((a * e).sum() / (e * e).sum()).item()  # the factor that best maps expected onto actual
    if (a - c * e).abs().max() > 1e-3 * e.abs().max() or abs(c) < 1e-6:
        return ""  # actual is no multiple of expected
    n = round(1 / c if abs(c) < 1 else c)
    near = abs(c * n - 1 if abs(c) < 1 else c / n - 1) < 1e-3
    return ("; actual = -expected: every entry has the opposite sign" if abs(c + 1) < 1e-3 else
            "" if abs(n) < 2 or not near else
            f"; actual = expected / {n}: every entry 1/{n} of what is expected" if abs(c) < 1 else
            f"; actual = {n} x expected: every entry {n} times what is expected")


def close(actual, expected, what, atol=None, rtol=None):
    """actual agrees with expected (numbers or tensors of one shape): the largest difference is at most
    atol, or the relative error at most rtol (give either)."""
    diff, rel, a, e = _differences(actual, expected, what)
    if (atol is not None and diff <= atol) or (rtol is not None and rel <= rtol):
        return
    limit = f"a difference below {atol:.0e}" if atol is not None else f"a relative error below {rtol:.0e}"
    if min(t for t in (atol, rtol) if t is not None) < 1e-8 and 1e-9 < rel < 1e-5:
        limit += " (the lessons compute in float64 here: float32 arithmetic leaves a relative error near 1e-7)"
    raise Wrong(f"{what}: max |difference| {diff:.1e}, relative error {rel:.1e}; expected {limit}{_slip(a, e)}")


def same(actual, expected, what):
    """actual equals expected exactly, entry for entry (bit for bit)."""
    diff, rel, a, e = _differences(actual, expected, what)
    unequal = int((a != e).sum())
    if unequal:
        bad = int((~torch.isfinite(a) & torch.isfinite(e)).sum())
        raise Wrong(f"{what}: {unequal} of {a.numel()} entries differ (" + (
            f"{bad} of them NaN or infinite where a finite number is expected; " if bad else "") +
            f"max |difference| {diff:.1e}, relative error {rel:.1e}); expected the same, bit for bit{_slip(a, e)}")

