"""
The answers that tests/test_exercises.py holds back from the student, each written out in full, as a student
hands it in: the whole function of its exercise file, below the contract that make.py writes. WRONG holds
common mistakes, each of which its exercise's command must fail, naming the mistake in words (the words are
test_exercises.SAYS's); RIGHT holds answers other than the real code's that every lesson must pass. Nothing
here is read from the core: a change to addrop.py or model.py leaves these as they are, and where a signature
changes, --impl refuses the old one by name, so the test that runs it says which to rewrite.
"""

# (exercise, the mistake, the whole function as the student hands it in)
WRONG = [
    (1, 'no 1/sqrt(D)', '''\
def attention(layer, x, pad, M=None):
    B, T, C = x.size()
    H, D = layer.H, C // layer.H
    # 1/sqrt(D) goes into q's weights, (C, C), rather than onto the scores, (B, H, T, T)
    s = 1
    q = F.linear(x, layer.q.weight * s, layer.q.bias * s).view(B, T, H, D).transpose(1, 2)  # (B, H, T, D)
    k = layer.k(x).view(B, T, H, D).transpose(1, 2)  # (B, H, T, D)
    v = layer.v(x).view(B, T, H, D).transpose(1, 2)  # (B, H, T, D)
    bias = pad if M is None else pad.masked_fill(M, float("-inf"))  # padding mask + M_l, (B, H, T, T)
    return F.softmax(q @ k.transpose(-2, -1) + bias, dim=-1), v  # A (B, H, T, T), Eq. 1
'''),
    (1, 'M_l ignored', '''\
def attention(layer, x, pad, M=None):
    B, T, C = x.size()
    H, D = layer.H, C // layer.H
    # 1/sqrt(D) goes into q's weights, (C, C), rather than onto the scores, (B, H, T, T)
    s = 1 / math.sqrt(D)
    q = F.linear(x, layer.q.weight * s, layer.q.bias * s).view(B, T, H, D).transpose(1, 2)  # (B, H, T, D)
    k = layer.k(x).view(B, T, H, D).transpose(1, 2)  # (B, H, T, D)
    v = layer.v(x).view(B, T, H, D).transpose(1, 2)  # (B, H, T, D)
    bias = pad  # padding mask + M_l, (B, H, T, T)
    return F.softmax(q @ k.transpose(-2, -1) + bias, dim=-1), v  # A (B, H, T, T), Eq. 1
'''),
    (1, 'the softmax over the queries', '''\
def attention(layer, x, pad, M=None):
    B, T, C = x.size()
    H, D = layer.H, C // layer.H
    # 1/sqrt(D) goes into q's weights, (C, C), rather than onto the scores, (B, H, T, T)
    s = 1 / math.sqrt(D)
    q = F.linear(x, layer.q.weight * s, layer.q.bias * s).view(B, T, H, D).transpose(1, 2)  # (B, H, T, D)
    k = layer.k(x).view(B, T, H, D).transpose(1, 2)  # (B, H, T, D)
    v = layer.v(x).view(B, T, H, D).transpose(1, 2)  # (B, H, T, D)
    bias = pad if M is None else pad.masked_fill(M, float("-inf"))  # padding mask + M_l, (B, H, T, T)
    return F.softmax(q @ k.transpose(-2, -1) + bias, dim=-2), v  # A (B, H, T, T), Eq. 1
'''),
    (1, 'no padding mask', '''\
def attention(layer, x, pad, M=None):
    B, T, C = x.size()
    H, D = layer.H, C // layer.H
    # 1/sqrt(D) goes into q's weights, (C, C), rather than onto the scores, (B, H, T, T)
    s = 1 / math.sqrt(D)
    q = F.linear(x, layer.q.weight * s, layer.q.bias * s).view(B, T, H, D).transpose(1, 2)  # (B, H, T, D)
    k = layer.k(x).view(B, T, H, D).transpose(1, 2)  # (B, H, T, D)
    v = layer.v(x).view(B, T, H, D).transpose(1, 2)  # (B, H, T, D)
    bias = 0 if M is None else torch.zeros_like(pad).masked_fill(M, float("-inf"))  # padding mask + M_l, (B, H, T, T)
    return F.softmax(q @ k.transpose(-2, -1) + bias, dim=-1), v  # A (B, H, T, T), Eq. 1
'''),
    (1, 'heads on interleaved channels', '''\
def attention(layer, x, pad, M=None):
    B, T, C = x.size()
    H, D = layer.H, C // layer.H
    # 1/sqrt(D) goes into q's weights, (C, C), rather than onto the scores, (B, H, T, T)
    s = 1 / math.sqrt(D)
    q = F.linear(x, layer.q.weight * s, layer.q.bias * s).view(B, T, D, H).permute(0, 3, 1, 2)
    k = layer.k(x).view(B, T, D, H).permute(0, 3, 1, 2)  # (B, H, T, D)
    v = layer.v(x).view(B, T, H, D).transpose(1, 2)  # (B, H, T, D)
    bias = pad if M is None else pad.masked_fill(M, float("-inf"))  # padding mask + M_l, (B, H, T, T)
    return F.softmax(q @ k.transpose(-2, -1) + bias, dim=-1), v  # A (B, H, T, T), Eq. 1
'''),
    (1, 'heads by a straight reshape', '''\
def attention(layer, x, pad, M=None):
    B, T, C = x.size()
    H, D = layer.H, C // layer.H
    # 1/sqrt(D) goes into q's weights, (C, C), rather than onto the scores, (B, H, T, T)
    s = 1 / math.sqrt(D)
    q = F.linear(x, layer.q.weight * s, layer.q.bias * s).reshape(B, H, T, D)
    k = layer.k(x).reshape(B, H, T, D)  # (B, H, T, D)
    v = layer.v(x).view(B, T, H, D).transpose(1, 2)  # (B, H, T, D)
    bias = pad if M is None else pad.masked_fill(M, float("-inf"))  # padding mask + M_l, (B, H, T, T)
    return F.softmax(q @ k.transpose(-2, -1) + bias, dim=-1), v  # A (B, H, T, T), Eq. 1
'''),
    (1, 'M times -inf', '''\
def attention(layer, x, pad, M=None):
    B, T, C = x.size()
    H, D = layer.H, C // layer.H
    # 1/sqrt(D) goes into q's weights, (C, C), rather than onto the scores, (B, H, T, T)
    s = 1 / math.sqrt(D)
    q = F.linear(x, layer.q.weight * s, layer.q.bias * s).view(B, T, H, D).transpose(1, 2)  # (B, H, T, D)
    k = layer.k(x).view(B, T, H, D).transpose(1, 2)  # (B, H, T, D)
    v = layer.v(x).view(B, T, H, D).transpose(1, 2)  # (B, H, T, D)
    bias = pad if M is None else pad + M * float("-inf")  # padding mask + M_l, (B, H, T, T)
    return F.softmax(q @ k.transpose(-2, -1) + bias, dim=-1), v  # A (B, H, T, T), Eq. 1
'''),
    (1, 'M transposed', '''\
def attention(layer, x, pad, M=None):
    B, T, C = x.size()
    H, D = layer.H, C // layer.H
    # 1/sqrt(D) goes into q's weights, (C, C), rather than onto the scores, (B, H, T, T)
    s = 1 / math.sqrt(D)
    q = F.linear(x, layer.q.weight * s, layer.q.bias * s).view(B, T, H, D).transpose(1, 2)  # (B, H, T, D)
    k = layer.k(x).view(B, T, H, D).transpose(1, 2)  # (B, H, T, D)
    v = layer.v(x).view(B, T, H, D).transpose(1, 2)  # (B, H, T, D)
    bias = pad if M is None else pad.masked_fill(M.transpose(-2, -1), float("-inf"))  # padding mask + M_l, (B, H, T, T)
    return F.softmax(q @ k.transpose(-2, -1) + bias, dim=-1), v  # A (B, H, T, T), Eq. 1
'''),
    (1, 'v in tokens first', '''\
def attention(layer, x, pad, M=None):
    B, T, C = x.size()
    H, D = layer.H, C // layer.H
    # 1/sqrt(D) goes into q's weights, (C, C), rather than onto the scores, (B, H, T, T)
    s = 1 / math.sqrt(D)
    q = F.linear(x, layer.q.weight * s, layer.q.bias * s).view(B, T, H, D).transpose(1, 2)  # (B, H, T, D)
    k = layer.k(x).view(B, T, H, D).transpose(1, 2)  # (B, H, T, D)
    v = layer.v(x).view(B, T, H, D)  # (B, H, T, D)
    bias = pad if M is None else pad.masked_fill(M, float("-inf"))  # padding mask + M_l, (B, H, T, T)
    return F.softmax(q @ k.transpose(-2, -1) + bias, dim=-1), v  # A (B, H, T, T), Eq. 1
'''),
    (2, 'the labels given ignored', '''\
def _unmasked_pass(model, batch, labels, dropped_A=False, probes=None):
    logits, attns = model(batch["input_ids"], batch["attention_mask"], batch["token_type_ids"], dropped_A=dropped_A,
                          probes=probes)
    if True:
        labels = pseudo_labels(logits, batch)  # Eq. 4
    return logits, labels, attns
'''),
    (2, 'dropped_A not passed on', '''\
def _unmasked_pass(model, batch, labels, dropped_A=False, probes=None):
    logits, attns = model(batch["input_ids"], batch["attention_mask"], batch["token_type_ids"],
                          probes=probes)
    if labels is None:
        labels = pseudo_labels(logits, batch)  # Eq. 4
    return logits, labels, attns
'''),
    (2, 'probes not passed on', '''\
def _unmasked_pass(model, batch, labels, dropped_A=False, probes=None):
    logits, attns = model(batch["input_ids"], batch["attention_mask"], batch["token_type_ids"], dropped_A=dropped_A)
    if labels is None:
        labels = pseudo_labels(logits, batch)  # Eq. 4
    return logits, labels, attns
'''),
    (2, "IGNORE not kept in a token task's pseudo labels", '''\
def _unmasked_pass(model, batch, labels, dropped_A=False, probes=None):
    logits, attns = model(batch["input_ids"], batch["attention_mask"], batch["token_type_ids"], dropped_A=dropped_A,
                          probes=probes)
    if labels is None:
        labels = logits.argmax(-1)  # Eq. 4
    return logits, labels, attns
'''),
    (2, 'the least likely class', '''\
def _unmasked_pass(model, batch, labels, dropped_A=False, probes=None):
    logits, attns = model(batch["input_ids"], batch["attention_mask"], batch["token_type_ids"], dropped_A=dropped_A,
                          probes=probes)
    if labels is None:
        labels = logits.argmin(-1)  # Eq. 4
    return logits, labels, attns
'''),
    (2, "example 0's pseudo label for all", '''\
def _unmasked_pass(model, batch, labels, dropped_A=False, probes=None):
    logits, attns = model(batch["input_ids"], batch["attention_mask"], batch["token_type_ids"], dropped_A=dropped_A,
                          probes=probes)
    if labels is None:
        labels = logits[:1].argmax(-1).expand(logits.size(0))  # Eq. 4
    return logits, labels, attns
'''),
    (2, 'the gold labels by default', '''\
def _unmasked_pass(model, batch, labels, dropped_A=False, probes=None):
    logits, attns = model(batch["input_ids"], batch["attention_mask"], batch["token_type_ids"], dropped_A=dropped_A,
                          probes=probes)
    if labels is None:
        labels = batch["labels"]  # Eq. 4
    return logits, labels, attns
'''),
    (2, 'the pseudo labels over the batch', '''\
def _unmasked_pass(model, batch, labels, dropped_A=False, probes=None):
    logits, attns = model(batch["input_ids"], batch["attention_mask"], batch["token_type_ids"], dropped_A=dropped_A,
                          probes=probes)
    if labels is None:
        labels = logits.argmax(0)  # Eq. 4
    return logits, labels, attns
'''),
    (2, 'the forward under no_grad', '''\
def _unmasked_pass(model, batch, labels, dropped_A=False, probes=None):
    with torch.no_grad():
        logits, attns = model(batch["input_ids"], batch["attention_mask"], batch["token_type_ids"], dropped_A=dropped_A,
                          probes=probes)
    if labels is None:
        labels = pseudo_labels(logits, batch)  # Eq. 4
    return logits, labels, attns
'''),
    (3, 'a mean for the sum', '''\
def objective(logits, labels, regression):
    if logits.dim() == 3:
        return -pseudo_loss(logits, labels)
    if regression:
        return -0.5 * ((logits.squeeze(-1) - labels) ** 2).sum()
    return logits.gather(1, labels[:, None]).mean()
'''),
    (3, 'the log-probability for the logit', '''\
def objective(logits, labels, regression):
    if logits.dim() == 3:
        return -pseudo_loss(logits, labels)
    if regression:
        return -0.5 * ((logits.squeeze(-1) - labels) ** 2).sum()
    return logits.log_softmax(-1).gather(1, labels[:, None]).sum()
'''),
    (3, 'regression without the 1/2', '''\
def objective(logits, labels, regression):
    if logits.dim() == 3:
        return -pseudo_loss(logits, labels)
    if regression:
        return -((logits.squeeze(-1) - labels) ** 2).sum()
    return logits.gather(1, labels[:, None]).sum()
'''),
    (3, 'regression logits (B, 1) against labels (B,)', '''\
def objective(logits, labels, regression):
    if logits.dim() == 3:
        return -pseudo_loss(logits, labels)
    if regression:
        return -0.5 * ((logits - labels) ** 2).sum()
    return logits.gather(1, labels[:, None]).sum()
'''),
    (4, 'one backward per layer', '''\
def gradient(model, batch, layers, labels, regression, m=None, ig_budget=None):
    logits, labels, attns = _unmasked_pass(model, batch, labels, dropped_A=model.training)
    F_c = objective(logits, labels, regression)
    grads = [torch.autograd.grad(F_c, attns[l], retain_graph=True)[0] for l in layers]
    return dict(zip(layers, grads))
'''),
    (4, 'the map before attention dropout in train mode', '''\
def gradient(model, batch, layers, labels, regression, m=None, ig_budget=None):
    logits, labels, attns = _unmasked_pass(model, batch, labels, dropped_A=False)
    grads = torch.autograd.grad(objective(logits, labels, regression), [attns[l] for l in layers])
    return dict(zip(layers, grads))
'''),
    (4, 'the labels given ignored', '''\
def gradient(model, batch, layers, labels, regression, m=None, ig_budget=None):
    logits, labels, attns = _unmasked_pass(model, batch, None, dropped_A=model.training)
    grads = torch.autograd.grad(objective(logits, labels, regression), [attns[l] for l in layers])
    return dict(zip(layers, grads))
'''),
    (4, "F.backward(), filling every parameter's .grad", '''\
def gradient(model, batch, layers, labels, regression, m=None, ig_budget=None):
    logits, labels, attns = _unmasked_pass(model, batch, labels, dropped_A=model.training)
    for l in layers:
        attns[l].retain_grad()
    objective(logits, labels, regression).backward()
    return {l: attns[l].grad for l in layers}
'''),
    (5, 'a float for the integer index', '''\
def threshold(scores, real, p):
    n = real.sum(-1, keepdim=True)  # (..., 1) real keys of each row
    keep = round((1 - p) * 10**6)
    if keep == 10**6:  # p = 0: no candidate
        return torch.full_like(scores[..., :1], float("inf"))
    idx = (n.double() * (1 - p)).long()  # int(n (1 - p)), (..., 1)
    b_hat = scores.masked_fill(~real, float("inf")).sort(-1).values  # padding last
    thr = b_hat.gather(-1, idx.clamp(max=scores.size(-1) - 1).expand(*scores.shape[:-1], 1))
    return thr.masked_fill(idx == n, float("inf"))
'''),
    (5, 'the index one place too high', '''\
def threshold(scores, real, p):
    n = real.sum(-1, keepdim=True)  # (..., 1) real keys of each row
    keep = round((1 - p) * 10**6)
    if keep == 10**6:  # p = 0: no candidate
        return torch.full_like(scores[..., :1], float("inf"))
    idx = n * keep // 10**6 + 1  # the entry after int(n (1 - p))
    b_hat = scores.masked_fill(~real, float("inf")).sort(-1).values  # padding last
    thr = b_hat.gather(-1, idx.clamp(max=scores.size(-1) - 1).expand(*scores.shape[:-1], 1))
    return thr.masked_fill(idx >= n, float("inf"))
'''),
    (5, 'n (1 - p) rounded', '''\
def threshold(scores, real, p):
    n = real.sum(-1, keepdim=True)  # (..., 1) real keys of each row
    keep = round((1 - p) * 10**6)
    if keep == 10**6:  # p = 0: no candidate
        return torch.full_like(scores[..., :1], float("inf"))
    idx = (n * keep + 5 * 10**5) // 10**6  # n (1 - p), rounded
    b_hat = scores.masked_fill(~real, float("inf")).sort(-1).values  # padding last
    thr = b_hat.gather(-1, idx.clamp(max=scores.size(-1) - 1).expand(*scores.shape[:-1], 1))
    return thr.masked_fill(idx == n, float("inf"))
'''),
    (5, 'padding counted in n', '''\
def threshold(scores, real, p):
    n = torch.full_like(real.sum(-1, keepdim=True), scores.size(-1))  # every key
    keep = round((1 - p) * 10**6)
    if keep == 10**6:  # p = 0: no candidate
        return torch.full_like(scores[..., :1], float("inf"))
    idx = n * keep // 10**6  # int(n (1 - p)), (..., 1)
    b_hat = scores.masked_fill(~real, float("inf")).sort(-1).values  # padding last
    thr = b_hat.gather(-1, idx.clamp(max=scores.size(-1) - 1).expand(*scores.shape[:-1], 1))
    return thr.masked_fill(idx == n, float("inf"))
'''),
    (5, 'padding counted in n, sorted first', '''\
def threshold(scores, real, p):
    n = torch.full_like(real.sum(-1, keepdim=True), scores.size(-1))  # every key
    keep = round((1 - p) * 10**6)
    if keep == 10**6:  # p = 0: no candidate
        return torch.full_like(scores[..., :1], float("inf"))
    idx = n * keep // 10**6  # int(n (1 - p)), (..., 1)
    b_hat = scores.masked_fill(~real, float("-inf")).sort(-1).values  # padding first
    thr = b_hat.gather(-1, idx.clamp(max=scores.size(-1) - 1).expand(*scores.shape[:-1], 1))
    return thr.masked_fill(idx == n, float("inf"))
'''),
    (5, 'padding sorted with its scores, counted in n', '''\
def threshold(scores, real, p):
    n = torch.full_like(real.sum(-1, keepdim=True), scores.size(-1))  # every key
    keep = round((1 - p) * 10**6)
    if keep == 10**6:  # p = 0: no candidate
        return torch.full_like(scores[..., :1], float("inf"))
    idx = n * keep // 10**6  # int(n (1 - p)), (..., 1)
    b_hat = scores.sort(-1).values
    thr = b_hat.gather(-1, idx.clamp(max=scores.size(-1) - 1).expand(*scores.shape[:-1], 1))
    return thr.masked_fill(idx == n, float("inf"))
'''),
    (5, 'p to 2 decimals', '''\
def threshold(scores, real, p):
    n = real.sum(-1, keepdim=True)  # (..., 1) real keys of each row
    keep = round((1 - round(p, 2)) * 10**6)
    if keep == 10**6:  # p = 0: no candidate
        return torch.full_like(scores[..., :1], float("inf"))
    idx = n * keep // 10**6  # int(n (1 - p)), (..., 1)
    b_hat = scores.masked_fill(~real, float("inf")).sort(-1).values  # padding last
    thr = b_hat.gather(-1, idx.clamp(max=scores.size(-1) - 1).expand(*scores.shape[:-1], 1))
    return thr.masked_fill(idx == n, float("inf"))
'''),
    (5, 'p and 1 - p swapped', '''\
def threshold(scores, real, p):
    n = real.sum(-1, keepdim=True)  # (..., 1) real keys of each row
    keep = round(p * 10**6)
    if keep == 10**6:  # p = 0: no candidate
        return torch.full_like(scores[..., :1], float("inf"))
    idx = n * keep // 10**6  # int(n (1 - p)), (..., 1)
    b_hat = scores.masked_fill(~real, float("inf")).sort(-1).values  # padding last
    thr = b_hat.gather(-1, idx.clamp(max=scores.size(-1) - 1).expand(*scores.shape[:-1], 1))
    return thr.masked_fill(idx == n, float("inf"))
'''),
    (5, 'the GPU path sorts padding first', '''\
def threshold(scores, real, p):
    n = real.sum(-1, keepdim=True)  # (..., 1) real keys of each row
    keep = round((1 - p) * 10**6)
    if keep == 10**6:  # p = 0: no candidate
        return torch.full_like(scores[..., :1], float("inf"))
    idx = n * keep // 10**6  # int(n (1 - p)), (..., 1)
    if sync_free(scores.device):  # a GPU: padding sorted to the front
        b_hat = scores.masked_fill(~real, float("-inf")).sort(-1).values
    else:
        b_hat = scores.masked_fill(~real, float("inf")).sort(-1).values  # padding last
    thr = b_hat.gather(-1, idx.clamp(max=scores.size(-1) - 1).expand(*scores.shape[:-1], 1))
    return thr.masked_fill(idx == n, float("inf"))
'''),
    (6, 'no guard', '''\
def _real_rows(drop, attention_mask):
    real = attention_mask.bool()
    drop &= real[:, None, :, None] & real[:, None, None, :]  # (B, 1, T, T) real pairs
    if sync_free(drop.device):
        lost = (drop | ~real[:, None, None, :]).all(-1, keepdim=True)  # (B, H, T, 1) all real keys dropped
        return drop & ~lost  # such rows keep everything
    # Why it is fast on a CPU: the guard's "all" and "and" run on the bytes of the bools, as uint8 min and
    # multiply: the same values, but torch vectorises those and not the bool forms, 3x faster. (Inductor
    # cannot compile a bool's view as uint8: hence the plain form above on a GPU and under compile.)
    lost = (drop | ~real[:, None, None, :]).view(torch.uint8).amin(-1, keepdim=True)  # (B, H, T, 1) 1: all real keys dropped
    drop  # such rows keep everything
    return drop
'''),
    (6, 'the guard clears the whole head', '''\
def _real_rows(drop, attention_mask):
    real = attention_mask.bool()
    drop &= real[:, None, :, None] & real[:, None, None, :]  # (B, 1, T, T) real pairs
    if sync_free(drop.device):
        lost = (drop | ~real[:, None, None, :]).all(-1, keepdim=True)  # (B, H, T, 1) all real keys dropped
        return drop & ~lost  # such rows keep everything
    # Why it is fast on a CPU: the guard's "all" and "and" run on the bytes of the bools, as uint8 min and
    # multiply: the same values, but torch vectorises those and not the bool forms, 3x faster. (Inductor
    # cannot compile a bool's view as uint8: hence the plain form above on a GPU and under compile.)
    lost = (drop | ~real[:, None, None, :]).view(torch.uint8).amin(-1, keepdim=True).amax(-2, keepdim=True)  # (B, H, T, 1) 1: all real keys dropped
    drop.view(torch.uint8).mul_(1 - lost)  # such rows keep everything
    return drop
'''),
    (6, 'padding queries masked', '''\
def _real_rows(drop, attention_mask):
    real = attention_mask.bool()
    drop &= real[:, None, None, :]  # (B, 1, T, T) real pairs
    if sync_free(drop.device):
        lost = (drop | ~real[:, None, None, :]).all(-1, keepdim=True)  # (B, H, T, 1) all real keys dropped
        return drop & ~lost  # such rows keep everything
    # Why it is fast on a CPU: the guard's "all" and "and" run on the bytes of the bools, as uint8 min and
    # multiply: the same values, but torch vectorises those and not the bool forms, 3x faster. (Inductor
    # cannot compile a bool's view as uint8: hence the plain form above on a GPU and under compile.)
    lost = (drop | ~real[:, None, None, :]).view(torch.uint8).amin(-1, keepdim=True)  # (B, H, T, 1) 1: all real keys dropped
    drop.view(torch.uint8).mul_(1 - lost)  # such rows keep everything
    return drop
'''),
    (7, 'the parity flipped', '''\
def is_addrop_epoch(epoch, cross_tuning=True):
    return epoch % 2 == 1 if cross_tuning else True
'''),
    (8, 'A_l not multiplied in', '''\
def integrated_gradients(model, batch, layers, labels, regression, m=20, ig_budget=None):
    enc = model.encoder
    with torch.no_grad():  # the unscaled pass: layer inputs x_l, maps A_l, pseudo labels
        x, pad = enc.embed(batch["input_ids"], batch["attention_mask"], batch["token_type_ids"])
        xs, attns = [], []
        for layer in enc.layers:
            xs.append(x)
            x, A = layer(x, pad)
            attns.append(A)
        if labels is None:
            labels = pseudo_labels(model.head(x), batch)  # Eq. 4
    B, H, T, _ = attns[0].size()
    L = len(enc.layers)
    last = L - 1 if model.head.first_only else None  # the layer that may carry the first token only
    if ig_budget is None:
        ig_budget = 2**25 if x.is_cuda else 2**23
    K = max(1, min(m, ig_budget // (B * H * T * T)))  # steps per chunk
    alphas = torch.arange(1, m + 1, device=x.device, dtype=x.dtype) / m  # k/m, k = 1..m
    scores = {}
    for l in layers:
        total = torch.zeros_like(attns[l])  # sum_k dF(k/m A)/dA, (B, H, T, T)
        for a in alphas.split(K):
            k = len(a)
            h = xs[l].repeat(k, 1, 1)  # (k*B, T, C): step-major copies of the batch
            padk = pad.repeat(k, 1, 1, 1)  # (k*B, 1, 1, T)
            scale = a.repeat_interleave(B).view(k * B, 1, 1, 1)
            with torch.enable_grad():  # a sentence head reads the first token only: so does the last layer
                h, A_scaled = enc.layers[l](h, padk, scale=scale, first_only=l == last)  # A_scaled = k/m A_l
                for i in range(l + 1, L):
                    h, _ = enc.layers[i](h, padk, first_only=i == last)
                F_k = objective(model.head(h), labels.repeat(k, *[1] * (labels.dim() - 1)), regression)
                g, = torch.autograd.grad(F_k, A_scaled)  # dF/dA at k/m A, (k*B, H, T, T)
            total += g.view(k, B, H, T, T).sum(0)
        scores[l] = total / m
    return scores
'''),
    (8, 'pseudo labels taken anew at each step', '''\
def integrated_gradients(model, batch, layers, labels, regression, m=20, ig_budget=None):
    enc = model.encoder
    with torch.no_grad():  # the unscaled pass: layer inputs x_l, maps A_l, pseudo labels
        x, pad = enc.embed(batch["input_ids"], batch["attention_mask"], batch["token_type_ids"])
        xs, attns = [], []
        for layer in enc.layers:
            xs.append(x)
            x, A = layer(x, pad)
            attns.append(A)
        if labels is None:
            labels = pseudo_labels(model.head(x), batch)  # Eq. 4
    B, H, T, _ = attns[0].size()
    L = len(enc.layers)
    last = L - 1 if model.head.first_only else None  # the layer that may carry the first token only
    if ig_budget is None:
        ig_budget = 2**25 if x.is_cuda else 2**23
    K = max(1, min(m, ig_budget // (B * H * T * T)))  # steps per chunk
    alphas = torch.arange(1, m + 1, device=x.device, dtype=x.dtype) / m  # k/m, k = 1..m
    scores = {}
    for l in layers:
        total = torch.zeros_like(attns[l])  # sum_k dF(k/m A)/dA, (B, H, T, T)
        for a in alphas.split(K):
            k = len(a)
            h = xs[l].repeat(k, 1, 1)  # (k*B, T, C): step-major copies of the batch
            padk = pad.repeat(k, 1, 1, 1)  # (k*B, 1, 1, T)
            scale = a.repeat_interleave(B).view(k * B, 1, 1, 1)
            with torch.enable_grad():  # a sentence head reads the first token only: so does the last layer
                h, A_scaled = enc.layers[l](h, padk, scale=scale, first_only=l == last)  # A_scaled = k/m A_l
                for i in range(l + 1, L):
                    h, _ = enc.layers[i](h, padk, first_only=i == last)
                F_k = objective(model.head(h), model.head(h).argmax(-1) if labels.dim() == 1 and not regression else labels.repeat(k, *[1] * (labels.dim() - 1)), regression)
                g, = torch.autograd.grad(F_k, A_scaled)  # dF/dA at k/m A, (k*B, H, T, T)
            total += g.view(k, B, H, T, T).sum(0)
        scores[l] = attns[l] * total / m
    return scores
'''),
    (8, 'a left Riemann sum', '''\
def integrated_gradients(model, batch, layers, labels, regression, m=20, ig_budget=None):
    enc = model.encoder
    with torch.no_grad():  # the unscaled pass: layer inputs x_l, maps A_l, pseudo labels
        x, pad = enc.embed(batch["input_ids"], batch["attention_mask"], batch["token_type_ids"])
        xs, attns = [], []
        for layer in enc.layers:
            xs.append(x)
            x, A = layer(x, pad)
            attns.append(A)
        if labels is None:
            labels = pseudo_labels(model.head(x), batch)  # Eq. 4
    B, H, T, _ = attns[0].size()
    L = len(enc.layers)
    last = L - 1 if model.head.first_only else None  # the layer that may carry the first token only
    if ig_budget is None:
        ig_budget = 2**25 if x.is_cuda else 2**23
    K = max(1, min(m, ig_budget // (B * H * T * T)))  # steps per chunk
    alphas = torch.arange(0, m, device=x.device, dtype=x.dtype) / m  # k/m, k = 1..m
    scores = {}
    for l in layers:
        total = torch.zeros_like(attns[l])  # sum_k dF(k/m A)/dA, (B, H, T, T)
        for a in alphas.split(K):
            k = len(a)
            h = xs[l].repeat(k, 1, 1)  # (k*B, T, C): step-major copies of the batch
            padk = pad.repeat(k, 1, 1, 1)  # (k*B, 1, 1, T)
            scale = a.repeat_interleave(B).view(k * B, 1, 1, 1)
            with torch.enable_grad():  # a sentence head reads the first token only: so does the last layer
                h, A_scaled = enc.layers[l](h, padk, scale=scale, first_only=l == last)  # A_scaled = k/m A_l
                for i in range(l + 1, L):
                    h, _ = enc.layers[i](h, padk, first_only=i == last)
                F_k = objective(model.head(h), labels.repeat(k, *[1] * (labels.dim() - 1)), regression)
                g, = torch.autograd.grad(F_k, A_scaled)  # dF/dA at k/m A, (k*B, H, T, T)
            total += g.view(k, B, H, T, T).sum(0)
        scores[l] = attns[l] * total / m
    return scores
'''),
    (8, 'the sum not divided by m', '''\
def integrated_gradients(model, batch, layers, labels, regression, m=20, ig_budget=None):
    enc = model.encoder
    with torch.no_grad():  # the unscaled pass: layer inputs x_l, maps A_l, pseudo labels
        x, pad = enc.embed(batch["input_ids"], batch["attention_mask"], batch["token_type_ids"])
        xs, attns = [], []
        for layer in enc.layers:
            xs.append(x)
            x, A = layer(x, pad)
            attns.append(A)
        if labels is None:
            labels = pseudo_labels(model.head(x), batch)  # Eq. 4
    B, H, T, _ = attns[0].size()
    L = len(enc.layers)
    last = L - 1 if model.head.first_only else None  # the layer that may carry the first token only
    if ig_budget is None:
        ig_budget = 2**25 if x.is_cuda else 2**23
    K = max(1, min(m, ig_budget // (B * H * T * T)))  # steps per chunk
    alphas = torch.arange(1, m + 1, device=x.device, dtype=x.dtype) / m  # k/m, k = 1..m
    scores = {}
    for l in layers:
        total = torch.zeros_like(attns[l])  # sum_k dF(k/m A)/dA, (B, H, T, T)
        for a in alphas.split(K):
            k = len(a)
            h = xs[l].repeat(k, 1, 1)  # (k*B, T, C): step-major copies of the batch
            padk = pad.repeat(k, 1, 1, 1)  # (k*B, 1, 1, T)
            scale = a.repeat_interleave(B).view(k * B, 1, 1, 1)
            with torch.enable_grad():  # a sentence head reads the first token only: so does the last layer
                h, A_scaled = enc.layers[l](h, padk, scale=scale, first_only=l == last)  # A_scaled = k/m A_l
                for i in range(l + 1, L):
                    h, _ = enc.layers[i](h, padk, first_only=i == last)
                F_k = objective(model.head(h), labels.repeat(k, *[1] * (labels.dim() - 1)), regression)
                g, = torch.autograd.grad(F_k, A_scaled)  # dF/dA at k/m A, (k*B, H, T, T)
            total += g.view(k, B, H, T, T).sum(0)
        scores[l] = attns[l] * total
    return scores
'''),
    (8, "the chain rule's k/m", '''\
def integrated_gradients(model, batch, layers, labels, regression, m=20, ig_budget=None):
    enc = model.encoder
    with torch.no_grad():  # the unscaled pass: layer inputs x_l, maps A_l, pseudo labels
        x, pad = enc.embed(batch["input_ids"], batch["attention_mask"], batch["token_type_ids"])
        xs, attns = [], []
        for layer in enc.layers:
            xs.append(x)
            x, A = layer(x, pad)
            attns.append(A)
        if labels is None:
            labels = pseudo_labels(model.head(x), batch)  # Eq. 4
    B, H, T, _ = attns[0].size()
    L = len(enc.layers)
    last = L - 1 if model.head.first_only else None  # the layer that may carry the first token only
    if ig_budget is None:
        ig_budget = 2**25 if x.is_cuda else 2**23
    K = max(1, min(m, ig_budget // (B * H * T * T)))  # steps per chunk
    alphas = torch.arange(1, m + 1, device=x.device, dtype=x.dtype) / m  # k/m, k = 1..m
    scores = {}
    for l in layers:
        total = torch.zeros_like(attns[l])  # sum_k dF(k/m A)/dA, (B, H, T, T)
        for a in alphas.split(K):
            k = len(a)
            h = xs[l].repeat(k, 1, 1)  # (k*B, T, C): step-major copies of the batch
            padk = pad.repeat(k, 1, 1, 1)  # (k*B, 1, 1, T)
            scale = a.repeat_interleave(B).view(k * B, 1, 1, 1)
            with torch.enable_grad():  # a sentence head reads the first token only: so does the last layer
                h, A_scaled = enc.layers[l](h, padk, scale=scale, first_only=l == last)  # A_scaled = k/m A_l
                for i in range(l + 1, L):
                    h, _ = enc.layers[i](h, padk, first_only=i == last)
                F_k = objective(model.head(h), labels.repeat(k, *[1] * (labels.dim() - 1)), regression)
                g, = torch.autograd.grad(F_k, A_scaled)  # dF/dA at k/m A, (k*B, H, T, T)
            total += (g.view(k, B, H, T, T) * a.view(k, 1, 1, 1, 1)).sum(0)
        scores[l] = attns[l] * total / m
    return scores
'''),
    (8, 'a plain loop that does not turn gradients on', '''\
def integrated_gradients(model, batch, layers, labels, regression, m=20, ig_budget=None):
    enc = model.encoder
    with torch.no_grad():  # the unscaled pass: each layer's input and map, the pseudo labels
        x, pad = enc.embed(batch["input_ids"], batch["attention_mask"], batch["token_type_ids"])
        xs, attns = [], []
        for layer in enc.layers:
            xs.append(x)
            x, A = layer(x, pad)
            attns.append(A)
        if labels is None:
            labels = pseudo_labels(model.head(x), batch)
    B = x.size(0)
    scores = {}
    for l in layers:
        total = torch.zeros_like(attns[l])
        for k in range(1, m + 1):
            scale = torch.full((B, 1, 1, 1), k / m, dtype=x.dtype, device=x.device)
            h, A_scaled = enc.layers[l](xs[l], pad, scale=scale)
            for i in range(l + 1, len(enc.layers)):
                h, _ = enc.layers[i](h, pad)
            g, = torch.autograd.grad(objective(model.head(h), labels, regression), A_scaled)
            total += g
        scores[l] = attns[l] * total / m
    return scores
'''),
    (9, 'p alone for p q', '''\
def random_mask(scores, attention_mask, p, q, generator=None):
    B, H, T, _ = scores.size()
    return _real_rows(bernoulli((B, H, T, T), p, generator, attention_mask.device), attention_mask)
'''),
    (9, 'a fixed count of candidates a row', '''\
def random_mask(scores, attention_mask, p, q, generator=None):
    B, H, T, _ = scores.size()
    return _real_rows((drop_mask(torch.rand((B, H, T, T), generator=generator, device=attention_mask.device), attention_mask, p, 1.0, generator=generator) & bernoulli((B, H, T, T), q, generator, attention_mask.device)), attention_mask)
'''),
    (9, 'real pairs only, no guard', '''\
def random_mask(scores, attention_mask, p, q, generator=None):
    B, H, T, _ = scores.size()
    real = attention_mask.bool()
    return bernoulli((B, H, T, T), p * q, generator, attention_mask.device) & real[:, None, :, None] & real[:, None, None, :]
'''),
    (9, 'the generator ignored', '''\
def random_mask(scores, attention_mask, p, q, generator=None):
    B, H, T, _ = scores.size()
    return _real_rows(bernoulli((B, H, T, T), p * q, None, attention_mask.device), attention_mask)
'''),
    (9, 'one mask for every head', '''\
def random_mask(scores, attention_mask, p, q, generator=None):
    B, H, T, _ = scores.size()
    return _real_rows(bernoulli((B, H, T, T), p * q, generator, attention_mask.device)[:, :1].repeat(1, H, 1, 1), attention_mask)
'''),
    (9, "the scores' top p as candidates", '''\
def random_mask(scores, attention_mask, p, q, generator=None):
    return drop_mask(scores, attention_mask, p, q, generator=generator)
'''),
    (10, 'log-softmax over the tokens', '''\
def pseudo_loss(logits, labels):
    k = labels != IGNORE
    return -logits.log_softmax(1)[k].gather(1, labels[k][:, None]).sum()
'''),
    (10, 'a mean for the sum', '''\
def pseudo_loss(logits, labels):
    return F.cross_entropy(logits.flatten(0, 1), labels.flatten(), ignore_index=IGNORE, reduction="mean")
'''),
    (10, 'the raw logits for the log-probabilities', '''\
def pseudo_loss(logits, labels):
    k = labels != IGNORE
    return -logits[k].gather(1, labels[k][:, None]).sum()
'''),
    (10, 'IGNORE counted as class 0', '''\
def pseudo_loss(logits, labels):
    return F.cross_entropy(logits.flatten(0, 1), labels.clamp(min=0).flatten(), reduction="sum")
'''),
    (11, 'the mirror strategy dropped', '''\
def addrop_masks(model, batch, layers, p, q, method="ga", mask="high", gold=False, regression=False, m=20,
                 first_pass="eval"):
    labels = batch["labels"] if gold else None
    scores = attribute(model, batch, layers, method, labels, regression, m, first_pass=first_pass)
    masks = [None] * model.cfg.num_hidden_layers
    for l, M in zip(layers, layer_masks([scores[l] for l in layers], batch["attention_mask"], p, q, "high")):
        masks[l] = M
    return masks
'''),
    (11, 'gold ignored', '''\
def addrop_masks(model, batch, layers, p, q, method="ga", mask="high", gold=False, regression=False, m=20,
                 first_pass="eval"):
    labels = None
    scores = attribute(model, batch, layers, method, labels, regression, m, first_pass=first_pass)
    masks = [None] * model.cfg.num_hidden_layers
    for l, M in zip(layers, layer_masks([scores[l] for l in layers], batch["attention_mask"], p, q, mask)):
        masks[l] = M
    return masks
'''),
    (11, 'masks for the selected layers only', '''\
def addrop_masks(model, batch, layers, p, q, method="ga", mask="high", gold=False, regression=False, m=20,
                 first_pass="eval"):
    labels = batch["labels"] if gold else None
    scores = attribute(model, batch, layers, method, labels, regression, m, first_pass=first_pass)
    masks = [None] * len(layers)
    for l, M in zip(layers, layer_masks([scores[l] for l in layers], batch["attention_mask"], p, q, mask)):
        masks[l] = M
    return masks
'''),
    (11, 'an attribution for RD too', '''\
def addrop_masks(model, batch, layers, p, q, method="ga", mask="high", gold=False, regression=False, m=20,
                 first_pass="eval"):
    labels = batch["labels"] if gold else None
    if method == "rd":
        attribute(model, batch, layers, "ga", first_pass=first_pass)
    scores = attribute(model, batch, layers, method, labels, regression, m, first_pass=first_pass)
    masks = [None] * model.cfg.num_hidden_layers
    for l, M in zip(layers, layer_masks([scores[l] for l in layers], batch["attention_mask"], p, q, mask)):
        masks[l] = M
    return masks
'''),
    (11, 'the layers drawn sorted', '''\
def addrop_masks(model, batch, layers, p, q, method="ga", mask="high", gold=False, regression=False, m=20,
                 first_pass="eval"):
    layers = sorted(layers)
    labels = batch["labels"] if gold else None
    scores = attribute(model, batch, layers, method, labels, regression, m, first_pass=first_pass)
    masks = [None] * model.cfg.num_hidden_layers
    for l, M in zip(layers, layer_masks([scores[l] for l in layers], batch["attention_mask"], p, q, mask)):
        masks[l] = M
    return masks
'''),
    (11, 'masks up to the highest selected layer', '''\
def addrop_masks(model, batch, layers, p, q, method="ga", mask="high", gold=False, regression=False, m=20,
                 first_pass="eval"):
    labels = batch["labels"] if gold else None
    scores = attribute(model, batch, layers, method, labels, regression, m, first_pass=first_pass)
    masks = [None] * (max(layers) + 1)
    for l, M in zip(layers, layer_masks([scores[l] for l in layers], batch["attention_mask"], p, q, mask)):
        masks[l] = M
    return masks
'''),
    (11, 'regression not handed on', '''\
def addrop_masks(model, batch, layers, p, q, method="ga", mask="high", gold=False, regression=False, m=20,
                 first_pass="eval"):
    labels = batch["labels"] if gold else None
    scores = attribute(model, batch, layers, method, labels, False, m, first_pass=first_pass)
    masks = [None] * model.cfg.num_hidden_layers
    for l, M in zip(layers, layer_masks([scores[l] for l in layers], batch["attention_mask"], p, q, mask)):
        masks[l] = M
    return masks
'''),
    (11, 'masks of the selected layers only, appended', '''\
def addrop_masks(model, batch, layers, p, q, method="ga", mask="high", gold=False, regression=False, m=20,
                 first_pass="eval"):
    labels = batch["labels"] if gold else None
    scores = attribute(model, batch, layers, method, labels, regression, m, first_pass=first_pass)
    masks = [None] * model.cfg.num_hidden_layers
    for l, M in zip(layers, layer_masks([scores[l] for l in layers], batch["attention_mask"], p, q, mask)):
        masks[l] = M
    return [M for M in masks if M is not None]
'''),
    (11, 'the model left in eval mode', '''\
def addrop_masks(model, batch, layers, p, q, method="ga", mask="high", gold=False, regression=False, m=20,
                 first_pass="eval"):
    model.eval()
    labels = batch["labels"] if gold else None
    scores = attribute(model, batch, layers, method, labels, regression, m, first_pass=first_pass)
    masks = [None] * model.cfg.num_hidden_layers
    for l, M in zip(layers, layer_masks([scores[l] for l in layers], batch["attention_mask"], p, q, mask)):
        masks[l] = M
    return masks
'''),
    (11, 'an attribution by backward()', '''\
def addrop_masks(model, batch, layers, p, q, method="ga", mask="high", gold=False, regression=False, m=20,
                 first_pass="eval"):
    model(batch["input_ids"], batch["attention_mask"], batch["token_type_ids"])[0].sum().backward()
    labels = batch["labels"] if gold else None
    scores = attribute(model, batch, layers, method, labels, regression, m, first_pass=first_pass)
    masks = [None] * model.cfg.num_hidden_layers
    for l, M in zip(layers, layer_masks([scores[l] for l in layers], batch["attention_mask"], p, q, mask)):
        masks[l] = M
    return masks
'''),
    (11, 'the layers in reversed order', '''\
def addrop_masks(model, batch, layers, p, q, method="ga", mask="high", gold=False, regression=False, m=20,
                 first_pass="eval"):
    labels = batch["labels"] if gold else None
    scores = attribute(model, batch, layers, method, labels, regression, m, first_pass=first_pass)
    masks = [None] * model.cfg.num_hidden_layers
    for l, M in zip(layers[::-1], layer_masks([scores[l] for l in layers[::-1]], batch["attention_mask"], p, q, mask)):
        masks[l] = M
    return masks
'''),
    (11, 'first_pass not handed on', '''\
def addrop_masks(model, batch, layers, p, q, method="ga", mask="high", gold=False, regression=False, m=20,
                 first_pass="eval"):
    labels = batch["labels"] if gold else None
    scores = attribute(model, batch, layers, method, labels, regression, m, first_pass="eval")
    masks = [None] * model.cfg.num_hidden_layers
    for l, M in zip(layers, layer_masks([scores[l] for l in layers], batch["attention_mask"], p, q, mask)):
        masks[l] = M
    return masks
'''),
    (11, 'm not handed on', '''\
def addrop_masks(model, batch, layers, p, q, method="ga", mask="high", gold=False, regression=False, m=20,
                 first_pass="eval"):
    labels = batch["labels"] if gold else None
    scores = attribute(model, batch, layers, method, labels, regression, 20, first_pass=first_pass)
    masks = [None] * model.cfg.num_hidden_layers
    for l, M in zip(layers, layer_masks([scores[l] for l in layers], batch["attention_mask"], p, q, mask)):
        masks[l] = M
    return masks
'''),
    (11, 'the method ignored', '''\
def addrop_masks(model, batch, layers, p, q, method="ga", mask="high", gold=False, regression=False, m=20,
                 first_pass="eval"):
    labels = batch["labels"] if gold else None
    scores = attribute(model, batch, layers, "ga", labels, regression, m, first_pass=first_pass)
    masks = [None] * model.cfg.num_hidden_layers
    for l, M in zip(layers, layer_masks([scores[l] for l in layers], batch["attention_mask"], p, q, mask)):
        masks[l] = M
    return masks
'''),
]

