"""
The exercises are honest: each exercise file, exercises/NN_name.py, shows its function's contract and no line
of its answer, and names no function that the answer calls; its hints come one at a time; each exercise is
checked alone, by the command its blank body prints, with the real code for everything else; that command
tells a wrong answer from a right one, in words; and the lessons each exercise names are those its markers say.
The wrong answers below, held back from the student, are common mistakes, each a small change to the text of
its exercise's real body.
"""

import ast
import contextlib
import inspect
import io
import json
import multiprocessing
import os
import re
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "exercises"))
import checks  # noqa: E402
import hint  # noqa: E402
import impl  # noqa: E402

make = impl.make  # exercises/make.py

# (exercise, the mistake, text of the real body, what the student wrote instead)
WRONG = [
    (1, "no 1/sqrt(D)", "s = 1 / math.sqrt(D)", "s = 1"),
    (1, "M_l ignored", 'bias = pad if M is None else pad.masked_fill(M, float("-inf"))', "bias = pad"),
    (1, "the softmax over the queries", "+ bias, dim=-1), v", "+ bias, dim=-2), v"),
    (1, "no padding mask", 'bias = pad if M is None else pad.masked_fill(M, float("-inf"))',
     'bias = 0 if M is None else torch.zeros_like(pad).masked_fill(M, float("-inf"))'),
    (1, "heads on interleaved channels", ".view(B, T, H, D).transpose(1, 2)  # (B, H, T, D)\n    k = layer.k(x).view(B, T, H, D).transpose(1, 2)",
     ".view(B, T, D, H).permute(0, 3, 1, 2)\n    k = layer.k(x).view(B, T, D, H).permute(0, 3, 1, 2)"),
    (1, "heads by a straight reshape", ".view(B, T, H, D).transpose(1, 2)  # (B, H, T, D)\n    k = layer.k(x).view(B, T, H, D).transpose(1, 2)",
     ".reshape(B, H, T, D)\n    k = layer.k(x).reshape(B, H, T, D)"),
    (1, "M times -inf", 'bias = pad if M is None else pad.masked_fill(M, float("-inf"))',
     'bias = pad if M is None else pad + M * float("-inf")'),
    (1, "M transposed", 'pad.masked_fill(M, float("-inf"))', 'pad.masked_fill(M.transpose(-2, -1), float("-inf"))'),
    (1, "v in tokens first", "v = layer.v(x).view(B, T, H, D).transpose(1, 2)", "v = layer.v(x).view(B, T, H, D)"),
    (10, "log-softmax over the tokens", 'return F.cross_entropy(logits.flatten(0, 1), labels.flatten(), '
     'ignore_index=IGNORE, reduction="sum")',
     "k = labels != IGNORE\n    return -logits.log_softmax(1)[k].gather(1, labels[k][:, None]).sum()"),
    (2, "the labels given ignored", "if labels is None:", "if True:"),
    (2, "dropped_A not passed on", ", dropped_A=dropped_A,", ","),
    (2, "probes not passed on", "dropped_A=dropped_A,\n                          probes=probes)", "dropped_A=dropped_A)"),
    (2, "IGNORE not kept in a token task's pseudo labels", "labels = pseudo_labels(logits, batch)",
     "labels = logits.argmax(-1)"),
    (2, "the least likely class", "labels = pseudo_labels(logits, batch)", "labels = logits.argmin(-1)"),
    (2, "example 0's pseudo label for all", "labels = pseudo_labels(logits, batch)",
     "labels = logits[:1].argmax(-1).expand(logits.size(0))"),
    (2, "the gold labels by default", "labels = pseudo_labels(logits, batch)", 'labels = batch["labels"]'),
    (2, "the pseudo labels over the batch", "labels = pseudo_labels(logits, batch)", "labels = logits.argmax(0)"),
    (2, "the forward under no_grad", "    logits, attns = model(", "    with torch.no_grad():\n        logits, attns = model("),
    (3, "a mean for the sum", "labels[:, None]).sum()", "labels[:, None]).mean()"),
    (3, "the log-probability for the logit", "return logits.gather(1, labels[:, None]).sum()",
     "return logits.log_softmax(-1).gather(1, labels[:, None]).sum()"),
    (3, "regression without the 1/2", "-0.5 * ((", "-(("),
    (3, "regression logits (B, 1) against labels (B,)", "logits.squeeze(-1) - labels", "logits - labels"),
    (4, "the model not handed back in its mode", "model.train(was_training)", "pass"),
    (4, "AA runs every layer", "depth=max(layers) + 1", "depth=None"),
    (4, "gradients not turned on", "with torch.enable_grad(), _frozen(model):", "with _frozen(model):"),
    (4, "IGA accepted with the authors' first pass", 'if theirs and method == "iga":', "if False:"),
    (4, "one backward per layer", "grads = torch.autograd.grad(objective(logits, labels, regression), "
     "[probes[l] for l in layers])", "F_c = objective(logits, labels, regression); grads = "
     "[torch.autograd.grad(F_c, probes[l], retain_graph=True)[0] for l in layers]"),
    (5, "a float for the integer index", "n * keep // 10**6", "(n.double() * (1 - p)).long()"),
    (5, "above the threshold, not at or above", "drop = scores >= thr", "drop = scores > thr"),
    (5, "q as the probability to keep", "bernoulli((B, H, T, T), q,", "bernoulli((B, H, T, T), 1 - q,"),
    (5, "the generator ignored", "q, generator, scores.device)", "q, None, scores.device)"),
    (5, "one coin per row", "bernoulli((B, H, T, T), q, generator, scores.device)",
     "bernoulli((B, H, T, 1), q, generator, scores.device)"),
    (5, "one coin per key, shared by the heads", "bernoulli((B, H, T, T), q, generator, scores.device)",
     "bernoulli((B, 1, T, T), q, generator, scores.device)"),
    (6, "no guard", "drop.view(torch.uint8).mul_(1 - lost)", "drop"),
    (6, "the guard clears the whole head", "amin(-1, keepdim=True)", "amin(-1, keepdim=True).amax(-2, keepdim=True)"),
    (6, "padding queries masked", "real[:, None, :, None] & real[:, None, None, :]", "real[:, None, None, :]"),
    (7, "the parity flipped", "epoch % 2 == 0", "epoch % 2 == 1"),
    (8, "A_l not multiplied in", "scores[l] = attns[l] * total / m", "scores[l] = total / m"),
    (8, "pseudo labels taken anew at each step", "F_k = objective(model.head(h), labels.repeat(",
     "F_k = objective(model.head(h), model.head(h).argmax(-1) if labels.dim() == 1 and not regression else labels.repeat("),
    (8, "a left Riemann sum", "torch.arange(1, m + 1,", "torch.arange(0, m,"),
    (8, "the sum not divided by m", "scores[l] = attns[l] * total / m", "scores[l] = attns[l] * total"),
    (8, "the chain rule's k/m", "total += g.view(k, B, H, T, T).sum(0)",
     "total += (g.view(k, B, H, T, T) * a.view(k, 1, 1, 1, 1)).sum(0)"),
    (9, "p alone for p q", "(B, H, T, T), p * q,", "(B, H, T, T), p,"),
    (9, "a fixed count of candidates a row", "bernoulli((B, H, T, T), p * q, generator, attention_mask.device)",
     "(drop_mask(torch.rand((B, H, T, T), generator=generator, device=attention_mask.device), attention_mask, p, "
     "1.0, generator=generator) & bernoulli((B, H, T, T), q, generator, attention_mask.device))"),
    (9, "real pairs only, no guard", "return _real_rows(bernoulli((B, H, T, T), p * q, generator, attention_mask.device), attention_mask)",
     "real = attention_mask.bool()\n    return bernoulli((B, H, T, T), p * q, generator, attention_mask.device) & "
     "real[:, None, :, None] & real[:, None, None, :]"),
    (5, "low takes int(n p) candidates", "idx = n * keep // 10**6",
     "idx = n - n * round(p * 10**6) // 10**6 if low else n * keep // 10**6"),
    (5, "n (1 - p) rounded", "idx = n * keep // 10**6", "idx = (n * keep + 5 * 10**5) // 10**6"),
    (5, "padding counted in n", "n = attention_mask.sum(-1)", "n = torch.full_like(attention_mask.sum(-1), T)"),
    (5, "padding sorted with its scores, counted in n",
     'idx = n * keep // 10**6  # int(n (1 - p)) in exact integers, (B,)\n    if sync_free(scores.device):\n'
     '        # Eq. 6 as written: each row sorted ascending, padding last, and its entry idx read\n'
     '        b_hat = scores.masked_fill(~real, float("inf")).sort(-1).values',
     'n = torch.full_like(n, T)\n    idx = n * keep // 10**6\n    if True:\n        b_hat = scores.sort(-1).values'),
    (5, "low takes the keys below the threshold", (chunk := make.real_body(make.BY_NUMBER[5]).split("    if low:")[1]
                                                            .split("  # Eq. 6: s = 0")[0]),
     chunk.replace("\n        scores = -scores", " pass").replace("drop = scores >= thr",
                                                                  "drop = (scores < thr) if low else (scores >= thr)")),
    (9, "the generator ignored", "p * q, generator,", "p * q, None,"),
    (9, "one mask for every head", "attention_mask.device), attention_mask)",
     "attention_mask.device)[:, :1].repeat(1, H, 1, 1), attention_mask)"),
    (10, "a mean for the sum", 'reduction="sum"', 'reduction="mean"'),
    (10, "the raw logits for the log-probabilities", 'return F.cross_entropy(logits.flatten(0, 1), labels.flatten(), '
     'ignore_index=IGNORE, reduction="sum")', "k = labels != IGNORE\n    return -logits[k].gather(1, labels[k][:, None]).sum()"),
    (10, "IGNORE counted as class 0", "labels.flatten(), ignore_index=IGNORE", "labels.clamp(min=0).flatten()"),
    (11, "the masks not given to the second forward", 'batch["token_type_ids"], masks)', 'batch["token_type_ids"], None)'),
    (11, "the mirror strategy dropped", "p, q, low, compile)", "p, q, False, compile)"),
    (11, "gold ignored", 'batch["labels"] if gold else None', "None"),
    (11, "masks handed to forward by keyword", 'batch["token_type_ids"], masks)', 'batch["token_type_ids"], masks=masks)'),
    (11, "masks for the selected layers only", "masks = [None] * model.cfg.num_hidden_layers",
     "masks = [None] * len(layers)"),
    (11, "an attribution for RD too", 'if method == "rd":  # RD: no attribution, a random mask per layer',
     'attribute(model, batch, layers, "ga", first_pass=first_pass)\n    if method == "rd":'),
    (11, "the layers drawn sorted", "for l, M in zip(layers, layer_masks(scores, layers,",
     "layers = sorted(layers)\n        for l, M in zip(layers, layer_masks(scores, layers,"),
    (11, "masks up to the highest selected layer", "masks = [None] * model.cfg.num_hidden_layers",
     "masks = [None] * (max(layers) + 1)"),
    (5, "p to 2 decimals", "keep = round((1 - p) * 10**6)", "keep = round((1 - round(p, 2)) * 10**6)"),
    (11, "regression not handed on", 'batch["labels"] if gold else None, regression, m,',
     'batch["labels"] if gold else None, False, m,'),
    (11, "the loss on the pseudo labels", 'loss(logits, batch["labels"])', "loss(logits, logits.argmax(-1))"),
    (11, "masks of the selected layers only, appended", "            masks[l] = M\n",
     "            masks[l] = M\n        masks = [M for M in masks if M is not None]\n"),
    (11, "the model left in eval mode", "masks = [None] *", "model.eval(); masks = [None] *"),
    (11, "an attribution by backward()", "masks = [None] *",
     'model(batch["input_ids"], batch["attention_mask"], batch["token_type_ids"])[0].sum().backward(); '
     "masks = [None] *"),
    (11, "the layers in reversed order", "\n".join(make.real_body(make.BY_NUMBER[11]).splitlines()[1:-2]),
     "\n".join(make.real_body(make.BY_NUMBER[11]).splitlines()[1:-2]).replace("for l in layers:",
                                                                               "for l in reversed(layers):")
     .replace("zip(layers, layer_masks(scores, layers,", "zip(layers[::-1], layer_masks(scores, layers[::-1],")),
    (11, "compile ignored", "whole_graph(random_mask, compile)(", "random_mask("),
    (11, "compile ignored, masks", 'batch["attention_mask"], p, q, low, compile)', 'batch["attention_mask"], p, q, low)'),
    (11, "steps 1-3 by addrop_masks", "\n".join(make.real_body(make.BY_NUMBER[11]).splitlines()[1:-2]),
     "    masks = addrop_masks(model, batch, layers, p, q, method=method, gold=gold, regression=regression, m=m,"
     " low=low, first_pass=first_pass, compile=compile)"),
    (5, "low without its ties", "drop = scores >= thr",
     "drop = (scores >= thr) & ~(low & (scores == thr) & ((scores == thr).cumsum(-1) > 1))"),
]


