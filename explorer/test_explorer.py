"""
The explorer shows the project's numbers and survives bad input. In-process tests check session.py against
addrop and the model directly; the browser test serves `python -m explorer` on 127.0.0.1 and drives it in a real
chromium, as a student would. The browser test needs gradio, playwright and Debian's chromium (pip install gradio
playwright; apt-get install chromium) and skips without them, unless EXPLORER_BROWSER_REQUIRED=1 (CI) makes that
a failure.
"""

import ast
import dataclasses
import html
import json
import os
import re
import statistics
import time
from pathlib import Path

import numpy as np
import pytest
import torch

import addrop
import data
from explorer import build, draw, session
from support import settings

SENTENCE = "the plot is thin , but the actors make every scene feel alive , warm and funny ."


@pytest.fixture(scope="module")
def m():
    return session.load("")  # the tutorial's model, or the pretrained one with its seeded fresh head


def reference(m, text, layer, head, p, q, seed, method="ga"):
    """What the page should show, from addrop and the model directly: (dropped in the head, in the layer,
    the predicted class's name)."""
    encoded, _ = data.encode(m.tok, [data.Example(text, None, None)])
    batch = next(data.batches(encoded, None, 1, data.pad_token_id(m.tok)))
    B = addrop.attribute(m.net, batch, [layer], method)[layer]
    M = addrop.drop_mask(B, batch["attention_mask"], p, q, generator=torch.Generator().manual_seed(seed))
    with torch.no_grad():
        logits, _ = m.net(batch["input_ids"], batch["attention_mask"], batch["token_type_ids"])
    return int(M[0, head].sum()), int(M.sum()), m.classes[int(logits.argmax())]


@pytest.mark.parametrize("p, q, seed", [(0.6, 0.8, 0), (0.3, 0.5, 7), (1.0, 1.0, 1)])
def test_counts_are_drop_masks(m, p, q, seed):
    """explore's dropped counts and prediction are those of addrop.drop_mask (same scores, same seeded coins) and
    of the model, exactly: the page computes nothing of its own."""
    v = session.explore(m, SENTENCE, "", "ga", False, 0, 5, 0, p, q, seed)
    head, layer, pred = reference(m, SENTENCE, 0, 5, p, q, seed)
    assert (v["dropped_head"], v["dropped_layer"], m.classes[v["pseudo"]]) == (head, layer, pred)
    assert v["cand_row"] >= p * v["n"] - 1e-9  # Eq. 6: at least pn candidates (ties add more)


def test_attribution_once_per_sentence(m, monkeypatch):
    """Attribution depends on neither p nor q: moving them, or the seed, computes no new B; a new sentence does."""
    calls = []
    real = addrop.attribute
    monkeypatch.setattr(addrop, "attribute", lambda *a, **k: calls.append(1) or real(*a, **k))
    m.cache.clear()
    for p, q, seed in [(0.6, 0.8, 0), (0.2, 0.8, 0), (0.2, 0.3, 0), (0.9, 0.3, 5)]:
        session.explore(m, SENTENCE, "", "ga", False, 2, 1, 3, p, q, seed)
    assert len(calls) == 1
    session.explore(m, SENTENCE + " really", "", "ga", False, 2, 1, 3, 0.6, 0.8, 0)
    assert len(calls) == 2


def test_bad_input_is_a_message(m, tmp_path):
    """Each bad input raises Problem with a message that names it, never another exception: an empty sentence,
    a missing folder, a broken one, a token-level (NER) model, a label count the task does not have."""
    with pytest.raises(session.Problem, match="Type a sentence"):
        session.explore(m, "  ", "", "ga", False, 0, 0, 0, 0.5, 0.5, 0)
    v = session.explore(m, "word " * 200, "", "ga", False, 0, 0, 0, 0.5, 0.5, 0)
    assert v["n"] == session.MAX_LEN and "cut to" in v["note"]
    with pytest.raises(session.Problem, match="does not exist"):
        session.load(str(tmp_path / "nowhere"))
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "config.json").write_text('{"model_type": "bert", "task": "sst2"')
    with pytest.raises(session.Problem, match="cannot be read"):
        session.load(str(broken))
    (broken / "config.json").write_text(json.dumps({**dataclasses.asdict(m.net.cfg), "task": "sst2", "num_labels": 2}))
    (broken / "model.safetensors").write_bytes(b"\0" * 100)
    with pytest.raises(session.Problem, match="model.safetensors"):
        session.load(str(broken))
    ner = {"task": "conll2003", "architectures": ["BertForTokenClassification"]}
    (broken / "config.json").write_text(json.dumps(ner))
    with pytest.raises(session.Problem, match="token"):
        session.load(str(broken))
    (broken / "config.json").write_text(json.dumps({"task": "sst2", "num_labels": 3}))
    with pytest.raises(session.Problem, match="num_labels 3"):
        session.load(str(broken))



