"""
A BERT / RoBERTa / ELECTRA encoder written out, for AD-DROP.

Every layer computes its attention probabilities explicitly (Eq. 1 of the paper),
    A = softmax(Q K^T / sqrt(d) + padding mask + M_l),
hands them out, and takes an optional mask M_l (0 keeps a position, -inf drops it;
passed as booleans, True where -inf). That is all AD-DROP needs from the model: A_l
out for attribution, M_l in for dropping. Two heads: a classifier on the first token
(GLUE: sequence classification and STS-B regression) and one on every token (NER:
token classification). Pretrained weights (Hugging Face's config.json + model.safetensors)
are read and written by support/checkpoint.py.

Letters: B batch, T tokens, C channels, H heads, D = C // H head size, L layers.
"""

import math
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

# -----------------------------------------------------------------------------
# config

@dataclass
class Config:
    """The encoder's sizes and constants. The field names are config.json's keys (checkpoint.read_config
    reads and checks one); the defaults are BERT-base's."""
    model_type: str = "bert"               # "bert", "roberta" or "electra"
    vocab_size: int = 30522                # rows of the word embedding
    hidden_size: int = 768                 # C
    num_hidden_layers: int = 12            # L
    num_attention_heads: int = 12          # H
    intermediate_size: int = 3072          # width of the feed-forward block
    max_position_embeddings: int = 512     # rows of the position embedding
    type_vocab_size: int = 2               # 2 for BERT (sentence A/B), 1 for RoBERTa
    layer_norm_eps: float = 1e-12          # LayerNorm's epsilon: 1e-12 in BERT and ELECTRA, 1e-5 in RoBERTa
    pad_token_id: int = 0                  # the padding token; RoBERTa counts positions past it
    hidden_act: str = "gelu"               # exact (erf) GELU, as in BERT
    hidden_dropout_prob: float = 0.1       # dropout on the embeddings and on each sublayer's output
    attention_probs_dropout_prob: float = 0.1  # dropout on A, where it multiplies v
    initializer_range: float = 0.02        # std of the normal init of fresh weights
    position_embedding_type: str = "absolute"  # learned absolute positions, the only kind supported
    embedding_size: int | None = None      # ELECTRA: width of the embeddings, projected to C (None: C)
    classifier_dropout: float | None = None  # the head's dropout (None: hidden_dropout_prob)

    @property
    def max_tokens(self):
        """The most tokens one example may have: a row of the position table each. RoBERTa's
        positions start at pad_token_id + 1, so its first pad_token_id + 1 rows are never a token's."""
        if self.model_type == "roberta":
            return self.max_position_embeddings - self.pad_token_id - 1
        return self.max_position_embeddings

# -----------------------------------------------------------------------------
# dropout, and the coin flips it draws (shared with AD-DROP's Eq. 7 in addrop.py)

def sync_free(device):
    """Whether code on `device` must be tensor operations only: no .item(), no int(tensor), no
    data-dependent shape. True on a GPU, where each of those stops the CPU until the GPU catches up
    (and a CUDA graph cannot hold them), and under torch.compile, which cannot trace them whole.
    An eager CPU may use the faster draws and selections that read numbers back (False)."""
    return torch.device(device or "cpu").type != "cpu" or torch.compiler.is_compiling()


def dropout(x, p, training, rescale=True):
    """Ordinary dropout: each entry of x set to zero with probability p, independently, and the
    rest multiplied by 1 / (1 - p); with rescale=False the caller applies that factor itself,
    to something smaller (Layer.forward: to A @ v rather than A). F.dropout's distribution, from
    another random stream.

    Why it is fast: on a CPU, F.dropout draws one random number per entry (the most expensive op
    of a step after the matmuls); here the zeros are drawn by their gaps (bernoulli_indices,
    below: a tenth of the numbers at p = 0.1) and written by index into a copy of x: on MiniLM's
    (B, H, T, T) the draw is 3x faster, forward and backward together 2x. A GPU draws a number
    per entry at memory speed, and the gap sampler's rounds would wait on it: there F.dropout's
    own kernel is used, and so it is under torch.compile (see sync_free). This is the one place that chooses."""
    if not training or p == 0:
        return x
    if sync_free(x.device):
        # rand_like, not empty_like(x).bernoulli_(): inductor (torch 2.13, CPU) made the latter NaN inside Layer
        return F.dropout(x, p) if rescale else x * (torch.rand_like(x) >= p)
    dropped = x.flatten().index_fill(0, bernoulli_indices(x.numel(), p, device=x.device), 0).view_as(x)
    return dropped / (1 - p) if rescale else dropped