# what the failure of a wrong answer must say, beyond its exercise and lesson
SAYS = {(1, "the softmax over the queries"): "the softmax taken over the queries",
        (1, "no padding mask"): "with no padding mask",
        (1, "heads on interleaved channels"): "head h on the channels h, h + H",
        (6, "the guard clears the whole head"): "whole rows with no drop at all, rows that keep some real key",
        (8, "the sum not divided by m"): "A_l times the sum of the m steps' gradients, not divided by m",
        (8, "the chain rule's k/m"): "multiplied by k/m (the derivative of the function A -> F(k/m A)",
        (8, "A_l not multiplied in"): "the mean gradient along the path, not multiplied by A_l",
        (5, "above the threshold, not at or above"): "your drops are those of the threshold read one place higher",
        (5, "q as the probability to keep"): "your drops are those of no drop at all",
        (5, "padding counted in n"): "padding counted in n, sorted below every real key",
        (5, "padding sorted with its scores, counted in n"): "padding counted in n and sorted with its own scores",
        (11, "masks of the selected layers only, appended"): "the model was handed masks list of 2 entries; expected "
                                                             "one entry per layer of the model (3)",
        (10, "IGNORE counted as class 0"): "the loss with each IGNORE token counted as class 0",
        (9, "real pairs only, no guard"): "random_mask(p = 1, q = 1) drops every real key in",
        (5, "n (1 - p) rounded"): "int(n (1 - p)) = int(6.7) = 6, the floor (yours are those of index 7, n (1 - p) "
                                  "rounded)",
        (5, "low without its ties"): "every key tied with the highest of them",
        (5, "low takes the keys below the threshold"): "yours took int(n (1 - p)) = 4, the keys below the high "
                                                       "strategy's threshold",
        (5, "low takes int(n p) candidates"): "the mirror strategy takes as many candidates as the high one",
        (1, "no 1/sqrt(D)"): "scaled by 1 (not scaled); expected them scaled as Eq. 1 scales them, by 1/sqrt(D)",
        (2, "the pseudo labels over the batch"): "returned pseudo labels of shape (3,)",
        (1, "heads by a straight reshape"): "reshaped straight to (B, H, T, D)",
        (1, "M transposed"): "M transposed; expected M[b, h, i, j] to drop query i's key j",
        (2, "dropped_A not passed on"): "returned the maps before attention dropout: the model was not handed dropped_A",
        (11, "an attribution for RD too"): "the step with method='rd' (first_pass='eval') ran the encoder 2 times; "
                                           "expected once",
        (11, "the layers drawn sorted"): "your masks are the real ones drawn in another order of the layers ([0, 2], "
                                         "same seed); expected them drawn in the order `layers` lists them, [2, 0]",
        (11, "masks up to the highest selected layer"): "the model was handed masks list of 1 entries; expected one "
                                                        "entry per layer of the model (3)",
        (5, "p to 2 decimals"): "yours are those of p = 0.12, p rounded to 2 decimals",
        (1, "v in tokens first"): "attention returned v of shape (3, 9, 4, 8); expected (B, H, T, D) = (3, 4, 9, 8)",
        (10, "log-softmax over the tokens"): "the log-probabilities taken over the tokens (log_softmax on axis 1)",
        (2, "the least likely class"): "returned as the labels to attribute the least likely classes (an argmin)",
        (2, "example 0's pseudo label for all"): "returned as the labels to attribute [2, 2, 2, 2], where the model "
                                                 "predicts [2, 2, 0, 1]",
        (2, "the gold labels by default"): 'returned as the labels to attribute the gold labels batch["labels"]',
        (2, "the labels given ignored"): "returned as the labels to attribute the model's predictions (Eq. 4); "
                                         "expected the labels given",
        (11, "masks for the selected layers only"): "the lesson stopped on IndexError: list assignment index out of range; "
                                                    "your code's lines on the way:",
        (2, "probes not passed on"): "returned logits that do not depend on the probes of layers [0, 1, 2]",
        (2, "the forward under no_grad"): "the maps your forward returned carry no autograd graph (requires_grad False",
        (5, "the generator ignored"): "torch's default stream seeded 123 and then 456, gave masks that differ",
        (9, "the generator ignored"): "torch's default stream seeded 123 and then 456, gave masks that differ",
        (11, "the layers in reversed order"): "your masks are the real ones drawn in another order of the layers ([2, 1, "
                                              "0], same seed); expected them drawn in the order `layers` lists them",
        (3, "the log-probability for the logit"): "the sum of the labels' log-probabilities (log-softmax), not of "
                                                  "their logits",
        (10, "the raw logits for the log-probabilities"): "minus the sum of the labels' logits, not of their "
                                                          "log-probabilities",
        (8, "pseudo labels taken anew at each step"): "for each step's own predicted class (pseudo labels taken anew",
        (8, "a left Riemann sum"): "the gradient at the zero map, the start of the path (k = 0: a left Riemann sum)",
        (3, "a mean for the sum"): "is 1/4 of the change of example 0's own pseudo-label logit",
        (3, "regression without the 1/2"): "actual = 2 x expected: every entry 2 times what is expected",
        (4, "one backward per layer"): "for 3 layers the gradient flowed back through the logits 3 times; expected once",
        (5, "one coin per row"): "along the key axis",
        (9, "a fixed count of candidates a row"): "each row's count of drops spreads by",
        (3, "regression logits (B, 1) against labels (B,)"): "broadcasts to (B, B)",
        (1, "M times -inf"): "0 x -inf is NaN",
        (5, "one coin per key, shared by the heads"): "along the head axis",
        (7, "the parity flipped"): "epoch 1: yours runs AD-DROP, Algorithm 1 runs the original fine-tuning there",
        (9, "p alone for p q"): "of 15512 real pairs; expected p q x 15512 = 1551",  # the count dropped is a draw
        (9, "one mask for every head"): "the same mask as head 0",
        (10, "a mean for the sum"): "the token attribution is 1/13 of -dL/dA_l",
        (11, "the loss on the pseudo labels"): "the step called `loss` on the labels [2, 2, 2, 2], the batch's gold "
                                               "labels being [0, 0, 1, 0]",
        (11, "compile ignored"): "compile='aot_eager'",
        (11, "masks handed to forward by keyword"): "forward was called with 3 positional argument(s) and keyword(s) "
                                                    "['masks']",
        (11, "regression not handed on"): "the step with regression=True: layer 0's mask differs",
        (11, "compile ignored, masks"): "compile='aot_eager'",
        (11, "steps 1-3 by addrop_masks"): "expected the step composed of its pieces"}
