// Beyond the paper: the explorer (explorer.h).
// explorer_template.cpp: the explorer's page (explorer.h, kExplorerTemplate), hand-written HTML,
// CSS and script with no library and nothing fetched: it works opened from disk. The C++ side
// (explorer_page.cpp) fills the placeholders: the text as one element per token (data-pos), and the
// data as JSON whose large arrays are base64 of little-endian integers:
//   blocks   u16 (rows, S)      global block index + 1 (0: no block), row (r, l, h) = (r L + l) H + h
//   scores   i16 (rows, S)      landmark score x 100
//   mass     u8  (rows, S + 2)  attention x 255 on each retrieved block, the tail, the chunk
//   topIds   u32 (n, top)       most probable next tokens; topProbs u16 (n, top) probability x 65535
//   nextProb u16 (n)            probability x 65535 of the text's next token; ids u32 (n) the tokens
// The script draws the panel for the selected token (a click, the arrow keys, or #pos=N).
#include "beyond/explorer.h"

namespace lm {

const char* const kExplorerTemplate = R"PAGE(<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>@@TITLE@@ - landmark explorer</title>
<style>
:root { --ink: #1d2330; --muted: #5f6b7e; --line: #e2e5eb; --local: #dff3e3; --hit: 37, 99, 235; --key: #d99a00; }
* { box-sizing: border-box; }
html, body { margin: 0; height: 100%; }
body { display: flex; flex-direction: column; color: var(--ink);
       font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif; }
header { padding: 8px 16px 7px; border-bottom: 1px solid var(--line); background: #f8f9fb; }
header h1 { font-size: 16px; margin: 0 0 1px; }
header .meta { color: var(--muted); font-size: 12.5px; }
.legend { margin-top: 5px; font-size: 12px; color: var(--muted); display: flex; gap: 14px; flex-wrap: wrap; }
.legend i { display: inline-block; width: 14px; height: 10px; vertical-align: -1px; margin-right: 4px;
  border-radius: 2px; }
main { flex: 1; min-height: 0; display: grid; grid-template-columns: minmax(0, 1fr) 560px; }
#text { overflow-y: auto; padding: 12px 18px 40px; white-space: pre-wrap; overflow-wrap: anywhere;
        font: 13px/1.7 ui-monospace, "DejaVu Sans Mono", Menlo, Consolas, monospace; }
#text .b { border-radius: 3px; }
#text .b.key { box-shadow: inset 0 -3px 0 var(--key); }
#text .b.hit { background: rgba(var(--hit), var(--a)); }
#text .b.focus { outline: 2px solid hsl(var(--h), 65%, 38%); outline-offset: 1px; }
#text [data-pos] { cursor: pointer; border-radius: 2px; }
#text [data-pos]:hover { background: rgba(0, 0, 0, .08); }
#text [data-pos].local { background: var(--local); }
#text [data-pos].sel { background: var(--ink); color: #fff; }
#text .lm { display: inline-block; width: 4px; height: 1.1em; margin: 0 3px; vertical-align: -3px;
            background: #b5bcc8; border-radius: 1px; }
#text .b.hit > .lm { background: rgb(var(--hit)); }
#text .b.key > .lm { background: var(--key); }
aside { border-left: 1px solid var(--line); overflow-y: auto; padding: 8px 14px 30px; }
aside h2 { font-size: 14px; margin: 14px 0 4px; }
aside #token h2 { margin-top: 4px; }
.sub { color: var(--muted); font-size: 12.5px; margin: 2px 0 6px; }
table.grid { border-collapse: collapse; width: 100%; font-size: 12px; table-layout: fixed; }
.grid th { font-weight: 600; color: var(--muted); padding: 2px 4px; text-align: left; white-space: nowrap; }
.grid th.l { width: 58px; }
.grid td.cell { border: 1px solid var(--line); padding: 4px; vertical-align: top; cursor: pointer; }
.grid td.cell:hover { background: #f6f7f9; }
.grid td.cell.on { outline: 2px solid var(--ink); outline-offset: -2px; }
.chips { display: flex; flex-wrap: wrap; gap: 3px; min-height: 20px; }
.chip { background: hsl(var(--h), 80%, 88%); border: 1px solid hsl(var(--h), 45%, 62%); border-radius: 3px;
        padding: 0 4px; font-variant-numeric: tabular-nums; white-space: nowrap; }
.chip small { color: #3c4452; margin-left: 3px; font-size: 10.5px; }
.chip.key { border: 2px solid var(--key); font-weight: 600; }
.none { color: var(--muted); font-size: 11.5px; }
.bar { display: flex; height: 6px; margin-top: 4px; border-radius: 2px; overflow: hidden; background: #eef0f3; }
.bar span { display: block; height: 100%; }
.r { background: rgb(var(--hit)); }
.t { background: #98a2b3; }
.c { background: #3f9d55; }
.p { background: #7a5af5; }
.hb { display: grid; grid-template-columns: 128px 1fr 56px; align-items: center; gap: 8px; margin: 3px 0;
      font-size: 12.5px; }
.hb .track { background: #eef0f3; height: 12px; border-radius: 2px; overflow: hidden; }
.hb .fill { display: block; height: 100%; }
.hb .val { text-align: right; font-variant-numeric: tabular-nums; }
.tok { font-family: ui-monospace, "DejaVu Sans Mono", monospace; background: #eef0f4; padding: 0 3px;
       border-radius: 3px; white-space: pre; }
.recall { margin: 6px 0; padding: 5px 8px; background: #fff6dc; border-left: 3px solid var(--key); font-size: 12.5px; }
</style>
</head>
<body>
<header>
<h1>@@TITLE@@</h1>
<div class="meta">@@MODEL@@ &middot; @@SETTINGS@@</div>
<div class="legend">
<span><i style="background:#1d2330"></i>selected token</span>
<span><i style="background:#dff3e3"></i>its tail and chunk (read directly)</span>
<span><i style="background:rgba(37,99,235,.5)"></i>retrieved block (darker: more heads)</span>
<span><i style="background:#fff;outline:2px solid #444"></i>blocks of the chosen head</span>
<span><i style="background:#d99a00"></i>pass-key block</span>
<span><i style="background:#b5bcc8;width:4px"></i>landmark</span>
<span>click a token &middot; &larr; &rarr; move &middot; #pos=N (&amp;block=G) in the URL</span>
</div>
</header>
<main>
<div id="text">@@TEXT@@</div>
<aside id="side">
<section id="token"></section>
<section id="retrieval"></section>
<section id="attention"></section>
<section id="next"></section>
</aside>
</main>
<script type="application/json" id="data">@@DATA@@</script>
<script>
"use strict";
(function () {
  const D = JSON.parse(document.getElementById("data").textContent);
  function bytes(b64) {
    const s = atob(b64), a = new Uint8Array(s.length);
    for (let i = 0; i < s.length; i++) a[i] = s.charCodeAt(i);
    return a;
  }
  // Little-endian integers of `size` bytes (2 or 4), signed for 2-byte scores.
  function ints(b64, size, signed) {
    const b = bytes(b64), v = new DataView(b.buffer), count = b.length / size;
    const out = size === 4 ? new Uint32Array(count) : signed ? new Int16Array(count) : new Uint16Array(count);
    for (let i = 0; i < count; i++)
      out[i] = size === 4 ? v.getUint32(4 * i, true) : signed ? v.getInt16(2 * i, true) : v.getUint16(2 * i, true);
    return out;
  }
  const blocks = ints(D.blocks, 2), scores = ints(D.scores, 2, true), mass = bytes(D.mass);
  const topIds = ints(D.topIds, 4), topProbs = ints(D.topProbs, 2), nextProb = ints(D.nextProb, 2);
  const ids = ints(D.ids, 4);
  const L = D.L, H = D.H, S = D.S, F = D.F, n = D.n, keys = new Set(D.keyBlocks);
  const text = document.getElementById("text");
  const tok = Array.from(text.querySelectorAll("[data-pos]"));
  const blk = Array.from(text.querySelectorAll(".b"));
  const panel = {
    token: document.getElementById("token"), retrieval: document.getElementById("retrieval"),
    attention: document.getElementById("attention"), next: document.getElementById("next")
  };
  let sel = -1, focus = null, pinned = null;
  const selMarks = [], focusMarks = [];

  function esc(s) {
    const named = { "&": "&amp;", "<": "&lt;", ">": "&gt;", "\"": "&quot;" };
    return String(s).replace(/[&<>"]/g, function (c) { return named[c]; });
  }
  function piece(id) { const p = D.pieces[id]; return p === undefined ? "#" + id : p; }
  // A token as code: spaces as a visible mark, line breaks and other controls escaped.
  function shown(p) {
    return "<span class=\"tok\">" + esc(JSON.stringify(p).slice(1, -1).replace(/ /g, "\u2423")) + "</span>";
  }
  function hue(g) { return Math.round((g * 137.508) % 360); }
  function pct(x) { return (100 * x).toFixed(x > 0 && x < 0.095 ? 1 : 0) + "%"; }
  function row(r, l, h) { return (r * L + l) * H + h; }
  // What head h of layer l did for token r: its blocks (chronological) with scores and weights.
  function taken(r, l, h) {
    const base = row(r, l, h), out = [];
    for (let c = 0; c < S; c++) {
      const g = blocks[base * S + c];
      if (g === 0) break;
      out.push({ g: g - 1, score: scores[base * S + c] / 100, mass: mass[base * (S + 2) + c] / 255 });
    }
    return { blocks: out, tail: mass[base * (S + 2) + S] / 255, chunk: mass[base * (S + 2) + S + 1] / 255 };
  }
  function retrievedMass(t) { let m = 0; for (const b of t.blocks) m += b.mass; return m; }
  function mark(list, e, cls) { e.classList.add(cls); list.push([e, cls]); }
  function unmark(list) {
    for (const [e, cls] of list) {
      e.classList.remove(cls);
      e.style.removeProperty("--a");
      e.style.removeProperty("--h");
    }
    list.length = 0;
  }
  function bar(label, x, cls) {
    return "<div class=\"hb\"><span>" + label + "</span><span class=\"track\"><span class=\"fill " + cls +
           "\" style=\"width:" + (100 * x).toFixed(1) + "%\"></span></span><span class=\"val\">" + pct(x) +
           "</span></div>";
  }

  function select(r, scroll) {
    if (!(r >= 0 && r < n)) return;
    sel = r;
    unmark(selMarks);
    const cs = Math.floor(r / D.chunk) * D.chunk, ts = Math.floor(cs / F) * F;
    for (let p = ts; p <= r; p++) mark(selMarks, tok[p], "local");
    mark(selMarks, tok[r], "sel");
    const count = new Map();
    let best = null, bestMass = -1;
    for (let l = 0; l < L; l++)
      for (let h = 0; h < H; h++) {
        const t = taken(r, l, h), m = retrievedMass(t);
        for (const b of t.blocks) count.set(b.g, (count.get(b.g) || 0) + 1);
        if (m > bestMass) { best = [l, h]; bestMass = m; }
      }
    for (const [g, c] of count) {
      mark(selMarks, blk[g], "hit");
      blk[g].style.setProperty("--a", (0.10 + 0.55 * c / (L * H)).toFixed(3));
    }
    focus = pinned || best;
    drawToken(r, cs, ts);
    drawRetrieval(r);
    drawNext(r);
    drawFocus();
    if (scroll) tok[r].scrollIntoView({ block: "center" });
  }

  function drawToken(r, cs, ts) {
    const cached = Math.min(Math.floor(cs / F), D.capacity > 0 ? D.capacity : Infinity);
    panel.token.innerHTML = "<h2>Token " + r + " " + shown(piece(ids[r])) + "</h2><div class=\"sub\">block " +
      Math.floor(r / F) + "; chunk " + Math.floor(r / D.chunk) + " (tokens " + cs + "&ndash;" +
      (Math.min(n, cs + D.chunk) - 1) + "), read directly with its tail from token " + ts + "; " + cached +
      " earlier block" + (cached === 1 ? "" : "s") + " in the cache to retrieve from (k = " + D.k + ")</div>";
  }

  function drawRetrieval(r) {
    const el = panel.retrieval;
    el.dataset.selected = r;
    let hits = 0, html = "<h2>Blocks retrieved, per layer and head</h2><div class=\"sub\">each chip: a block and its " +
      "landmark score; a block has the same colour in every cell; the bar: attention on retrieved blocks " +
      "<span class=\"r\" style=\"padding:0 6px\"></span> | tail " +
      "<span class=\"t\" style=\"padding:0 6px\"></span> | chunk " +
      "<span class=\"c\" style=\"padding:0 6px\"></span></div>";
    let grid = "<table class=\"grid\"><thead><tr><th class=\"l\"></th>";
    for (let h = 0; h < H; h++) grid += "<th>head " + h + "</th>";
    grid += "</tr></thead><tbody>";
    for (let l = 0; l < L; l++) {
      grid += "<tr><th class=\"l\">layer " + l + "</th>";
      for (let h = 0; h < H; h++) {
        const t = taken(r, l, h), m = retrievedMass(t);
        let chips = "", hit = false;
        for (const b of t.blocks) {
          const key = keys.has(b.g);
          hit = hit || key;
          chips += "<span class=\"chip" + (key ? " key" : "") + "\" data-block=\"" + b.g + "\" style=\"--h:" +
                   hue(b.g) +
                   "\">" + b.g + "<small>" + b.score.toFixed(2) + "</small></span>";
        }
        hits += hit ? 1 : 0;
        if (!chips) chips = "<span class=\"none\">nothing cached</span>";
        grid += "<td class=\"cell\" data-layer=\"" + l + "\" data-head=\"" + h + "\" data-blocks=\"" +
                t.blocks.map(function (b) { return b.g; }).join(",") + "\" title=\"layer " + l + ", head " + h +
                ": retrieved " + pct(m) + ", tail " + pct(t.tail) + ", chunk " + pct(t.chunk) +
                "\"><div class=\"chips\">" +
                chips + "</div><div class=\"bar\"><span class=\"r\" style=\"width:" + (100 * m).toFixed(1) +
                "%\"></span><span class=\"t\" style=\"width:" + (100 * t.tail).toFixed(1) +
                "%\"></span><span class=\"c\" " +
                "style=\"width:" + (100 * t.chunk).toFixed(1) + "%\"></span></div></td>";
      }
      grid += "</tr>";
    }
    grid += "</tbody></table>";
    if (keys.size) {
      const kb = Array.from(keys).sort(function (a, b) { return a - b; });
      html += "<div class=\"recall\">pass key " + (D.key >= 0 ? "<b>" + D.key + "</b> " : "") + "in block" +
              (kb.length > 1 ? "s " : " ") + kb.join(", ") + ": <b>" + hits + " of " + L * H +
              "</b> heads retrieved it for this token</div>";
    }
    el.innerHTML = html + grid;
  }

  function drawFocus() {
    unmark(focusMarks);
    if (!focus || sel < 0) return;
    const l = focus[0], h = focus[1], t = taken(sel, l, h);
    const cell = panel.retrieval.querySelector("td.cell[data-layer=\"" + l + "\"][data-head=\"" + h + "\"]");
    if (cell) mark(focusMarks, cell, "on");
    let html = "<h2>Where layer " + l + ", head " + h + " attends</h2><div class=\"sub\">the weights of token " + sel +
               ", summed over each retrieved block (its tokens and landmark), the tail and the chunk; " +
               "click a cell above to choose another head</div>";
    for (const b of t.blocks) {
      mark(focusMarks, blk[b.g], "focus");
      blk[b.g].style.setProperty("--h", hue(b.g));
      html += bar("<span class=\"chip" + (keys.has(b.g) ? " key" : "") + "\" style=\"--h:" + hue(b.g) + "\">block " +
                  b.g + "</span>", b.mass, "r");
    }
    const cs = Math.floor(sel / D.chunk) * D.chunk, ts = Math.floor(cs / F) * F;
    html += bar("tail (" + (cs - ts) + " tokens)", t.tail, "t");
    html += bar("chunk (" + (sel - cs + 1) + " tokens)", t.chunk, "c");
    panel.attention.innerHTML = html;
  }

  function drawNext(r) {
    let html = "<h2>Next token</h2>";
    for (let j = 0; j < D.top; j++) {
      html += bar(shown(piece(topIds[r * D.top + j])), topProbs[r * D.top + j] / 65535, "p");
    }
    html += r + 1 < n ? "<div class=\"sub\">the text goes on with " + shown(piece(ids[r + 1])) + ", given " +
                        pct(nextProb[r] / 65535) + "</div>" : "<div class=\"sub\">the last token of the text</div>";
    panel.next.innerHTML = html;
  }

  function fromHash() {
    const m = /pos=(\d+)/.exec(location.hash);
    return m ? Math.min(n - 1, parseInt(m[1], 10)) : D.select;
  }
  // #pos=N&block=G: select token N but show block G in the text (e.g. the key's block).
  function shownBlock() {
    const m = /block=(\d+)/.exec(location.hash);
    return m && parseInt(m[1], 10) < blk.length ? blk[parseInt(m[1], 10)] : null;
  }
  text.addEventListener("click", function (e) {
    const t = e.target.closest("[data-pos]");
    if (!t) return;
    history.replaceState(null, "", "#pos=" + t.dataset.pos);
    select(parseInt(t.dataset.pos, 10), false);
  });
  panel.retrieval.addEventListener("click", function (e) {
    const cell = e.target.closest("td.cell");
    if (!cell) return;
    pinned = focus = [parseInt(cell.dataset.layer, 10), parseInt(cell.dataset.head, 10)];
    drawFocus();
    const chip = e.target.closest(".chip");
    if (chip) blk[parseInt(chip.dataset.block, 10)].scrollIntoView({ block: "center" });
  });
  document.addEventListener("keydown", function (e) {
    if (e.key !== "ArrowLeft" && e.key !== "ArrowRight") return;
    const r = Math.max(0, Math.min(n - 1, sel + (e.key === "ArrowLeft" ? -1 : 1)));
    history.replaceState(null, "", "#pos=" + r);
    select(r, true);
    e.preventDefault();
  });
  function fromUrl() {
    const b = shownBlock();
    select(fromHash(), !b);
    if (b) b.scrollIntoView({ block: "center" });
  }
  window.addEventListener("hashchange", fromUrl);
  fromUrl();
})();
</script>
</body>
</html>
)PAGE";

}  // namespace lm
