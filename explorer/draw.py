"""
The explorer's drawings: HTML (and one PNG a map, made with numpy) of what session.explore, session.spread and
a build.Build return; of the method's numbers none is computed here (only summaries of them: the spread's median
and quartiles, a colour bar's ends). Without gradio, so that the in-process tests read them.

Each map is drawn as one PNG, not as a matplotlib figure: a p or q move redraws three T x T maps, and a matplotlib
figure takes a tenth of a second or more. The only web code is SCRIPT: a map cell's values on hover, read from
the numbers the page already holds (no round trip). (Picking the query row by a click on a map was tried: a value
set from script reached gradio's textbox one event late or not at all, so the row stays the dropdown's.)
"""

import base64
import html
import io
import json
import statistics

import numpy as np
import PIL.Image

from explorer import session

BLUE, RED = (33, 102, 172), (178, 24, 43)
CSS = """
.map { display: inline-grid; font: 11px/13px monospace; }
.map .keys { display: flex; align-items: flex-end; }
.map .keys span { writing-mode: vertical-rl; transform: rotate(180deg); width: 13px; max-height: 7em;
                  overflow: hidden; }
.map .queries span { display: block; height: 13px; text-align: right; padding-right: 4px; white-space: nowrap;
                     max-width: 9em; overflow: hidden; cursor: pointer; }
.map .here { font-weight: bold; color: #b2182b; }
.map img { image-rendering: pixelated; cursor: crosshair; }
.maps { display: flex; flex-wrap: wrap; gap: 28px; }
.maps h4 { margin: 0 0 4px 0; font-size: 13px; }
.cbar { font: 11px monospace; margin: 0 0 6px 0; }
.cbar .grad { display: block; width: 160px; height: 10px; border: 1px solid #999; }
.cbar .ticks { display: flex; width: 162px; justify-content: space-between; }
.cbar .what { display: block; color: #555; max-width: 28em; font-family: sans-serif; }
.bars { max-width: 1000px; display: grid; grid-template-columns: auto auto auto 1fr auto; gap: 0 8px;
        font: 12px monospace; }
.bars .bar { height: 10px; align-self: center; }
.bars .thr { grid-column: 1 / -1; border-top: 2px dashed #b2182b; color: #b2182b; font-size: 11px; }
.bars .tie { color: #b2182b; }
.figs td, .figs th { padding: 1px 10px; text-align: right; white-space: nowrap; }
#spread { width: auto; font-size: 12px; }
#spread td, #spread th { padding: 1px 5px; }
.note { color: #555; font-size: 12px; }
.offscreen { position: absolute !important; left: -10000px; width: 1px; height: 1px; overflow: hidden; }
#hover { position: fixed; z-index: 1000; display: none; pointer-events: none; background: #fff; border: 1px solid
         #888; padding: 3px 6px; font: 12px monospace; white-space: pre; box-shadow: 0 1px 4px #0003; }
"""
# The page's own script (gradio puts it in the page's head): hover and click on the maps, by delegation on the
# document, so that it keeps working as gradio replaces the maps' HTML at every move.
SCRIPT = """<script>
(() => {
  const values = box => box._values || (box._values = JSON.parse(box.dataset.values));
  function cell(e) {  // the (query, key) cell under the mouse, or null
    const img = e.target.closest && e.target.closest('.maps img.cells');
    if (!img) return null;
    const box = img.closest('.maps'), v = values(box), n = v.tokens.length, r = img.getBoundingClientRect();
    const i = Math.floor((e.clientY - r.top) / r.height * n), j = Math.floor((e.clientX - r.left) / r.width * n);
    return i >= 0 && j >= 0 && i < n && j < n ? {v, i, j} : null;
  }
  function tip() {
    let t = document.getElementById('hover');
    if (!t) { t = document.createElement('div'); t.id = 'hover'; document.body.appendChild(t); }
    return t;
  }
  const fmt = x => (x >= 0 ? '+' : '') + x.toPrecision(4);
  document.addEventListener('mousemove', e => {
    const c = cell(e), t = tip();
    if (!c) { t.style.display = 'none'; return; }
    const {v, i, j} = c, parts = [`query ${i} ${v.tokens[i]} -> key ${j} ${v.tokens[j]}`,
                                  `A = ${v.A[i][j].toPrecision(4)}`];
    if (v.B) parts.push(`B = ${fmt(v.B[i][j])}` + (v.cand[i][j] ? ', candidate' : ''));
    parts.push(v.drop[i][j] ? 'dropped (M = -inf)' : 'kept (M = 0)');
    t.textContent = parts.join('\\n');
    t.style.left = (e.clientX + 14) + 'px'; t.style.top = (e.clientY + 14) + 'px'; t.style.display = 'block';
  });
})();
</script>"""