# (exercise, the answer, text of the real body, what the student wrote instead): other answers that are right,
# which every lesson must pass: the lessons check the law of the coins and where they come from, not one way to
# draw them
RIGHT = [
    (5, "coin flips by torch.rand", "bernoulli((B, H, T, T), q, generator, scores.device)",
     "(torch.rand((B, H, T, T), generator=generator, device=scores.device) < q)"),
    (5, "coin flips by torch.bernoulli", "bernoulli((B, H, T, T), q, generator, scores.device)",
     "torch.bernoulli(torch.full((B, H, T, T), float(q), device=scores.device), generator=generator).bool()"),
    (9, "two draws, at p and at q", "bernoulli((B, H, T, T), p * q, generator, attention_mask.device)",
     "bernoulli((B, H, T, T), p, generator, attention_mask.device) & "
     "bernoulli((B, H, T, T), q, generator, attention_mask.device)"),
]

# what a later lesson says of a wrong answer that an earlier one stops under -x: the run of every lesson, in
# exercise 6's terms where only exercise 6 is the student's
SAYS_LATER = {(6, "no guard"): "lesson 7: drop_mask(p = 0.1, q = 1) on integer scores with ties: it drops every "
              "real key in 2 rows of real queries",
              (6, "padding queries masked"): "lesson 7: drop_mask(p = 0.1, q = 0.1) on continuous scores: it drops 3 "
              "positions in rows of padding queries or on padding keys; expected none there"}


