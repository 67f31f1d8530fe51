"""
The explorer's page, in gradio: the controls, and draw.py's drawings of what session.explore returns.

gradio because it is made for exactly this: a page of sliders and outputs around a Python function, served by one
call (`python -m explorer`) and shown inline in a notebook by the same object.
"""

import html
import os

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")  # gradio reports usage by default; nothing leaves here

import gradio as gr

from explorer import draw, session

SENTENCE = "it 's a charming and often affecting journey . "  # SST-2's first dev sentence, the tutorial's
METHODS = [("GA: gradient, Eq. 5", "ga"), ("IGA: integrated gradients, Eq. 3", "iga"),
           ("AA: attention weights", "aa"), ("RD: random", "rd")]

# -----------------------------------------------------------------------------
# the page

_models = {}  # folder as typed -> session.Loaded, the last few
BUILD = None  # a build.Build of the tutorial's model under way or done (python -m explorer sets it), or None


def get_model(folder):
    folder = (folder or "").strip()
    m = _models.get(folder)
    if m is None:
        m = session.load(folder)  # raises session.Problem
        while len(_models) >= 3:
            _models.pop(next(iter(_models)), None)
        _models[folder] = m
    return m


def update(text_a, text_b, folder, method, strategy, layer, head, row, p, q, seed, marks=True,
           request: gr.Request = None):
    """The handler of every control: yields the page's outputs (a status line first while a model builds or
    loads, or IGA has work to do), the last with a new ticket for the seeds' spread (update_spread), which runs
    after it. Nothing raises out of it: a Problem (a bad value typed included) becomes the message, anything
    else a one-line error, never a traceback."""
    keep = gr.update()
    strategy_box = gr.update(interactive=method != "rd")  # RD draws no scores: there is no high or low
    ticket = _ticket(request)

    def say(message, prediction="", last=False):
        return [message, prediction, "", "", "", keep, keep, keep, strategy_box, ticket if last else keep]
    try:
        key = (folder or "").strip()
        if not key and BUILD is not None and key not in _models:
            while not BUILD.wait(0.5):
                yield say("The tutorial's model is being built (below, and in the terminal); the page shows it "
                          "when it is ready.", draw.draw_build(BUILD))
        if key not in _models:
            yield say(f"Loading the model {html.escape(key or 'of the tutorial')}...")
        m = get_model(folder)
        L, H = m.net.cfg.num_hidden_layers, m.net.cfg.num_attention_heads
        p, q, layer, head, seed = session.check(m, p, q, layer, head, seed)
        if method == "iga" and session.needs_work(m, text_a, text_b, method, layer):
            yield say(f"Computing integrated gradients for layer {layer + 1} ({session.IG_STEPS} scaled passes, "
                      "one batch)... a second or so on a laptop CPU.")
        v = session.explore(m, text_a, text_b, method, strategy == "low", layer, head, int(row or 0), p, q, seed)
    except session.Problem as e:
        yield say(f"**{e}**", last=True)
        return
    except Exception as e:  # a bug of ours or a file we did not foresee: said in a line, the page keeps serving
        yield say(f"**Unexpected error** ({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''})", last=True)
        return
    notes = " ".join(x for x in (draw.model_line(m, BUILD), v["note"]) if x)
    rows = [(f"{i}: {t}", i) for i, t in enumerate(v["tokens"])]
    yield [notes, draw.draw_prediction(v), draw.draw_counts(v), draw.draw_maps(v, marks), draw.draw_row(v),
           gr.update(choices=rows, value=v["row"]), gr.update(maximum=L), gr.update(maximum=H), strategy_box, ticket]


_latest = {}  # browser session -> the ticket of its last update


def _ticket(request):
    """A new ticket for this browser session's latest update: the spread runs only for the latest."""
    who = getattr(request, "session_hash", None)
    _latest[who] = _latest.get(who, 0) + 1
    return _latest[who]


