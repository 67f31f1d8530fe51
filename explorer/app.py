"""
The explorer's page, in gradio: the controls, and HTML drawings of what session.explore returns.

gradio because it is made for exactly this: a page of sliders and outputs around a Python function, served by one
call (`python -m explorer`) and shown inline in a notebook by the same object, with no web code of ours. Each map
is drawn as one PNG made with numpy (heatmap), not as a matplotlib figure: a p or q move redraws three T x T maps,
and a matplotlib figure takes a tenth of a second or more.
"""

import base64
import html
import io
import os

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")  # gradio reports usage by default; nothing leaves here

import gradio as gr
import numpy as np
import PIL.Image

from explorer import session

SENTENCE = "it 's a charming and often affecting journey . "  # SST-2's first dev sentence, the tutorial's
METHODS = [("GA: gradient, Eq. 5", "ga"), ("IGA: integrated gradients, Eq. 3", "iga"),
           ("AA: attention weights", "aa"), ("RD: random", "rd")]
CSS = """
.map { display: grid; font: 11px/13px monospace; }
.map .keys { display: flex; align-items: flex-end; }
.map .keys span { writing-mode: vertical-rl; transform: rotate(180deg); width: 13px; max-height: 7em;
                  overflow: hidden; }
.map .queries span { display: block; height: 13px; text-align: right; padding-right: 4px; white-space: nowrap;
                     max-width: 9em; overflow: hidden; }
.map .here { font-weight: bold; color: #b2182b; }
.map img { image-rendering: pixelated; }
.maps { display: flex; flex-wrap: wrap; gap: 28px; }
.maps h4 { margin: 0 0 4px 0; font-size: 13px; }
.bars { max-width: 1000px; display: grid; grid-template-columns: auto auto auto 1fr auto; gap: 0 8px;
        font: 12px monospace; }
.bars .bar { height: 10px; align-self: center; }
.bars .thr { grid-column: 1 / -1; border-top: 2px dashed #b2182b; color: #b2182b; font-size: 11px; }
.figs td, .figs th { padding: 1px 10px; text-align: right; }
"""

# -----------------------------------------------------------------------------
# drawing (HTML only: every number is session.explore's)

CELL = 13  # pixels per map cell, a 1-pixel white gap included
_DOTS = np.zeros((CELL, CELL), bool)  # a candidate's dotted frame
_DOTS[[0, -2], ::2] = _DOTS[::2, [0, -2]] = True
_CROSS = np.eye(CELL, dtype=bool) | np.eye(CELL, dtype=bool)[::-1]  # a dropped position's x
_CROSS[:3] = _CROSS[-4:] = _CROSS[:, :3] = _CROSS[:, -4:] = False
_GAP = np.zeros((CELL, CELL), bool)
_GAP[-1] = _GAP[:, -1] = True


def colours(X, signed):
    """(T, T) values -> (T, T, 3) colours: white to blue for A in [0, max]; for B blue (negative) to white to red
    (positive), on one scale, max |B|."""
    X = np.asarray(X, dtype=np.float64)
    t = np.clip(np.abs(X) / (np.abs(X).max() or 1.0), 0, 1)[..., None]  # (T, T, 1)
    blue, red = np.array([33, 102, 172]), np.array([178, 24, 43])
    end = np.where((X > 0)[..., None], red, blue) if signed else blue  # (T, T, 3)
    return 255 + (end - 255) * t