def written(e, old=None, new=None):
    """Exercise e's file with its real body written in, or with `old` replaced by `new` in it (a mistake)."""
    body = make.real_body(e)
    if old is not None:
        assert body.count(old) == 1, f"the wrong answer {old!r} is not once in the body of {e.name}"
        body = body.replace(old, new)
    return make.contract(e) + make.signature(e) + body


def shown(e):
    """What the student sees of exercise e before asking for a hint: its file as make.py writes it."""
    return make.blank(e)


def pytest_run(args):
    """pytest.main(args) in a worker of runs(): exit code, output, the worker's pid, and model or addrop if an
    earlier run had imported them. Without unraisableexception: its gc.collect()s at exit cost a third of a run."""
    os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"  # the lessons use no plugin
    sys.dont_write_bytecode = False  # under PYTHONDONTWRITEBYTECODE=1 each run would rewrite the lessons' asserts
    os.chdir(ROOT)
    torch.set_num_threads(1)  # as many runs at a time as cores: one thread each, none waiting on another's
    left, out = [m for m in ("model", "addrop") if m in sys.modules], io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        code = int(pytest.main(["-p", "no:cacheprovider", "-p", "no:unraisableexception", *map(str, args)]))
    return code, out.getvalue(), os.getpid(), left


def where(tmp_path_factory, key, name):
    """The path of run `key`'s exercise file `name`: a folder of its own, outside exercises/."""
    return tmp_path_factory.getbasetemp() / re.sub(r"\W+", "_", "-".join(map(str, key)))[:40] / name


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Every lesson run of the tests below, {key: pytest_run(args)}, or a wrong answer's reason it cannot be
    written, which fails its test alone. Each run needs an interpreter of its own, where --impl loads before
    any lesson: a pool forked from a server that has imported torch and pytest, one run per worker
    (maxtasksperchild) and per hand-out (chunksize; by default a worker runs a chunk in one interpreter)."""
    def run(key, e, text, *extra, test=None, name=None):
        (path := where(tmp_path_factory, key, name or Path(e.path).name)).parent.mkdir()
        path.write_text(text)
        jobs[key] = [test or make.TESTS[e.file], "--impl", path, *extra]
        return path
    jobs, failed = {}, {}
    for n, mistake, old, new in WRONG:
        try:
            run(("wrong", n, mistake), make.BY_NUMBER[n], written(make.BY_NUMBER[n], old, new), "-x", "-q")
        except AssertionError as reason:
            failed["wrong", n, mistake] = str(reason)
    for n, answer, old, new in RIGHT:
        run(("right", n, answer), make.BY_NUMBER[n], written(make.BY_NUMBER[n], old, new), "-q")
    for n, mistake, old, new in WRONG:
        if (n, mistake) in SAYS_LATER:
            run(("later", n, mistake), make.BY_NUMBER[n], written(make.BY_NUMBER[n], old, new), "-q")
    for e in make.EXERCISES:
        run(("written", e.number), e, written(e), "-q")
        run(("blank", e.number), e, shown(e), "-x", "-q")
    everything = where(tmp_path_factory, ("real",), "x").parent
    everything.mkdir()
    for e in make.EXERCISES:
        (everything / Path(e.path).name).write_text(written(e))
    jobs["real",] = [*make.TESTS.values(), "--impl", everything]
    e5, e1 = make.BY_NUMBER[5], make.BY_NUMBER[1]
    run(("pairing",), e5, shown(e5), test=make.TESTS["model.py"])  # exercise 5 given the lessons of exercise 1
    run(("no function",), e5, make.contract(e5) + "def drop(scores):\n    return scores\n")
    run(("signature",), e5, written(e5).replace("low=False, generator=None", "low=False"))
    run(("redefines",), e5, written(e5) + "\n\ndef bernoulli(shape, prob, generator=None, device=None):\n    pass\n")
    run(("not an exercise",), e1, written(e1), name="attention.py")
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(["torch", "torch._dynamo", "pytest"])  # _dynamo: checkpoint.py's meta-device op
    with context.Pool(maxtasksperchild=1) as pool:
        return {**dict(zip(jobs, pool.map(pytest_run, jobs.values(), chunksize=1))), **failed}


@pytest.mark.parametrize("e", make.EXERCISES, ids=lambda e: f"{e.number}-{e.name}")
def test_committed_files_are_generated(e):
    """(a) The committed exercise file is, above its def, what exercises/make.py writes from the contract as it
    is now, and its def is the real signature: a change to the contract or to the real signature reaches the
    exercises. The body is the student's: an answer written there keeps this test green."""
    text = (ROOT / e.path).read_text()
    assert make.refreshed(e, text) == text and make.signature(e) in text, \
        f"{e.path} is out of date: run python exercises/make.py (it keeps your answer)"
    assert set(p.name for p in (ROOT / "exercises").glob("[0-9]*.py")) == set(make.BY_PATH), "an exercise file too many"