@pytest.mark.parametrize("field, values", [
    ("p", [(1.5, 0.8, 1, 6, 0), (-0.1, 0.8, 1, 6, 0), (None, 0.8, 1, 6, 0), (float("nan"), 0.8, 1, 6, 0)]),
    ("q", [(0.6, 1.01, 1, 6, 0), (0.6, -1, 1, 6, 0)]),
    ("layer", [(0.6, 0.8, 0, 6, 0), (0.6, 0.8, 7, 6, 0), (0.6, 0.8, 1.5, 6, 0)]),
    ("head", [(0.6, 0.8, 1, 0, 0), (0.6, 0.8, 1, 13, 0)]),
    ("seed", [(0.6, 0.8, 1, 6, 1e30), (0.6, 0.8, 1, 6, -1), (0.6, 0.8, 1, 6, 0.5), (0.6, 0.8, 1, 6, 2**32)])])
def test_out_of_range_is_named(m, field, values):
    """Each numeric control typed outside its range (or not a number) is a Problem whose message names the field
    and its range, as the page shows it: p and q 0 to 1, layer 1 to L, head 1 to H (the page counts from 1), the
    seed a whole number 0 to 2^32 - 1. A seed of 1e30 was torch's "Overflow when unpacking long long"."""
    L, H = m.net.cfg.num_hidden_layers, m.net.cfg.num_attention_heads
    ranges = {"p": "from 0 to 1", "q": "from 0 to 1", "layer": f"from 1 to {L}", "head": f"from 1 to {H}",
              "seed": f"from 0 to {2**32 - 1}"}
    for p, q, layer, head, seed in values:
        with pytest.raises(session.Problem, match=rf"^{field}\b.* {ranges[field]}"):
            session.check(m, p, q, layer, head, seed)
    assert session.check(m, 1, 0, L, H, 2**32 - 1) == (1.0, 0.0, L - 1, H - 1, 2**32 - 1)  # the ends are in range


@pytest.mark.parametrize("method, low, layer, p, q, seed", [
    ("ga", False, 0, 1.0, 1.0, 0), ("ga", False, 0, 0.6, 0.8, 0), ("ga", True, 0, 1.0, 0.9, 3),
    ("rd", False, 0, 1.0, 0.9, 1), ("aa", False, 2, 0.6, 0.8, 5)])
def test_guard_note_is_this_draws(m, method, low, layer, p, q, seed):
    """The guard's note speaks of the draw shown, at its q. The mask alone cannot tell a row the guard kept whole
    (every coin "drop") from one whose coins all said "keep"; session.guard_rows redraws the coins as the mask
    functions do and is used only when they give the mask exactly (guard_known, asserted here for every mask
    kind). Then: a row the guard fired on is kept whole in M; at p = q = 1 it fires on every row (each row would
    lose every key); the note is on the page iff it fired, and names the q shown."""
    short = "good fun ."  # 5 tokens: at p = 1, q = 0.9 a row loses all its keys with probability 0.9^5 = 0.59
    v = session.explore(m, short, "", method, low, layer, 5, 0, p, q, seed)
    assert v["guard_known"]
    M = np.array(v["mask"])
    assert v["guard_fired"] <= int((M.sum(-1) == 0).sum())  # fired rows are whole rows of M
    if p == q == 1:
        assert v["guard_fired"] == v["n"]
    note = draw.guard_note(v)
    assert bool(note) == (v["guard_fired"] > 0)
    assert not note or f"q = {q:.2f}" in note