def bernoulli_indices(n, prob, generator=None, device=None):
    """The flat indices, increasing, at which n independent Bernoulli(prob) draws come out True.

    Why it is fast: instead of one uniform per entry, it draws the GAPS between one True and the
    next: each gap is Geometric(prob), 1 + floor(log U / log(1 - prob)) with U uniform on (0, 1],
    so about prob * n uniforms do the work of n (a tenth at p = 0.1). A round draws enough gaps
    to pass the end about 98 times in 100; when they fall short, the next round starts where
    they stopped (gaps are memoryless). Above prob = 0.25 one uniform per entry is the cheaper
    draw, and is used."""
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
    """A bool tensor of independent Bernoulli(prob) draws: torch.rand(shape) < prob, as written where the
    step must not wait (sync_free); on an eager CPU the same distribution drawn by its gaps, in a
    fraction of the time when prob is small."""
    if sync_free(device):
        return torch.rand(shape, generator=generator, device=device) < prob
    n = math.prod(shape)
    out = torch.zeros(n, dtype=torch.bool, device=device)
    return out.index_fill_(0, bernoulli_indices(n, prob, generator, device), True).view(shape)

# -----------------------------------------------------------------------------
# the encoder

def attention(layer, x, pad, M=None):
    """Eq. 1 for one layer: A = softmax(q k^T / sqrt(D) + padding mask + M_l), each head's attention
    probabilities, and v, what A weighs (Layer.forward takes A v on from here, with attention dropout).
    layer: a Layer, whose q, k, v are its projections (C, C); x (B, T, C) the layer's input; pad (B, 1, 1, T)
    the additive padding mask (0 on real keys, -inf on padding); M (B, H, T, T) bool AD-DROP mask, True
    where M_l = -inf, or None. The C channels split into H heads of D = C / H each.
    Returns A (B, H, T, T) and v (B, H, T, D)."""
    B, T, C = x.size()
    H, D = layer.H, C // layer.H
    # 1/sqrt(D) goes into q's weights, (C, C), rather than onto the scores, (B, H, T, T)
    s = 1 / math.sqrt(D)
    q = F.linear(x, layer.q.weight * s, layer.q.bias * s).view(B, T, H, D).transpose(1, 2)  # (B, H, T, D)
    k = layer.k(x).view(B, T, H, D).transpose(1, 2)  # (B, H, T, D)
    v = layer.v(x).view(B, T, H, D).transpose(1, 2)  # (B, H, T, D)
    bias = pad if M is None else pad.masked_fill(M, float("-inf"))  # padding mask + M_l, (B, H, T, T)
    return F.softmax(q @ k.transpose(-2, -1) + bias, dim=-1), v  # A (B, H, T, T), Eq. 1


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

    def forward(self, x, pad, M=None, scale=None, first_only=False, dropped_A=False, probe=None):
        """Eq. 1, A = softmax(q k^T / sqrt(D) + padding mask + M_l), then A v, the output
        projection and the feed-forward block, each added to its input and normalised.

        x (B, T, C) the layer's input; pad (B, 1, 1, T) the additive padding mask (0 on real
        keys, -inf on padding); M (B, H, T, T) bool AD-DROP mask, True where M_l = -inf, or None.
        scale (B, 1, 1, 1) or None: A is multiplied by it, and the product is both used and
        handed out (integrated gradients, Eq. 3, runs the layer at k/m A).
        first_only: only the first token goes on past A (see Encoder.forward).
        In train mode, attention dropout (rate p = attention_probs_dropout_prob) zeroes entries of
        A and multiplies the rest by 1 / (1 - p). By default it acts where A multiplies v, and A
        is handed out as Eq. 1 defines it. dropped_A=True hands out the dropped A instead, zeros
        and rescaled entries, the tensor the authors' first pass differentiates (see
        addrop.attribute); in eval mode the two are the same.
        probe (B, H, T, T) or None: zeros added to A as handed out, so that dF/dprobe = dF/dA. The
        attribution differentiates with respect to it, an input: a compiled model's outputs cannot be
        differentiated with respect to one another, its inputs can (addrop.attribute).
        Returns the new x, (B, T, C) or (B, 1, C), and A, (B, H, T, T)."""
        A, v = attention(self, x, pad, M)  # (B, H, T, T), (B, H, T, D): Eq. 1
        if scale is not None:
            A = A * scale
        if dropped_A:  # the tensor the authors' code differentiates: A after attention dropout, rescaled
            A = dropout(A, self.p_attn, self.training)
        if probe is not None:
            A = A + probe  # the same numbers; the gradient with respect to probe is dF/dA
        A_rows = A
        if first_only:
            A_rows, x = A[:, :, :1], x[:, :1]  # (B, H, 1, T), (B, 1, C)
        if dropped_A:
            y = A_rows @ v  # (B, H, T, D)
        else:
            # attention dropout acts on the product only: A itself stays a distribution, and
            # attribution is taken with respect to A as Eq. 1 defines it. Its 1 / (1 - p) is applied
            # to the product, (B, H, T, D), 4x smaller than A here.
            y = dropout(A_rows, self.p_attn, self.training, rescale=False) @ v  # (B, H, T, D)
            if self.training:
                y = y / (1 - self.p_attn)
        y = y.transpose(1, 2).reshape(x.shape)  # (B, T, C)
        x = self.ln1(x + dropout(self.o(y), self.p, self.training))
        x = self.ln2(x + dropout(self.ff2(F.gelu(self.ff1(x))), self.p, self.training))
        return x, A


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
        # in LayerNorm's dtype, float32 under bf16 autocast: the scores plus pad, so A and B = dF/dA, are float32
        # there for every model type (train.py, "Precision")
        pad = torch.zeros(B, 1, 1, T, dtype=x.dtype, device=x.device)
        pad = pad.masked_fill(attention_mask[:, None, None, :] == 0, float("-inf"))
        if self.project is not None:  # ELECTRA: back to LayerNorm's dtype, so that under bf16 autocast the residual
            x = self.project(x).to(x.dtype)  # (B, T, C) stream is float32 on a CPU as on a GPU (whose LayerNorm is)
        return x, pad

    def forward(self, input_ids, attention_mask=None, token_type_ids=None, masks=None, depth=None, first_only=False,
                dropped_A=False, probes=None):
        """masks: None, or a list of L masks (B, H, T, T) bool (True: -inf) or None per layer;
        probes likewise, zeros (B, H, T, T) or None per layer (Layer.forward).
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
                         dropped_A=dropped_A, probe=None if probes is None else probes[l])
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
    """The encoder, then a head: Head on the first token, or with token_level=True TokenHead on every token.
    checkpoint.from_pretrained builds one from a weights folder."""

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

    def forward(self, input_ids, attention_mask=None, token_type_ids=None, masks=None, dropped_A=False, probes=None):
        """Returns logits, (B, num_labels) or for a token head (B, T, num_labels), and the L
        attention tensors (B, H, T, T)."""
        h, attns = self.encoder(input_ids, attention_mask, token_type_ids, masks, first_only=self.head.first_only,
                                dropped_A=dropped_A, probes=probes)
        return self.head(h), attns