def _code_lines(text):
    """The lines of code in text, stripped, comments cut; lines of brackets alone left out."""
    lines = (line.split("  # ")[0].split("# ")[0].strip() for line in text.splitlines())
    return {line for line in lines if line and not re.fullmatch(r"[()\[\]{},:]+", line)}


def _project_functions():
    """The names of every function and method that model.py and addrop.py define (forward and dunders aside:
    a model's call is its forward)."""
    names = set()
    for file in ("model.py", "addrop.py"):
        for node in ast.walk(ast.parse((ROOT / file).read_text())):
            if isinstance(node, ast.FunctionDef) and node.name != "forward" and not node.name.startswith("__"):
                names.add(node.name)
    return names


@pytest.mark.parametrize("e", make.EXERCISES, ids=lambda e: f"{e.number}-{e.name}")
def test_contract_holds_no_line_of_the_answer(e):
    """(b) What the student sees of exercise e before asking for a hint, its file as make.py writes it, holds no
    line of the real body (code, comments cut), and names no project function that the real body calls:
    the contract says what, the hints say how. The hints do hold the recipe: the last one quotes the body.
    One exception, narrow: a method of an input (the model's pieces, as model.encoder.embed) that the contract
    must state as that input's interface, with what it takes and returns, may be named when the exercise lists
    it as given (make.Exercise.given) and the contract writes it as a call on a parameter of the signature,
    followed by its outputs (model.encoder.embed(input_ids, ...) -> (x, pad)): an interface, not a step; and
    likewise a function of the exercise's own module handed to the student as a tool, written as a call on
    the module with its outputs (addrop.whole_graph(fn, compile) -> ...)."""
    student, body = shown(e), make.real_body(e)
    leaked = _code_lines(body) & _code_lines(student)
    assert not leaked, f"{e.path} shows lines of its answer: {sorted(leaked)[:3]}"
    calls = {n.func.id if isinstance(n.func, ast.Name) else n.func.attr
             for n in ast.walk(ast.parse(make.signature(e) + body)) if isinstance(n, ast.Call)
             and isinstance(n.func, (ast.Name, ast.Attribute))}
    params = list(inspect.signature(getattr(impl.importlib.import_module(e.file[:-3]), e.name)).parameters)
    for name in e.given:
        assert re.search(rf"\b(?:{'|'.join([*params, e.file[:-3]])})(?:\.\w+)*\.{name}\([^)]*\) -> ", student), \
            f"{e.path}: {name}, given, is not stated as a call on an input with its outputs (model.x.{name}(...) -> ...)"
    named = sorted(name for name in calls & _project_functions() - {e.name} - set(e.given)
                   if re.search(rf"\b{name}\b", student))
    assert not named, f"{e.path} names {named}, which its answer calls"
    assert "def " + e.name in student and "raise NotImplementedError" in student