# -----------------------------------------------------------------------------
# the maps

CELL = 13  # pixels per map cell, a 1-pixel white gap included
_DOTS = np.zeros((CELL, CELL), bool)  # a candidate's dotted frame
_DOTS[[0, -2], ::2] = _DOTS[::2, [0, -2]] = True
_CROSS = np.eye(CELL, dtype=bool) | np.eye(CELL, dtype=bool)[::-1]  # a dropped position's x
_CROSS[:3] = _CROSS[-4:] = _CROSS[:, :3] = _CROSS[:, -4:] = False
_GAP = np.zeros((CELL, CELL), bool)
_GAP[-1] = _GAP[:, -1] = True


def colours(X, signed):
    """(T, T) values -> (T, T, 3) colours. A (signed False): white to blue over [0, max A] of the map. B (signed
    True): blue (negative) to white to red (positive), each ROW on its own symmetric scale, [-r, r] with r its
    max |B|: Eq. 6 compares a row's scores only with each other, and on one scale for the map a row of small
    scores (most rows, beside the few largest) came out nearly white."""
    X = np.asarray(X, dtype=np.float64)
    top = np.abs(X).max(-1, keepdims=True) if signed else np.full((len(X), 1), X.max())  # (T, 1)
    t = np.clip(np.abs(X) / np.where(top > 0, top, 1.0), 0, 1)[..., None]  # (T, T, 1)
    end = np.where((X > 0)[..., None], RED, BLUE) if signed else np.array(BLUE)  # (T, T, 3)
    return 255 + (end - 255) * t


def colour_bar(ident, stops, labels, what):
    """A colour bar: the gradient through `stops` (rgb tuples) over its labels (spread evenly: left, [middle,]
    right), and a line saying what the scale is."""
    grad = ", ".join(f"rgb{tuple(s)}" for s in stops)
    ticks = "".join(f"<span>{t}</span>" for t in labels)
    return (f'<div class="cbar" id="{ident}"><span class="grad" style="background: linear-gradient(to right, '
            f'{grad})"></span><span class="ticks">{ticks}</span><span class="what">{what}</span></div>')


def heatmap(title, tokens, row, rgb, cand=None, drop=None, bar=""):
    """A T x T map, queries down and keys across, as a PNG (one image, not T^2 page elements: a 30-token map
    draws in a few milliseconds) between token labels; the chosen query row's labels in red; candidates dotted,
    dropped positions crossed (x), as in the paper's Figure 1."""
    T = len(tokens)
    img = np.kron(rgb, np.ones((CELL, CELL, 1)))  # (T*CELL, T*CELL, 3), each cell a CELL x CELL block
    for marks, pattern, ink in ((cand, _DOTS, RED), (drop, _CROSS, (17, 17, 17))):
        if marks is not None:
            img[np.kron(np.asarray(marks, bool), pattern)] = ink
    img[np.kron(np.ones((T, T), bool), _GAP)] = 255
    img[[row * CELL, (row + 1) * CELL - 1]] = 90  # the chosen query row, framed
    out = io.BytesIO()
    PIL.Image.fromarray(img.astype(np.uint8)).save(out, "png", compress_level=1)  # fast; the page is local
    src = "data:image/png;base64," + base64.b64encode(out.getvalue()).decode()
    esc = [html.escape(t) for t in tokens]
    keys = "".join(f"<span>{t}</span>" for t in esc)
    queries = "".join(f'<span data-row="{i}" class="{"here" if i == row else ""}">{i} {t}</span>'
                      for i, t in enumerate(esc))
    return (f'<div><h4>{title}</h4>{bar}<div class="map" style="grid-template-columns: auto {T * CELL}px">'
            f'<span></span><div class="keys">{keys}</div><div class="queries">{queries}</div>'
            f'<img class="cells" src="{src}" width="{T * CELL}" height="{T * CELL}" alt="{html.escape(title)}">'
            "</div></div>")