def test_ties_are_marked(m):
    """Eq. 6 takes every key AT or above the threshold, so keys tied with it are candidates even when sorted
    before the threshold entry: the page marks them. In the last layer only [CLS] reaches the head, so every
    other row's B is 0: the whole row ties, every key is a candidate, and exactly int(n (1 - p)) of them sort
    before the threshold line, each marked "tie" in the sorted row."""
    v = session.explore(m, SENTENCE, "", "ga", False, m.net.cfg.num_hidden_layers - 1, 5, 3, 0.6, 0.8, 0)
    assert set(v["B"][3]) == {0.0} and v["cand_row"] == v["n"]
    assert sum(v["ties"]) == v["idx"] == int(v["n"] * 0.4)
    row = draw.draw_row(v)
    assert row.count('class="tie"') == v["idx"] and "{" not in row  # the note's words filled in, no code left
    assert "marked &quot;tie&quot; equal it and are candidates" in row or v["idx"] == 1
    w = session.explore(m, SENTENCE, "", "ga", False, 0, 5, 3, 0.6, 0.8, 0)  # distinct scores: no ties
    assert sum(w["ties"]) == 0 and 'class="tie"' not in draw.draw_row(w)


def test_maps_read(m):
    """B's colours are per row: the chosen row's largest |B| is drawn at full colour (within 1/255), however
    small the row's scores are beside the map's largest (on one scale for the map, layer 1's [CLS] row came out
    nearly white). The colour bars name their ends: A's largest weight, and the chosen row's r = max |B|, to 3
    digits. The hover's numbers (data-values) are explore's A and B to 6 significant digits."""
    v = session.explore(m, SENTENCE, "", "ga", False, 0, 5, 0, 0.6, 0.8, 0)
    B = np.array(v["B"])
    rgb = draw.colours(B, True)
    j = int(np.abs(B[0]).argmax())
    assert np.abs(rgb[0, j] - (draw.RED if B[0, j] > 0 else draw.BLUE)).max() <= 1
    page = draw.draw_maps(v)
    assert f"<span>{max(map(max, v['A'])):.3g}</span>" in page
    assert f"row 0: r = {np.abs(B[0]).max():.3g}" in page
    shown = json.loads(html.unescape(re.search(r'data-values="([^"]*)"', page)[1]))
    assert np.allclose(shown["A"], v["A"], rtol=1e-5, atol=0) and np.allclose(shown["B"], B, rtol=1e-5, atol=0)
    assert shown["drop"] == np.array(v["mask"], int).tolist()


def test_spread_is_the_pages_draws(m):
    """The seeds' spread is made of the page's own draws: its change of the pseudo-label logit at seed s equals
    explore's at seed s (the same mask; the batched forward may differ in the last bits: 1e-5), for the shown
    method, its low mirror and RD."""
    attribution, changes = session.spread(m, SENTENCE, "", "ga", 0, 0.6, 0.8)
    assert attribution == "ga" and set(changes) == {"high", "low", "random"}
    assert all(len(c) == len(session.SEEDS) for c in changes.values())
    for name, method, low in (("high", "ga", False), ("low", "ga", True), ("random", "rd", False)):
        for s in (0, 7):
            v = session.explore(m, SENTENCE, "", method, low, 0, 5, 0, 0.6, 0.8, s)
            c = v["pseudo"]
            assert abs(changes[name][s] - (v["logits_after"][c] - v["logits"][c])) < 1e-5


def test_failed_build_is_said(tmp_path, monkeypatch):
    """When the tutorial's model cannot be built, the page says so and why (train.py's last line), beside the
    fallback's own warning that its head is fresh: a random head is never shown as a trained model."""
    monkeypatch.setattr(session, "tutorial_dir", tmp_path / "model")  # not built
    failed = type("Failed", (), dict(state="failed", error="train.py exited with 2: no SST-2"))()
    line = draw.model_line(session.load(""), failed)
    assert "could not be built" in line and "no SST-2" in line and "freshly initialised head" in line


