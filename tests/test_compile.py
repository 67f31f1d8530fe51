"""
Tests of the GPU's code path, run on a CPU: the masks and the attribution without host synchronisations,
captured whole by torch.compile, giving what the eager CPU path gives; and train.py --compile training as
the eager run does, resuming exactly and under torchrun.

On a GPU every read of a number back to the CPU (.item(), int(tensor), a data-dependent shape) stops the CPU
until the GPU catches up, and a CUDA graph cannot hold it. torch.compile(fullgraph=True) refuses such code
outright, so compiling with it here (backend aot_eager: the captured graph run op by op, no C compiler, the
same numbers as eager) proves the path sync-free without a GPU.

    python -m pytest -q test_compile.py
"""

import contextlib
import copy
import signal

import pytest
import torch

import addrop
import model
from test_train import metrics, setup, signal_at, start, train  # noqa: F401 (setup: the fixture, used by name)


def scores_and_mask(seed, B=5, H=3, T=11):
    """Random scores with ties (rounded to a tenth) and an attention mask with padding of several lengths."""
    g = torch.Generator().manual_seed(seed)
    scores = (torch.randn(B, H, T, T, generator=g) * 10).round() / 10
    n = torch.tensor([T, T - 1, 7, 3, 1])[:B]
    return scores, (torch.arange(T)[None] < n[:, None]).long()


def drop_mask_sorted(monkeypatch, *args, **kw):
    """drop_mask through its sync-free branch (sort, then a gather at int(n(1-p))), on this CPU."""
    with monkeypatch.context() as m:
        m.setattr(addrop, "sync_free", lambda device: True)
        return addrop.drop_mask(*args, **kw)


@pytest.mark.parametrize("p", [0.1, 0.3, 0.5, 0.7, 0.9, 0.95, 1.0])
@pytest.mark.parametrize("low", [False, True])
def test_the_sorted_threshold_equals_the_selected_one(monkeypatch, p, low):
    """The GPU's drop_mask (a sort and a gather) and the eager CPU's (one kthvalue) give the same mask for the
    same scores and coin flips, exactly: with q = 1 (the candidates themselves) and with q = 0.5, whose coin
    flips both paths draw as torch.rand(n) < q from the same stream. Ties, padding, a one-token example, and
    p = 0.95 and 1, where the guard keeps whole rows, are all in the rows compared."""
    scores, mask = scores_and_mask(0)
    for q in (1.0, 0.5):
        torch.manual_seed(1)
        selected = addrop.drop_mask(scores, mask, p, q, low=low)
        torch.manual_seed(1)
        assert torch.equal(drop_mask_sorted(monkeypatch, scores, mask, p, q, low=low), selected), (p, q, low)
    assert selected.any() or p >= 0.95  # the comparison is not of two empty masks


def sync_free_everywhere(monkeypatch):
    """Both modules' choice set to the sync-free draws: the eager reference of what a compiled graph runs."""
    monkeypatch.setattr(addrop, "sync_free", lambda device: True)
    monkeypatch.setattr(model, "sync_free", lambda device: True)


def test_masks_and_their_count_compile_as_one_graph(monkeypatch):
    """drop_mask, random_mask and dropped_fraction compile with fullgraph=True, which fails on any host
    synchronisation or data-dependent shape, and give the eager sync-free path's masks for the same seed
    (q = 0.1: coin flips drawn by torch.rand, not by the CPU's gap sampler), to the last bit."""
    scores, mask = scores_and_mask(2)
    masks = {}
    for name, f, args in (("drop", addrop.drop_mask, (scores, mask, 0.7, 0.1)),
                          ("low", lambda *a: addrop.drop_mask(*a, low=True), (scores, mask, 0.3, 0.4)),
                          ("rd", addrop.random_mask, (scores, mask, 0.7, 0.1))):
        torch.manual_seed(3)
        masks[name] = torch.compile(f, backend="aot_eager", fullgraph=True, dynamic=False)(*args)
        with monkeypatch.context() as m:
            sync_free_everywhere(m)
            torch.manual_seed(3)
            assert torch.equal(f(*args), masks[name]), name
        assert masks[name].any(), name
    Ms = [masks["drop"], None, masks["rd"]]
    frac = torch.compile(addrop.dropped_fraction, backend="aot_eager", fullgraph=True)(Ms, mask)
    assert frac.item() == pytest.approx(addrop.dropped_fraction(Ms, mask).item(), rel=1e-6)