def heatmap(title, tokens, row, rgb, cand=None, drop=None):
    """A T x T map, queries down and keys across, as a PNG (one image, not T^2 page elements: a 30-token map
    draws in a few milliseconds) between token labels; the chosen query row's labels in red; candidates dotted,
    dropped positions crossed (x), as in the paper's Figure 1."""
    T = len(tokens)
    img = np.kron(rgb, np.ones((CELL, CELL, 1)))  # (T*CELL, T*CELL, 3), each cell a CELL x CELL block
    for marks, pattern, ink in ((cand, _DOTS, (178, 24, 43)), (drop, _CROSS, (17, 17, 17))):
        if marks is not None:
            img[np.kron(np.asarray(marks, bool), pattern)] = ink
    img[np.kron(np.ones((T, T), bool), _GAP)] = 255
    img[[row * CELL, (row + 1) * CELL - 1]] = 90  # the chosen query row, framed
    out = io.BytesIO()
    PIL.Image.fromarray(img.astype(np.uint8)).save(out, "png", compress_level=1)  # fast; the page is local
    src = "data:image/png;base64," + base64.b64encode(out.getvalue()).decode()
    esc = [html.escape(t) for t in tokens]
    keys = "".join(f"<span>{t}</span>" for t in esc)
    queries = "".join(f'<span class="{"here" if i == row else ""}">{i} {t}</span>' for i, t in enumerate(esc))
    return (f'<div><h4>{title}</h4><div class="map" style="grid-template-columns: auto {T * CELL}px">'
            f'<span></span><div class="keys">{keys}</div><div class="queries">{queries}</div>'
            f'<img src="{src}" width="{T * CELL}" height="{T * CELL}" alt="{html.escape(title)}"></div></div>')


def draw_maps(v):
    L, h = v["layer"] + 1, v["head"] + 1
    tokens, row, M = v["tokens"], v["row"], np.asarray(v["mask"], bool)
    parts = [heatmap(f"A, layer {L} head {h} (Eq. 1), unmasked", tokens, row, colours(v["A"], False))]
    if v["B"] is not None:
        what = {"ga": "dF/dA (Eq. 5)", "iga": "integrated gradients (Eq. 3)", "aa": "= A (AA)"}[v["method"]]
        parts.append(heatmap(f"B, {what}: candidates dotted, dropped x", tokens, row, colours(v["B"], True),
                             cand=v["cand"], drop=M))
    dark = np.where(M[..., None], 59.0, 255.0).repeat(3, -1)  # (T, T, 3): dropped dark, kept white
    parts.append(heatmap(f"mask M of head {h}: dark = -inf (dropped)", tokens, row, dark))
    return f'<div class="maps">{"".join(parts)}</div>'


def draw_row(v):
    """The chosen query's scores sorted ascending, the threshold at entry int(n(1 - p)), candidates and drops."""
    tokens, row, mask = v["tokens"], v["row"], v["mask"][v["row"]]
    head = f"<h4>query row {row} ({html.escape(tokens[row])}), head {v['head'] + 1}"
    if v["B"] is None:
        return (f"{head}</h4><p>RD draws no scores: each real key is dropped with probability p&middot;q = "
                f"{v['p'] * v['q']:.2f}. Dropped here: {sum(mask)} of {v['n']} keys: "
                f"{', '.join(html.escape(tokens[j]) for j in range(v['n']) if mask[j]) or 'none'}.</p>")
    b, cand = v["B"][row], v["cand"][row]
    top = max(abs(x) for x in b) or 1.0
    sort = "-B ascending (low: the lowest B are the candidates)" if v["low"] else "B ascending"
    lines = []
    for rank, j in enumerate(v["order"]):
        if rank == v["idx"]:
            lines.append(f'<span class="thr">threshold: entry int(n(1-p)) = int({v["n"]}&middot;{1 - v["p"]:.2f}) = '
                         f'{v["idx"]} of the sorted row, B = {b[j]:+.4g}; candidates at or '
                         f'{"below" if v["low"] else "above"} it</span>')
        colour = "#b2182b" if b[j] > 0 else "#2166ac"
        status = "dropped &times;" if mask[j] else ("candidate, kept" if cand[j] else "")
        lines.append(f"<span>{rank}</span><span>{j} {html.escape(tokens[j])}</span><span>{b[j]:+.4g}</span>"
                     f'<span class="bar" style="width:{100 * abs(b[j]) / top:.0f}%;background:{colour}"></span>'
                     f"<span>{status}</span>")
    if v["idx"] >= v["n"]:
        lines.append('<span class="thr">threshold: int(n(1-p)) = n, past the end: no candidates (p = 0)</span>')
    return f'{head}, sorted by {sort}</h4><div class="bars">{"".join(lines)}</div>'


def table(rows):
    """An HTML table: rows of cells, the first row the header; a cell is a value, or (value, id) to be found by."""
    def cell(c, tag):
        text, ident = c if isinstance(c, tuple) else (c, None)
        return f'<{tag} id="{ident}">{text}</{tag}>' if ident else f"<{tag}>{text}</{tag}>"
    body = "".join("<tr>" + "".join(cell(c, "td" if k else "th") for c in r) + "</tr>" for k, r in enumerate(rows))
    return f'<table class="figs">{body}</table>'