def draw_maps(v, marks=True):
    """A, B (not for RD) and the mask of the chosen head, with colour bars; the numbers behind them ride along
    in data-values, for the hover (SCRIPT). marks False leaves B's frames and crosses off."""
    L, h, row = v["layer"] + 1, v["head"] + 1, v["row"]
    tokens, M = v["tokens"], np.asarray(v["mask"], bool)
    top = max(max(r) for r in v["A"])
    parts = [heatmap(f"A, layer {L} head {h} (Eq. 1), unmasked", tokens, row, colours(v["A"], False),
                     bar=colour_bar("cbar-A", [(255, 255, 255), BLUE], ["0", f"{top:.3g}"],
                                    "one scale for the map: white 0 to blue at its largest weight"))]
    if v["B"] is not None:
        what = {"ga": "dF/dA (Eq. 5)", "iga": "integrated gradients (Eq. 3)", "aa": "= A (AA)"}[v["method"]]
        r = max(abs(x) for x in v["B"][row])
        bar = colour_bar("cbar-B", [BLUE, (255, 255, 255), RED], ["-r", "0", "+r"],
                         f"each row its own scale, r = the row's max |B| (Eq. 6 compares a row's scores only with "
                         f"each other); row {row}: r = {r:.3g}")
        title = f"B, {what}: " + ("candidates dotted, dropped x" if marks else "marks off")
        parts.append(heatmap(title, tokens, row, colours(v["B"], True), cand=v["cand"] if marks else None,
                             drop=M if marks else None, bar=bar))
    dark = np.where(M[..., None], 59.0, 255.0).repeat(3, -1)  # (T, T, 3): dropped dark, kept white
    parts.append(heatmap(f"mask M of head {h}: dark = -inf (dropped)", tokens, row, dark,
                         bar=colour_bar("cbar-M", [(255, 255, 255), (59, 59, 59)], ["kept", "dropped"],
                                        "M = 0 kept, M = -inf dropped")))
    values = dict(tokens=tokens, A=_short(v["A"]), B=None if v["B"] is None else _short(v["B"]),
                  cand=v.get("cand"), drop=M.astype(int).tolist())
    hint = '<p class="note">Hover a cell for its values; the query row is picked above.</p>'
    return (f'{hint}<div class="maps" data-values="{html.escape(json.dumps(values, separators=(",", ":")))}">'
            f'{"".join(parts)}</div>')


def _short(X):
    """A map's numbers for the hover, to 6 significant digits (the page shows 4): a 64 x 64 map in ~40 kB."""
    return [[float(f"{x:.6g}") for x in r] for r in X]


def draw_row(v):
    """The chosen query's scores sorted ascending, the threshold at entry int(n(1 - p)), candidates and drops;
    entries sorted before the threshold but equal to it (ties) are candidates too, and marked so."""
    tokens, row, mask = v["tokens"], v["row"], v["mask"][v["row"]]
    head = f"<h4>query row {row} ({html.escape(tokens[row])}), head {v['head'] + 1}"
    if v["B"] is None:
        return (f"{head}</h4><p>RD draws no scores: each real key is dropped with probability p&middot;q = "
                f"{v['p'] * v['q']:.2f}. Dropped here: {sum(mask)} of {v['n']} keys: "
                f"{', '.join(html.escape(tokens[j]) for j in range(v['n']) if mask[j]) or 'none'}.</p>")
    b, cand, ties = v["B"][row], v["cand"][row], v["ties"]
    top = max(abs(x) for x in b) or 1.0
    sort = "-B ascending (low: the lowest B are the candidates)" if v["low"] else "B ascending"
    lines = []
    for rank, j in enumerate(v["order"]):
        if rank == v["idx"]:
            tied = sum(ties)
            lines.append(f'<span class="thr">threshold: entry int(n(1-p)) = int({v["n"]}&middot;{1 - v["p"]:.2f}) = '
                         f'{v["idx"]} of the sorted row, B = {b[j]:+.4g}; candidates at or '
                         f'{"below" if v["low"] else "above"} it'
                         + (f": ties included, so the {tied} entr{'y' if tied == 1 else 'ies'} above this line "
                            f"marked &quot;tie&quot; equal{'s' if tied == 1 else ''} it and "
                            f"{'is a candidate' if tied == 1 else 'are candidates'}" if tied else "")
                         + "</span>")
        colour = "#b2182b" if b[j] > 0 else "#2166ac"
        status = "dropped &times;" if mask[j] else ("candidate, kept" if cand[j] else "")
        if ties[j]:
            status = f'<span class="tie">tie: = threshold, {status}</span>'
        lines.append(f"<span>{rank}</span><span>{j} {html.escape(tokens[j])}</span><span>{b[j]:+.4g}</span>"
                     f'<span class="bar" style="width:{100 * abs(b[j]) / top:.0f}%;background:{colour}"></span>'
                     f"<span>{status}</span>")
    if v["idx"] >= v["n"]:
        lines.append('<span class="thr">threshold: int(n(1-p)) = n, past the end: no candidates (p = 0)</span>')
    return f'{head}, sorted by {sort}</h4><div class="bars">{"".join(lines)}</div>'