@pytest.mark.parametrize("mask", ["high", "low", "random"])
def test_all_layers_in_one_graph_give_each_layers_mask(monkeypatch, mask):
    """layer_masks under compile (addrop.GRAPH_BACKEND set, as train.py --compile sets it) builds every layer's
    mask in one graph, the layers' scores joined as one batch; each layer's mask is the one MASKS[mask] gives
    it alone, drawn in the order the layers are listed (the coin flips of a CPU come from one stream): the
    masks of per-layer sync-free calls for the same seed, to the bit, for layers listed out of order too.
    Ties, padding, a one-token example in every layer."""
    layers = [4, 0, 2]
    scores = {l: scores_and_mask(10 + l)[0] for l in range(5)}
    am = scores_and_mask(0)[1]
    torch.manual_seed(7)
    monkeypatch.setattr(addrop, "GRAPH_BACKEND", "aot_eager")
    joined = addrop.layer_masks([scores[l] for l in layers], am, 0.7, 0.3, mask)
    monkeypatch.setattr(addrop, "GRAPH_BACKEND", None)
    with monkeypatch.context() as m:
        sync_free_everywhere(m)
        torch.manual_seed(7)
        alone = [addrop.MASKS[mask](scores[l], am, 0.7, 0.3) for l in layers]
    assert [M.shape for M in joined] == [M.shape for M in alone]
    for l, a, b in zip(layers, joined, alone):
        assert torch.equal(a, b), l
        assert a.any(), l
    assert not torch.equal(joined[0], joined[1])  # the layers are not one mask repeated


def first_key(scores, attention_mask, p, q, generator=None):
    """A mask a researcher might add, written plainly (no sync-free care): each real row drops its first key
    when that key scores above the row's mean."""
    drop = torch.zeros_like(scores, dtype=torch.bool)
    drop[..., 0] = scores[..., 0] > scores.mean(-1)
    return addrop._real_rows(drop, attention_mask)


def sign_flipped(model, batch, layers, labels, regression, m=None, ig_budget=None):
    """An attribution a researcher might add: minus the gradient."""
    return {l: -B for l, B in addrop.gradient(model, batch, layers, labels, regression).items()}


def test_a_new_mask_and_attribution_are_one_entry_each(monkeypatch):
    """Adding a mask or an attribution is one function and one entry in addrop.MASKS / addrop.ATTRIBUTIONS:
    addrop_masks then uses it, eagerly and with the masks compiled (GRAPH_BACKEND aot_eager, the path of train.py
    --compile), the same masks on both paths; and train.py's flags accept the new names."""
    monkeypatch.setitem(addrop.MASKS, "first", first_key)
    monkeypatch.setitem(addrop.ATTRIBUTIONS, "neg", sign_flipped)
    net, b = tiny(dropout=0.0), tiny_batch()
    eager = addrop.addrop_masks(net, b, [0, 2], 0.5, 0.5, method="neg", mask="first")
    monkeypatch.setattr(addrop, "GRAPH_BACKEND", "aot_eager")
    compiled = addrop.addrop_masks(net, b, [0, 2], 0.5, 0.5, method="neg", mask="first")
    scores = sign_flipped(net.eval(), b, [0, 2], None, False)
    for l in (0, 2):
        assert torch.equal(eager[l], compiled[l]) and torch.equal(eager[l], first_key(scores[l], b["attention_mask"], 0, 0))
    assert eager[1] is None and any(eager[l].any() for l in (0, 2))
    from support import settings
    args = settings.parse_args(["--task", "rte", "--attribution", "neg", "--mask", "first", "--p", "0.5", "--q", "0.5"])
    assert (args.attribution, args.mask) == ("neg", "first")


def tiny(seed=0, dropout=0.1, token_level=False):
    torch.manual_seed(seed)
    cfg = model.Config(vocab_size=100, hidden_size=32, num_hidden_layers=3, num_attention_heads=4,
                       intermediate_size=37, max_position_embeddings=64, hidden_dropout_prob=dropout,
                       attention_probs_dropout_prob=dropout)
    return model.Model(cfg, 3, token_level=token_level)