def draw_prediction(v):
    cls, c = [html.escape(str(name)) for name in v["classes"]], v["pseudo"]
    rows = [["class", "P", "logit", "P, masked", "logit, masked"]] + [
        [name + (" (c~)" if k == c else ""), f"{v['probs'][k]:.3f}", f"{v['logits'][k]:+.3f}",
         f"{v['probs_after'][k]:.3f}", f"{v['logits_after'][k]:+.3f}"] for k, name in enumerate(cls)]
    return (f'<p>prediction: <b id="pred">{cls[c]}</b> (the pseudo label c~, Eq. 4); after the masked forward: '
            f'<b id="pred-after">{cls[v["pred_after"]]}</b></p>{table(rows)}'
            f"<p>pseudo-label logit F_c~: {v['logits'][c]:+.4f} &rarr; {v['logits_after'][c]:+.4f} masked; "
            f"loss (cross-entropy with c~): {v['loss']:.4f} &rarr; {v['loss_after']:.4f} masked</p>")


def draw_counts(v):
    n, H, L, h, row = v["n"], len(v["dropped_per_head"]), v["layer"] + 1, v["head"] + 1, v["row"]
    per_head = " ".join(f"{k + 1}:{d}" for k, d in enumerate(v["dropped_per_head"]))
    stamp = (f'<p id="stamp" style="color:#666">for p = {v["p"]:.2f}, q = {v["q"]:.2f}, seed {v["seed"]}, '
             f'{v["method"].upper()}, {"low" if v["low"] else "high"}, layer {L}, head {h}, row {row}</p>')
    rows = [["", f"row {row}", f"head {h}", f"layer {L} (all {H} heads)"],
            [f'positions (n = <b id="n">{n}</b> real tokens)', n, n * n, H * n * n]]
    if v["B"] is None:  # RD: no candidates, every real position dropped with probability p q
        rows += [["dropped", v["dropped_row"], (v["dropped_head"], "dropped-head"),
                  (v["dropped_layer"], "dropped-layer")],
                 ["expected p &times; q &times; positions", f"{v['p'] * v['q'] * n:.1f}", f"{v['expected_head']:.1f}",
                  f"{v['expected_layer']:.1f}"]]
    else:
        rows += [["candidates (Eq. 6)", v["cand_row"], v["cand_head"], v["cand_layer"]],
                 ["dropped (Eq. 7)", v["dropped_row"], (v["dropped_head"], "dropped-head"),
                  (v["dropped_layer"], "dropped-layer")],
                 ["expected q &times; candidates", f"{v['expected_row']:.1f}", f"{v['expected_head']:.1f}",
                  f"{v['expected_layer']:.1f}"]]
    guard = (f" The guard kept {v['guarded_rows']} row(s) of this head whole at q = 1: every key was a candidate."
             if v.get("guarded_rows") else "")
    return f"{table(rows)}<p>Dropped per head: {per_head}.{guard}</p>{stamp}"


# -----------------------------------------------------------------------------
# the page

_models = {}  # folder as typed -> session.Loaded, the last few


def get_model(folder):
    folder = (folder or "").strip()
    if folder not in _models:
        m = session.load(folder)  # raises session.Problem
        while len(_models) >= 3:
            _models.pop(next(iter(_models)))
        _models[folder] = m
    return _models[folder]