def table(rows, ident=None):
    """An HTML table: rows of cells, the first row the header; a cell is a value, or (value, id) to be found by."""
    def cell(c, tag):
        text, ident = c if isinstance(c, tuple) else (c, None)
        return f'<{tag} id="{ident}">{text}</{tag}>' if ident else f"<{tag}>{text}</{tag}>"
    body = "".join("<tr>" + "".join(cell(c, "td" if k else "th") for c in r) + "</tr>" for k, r in enumerate(rows))
    return f'<table class="figs"{f" id={ident}" if ident else ""}>{body}</table>'


def draw_prediction(v):
    cls, c = [html.escape(str(name)) for name in v["classes"]], v["pseudo"]
    rows = [["class", "P", "logit", "P, masked", "logit, masked"]] + [
        [name + (" (c~)" if k == c else ""), f"{v['probs'][k]:.3f}", f"{v['logits'][k]:+.3f}",
         f"{v['probs_after'][k]:.3f}", f"{v['logits_after'][k]:+.3f}"] for k, name in enumerate(cls)]
    return (f'<p>prediction: <b id="pred">{cls[c]}</b> (the pseudo label c~, Eq. 4); after the masked forward: '
            f'<b id="pred-after">{cls[v["pred_after"]]}</b></p>{table(rows)}'
            f"<p>pseudo-label logit F_c~: {v['logits'][c]:+.4f} &rarr; {v['logits_after'][c]:+.4f} masked; "
            f"loss (cross-entropy with c~): {v['loss']:.4f} &rarr; {v['loss_after']:.4f} masked</p>"
            f'<p class="note" id="head-note">The mask covers all {v["heads"]} heads of layer {v["layer"] + 1} '
            "(each head its own mask): the head control changes the maps shown, not this prediction.</p>")


def draw_counts(v):
    n, H, L, h, row = v["n"], len(v["dropped_per_head"]), v["layer"] + 1, v["head"] + 1, v["row"]
    per_head = " ".join(f"{k + 1}:{d}" for k, d in enumerate(v["dropped_per_head"]))
    rd = v["B"] is None
    stamp = (f'<p id="stamp" style="color:#666">for p = {v["p"]:.2f}, q = {v["q"]:.2f}, seed {v["seed"]}, '
             f'{v["method"].upper()}, {"no high/low" if rd else "low" if v["low"] else "high"}, layer {L}, '
             f"head {h}, row {row}</p>")
    rows = [["", f"row {row}", f"head {h}", f"layer {L} (all {H} heads)"],
            [f'positions (n = <b id="n">{n}</b> real tokens)', n, n * n, H * n * n]]
    if rd:  # RD: no candidates, every real position dropped with probability p q
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
    return f"{table(rows)}<p>Dropped per head: {per_head}.{guard_note(v)}</p>{stamp}"