def tiny_batch(token_level=False):
    g = torch.Generator().manual_seed(5)
    B, T = 4, 12
    mask = torch.ones(B, T, dtype=torch.long)
    mask[2:, 8:] = 0
    ids = torch.randint(1, 100, (B, T), generator=g).masked_fill(mask == 0, 0)
    labels = torch.randint(0, 3, (B, T) if token_level else (B,), generator=g)
    if token_level:
        labels = labels.masked_fill(mask == 0, addrop.IGNORE)
    return {"input_ids": ids, "attention_mask": mask, "token_type_ids": torch.zeros_like(ids), "labels": labels}


@pytest.mark.parametrize("token_level", [False, True])
def test_compiled_attribution_equals_eager(token_level):
    """B_l through a model compiled whole (fullgraph=True: no graph break in the model) equals eager B_l to
    1e-6 of its largest entry, in fp32, for GA on every layer (the gradient with respect to the zero probes
    added to A_l, inputs of the compiled graph), and AA and IGA too (these two run the model's layers eagerly:
    model.encoder with depth, and layer by layer at k/m A). No parameter is left with a gradient, and
    every parameter wants one again afterwards (addrop._frozen)."""
    net = tiny(token_level=token_level)
    compiled = copy.deepcopy(net)
    compiled.compile(backend="aot_eager", fullgraph=True)
    b = tiny_batch(token_level)
    for method in ("ga", "aa", "iga"):
        want = addrop.attribute(net, b, [0, 1, 2], method, m=4)
        got = addrop.attribute(compiled, b, [0, 1, 2], method, m=4)
        scale = max(w.abs().max().item() for w in want.values())
        assert scale > 0 and max((got[l] - want[l]).abs().max().item() for l in want) <= 1e-6 * scale, method
    assert all(w.grad is None and w.requires_grad for w in compiled.parameters())


def test_the_compiled_attribution_computes_no_parameter_gradient(monkeypatch):
    """A compiled model's backward is built before anyone asks for a gradient: AOTAutograd differentiates with
    respect to every input that needs one, the parameters too, unless addrop._frozen turns them off for the
    attribution pass. The backward graph GA's attribution runs returns the probes' gradients (one per layer
    asked for) and nothing else, and has half the matrix products that the backward with every parameter's
    gradient has (26 against 52 here: each linear layer's weight gradient is one more)."""
    from functorch.compile import make_boxed_func
    from torch._dynamo.backends.common import aot_autograd

    def backward_graph(frozen):
        graphs = []

        def run_as_traced(gm, inputs):
            return make_boxed_func(gm.forward)

        def keep_backward(gm, inputs):
            graphs.append(gm)
            return run_as_traced(gm, inputs)

        net = tiny()
        net.compile(backend=aot_autograd(fw_compiler=run_as_traced, bw_compiler=keep_backward), fullgraph=True)
        with monkeypatch.context() as m:
            if not frozen:
                m.setattr(addrop, "_frozen", lambda model: contextlib.nullcontext())
            addrop.attribute(net, tiny_batch(), [0, 1, 2], "ga")
        (graph,) = graphs
        outputs = next(n for n in graph.graph.nodes if n.op == "output").args[0]
        products = [n for n in graph.graph.nodes if n.op == "call_function" and "mm" in str(n.target)]
        return sum(o is not None for o in outputs), len(products)

    (grads, products), (grads_all, products_all) = backward_graph(True), backward_graph(False)
    assert grads == 3  # the probes of layers 0, 1, 2
    assert grads_all > 3 + 2 * 3 * 6  # every weight and bias of the 3 layers' 6 linear maps, and more
    assert products * 2 == products_all