def test_hints_come_one_at_a_time(tmp_path, monkeypatch, capsys):
    """(b) Every exercise has at least two hints, the last the recipe; python exercises/hint.py N shows one
    more each call (the first call the first hint alone), stays at the last, and counts them per exercise in
    an ignored file, which --count reports."""
    monkeypatch.setattr(hint, "COUNT", tmp_path / "hints.json")
    assert "exercises/.hints.json" in (ROOT / ".gitignore").read_text().split()
    for e in make.EXERCISES:
        assert len(e.hints) >= 2 and all(h.strip() for h in e.hints), f"exercise {e.number}: too few hints"
        for k in range(1, len(e.hints) + 2):
            hint.main([str(e.number)])
            out = capsys.readouterr().out
            k = min(k, len(e.hints))
            assert f"hint {k} of {len(e.hints)}" in out and all(h.split("\n")[0] in out for h in e.hints[:k])
            assert not any(h.split("\n")[0] in out for h in e.hints[k:]), f"exercise {e.number}: hint {k + 1} shown early"
    assert json.loads((tmp_path / "hints.json").read_text()) == {str(e.number): len(e.hints) for e in make.EXERCISES}
    hint.main(["--count"])
    assert "exercise 11 addrop_step" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        hint.main(["12"])
    (tmp_path / "hints.json").write_text('{"2": ')  # cut short: the hints go on, the count starts again
    hint.main(["2"])
    out = capsys.readouterr().out
    assert "does not read as a hint count (JSONDecodeError); the count starts again" in out and "hint 1 of" in out
    assert json.loads((tmp_path / "hints.json").read_text()) == {"2": 1}