def guard_note(v):
    """The guard's line: said only when it fired in this draw, for the q shown (session.guard_rows)."""
    h, k = v["head"] + 1, v["guard_fired"]
    if v["guard_known"]:
        if not k:
            return ""
        return (f' <span id="guard">In this draw (q = {v["q"]:.2f}) the guard kept {k} row{"s" if k > 1 else ""} '
                f"of head {h} whole: every real key of {'them' if k > 1 else 'it'} came up &quot;drop&quot;, and a "
                "query cannot attend to nothing.</span>")
    whole = v.get("all_candidates") or 0  # the coins could not be told apart: what is certain only
    return (f' <span id="guard">{whole} row(s) of head {h} have every key a candidate: the guard keeps such a row '
            "whole when all its coins come up &quot;drop&quot; (probability q<sup>n</sup>).</span>" if whole else "")


def strip(xs, lo, hi, mark=None, width=140):
    """The values xs as dots on a line from lo to hi (an inline SVG), 0 as a grey tick; mark: one in red."""
    def x(u):
        return 4 + (width - 8) * (u - lo) / ((hi - lo) or 1.0)
    dots = "".join(f'<circle cx="{x(u):.1f}" cy="7" r="2.5" fill="#2166ac" fill-opacity="0.5"/>' for u in xs)
    zero = f'<line x1="{x(0):.1f}" x2="{x(0):.1f}" y1="0" y2="14" stroke="#999"/>' if lo <= 0 <= hi else ""
    red = f'<circle cx="{x(mark):.1f}" cy="7" r="3" fill="#b2182b"/>' if mark is not None else ""
    return f'<svg width="{width}" height="14">{zero}{dots}{red}</svg>'


def draw_spread(v, attribution, changes):
    """The pseudo-label logit's change over the seeds, per mask: median, the middle half, the range, the dots."""
    names = {"high": f"{attribution.upper()}, high", "low": f"{attribution.upper()}, low", "random": "RD"}
    shown = session.mask_name(v["method"], v["low"])
    lo, hi = min(min(c) for c in changes.values()), max(max(c) for c in changes.values())
    seeds = session.SEEDS
    rows = [["mask", "median", "middle half", "range", f"seeds, {lo:+.2f} to {hi:+.2f}"]]
    for name, c in changes.items():
        q1, _, q3 = statistics.quantiles(c, n=4, method="inclusive")
        here = v["seed"] - seeds.start if name == shown and v["seed"] in seeds else None
        rows.append([names[name] + (" (shown)" if name == shown else ""),
                     (f"{statistics.median(c):+.4f}", f"spread-{name}"), f"{q1:+.3f} .. {q3:+.3f}",
                     f"{min(c):+.3f} .. {max(c):+.3f}", strip(c, lo, hi, None if here is None else c[here])])
    return (f"<h4>One draw is noise: F_c~ masked - unmasked over seeds {seeds.start}-{seeds.stop - 1}, at p = "
            f"{v['p']:.2f}, q = {v['q']:.2f}, layer {v['layer'] + 1}</h4>{table(rows, 'spread')}"
            '<p class="note">Each dot one seed\'s mask (the page\'s draw for that seed), red the seed shown; the '
            "middle half: the 25th to the 75th percentile. A negative change: the mask took evidence the "
            "prediction rested on.</p>")


def draw_build(b):
    """The build's progress (build.Build), for the page while the tutorial's model trains."""
    if b.steps:
        where = (f"training step {b.step} of {b.steps}" if b.step < b.steps else
                 "training done, scoring the dev sentences")
        bar = f'<progress id="build-progress" value="{b.step}" max="{b.steps}"></progress>'
    else:
        where, bar = "starting train.py (reading SST-2, loading the weights)", '<progress id="build-progress"></progress>'
    last = "<br>".join(html.escape(line) for line in b.lines[-4:])
    return (f'<div id="build"><p><b>Building the tutorial\'s model</b> in {html.escape(b.shown())}/, '
            f"{html.escape(b.what)}: {where}, {b.elapsed():.0f} s so far.</p>{bar}"
            f'<pre style="font-size: 11px">{last}</pre></div>')


def model_line(m, build=None):
    """The line that names the model shown, and how it was trained; after a failed build (build.Build), why."""
    line = f"Model: `{m.name}`. {m.note}".strip()
    if build is not None and build.state == "failed" and m.task is None:
        line = (f"**The tutorial's model could not be built** ({html.escape(build.error)}): the page shows the "
                f"fallback instead. {line}")
    return line