def update_spread(ticket, text_a, text_b, folder, method, strategy, layer, head, row, p, q, seed, marks=True,
                  request: gr.Request = None):
    """The seeds' spread (session.spread), after each update, in its own queue: it costs 3 x 20 masked
    forwards, which a p or q move should not wait for. A spread whose update is no longer the latest is
    skipped (a slider dragged): the panel keeps its last answer, which names its own p and q."""
    if ticket != _latest.get(getattr(request, "session_hash", None)):
        return gr.update()
    try:
        m = get_model(folder)
        p, q, layer, head, seed = session.check(m, p, q, layer, head, seed)
        shown = dict(method=method, low=strategy == "low", seed=seed, p=p, q=q, layer=layer)
        return draw.draw_spread(shown, *session.spread(m, text_a, text_b, method, layer, p, q))
    except session.Problem:
        return ""  # the message says what is wrong
    except Exception as e:  # the rest of the page stands
        return f"(the seeds' spread failed: {type(e).__name__})"


class Slider(gr.Slider):
    """gr.Slider with gradio's range check off: a value typed outside the range reaches `update` as typed, and
    session.check names the field and its range in the page. (gradio's own check raises inside gradio: a
    traceback in the terminal, a bare "Error" in the page.) is_template: the page draws it as a gr.Slider;
    a subclass, not a patched instance, since gradio remakes a component from its class at each gr.update."""
    is_template = True

    def preprocess(self, payload):
        return payload


class Number(gr.Number):
    """gr.Number with gradio's range check off, as Slider (a seed of 1e30 or -1 is session.check's to name)."""
    is_template = True

    def preprocess(self, payload):
        return payload


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
                               placeholder=session.shown(session.tutorial_dir), scale=2)
        with gr.Row():
            p = Slider(0, 1, 0.6, step=0.05, label="p (candidate fraction, 0 to 1)", elem_id="p")
            q = Slider(0, 1, 0.8, step=0.05, label="q (drop probability, 0 to 1)", elem_id="q")
            seed = Number(0, label=f"coin-flip seed (0 to {session.SEED_MAX})", precision=0,
                                       elem_id="seed", minimum=0, maximum=session.SEED_MAX)
        with gr.Row():
            method = gr.Radio(METHODS, value="ga", label="attribution", elem_id="method")
            strategy = gr.Radio(["high", "low"], value="high", label="drop the (not for RD: it has no scores)",
                                elem_id="strategy")
        with gr.Row():
            layer = Slider(1, 6, 1, step=1, label="layer", elem_id="layer")
            head = Slider(1, 12, 6, step=1, label="head (the maps only)", elem_id="head")
            row = gr.Dropdown([("0: [CLS]", 0)], value=0, label="query row", elem_id="row")
            marks = gr.Checkbox(True, label="B's frames and crosses", elem_id="marks")
        message = gr.Markdown(elem_id="message")
        with gr.Row():
            prediction = gr.HTML(elem_id="prediction")
            counts = gr.HTML(elem_id="counts")
        maps = gr.HTML(elem_id="maps")
        with gr.Row():
            sorted_row = gr.HTML(elem_id="sorted-row")
            spread = gr.HTML(elem_id="spread-panel")
        ticket = gr.State(0)
        inputs = [text_a, text_b, model, method, strategy, layer, head, row, p, q, seed, marks]
        outputs = [message, prediction, counts, maps, sorted_row, row, layer, head, strategy, ticket]
        # one computation at a time; a change made while one runs is not lost: the last waits, older ones are skipped
        run = dict(fn=update, inputs=inputs, outputs=outputs, concurrency_id="explore", concurrency_limit=1,
                   show_progress="hidden", trigger_mode="always_last")
        then = dict(fn=update_spread, inputs=[ticket, *inputs], outputs=[spread], concurrency_id="spread",
                    concurrency_limit=1, show_progress="hidden")

        events = [box.submit for box in (text_a, text_b, model)]
        events += [control.input for control in (method, strategy, row, seed, marks)]
        events += [slider.change for slider in (p, q, layer, head)]  # while dragging too
        for event in events:
            event(**run).then(**then)
        demo.load(**run).then(**then)
    return demo


def launch(demo, **kwargs):
    """demo.launch with the explorer's look: system fonts (gradio's default theme fetches web fonts), its CSS
    and script. No run history: gradio would keep every answer (maps included) in the browser, and each move got
    slower."""
    theme = gr.themes.Default(font=["system-ui", "sans-serif"], font_mono=["monospace"])
    return demo.launch(theme=theme, css=draw.CSS, head=draw.SCRIPT, run_history=False, **kwargs)
