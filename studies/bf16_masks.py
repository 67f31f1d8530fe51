"""
How far --dtype bf16 moves AD-DROP's masks, on real dev batches: run as `python studies/bench.py --bf16-masks
[--checkpoint DIR]`, whose figures RESULTS.md gives. See bf16_masks.
"""

import json
import sys
from pathlib import Path

import torch

import addrop
import data
from support import checkpoint, settings

def bf16_masks(args, p, batches=4):
    """How far --dtype bf16 moves AD-DROP's masks. On real RTE dev batches (16 x up to 128 tokens) and the
    installed MiniLM, GA scores of all layers are taken once in float32 and once under bf16 autocast (as
    train.py does under --dtype bf16), and compared through what they decide: the candidate regions of Eq. 6
    (p, q = 1), the dropped positions of Eq. 7 (q = 0.1, the same coin flips for both), and the pseudo
    labels. Agreement is the intersection over the union of the two sets of (example, head, query, key).
    A fresh head's logits are nearly tied, so bf16 rounding flips many pseudo labels there: pass a
    fine-tuned --checkpoint for the figure that holds in an AD-DROP epoch (which follows a plain one)."""
    device = settings.pick_device(args.device, 0)
    torch.manual_seed(args.seed)  # the fresh head, when there is one
    weights = Path(args.checkpoint) if args.checkpoint else checkpoint.default_weights_dir()
    task = json.loads((weights / "config.json").read_text()).get("task", "rte")  # train.py writes a checkpoint's task
    if data.get_task(task).labels is None:
        sys.exit(f"error: --checkpoint {weights}: a {task} model is a regressor; --bf16-masks compares classifiers")
    net = checkpoint.from_pretrained(weights, data.num_labels(task)).to(device)
    tok = data.load_tokenizer(weights, 128)
    dev = data.load_split(task, "dev", data.resolve_data_dir(args.data_dir))[:16 * batches]
    layers = list(range(net.cfg.num_hidden_layers))
    sets = {"candidates (q = 1)": [0, 0], "dropped (q = 0.1)": [0, 0]}  # name -> [intersection, union]
    same_label = 0
    encoded, labels = data.encode(tok, dev)
    for b in data.batches(encoded, labels, 16, data.pad_token_id(tok)):
        b = {k: v.to(device) for k, v in b.items()}
        s32 = addrop.attribute(net, b, layers, "ga")
        with torch.autocast(device.type, torch.bfloat16):
            s16 = addrop.attribute(net, b, layers, "ga")
            logits16 = net(b["input_ids"], b["attention_mask"], b["token_type_ids"])[0]
        with torch.no_grad():
            same_label += (net(b["input_ids"], b["attention_mask"], b["token_type_ids"])[0].argmax(-1)
                           == logits16.argmax(-1)).sum().item()
        for l in layers:
            for name, q in (("candidates (q = 1)", 1.0), ("dropped (q = 0.1)", 0.1)):
                m32, m16 = (addrop.drop_mask(s[l].float(), b["attention_mask"], p, q,
                                             generator=torch.Generator(device).manual_seed(l)) for s in (s32, s16))
                sets[name][0] += (m32 & m16).sum().item()
                sets[name][1] += (m32 | m16).sum().item()
    print(f"bf16 vs float32 attribution: {len(dev)} {data.get_task(task).name} dev examples, GA in all {len(layers)} layers, p={p}, "
          f"{f'fine-tuned {weights}' if args.checkpoint else 'MiniLM with a fresh classifier head'}, {device}")
    for name, (inter, union) in sets.items():
        print(f"  {name:<20} agree on {inter / union:.2%} of the positions either one marks (intersection / union)")
    print(f"  pseudo labels        {same_label} of {len(dev)} the same")
    return {name: inter / union for name, (inter, union) in sets.items()} | {"pseudo_labels_same": same_label / len(dev)}
