"""
The explorer shows the project's numbers and survives bad input. In-process tests check session.py against
addrop and the model directly; the browser test serves `python -m explorer` on 127.0.0.1 and drives it in a real
chromium, as a student would. The browser test needs gradio, playwright and Debian's chromium (pip install gradio
playwright; apt-get install chromium) and skips without them, unless EXPLORER_BROWSER_REQUIRED=1 (CI) makes that
a failure.
"""

import dataclasses
import json
import os
from pathlib import Path

import pytest
import torch

import addrop
import data
from explorer import session

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

# -----------------------------------------------------------------------------
# in a real browser


def _needs(module):
    if os.environ.get("EXPLORER_BROWSER_REQUIRED"):
        return __import__(module)
    return pytest.importorskip(module, reason=f"the browser test needs {module} (pip install gradio playwright)")


@pytest.mark.slow  # runs `python -m explorer` as a whole script, and a browser: about 20 s
def test_in_a_browser(m, tmp_path):
    """Served and driven in chromium: a typed sentence, p and q moved by their number boxes, the seed changed;
    the page's dropped counts equal drop_mask's for the same scores and seed, its prediction the model's; an empty
    sentence, an unknown folder and a token-level model each show their message and the page keeps serving; an
    over-long sentence is cut with a note. No request leaves 127.0.0.1, no traceback reaches the server's output."""
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

    with browser.serve() as (url, printed), browser.page(url) as (page, refused):
        def stamped(text):
            page.wait_for_function("t => (document.querySelector('#stamp') || {}).textContent?.includes(t)", arg=text)

        def says(text):
            page.wait_for_function("t => document.querySelector('#message').textContent.includes(t)", arg=text)

        def shows(elem_id):
            return page.inner_text(f"#{elem_id}").strip()

        browser.set_value(page, "text-a", SENTENCE)
        for elem_id, value in (("p", 0.3), ("q", 0.5), ("seed", 7)):
            browser.set_value(page, elem_id, value)
        stamped("p = 0.30, q = 0.50, seed 7, GA, high, layer 1, head 6")
        head, layer, pred = reference(m, SENTENCE, 0, 5, 0.3, 0.5, 7)
        assert int(shows("n")) == len(m.tok.encode(SENTENCE).ids)
        assert (int(shows("dropped-head")), int(shows("dropped-layer")), shows("pred")) == (head, layer, pred)

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