def update(text_a, text_b, folder, method, strategy, layer, head, row, p, q, seed):
    """The handler of every control: yields the page's outputs (a status line first when IGA has work to do).
    Nothing raises out of it: a Problem becomes the message, anything else a one-line error, never a traceback."""
    nothing = [gr.update()] * 6
    try:
        m = get_model(folder)
        L, H = m.net.cfg.num_hidden_layers, m.net.cfg.num_attention_heads
        layer, head = min(int(layer or 1), L) - 1, min(int(head or 1), H) - 1
        if method == "iga" and session.needs_work(m, text_a, text_b, method, layer):
            yield [f"Computing integrated gradients for layer {layer + 1} ({session.IG_STEPS} scaled passes, one "
                   "batch)... a second or so on a laptop CPU.", *nothing, gr.update()]
        v = session.explore(m, text_a, text_b, method, strategy == "low", layer, head, int(row or 0), float(p),
                            float(q), int(seed or 0))
    except session.Problem as e:
        yield [f"**{e}**", "", "", "", "", gr.update(), gr.update(), gr.update()]
        return
    except Exception as e:  # a bug of ours or a file we did not foresee: said in a line, the page keeps serving
        yield [f"**Unexpected error** ({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''})",
               "", "", "", "", gr.update(), gr.update(), gr.update()]
        return
    notes = " ".join(x for x in (m.note, v["note"]) if x)
    rows = [(f"{i}: {t}", i) for i, t in enumerate(v["tokens"])]
    yield [notes or f"Model: `{m.name}`.", draw_prediction(v), draw_counts(v), draw_maps(v), draw_row(v),
           gr.update(choices=rows, value=v["row"]), gr.update(maximum=L), gr.update(maximum=H)]


def build(folder=""):
    """The explorer as a gradio Blocks, not launched: __main__ serves it, tutorial.ipynb shows it inline.
    folder: the model folder shown at the start ("" the tutorial's, or the fallback)."""
    with gr.Blocks(title="AD-DROP explorer", analytics_enabled=False) as demo:
        gr.Markdown("## AD-DROP explorer\nType a sentence, then move p and q: the candidates (Eq. 6) and the "
                    "dropped positions (Eq. 7) follow, and the prediction after the masked forward.")
        with gr.Row():
            text_a = gr.Textbox(SENTENCE, label="sentence (Enter to run)", lines=1, elem_id="text-a", scale=3)
            text_b = gr.Textbox("", label="second sentence (pair tasks)", lines=1, elem_id="text-b", scale=2)
            model = gr.Textbox(folder, label="model folder (empty: the tutorial's)", lines=1, elem_id="model",
                               placeholder=session.TUTORIAL_MODEL, scale=2)
        with gr.Row():
            p = gr.Slider(0, 1, 0.6, step=0.05, label="p (candidate fraction)", elem_id="p")
            q = gr.Slider(0, 1, 0.8, step=0.05, label="q (drop probability)", elem_id="q")
            seed = gr.Number(0, label="coin-flip seed", precision=0, elem_id="seed", minimum=0)
        with gr.Row():
            method = gr.Radio(METHODS, value="ga", label="attribution", elem_id="method")
            strategy = gr.Radio(["high", "low"], value="high", label="drop the", elem_id="strategy")
        with gr.Row():
            layer = gr.Slider(1, 6, 1, step=1, label="layer", elem_id="layer")
            head = gr.Slider(1, 12, 6, step=1, label="head", elem_id="head")
            row = gr.Dropdown([("0: [CLS]", 0)], value=0, label="query row", elem_id="row")
        message = gr.Markdown(elem_id="message")
        with gr.Row():
            prediction = gr.HTML(elem_id="prediction")
            counts = gr.HTML(elem_id="counts")
        maps = gr.HTML(elem_id="maps")
        sorted_row = gr.HTML(elem_id="sorted-row")
        inputs = [text_a, text_b, model, method, strategy, layer, head, row, p, q, seed]
        outputs = [message, prediction, counts, maps, sorted_row, row, layer, head]
        # one computation at a time; a change made while one runs is not lost: the last waits, older ones are skipped
        run = dict(fn=update, inputs=inputs, outputs=outputs, concurrency_id="explore", concurrency_limit=1,
                   show_progress="hidden", trigger_mode="always_last")
        for box in (text_a, text_b, model):
            box.submit(**run)
        for control in (method, strategy, row, seed):
            control.input(**run)
        for slider in (p, q, layer, head):  # while dragging too
            slider.change(**run)
        demo.load(**run)
    return demo


def launch(demo, **kwargs):
    """demo.launch with the explorer's look: system fonts (gradio's default theme fetches web fonts), its CSS.
    No run history: gradio would keep every answer (maps included) in the browser, and each move got slower."""
    theme = gr.themes.Default(font=["system-ui", "sans-serif"], font_mono=["monospace"])
    return demo.launch(theme=theme, css=CSS, run_history=False, **kwargs)