@pytest.mark.parametrize("test", make.TESTS.values())
def test_markers_tie_every_exercise_to_lessons(test):
    """(c) Every exercise has lessons in its module's lesson file; every marker names an exercise of that
    module; and make.py, which writes the blanks' messages and RESULTS' table from the markers, reads them as
    pytest does."""
    module = __import__(Path(test).stem)  # the module pytest collected, where it did
    for name, _, numbers in make.lessons(test):
        assert list(numbers) == [n for m in getattr(getattr(module, name), "pytestmark", []) if m.name == "exercise"
                                 for n in m.args], name
        assert all(make.TESTS[make.BY_NUMBER[n].file] == test for n in numbers if n in make.BY_NUMBER) and \
            set(numbers) <= set(make.BY_NUMBER), f"{name} is marked exercise{numbers}: no such exercise of {test}"
    for e in (e for e in make.EXERCISES if make.TESTS[e.file] == test):
        assert any(e.number in numbers for _, _, numbers in make.lessons(test)), f"exercise {e.number}: no lesson"


def test_tables_agree_with_the_markers():
    """(c) RESULTS.md's exercise table is what make.py writes; README.md's table gives each exercise's number,
    function and file, and the command of the first."""
    results = (ROOT / "RESULTS.md").read_text()
    assert make.with_table(results) == results, "RESULTS.md's exercise table is out of date: run python exercises/make.py"
    rows = re.findall(r"^(\d+) \| `([\w.]+)` \| \[?([\w/.]+)", (ROOT / "README.md").read_text(), re.M)
    assert [(int(n), name, path.split("/")[-1]) for n, name, path in rows] == \
        [(e.number, e.name, Path(e.path).name) for e in make.EXERCISES]
    assert make.command(make.EXERCISES[0]) in (ROOT / "README.md").read_text()


def test_real_answers_pass_every_lesson(runs):
    """(d) The real bodies, written into every exercise file and given as the folder (as in the capstone),
    pass every lesson that checks an exercise; the header shows that --impl took effect. The lessons that
    check none (loading, speed-ups) run on the real files in the suite itself."""
    code, out, _, _ = runs["real",]
    assert code == 0 and "exercises 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11 from" in out and " deselected" in out, out


@pytest.mark.parametrize("e", make.EXERCISES, ids=lambda e: f"{e.number}-{e.name}")
def test_each_blank_fails_its_lessons(e, runs, tmp_path_factory):
    """(e) The blank file fails the command that exercise e's message prints (the first failure stops the run)
    with exercise e's own message, printed without a traceback by plugin.py: every other exercise is the real
    code. The file lies outside exercises/, and the message names it where it lies. The run had an
    interpreter of its own, no model or addrop imported before it, a pid no other run had."""
    code, out, pid, left = runs["blank", e.number]
    assert code == 1, out  # 1: tests failed (not 2-5: interrupted, internal or usage error, none collected)
    assert left == [] and [r[2] for r in runs.values() if not isinstance(r, str)].count(pid) == 1
    path = str(where(tmp_path_factory, ("blank", e.number), Path(e.path).name))
    assert make.message(e).replace(e.path, path) in out and "Traceback" not in out, out