def test_build_is_the_tutorials():
    """The explorer builds the tutorial's model with tutorial.ipynb's own flags: every flag that changes the
    model (all but settings.RESUME_FREE, and the epochs) equal, so that the notebook loads what the explorer
    built instead of training again, and the page explains the model the notebook does."""
    nb = json.loads((session.ROOT / "tutorial.ipynb").read_text())
    walk = None
    for cell in nb["cells"]:
        if cell["cell_type"] == "code" and "walk_flags" in "".join(cell["source"]):
            for node in ast.walk(ast.parse("".join(cell["source"]))):
                if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "walk_flags":
                    walk = [e.value if isinstance(e, ast.Constant) else "OUT" for e in node.value.elts]
                    break
        if walk:
            break
    assert walk, "tutorial.ipynb no longer sets walk_flags"
    ours = vars(settings.parse_args(build.flags() + ["--out", "OUT"]))
    theirs = vars(settings.parse_args(walk))
    assert {k: v for k, v in ours.items() if k == "epochs" or k not in settings.RESUME_FREE} == \
        {k: v for k, v in theirs.items() if k == "epochs" or k not in settings.RESUME_FREE}
# -----------------------------------------------------------------------------
# in a real browser


def _needs(module):
    if os.environ.get("EXPLORER_BROWSER_REQUIRED"):
        return __import__(module)
    return pytest.importorskip(module, reason=f"the browser test needs {module} (pip install gradio playwright)")


BAD = [("p", 1.5, "p (candidate fraction) must be a number from 0 to 1"),
       ("q", -1, "q (drop probability) must be a number from 0 to 1"),
       ("layer", 7, "layer must be a whole number from 1 to 6"),
       ("head", 13, "head must be a whole number from 1 to 12"),
       ("seed", "1e30", "seed must be a whole number from 0 to 4294967295"),
       ("seed", -1, "seed must be a whole number from 0 to 4294967295")]
GOOD = {"p": 0.3, "q": 0.5, "layer": 1, "head": 6, "seed": 7}