def test_a_compiled_addrop_step_trains_as_the_eager_one():
    """Algorithm 1's AD-DROP step (attribution, masks, masked forward, backward, AdamW) with the model compiled
    whole and the masks as whole graphs (addrop.whole_graph) runs without a graph break, and with dropout off
    and q = 0.5 (the same coin flips in both paths: test_the_sorted_threshold_equals_the_selected_one) follows
    the eager step's losses over 5 steps to 1e-6."""
    losses = {}
    for backend in (None, "aot_eager"):
        net = tiny(dropout=0.0).train()
        if backend:
            net.compile(backend=backend, fullgraph=True)
        opt = torch.optim.AdamW(net.parameters(), lr=1e-2)
        b = tiny_batch()
        torch.manual_seed(7)
        losses[backend] = []
        addrop.GRAPH_BACKEND = backend
        for _ in range(5):
            masks = addrop.addrop_masks(net, b, [0, 1, 2], 0.5, 0.5)
            logits, _ = net(b["input_ids"], b["attention_mask"], b["token_type_ids"], masks)
            loss = torch.nn.functional.cross_entropy(logits, b["labels"])
            loss.backward()
            opt.step()
            opt.zero_grad()
            losses[backend].append(loss.item())
    addrop.GRAPH_BACKEND = None
    assert losses[None][0] != losses[None][-1]  # it trained: the comparison means something
    assert losses["aot_eager"] == pytest.approx(losses[None], abs=1e-6)

STEP_OPTIONS = [{}, {"gold": True}, {"mask": "low"}, {"method": "aa"}, {"method": "rd", "mask": "random"},
                {"method": "iga", "m": 3}, {"first_pass": "train"}, {"regression": True}, {"layers": [2, 0]},
                {"compile": "aot_eager"}, {"method": "rd", "mask": "random", "compile": "aot_eager"}]


@pytest.mark.parametrize("options", STEP_OPTIONS, ids=lambda o: ",".join(f"{k}={v}" for k, v in o.items()) or "default")
def test_addrop_masks_is_its_pieces_composed(monkeypatch, options):
    """addrop.addrop_masks (what train.py trains with) against Algorithm 1's lines 7-8 spelled out here from the
    pieces (attribute, then MASKS[mask] per layer in the order given; under compile all layers in one graph,
    layer_masks), from the same seed (q = 0.1 under compile, where an eager CPU would draw other coins, so that
    a path ignoring GRAPH_BACKEND fails; 0.5 else): the masks exactly. Exercise 11's lessons compare a
    student's addrop_masks with the real one, which without --impl is this function itself: this is what checks
    the real one. Each option must also change the masks from the default's, so that a function that dropped
    it could not pass."""
    options = dict(options)
    layers, compile = options.pop("layers", [0, 2]), options.pop("compile", None)
    monkeypatch.setattr(addrop, "GRAPH_BACKEND", compile)
    q = 0.1 if compile else 0.5  # at q <= 0.25 an eager CPU draws its coins otherwise: a path ignoring compile shows
    regression = options.get("regression", False)
    torch.manual_seed(0)
    net = tiny(dropout=0.1).double()
    net.head.out = torch.nn.Linear(32, 1).double() if regression else net.head.out
    b = tiny_batch()
    if regression:
        b["labels"] = torch.randn(4, dtype=torch.float64)

    def composed(opts, lay):
        net.train()
        torch.manual_seed(0)
        masks, am = [None] * 3, b["attention_mask"]
        scores = addrop.attribute(net, b, lay, opts.get("method", "ga"), b["labels"] if opts.get("gold") else None,
                                  opts.get("regression", False), opts.get("m", 20),
                                  first_pass=opts.get("first_pass", "eval"))
        if compile:
            drawn = addrop.layer_masks([scores[l] for l in lay], am, 0.5, q, opts.get("mask", "high"))
        else:
            drawn = [addrop.MASKS[opts.get("mask", "high")](scores[l], am, 0.5, q) for l in lay]
        for l, M in zip(lay, drawn):
            masks[l] = M
        return masks

    want = composed(options, layers)
    net.train()
    torch.manual_seed(0)
    got = addrop.addrop_masks(net, b, layers, 0.5, q, **options)
    assert net.training  # handed back in the mode it came in
    for l in range(3):
        assert (got[l] is None) == (want[l] is None) and (want[l] is None or torch.equal(got[l], want[l])), l
    if options or layers != [0, 2]:  # the option is seen: its masks are not the default's
        default = composed({"regression": regression}, [0, 2]) if not regression else None
        if default is not None:
            assert any(not torch.equal(want[l], default[l]) for l in (0, 2)), options