@pytest.mark.parametrize("e", make.EXERCISES, ids=lambda e: f"{e.number}-{e.name}")
def test_each_exercise_written_alone_passes(e, runs):
    """(f) The exercise file with the real body written in passes the command that e's message prints, the
    real code for everything else: each exercise can be done first."""
    code, out, _, _ = runs["written", e.number]
    assert code == 0 and re.search(r"\b\d+ passed", out), out


@pytest.mark.parametrize("n, mistake, old, new", WRONG, ids=[f"{w[0]}-{w[1]}" for w in WRONG])
def test_wrong_answers_fail_in_words(n, mistake, old, new, runs):
    """(g) Each held-back wrong answer, written into its exercise file, fails its exercise's command, naming the
    exercise (and test_addrop.py's lesson by number), what was measured, and the hint command, with no tensor
    printed whole and no traceback; where SAYS has words for it, those words (the slip named). One whose text is no longer in the body fails here alone, naming it."""
    if isinstance(runs["wrong", n, mistake], str):
        pytest.fail(runs["wrong", n, mistake])
    code, out, _, _ = runs["wrong", n, mistake]
    lesson = r", lesson \d+\w?" if make.BY_NUMBER[n].file == "addrop.py" else ""
    assert code == 1 and re.search(rf"Exercise {n} \({make.BY_NUMBER[n].name}\){lesson}: ", out), out
    assert f"python exercises/hint.py {n}" in out and "tensor(" not in out and "Traceback" not in out, out
    assert SAYS.get((n, mistake), "") in out, out


@pytest.mark.parametrize("n, answer, old, new", RIGHT, ids=[f"{r[0]}-{r[1]}" for r in RIGHT])
def test_other_right_answers_pass(n, answer, old, new, runs):
    """(g') Each other right answer, written into its exercise file, passes every lesson of its exercise: the
    lessons hold a student to the law of Eq. 7's coins, not to one way of drawing them."""
    code, out, _, _ = runs["right", n, answer]
    assert code == 0 and " passed" in out, out


@pytest.mark.parametrize("n, mistake", SAYS_LATER, ids=[f"{n}-{mistake}" for n, mistake in SAYS_LATER])
def test_later_lessons_name_the_symptom(n, mistake, runs):
    """(g) A wrong answer run through every lesson of its command (the student's command has no -x): a later
    lesson that fails too says what SAYS_LATER has for it, the symptom in its own exercise's terms, and never
    blames a piece that is the real code there."""
    code, out, _, _ = runs["later", n, mistake]
    assert code == 1 and SAYS_LATER[n, mistake] in out and "your candidates differ too" not in out, out


def test_usage_errors_say_what_to_do(runs):
    """(h) Refused before any lesson runs (exit 4, no traceback), naming the file and why: exercise 5 given
    exercise 1's lessons (naming test_addrop.py and the command); a file without the exercise's function; one
    whose function takes other arguments; one that redefines a function of the real module; a file not named
    as an exercise file."""
    says = {("pairing",): "lessons are in exercises/test_addrop.py", ("no function",): "defines no function drop_mask",
            ("signature",): "expected drop_mask(scores, attention_mask, p, q, low=False, generator=None)",
            ("redefines",): "defines bernoulli, which addrop.py has already",
            ("not an exercise",): "not an exercise file"}
    for key, words in says.items():
        code, out, _, _ = runs[key]
        assert code == 4 and words in out and "Traceback" not in out, (key, out)

@pytest.mark.parametrize("actual, expected, says", [
    ([-1.0, 2.0, -3.0], [1.0, -2.0, 3.0], "every entry has the opposite sign"),
    ([0.25, 0.5, 0.75], [1.0, 2.0, 3.0], "expected / 4: every entry 1/4 of what is expected"),
    ([3.0, 6.0, 9.0], [1.0, 2.0, 3.0], "3 x expected: every entry 3 times"), ([4.0, 7.0, 2.0], [4.0, 6.0, 2.0], "off by exactly one"),
    ([[1.0, 2.0, 3.0]], [[1.0], [2.0], [3.0]], "in another order"), ([1.0, 0.0, 0.5], [0.0, 1.0, 1.0], None)])
def test_checks_name_the_usual_slips(actual, expected, says):
    """(j) A failed check names the pattern its numbers show, as measured (checks._slip: a factor -1, 1/N or N
    to 1e-3, integers off by exactly one, the sizes in another order), and none where they show none (the
    last); it says what was measured, never what to write."""
    with pytest.raises(checks.Wrong) as failed:
        checks.close(torch.tensor(actual), torch.tensor(expected), "x", atol=1e-9)
    patterns = ("opposite sign", "every entry", "off by exactly one", "another order")
    assert (says in str(failed.value)) if says else not any(w in str(failed.value) for w in patterns), str(failed.value)