@pytest.mark.slow  # `python -m explorer`, a quick build of the tutorial's model and a browser: about a minute
def test_in_a_browser(tmp_path):
    """Served from a fresh folder (no tutorial model) and driven in chromium. It takes about a minute: 38 to 90 s
    measured (pytest's call time, seven runs) on 2 cores shared with other jobs (load 5-7); in one timed run,
    25 s to start the server and the page while the build starts beside them, 15 s more for the build, 15 s for
    the rest.
    It checks:
    - the first page shows the tutorial's model being built, with a progress bar, or already its prediction; the
      terminal shows train.py's progress; then the page shows the built model, named as trained (a quick build,
      --build-limit 32: the page says on how many sentences), never the fresh head;
    - a typed sentence, p and q moved by their number boxes, the seed changed: the page's dropped counts equal
      drop_mask's for the same scores and seed, its prediction the model's;
    - the colour bars are there, A's naming the map's largest weight; hovering a cell of B shows that cell's
      tokens, A and B (to the 4 digits shown, 1e-3 relative); the marks
      switch off; under RD high/low is disabled; the seeds' spread shows explore's median for the method shown;
    - p, q, layer, head and seed typed out of range each get a message naming the field and its range, and the
      server prints nothing at all meanwhile (the terminal's output is compared before and after);
    - an empty sentence, an unknown folder and a token-level model each show their message and the page keeps
      serving; an over-long sentence is cut with a note. No request leaves 127.0.0.1, no traceback reaches the
      server's output."""
    _needs("gradio")
    _needs("playwright")
    from explorer import browser
    if not Path(browser.CHROMIUM).exists():
        if os.environ.get("EXPLORER_BROWSER_REQUIRED"):
            pytest.fail(f"no chromium at {browser.CHROMIUM}")
        pytest.skip(f"no chromium at {browser.CHROMIUM} (apt-get install chromium)")
    ner = tmp_path / "ner"
    ner.mkdir()
    (ner / "config.json").write_text(json.dumps({"task": "conll2003", "architectures": ["BertForTokenClassification"]}))
    built = tmp_path / "model"

    with browser.serve("--tutorial-model", str(built), "--build-limit", "32") as (url, printed), \
            browser.page(url, ready="#build, #stamp") as (page, refused):
        def stamped(text):
            page.wait_for_function("t => (document.querySelector('#stamp') || {}).textContent?.includes(t)", arg=text)

        def says(text):
            page.wait_for_function("t => document.querySelector('#message').textContent.includes(t)", arg=text)

        def shows(elem_id):
            return page.inner_text(f"#{elem_id}").strip()

        if page.query_selector("#build"):  # the first page: the build under way
            assert "Building the tutorial's model" in shows("build") and page.query_selector("#build-progress")
        page.wait_for_selector("#stamp", timeout=300_000)
        assert "Trained model: fine-tuned on 32 SST-2 training sentences" in shows("message")
        assert "fresh" not in shows("message") and (built / "model.safetensors").is_file()
        assert re.search(r"\[explorer build\] step \d+/\d+", printed())  # progress in the terminal
        m = session.load(str(built))

        browser.set_value(page, "text-a", SENTENCE)
        for elem_id, value in (("p", 0.3), ("q", 0.5), ("seed", 7)):
            browser.set_value(page, elem_id, value)
        stamped("p = 0.30, q = 0.50, seed 7, GA, high, layer 1, head 6")
        head, layer, pred = reference(m, SENTENCE, 0, 5, 0.3, 0.5, 7)
        assert int(shows("n")) == len(m.tok.encode(SENTENCE).ids)
        assert (int(shows("dropped-head")), int(shows("dropped-layer")), shows("pred")) == (head, layer, pred)

        v = session.explore(m, SENTENCE, "", "ga", False, 0, 5, 0, 0.3, 0.5, 7)
        assert page.query_selector("#cbar-A") and page.query_selector("#cbar-B")
        assert f"{max(map(max, v['A'])):.3g}" in shows("cbar-A").split()
        img = page.locator(".maps img.cells").nth(1).bounding_box()  # B's map
        i, j = 2, 3
        page.mouse.move(img["x"] + (j + 0.5) * img["width"] / v["n"], img["y"] + (i + 0.5) * img["height"] / v["n"])
        page.wait_for_function("() => (document.querySelector('#hover') || {}).textContent?.includes('A =')")
        hover = shows("hover")
        assert f"query {i} {v['tokens'][i]} -> key {j} {v['tokens'][j]}" in hover
        for name, want in (("A", v["A"][i][j]), ("B", v["B"][i][j])):
            got = float(re.search(rf"{name} = ([-+0-9.e]+)", hover)[1])
            assert abs(got - want) <= 1e-3 * abs(want), (name, got, want)
        page.locator("#marks input").uncheck()
        page.wait_for_function("() => document.querySelector('#maps').textContent.includes('marks off')")
        spread = session.spread(m, SENTENCE, "", "ga", 0, 0.3, 0.5)[1]["high"]
        page.wait_for_function("t => (document.querySelector('#spread-high') || {}).textContent?.includes(t)",
                               arg=f"{statistics.median(spread):+.4f}")
        page.get_by_label("RD: random").check()
        stamped("RD, no high/low")
        assert page.locator("#strategy input").first.is_disabled()

        before = printed()
        for elem_id, value, message in BAD:  # each bad value, its message, then the field set right again
            browser.set_value(page, elem_id, value)
            says(message)
            assert not page.query_selector("#stamp")  # no figures beside the message
            browser.set_value(page, elem_id, GOOD[elem_id])
            stamped("p = 0.30, q = 0.50, seed 7, RD, no high/low, layer 1, head 6")
        time.sleep(1)  # anything the server would print about the last one
        assert printed() == before, printed()[len(before):][-2000:]

        browser.set_value(page, "text-a", "")
        says("Type a sentence")
        browser.set_value(page, "model", str(tmp_path / "nowhere"))
        says("does not exist")
        browser.set_value(page, "model", str(ner))
        says("token")
        browser.set_value(page, "model", "")
        browser.set_value(page, "text-a", "word " * 200)
        says("cut to")
        browser.set_value(page, "q", 0.9)
        stamped("p = 0.30, q = 0.90, seed 7")  # still serving, after every message
        page.screenshot(path=str(tmp_path / "last.png"))  # left in pytest's tmp folder, to look at after a failure
        log = printed()
    assert not refused, f"the page asked for outside addresses: {refused[:3]}"
    assert "Traceback" not in log, log[-2000:]