def test_compile_model_keeps_every_batch_shape_static():
    """train.compile_model compiles a graph per batch shape: a last, smaller batch gets its own graph, and the
    full batches after it keep theirs. (torch.compile's default would recompile at the second shape with a
    symbolic batch size and run every later batch through that graph; under CUDA graphs, a graph per shape
    is what is replayed.) A recording backend sees every graph dynamo hands on; a symbolic size would come as
    an input of its own."""
    import train as train_py
    seen = []

    def backend(gm, example_inputs):
        seen.append([x if isinstance(x, torch.Tensor) else type(x).__name__ for x in example_inputs])
        return gm.forward
    net = tiny(dropout=0.0).eval()
    train_py.compile_model(net, backend, torch.device("cpu"))
    for B in (4, 3, 4):
        b = tiny_batch()
        net(b["input_ids"][:B], b["attention_mask"][:B], b["token_type_ids"][:B])
    assert len(seen) == 2, seen  # B = 4 and B = 3, and B = 4 again from the first graph
    assert all(isinstance(x, torch.Tensor) for inputs in seen for x in inputs), seen  # no symbolic size (SymInt)


def test_compiled_evaluation_marks_a_step_per_batch(setup, tmp_path, monkeypatch):
    """Under --compile each evaluation batch is a new CUDA-graph step, as each training step is: once a training
    step has marked one, CUDA graphs start a new generation only when told, and an evaluation that never marks
    would chain every batch's graph onto the last one's, its outputs kept alive."""
    import train as train_py
    from support import settings
    args = settings.parse_args(["--task", "rte", "--weights", str(setup / "w0"), "--data-dir", str(setup / "glue"),
                                "--out", str(tmp_path / "out"), "--max-len", "24", "--batch-size", "8",
                                "--compile", "aot_eager"])
    j = train_py.setup(args)
    marks = []
    monkeypatch.setattr(torch.compiler, "cudagraph_mark_step_begin", lambda: marks.append(1))
    loss, scores, _ = train_py.evaluate(j, j.splits["dev"])
    assert len(marks) == -(-len(j.splits["dev"].y) // 8) == 2 and scores  # 16 dev examples, batches of 8


# -----------------------------------------------------------------------------
# train.py --compile, as a user runs it (subprocesses: the tiny BERT and synthetic RTE of test_train.py)

COMPILED = ["--compile", "aot_eager", "--limit", "77", "--epochs", "2", "--p", "0.5", "--q", "1.0", "--lr", "1e-3"]


@pytest.mark.slow
def test_compiled_training_follows_eager_for_20_steps(setup):
    """train.py --compile (aot_eager) against the eager run, 20 steps: a plain epoch and an AD-DROP epoch, dropout
    off, q = 1 (every candidate dropped: masks that need no coin flips). --compile pads every batch to --max-len
    and eager to the batch's longest, and fills each epoch's last batch (77 = 9 x 8 + 5) to 8 rows with copies
    that count for nothing; padding keys get exactly zero attention, so only float rounding may differ: every
    step's loss to 1e-5, dev loss too. The dropped fraction counts the copies' masks too: to 0.02."""
    train(setup, setup / "eager20", *COMPILED[2:], glue="glue_long")
    train(setup, setup / "compiled20", *COMPILED, glue="glue_long")
    eager, comp = metrics(setup / "eager20"), metrics(setup / "compiled20")
    assert [h["kind"] for h in comp["history"]] == ["plain", "AD-DROP"]
    for he, hc in zip(eager["history"], comp["history"]):
        assert len(he["step_losses"]) == len(hc["step_losses"]) == 10
        assert max(abs(a - b) for a, b in zip(he["step_losses"], hc["step_losses"])) < 1e-5
        assert abs(he["dev_loss"] - hc["dev_loss"]) < 1e-5 and abs(he["dropped"] - hc["dropped"]) < 0.02
    assert comp["args"]["compile"] == "aot_eager" and comp["history"][1]["dropped"] > 0


@pytest.mark.slow
def test_compiled_run_resumes_and_runs_under_torchrun(setup):
    """--compile keeps what a run promises: stopped by SIGTERM inside its AD-DROP epoch (dropout on, q = 0.5:
    random masks) and resumed with --compile, it ends as the uninterrupted compiled run did, epoch records
    byte for byte; and two torchrun ranks with --compile follow one process to 1e-5 (q = 1, dropout off)."""
    flags = ["--compile", "aot_eager", "--limit", "77", "--epochs", "2", "--p", "0.5", "--q", "0.5", "--lr", "1e-3"]
    train(setup, setup / "c_whole", *flags, weights="w1", glue="glue_long")
    proc = start(setup, setup / "c_stopped", *flags)
    signal_at(proc, 14, signal.SIGTERM)  # epoch 2, AD-DROP, runs steps 11-20
    assert proc.returncode == 75
    r = train(setup, setup / "c_stopped", *flags, "--resume", weights="w1", glue="glue_long")
    assert "resuming after batch" in r.stdout
    strip = lambda hs: [{k: v for k, v in h.items() if k != "seconds"} for h in hs]
    assert strip(metrics(setup / "c_stopped")["history"]) == strip(metrics(setup / "c_whole")["history"])
    train(setup, setup / "c_one", *COMPILED)
    train(setup, setup / "c_two", *COMPILED, torchrun=2)
    one, two = metrics(setup / "c_one"), metrics(setup / "c_two")
    assert two["world_size"] == 2
    for h1, h2 in zip(one["history"], two["history"]):
        assert max(abs(a - b) for a, b in zip(h1["step_losses"], h2["step_losses"])) < 1e-5


def test_a_compiled_run_compiles_nothing_after_its_first_addrop_step(setup, tmp_path, monkeypatch):
    """train.py --compile compiles a fixed set of graphs, and nothing after its first AD-DROP step: over three
    epochs (plain, AD-DROP, plain) whose last training batch (21 = 6 + 6 + 6 + 3) and last dev batch (16 = 6 + 6 + 4)
    are short, every batch has one static shape (data.batches fills the last with copies that count for nothing),
    and grad mode, probes and masks each choose among graphs already made. A backend that counts what dynamo
    hands it (then runs aot_eager) records the step each graph was compiled at: none after the first AD-DROP step
    has run, and before it one graph for each kind of pass (plain step, the optimizer's step, evaluation,
    attribution, masked step, masks, their count), not one per batch shape."""
    import train as train_py
    from support import settings
    where, compiled = {"at": "setup"}, []

    def recompile_counter(gm, example_inputs):
        compiled.append(where["at"])
        return torch._dynamo.lookup_backend("aot_eager")(gm, example_inputs)
    if "recompile_counter" not in torch._dynamo.list_backends(exclude_tags=()):
        torch._dynamo.register_backend(recompile_counter)
    else:
        monkeypatch.setitem(torch._dynamo.backends.registry._COMPILER_FNS, "recompile_counter", recompile_counter)
    torch._dynamo.reset()
    first_addrop = []
    step, evaluate = train_py.train_step, train_py.evaluate

    def counted_step(j, b, adrop):
        where["at"] = f"{'AD-DROP' if adrop else 'plain'} step {j.step + 1}"
        out = step(j, b, adrop)
        if adrop and not first_addrop:
            first_addrop.append(len(compiled))
        return out

    def counted_evaluate(j, split):
        where["at"] = f"evaluation after step {j.step}"
        return evaluate(j, split)
    monkeypatch.setattr(train_py, "train_step", counted_step)
    monkeypatch.setattr(train_py, "evaluate", counted_evaluate)
    monkeypatch.setattr(addrop, "GRAPH_BACKEND", None)  # compile_model sets it; put back after the test
    args = settings.parse_args(["--task", "rte", "--weights", str(setup / "w1"), "--data-dir", str(setup / "glue"),
                                "--out", str(tmp_path / "out"), "--max-len", "24", "--batch-size", "6", "--epochs", "3",
                                "--p", "0.5", "--q", "0.5", "--log-interval", "100", "--compile", "recompile_counter"])
    result = train_py.run(args)
    torch._dynamo.reset()
    assert [h["kind"] for h in result["history"]] == ["plain", "AD-DROP", "plain"] and first_addrop
    after = compiled[first_addrop[0]:]
    assert not after, f"compiled after the first AD-DROP step: {after}"
    assert compiled.count("plain step 1") >= 1 and any(c.startswith("evaluation") for c in compiled), compiled
    assert len(compiled) == 7, f"{len(compiled)} graphs: {compiled}"  # plain step, AdamW's step (its lr a tensor:
    # the warm-up recompiles nothing), evaluation, attribution, masks, masked step, dropped count: one a kind of pass