# (exercise, the answer, the whole function): right answers other than the real code's, which every lesson
# must pass: the lessons check the law of Eq. 7's coins and where they come from, not one way to draw them, and a
# plain loop of integrated gradients is as right as addrop.py's batched one
RIGHT = [
    (5, 'an extra column of +inf instead of a test for idx == n', '''\
def threshold(scores, real, p):
    n = real.sum(-1, keepdim=True)
    idx = n * round((1 - p) * 10**6) // 10**6  # int(n (1 - p)); n when p = 0
    b_hat = scores.masked_fill(~real, float("inf")).sort(-1).values
    b_hat = torch.cat([b_hat, torch.full_like(b_hat[..., :1], float("inf"))], -1)  # entry T: +inf
    return b_hat.gather(-1, idx.expand(*scores.shape[:-1], 1))
'''),
    (8, 'a plain loop', '''\
def integrated_gradients(model, batch, layers, labels, regression, m=20, ig_budget=None):
    enc = model.encoder
    with torch.no_grad():  # the unscaled pass: each layer's input and map, the pseudo labels
        x, pad = enc.embed(batch["input_ids"], batch["attention_mask"], batch["token_type_ids"])
        xs, attns = [], []
        for layer in enc.layers:
            xs.append(x)
            x, A = layer(x, pad)
            attns.append(A)
        if labels is None:
            labels = pseudo_labels(model.head(x), batch)
    B = x.size(0)
    scores = {}
    for l in layers:
        total = torch.zeros_like(attns[l])
        for k in range(1, m + 1):
            scale = torch.full((B, 1, 1, 1), k / m, dtype=x.dtype, device=x.device)
            with torch.enable_grad():  # whoever called, the steps need a graph
                h, A_scaled = enc.layers[l](xs[l], pad, scale=scale)
                for i in range(l + 1, len(enc.layers)):
                    h, _ = enc.layers[i](h, pad)
                g, = torch.autograd.grad(objective(model.head(h), labels, regression), A_scaled)
            total += g
        scores[l] = attns[l] * total / m
    return scores
'''),
    (9, 'two draws, at p and at q', '''\
def random_mask(scores, attention_mask, p, q, generator=None):
    B, H, T, _ = scores.size()
    return _real_rows(bernoulli((B, H, T, T), p, generator, attention_mask.device) & bernoulli((B, H, T, T), q, generator, attention_mask.device), attention_mask)
'''),
]
