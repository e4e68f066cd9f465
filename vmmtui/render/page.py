"""One self-contained HTML page of a replay (``vmmtui replay NAME --html OUT.html``): every frame as
the inspector drew it (its SVG screenshot), the teacher's notes, a bar of every step and keys to
step back and forth.

A student opens it from disk in a browser: nothing to install, no server, no network. The page's
Content-Security-Policy allows nothing to be fetched (``default-src 'none'``); Textual's SVGs name
a web font, whose remote addresses are cut here so that the page never tries (the browser's
monospace font stands in). Each frame's SVG is gzipped and base64-encoded (a 160×48 frame is about
180 KB of SVG, 12 KB gzipped) and unpacked in the browser with ``DecompressionStream`` when shown.
Everything from the recording reaches the page as JSON read by the script and shown through
``textContent`` or as the SVG Rich escaped. No Textual here.
"""

from __future__ import annotations

import base64
import gzip
import html
import json
import re
from dataclasses import dataclass

#: Textual's SVGs load Fira Code from a CDN: keep ``local()``, drop the remote addresses
_REMOTE_FONT = re.compile(r',\s*url\("https?://[^"]*"\)\s*format\("[^"]*"\)')


@dataclass
class PageFrame:
    """One frame: the SVG and what the page says about it."""

    svg: str
    #: "start", "step 8: producer · export", "closed"
    label: str
    steps: int
    #: the role that acted in this frame ("" for the start and the close): the bar's colour
    role: str = ""
    failed: bool = False
    #: the teacher's note on this frame: (what it is on, text)
    note: tuple[str, str] | None = None
    #: how many lines of the event log (``build``'s ``log``) this frame shows
    log: int = 0


def offline_svg(svg: str) -> str:
    """The SVG with no address the browser would fetch."""
    return _REMOTE_FONT.sub("", svg)


def _packed(svg: str) -> str:
    return base64.b64encode(gzip.compress(offline_svg(svg).encode(), 9, mtime=0)).decode("ascii")


def _json_for_script(data: object) -> str:
    """JSON that cannot end the <script> element it sits in."""
    text = json.dumps(data, ensure_ascii=True, separators=(",", ":"))
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


_STEP_LABEL = re.compile(r"step (\d+): (.*)")


def positions(frames: list[PageFrame], steps: int) -> list[str]:
    """What the page says of each frame, one of a kind: ``step 8 of 23: producer · export``, and
    for the frames that are not a step ``start · before step 1 of 23``, ``closed · after step 23
    of 23``. The last step and the close both stood at "step 23 of 23"; any two frames that would
    still read alike are told apart by their number."""
    out = []
    for f in frames:
        m = _STEP_LABEL.fullmatch(f.label)
        if m:
            out.append(f"step {m.group(1)} of {steps}: {m.group(2)}")
        elif f.steps == 0:
            out.append(f"{f.label} · before step 1 of {steps}")
        else:
            out.append(f"{f.label} · after step {f.steps} of {steps}")
    seen: dict[str, int] = {}
    for text in out:
        seen[text] = seen.get(text, 0) + 1
    n = len(frames)
    return [f"{t} · frame {k + 1} of {n}" if seen[t] > 1 else t for k, t in enumerate(out)]


def build(
    frames: list[PageFrame],
    title: str,
    subtitle: str,
    steps: int,
    keys: list[dict[str, object]] | None = None,
    log: list[str] | None = None,
) -> str:
    """The page: ``title`` (the recording's device and date), ``subtitle`` (the notes' title or what
    the recording shows), ``steps`` (the plan's length, for "step N of M"); ``keys``: the keys the
    page handles, from the inspector's binding table (``vmmtui.tui.keys.page_keys``): the script
    and the keys line are made from them, so the page offers no key that does nothing there;
    ``log``: the event log's entries (an entry may say several lines, or none), of which each
    frame shows its first ``PageFrame.log``, in a
    box of text that scrolls (the frames' SVGs leave the log out)."""
    where = positions(frames, steps)
    data = {
        "steps": steps,
        "keys": keys or [],
        "log": log or [],
        "frames": [
            {
                "label": f.label,
                "position": where[k],
                "steps": f.steps,
                "role": f.role,
                "failed": f.failed,
                "note": None if f.note is None else {"on": f.note[0], "text": f.note[1]},
                "svg": _packed(f.svg),
                "log": f.log,
            }
            for k, f in enumerate(frames)
        ],
    }
    return (
        _TEMPLATE.replace("@TITLE@", html.escape(title))
        .replace("@SUBTITLE@", html.escape(subtitle))
        .replace("@DATA@", _json_for_script(data))
    )


_TEMPLATE = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy"
  content="default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>vmmtui REPLAY · @TITLE@</title>
<style>
  :root { color-scheme: dark; --bg: #1e1e1e; --fg: #e0e0e0; --dim: #9a9a9a;
          /* everything above and beside the frame that must stay on screen with it */
          --above: 4.6rem; --below: 0rem; }
  body { margin: 0; background: var(--bg); color: var(--fg);
         font: 15px/1.4 system-ui, sans-serif; }
  header { display: flex; gap: 1em; align-items: baseline; white-space: nowrap; overflow: hidden;
           height: 1.9rem; padding: .25rem 1em 0; background: #2b2b2b; box-sizing: border-box; }
  header .replay { font-weight: bold; color: #111; background: #f0c674; padding: 0 .4em; }
  header .where, header .what { color: var(--dim); overflow: hidden; text-overflow: ellipsis; }
  #position { font-weight: bold; margin-left: auto; font-variant-numeric: tabular-nums; }
  #bar { display: flex; height: 22px; margin: .4rem 1em; cursor: pointer; user-select: none; }
  #bar div { flex: 1; margin-right: 1px; background: #555; position: relative; }
  #bar div.producer { background: #2a7fbf; }
  #bar div.consumer { background: #a05fb5; }
  #bar div.failed { background: #d0312d; }
  #bar div.noted::after { content: ""; position: absolute; left: 35%; top: -5px; width: 30%;
                          height: 4px; background: #f0c674; }
  #bar div.here { outline: 2px solid #fff; z-index: 1; }
  main { display: grid; grid-template-columns: minmax(0, 1fr) 22em; gap: 0 1em;
         grid-template-areas: "frame side" "log side"; padding: 0 1em 1em; align-items: start; }
  #frame { grid-area: frame; }
  /* the whole frame on screen: as wide as there is room for, no taller than the window leaves */
  #frame svg { display: block; width: 100%; height: auto;
               max-height: calc(100vh - var(--above) - var(--below)); }
  aside { grid-area: side; }
  #note { white-space: pre-wrap; overflow-wrap: anywhere; background: #2b2433; border-left: 4px solid #f0c674;
          padding: .4em .8em; min-height: 1.4em; overflow-y: auto; }
  #note:empty::before { content: "no note on this step"; color: var(--dim); }
  #note-on { font-weight: bold; color: #f0c674; margin: .3em 0 .2em; }
  nav { display: flex; flex-wrap: wrap; align-items: center; gap: .2em .6em; }
  nav button { font: inherit; }
  #chapters { list-style: none; padding: 0; margin: .8em 0 0; }
  #chapters a { color: #8ab4f8; cursor: pointer; text-decoration: none; }
  #chapters li.here a { font-weight: bold; color: #f0c674; }
  .keys { color: var(--dim); font-size: 90%; }
  .keys kbd { font: 13px ui-monospace, monospace; color: var(--fg); background: #333;
              border: 1px solid #555; border-radius: 3px; padding: 0 .3em; }
  #log-box { grid-area: log; margin-top: .6em; }
  #log-box h2 { font-size: 14px; font-weight: normal; color: var(--dim); margin: 0 0 .2em; }
  #log { font: 13px/1.35 ui-monospace, "DejaVu Sans Mono", monospace; white-space: pre-wrap;
         overflow-wrap: anywhere; background: #151515; border: 1px solid #444; margin: 0;
         padding: .4em .6em; height: 14em; overflow-y: auto; }
  /* below 1300 px the frame takes the page's width (its text stays 12 px or more at 1024 px),
     and the buttons, keys and note go under it, in rows kept short enough that they too are on
     screen at 768 px: the note scrolls within its box when it is longer */
  @media (max-width: 1300px) {
    :root { --below: 8.4rem; }
    body { font-size: 14px; }
    main { grid-template-columns: minmax(0, 1fr); grid-template-areas: "frame" "side" "log";
           padding: 0 .4em .6em; }
    #frame svg { margin: 0 auto; }
    nav { margin-top: .3em; }
    nav button { font-size: 13px; padding: 0 .4em; }
    #note-on { display: inline; margin: 0 .4em 0 0; font-size: 13px; }
    #note { max-height: 3.6em; margin-top: .2em; }
    #chapters { display: flex; flex-wrap: wrap; gap: 0 1em; }
  }
</style>
</head>
<body>
<header>
  <span class="replay">REPLAY</span>
  <span class="where">@TITLE@</span>
  <span class="what">@SUBTITLE@</span>
  <span id="position" aria-live="polite"></span>
</header>
<div id="bar" role="slider" tabindex="0" aria-label="steps"></div>
<main>
  <div id="frame"></div>
  <aside>
    <nav>
      <span><button id="first" title="Home">&#xAB; first</button><button id="back" title="&#x2190;">&#x2039; back</button><button id="next" title="&#x2192;">next &#x203A;</button><button id="last" title="End">last &#xBB;</button></span>
      <span class="keys" id="keys"></span>
    </nav>
    <p id="note-on"></p>
    <div id="note"></div>
    <ul id="chapters"></ul>
  </aside>
  <section id="log-box"><h2>event log (scrolls)</h2><pre id="log" tabindex="0"></pre></section>
</main>
<script id="data" type="application/json">@DATA@</script>
<script>
"use strict";
const data = JSON.parse(document.getElementById("data").textContent);
const frames = data.frames;
const cache = new Map();
let shown = -1, wanted = 0;

async function svgOf(k) {
  if (!cache.has(k)) {
    const bytes = Uint8Array.from(atob(frames[k].svg), c => c.charCodeAt(0));
    const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
    cache.set(k, new Response(stream).text());
  }
  return cache.get(k);
}

const bar = document.getElementById("bar");
frames.forEach((f, k) => {
  const cell = document.createElement("div");
  const role = f.role.startsWith("consumer") ? "consumer" : f.role;
  if (role) cell.classList.add(role);
  if (f.failed && f.label.endsWith("(failed)")) cell.classList.add("failed");
  if (f.note) cell.classList.add("noted");
  cell.title = f.position;
  bar.appendChild(cell);
});
const chapters = document.getElementById("chapters");
frames.forEach((f, k) => {
  if (!f.note) return;
  const li = document.createElement("li");
  const a = document.createElement("a");
  a.textContent = f.note.on;
  a.addEventListener("click", () => go(k));
  li.appendChild(a);
  li.dataset.frame = k;
  chapters.appendChild(li);
});

async function go(k) {
  k = Math.max(0, Math.min(frames.length - 1, k));
  wanted = k;
  const svg = await svgOf(k);
  if (wanted !== k) return;  // a later key press won
  const f = frames[k];
  document.getElementById("frame").innerHTML = svg;
  document.getElementById("position").textContent =
    f.position + (k === frames.length - 1 ? " · the end" : "");
  document.getElementById("note-on").textContent = f.note ? `teacher's note (${f.note.on})` : "";
  document.getElementById("note").textContent = f.note ? f.note.text : "";
  const log = document.getElementById("log");
  log.textContent = data.log.slice(0, f.log).filter((l) => l).join("\\n");
  log.scrollTop = log.scrollHeight;  // the frame's last lines, as the inspector's log follows
  [...bar.children].forEach((c, i) => c.classList.toggle("here", i === k));
  [...chapters.children].forEach(li => li.classList.toggle("here", +li.dataset.frame === k));
  bar.setAttribute("aria-valuenow", k);
  shown = k;
  document.body.dataset.frame = k;
}

// the keys: the inspector's binding table's, those marked for the page (data.keys)
const noted = frames.map((f, k) => f.note ? k : -1).filter(k => k >= 0);
const actions = {
  step: () => go(wanted + 1),
  back: () => go(wanted - 1),
  first: () => go(0),
  last: () => go(frames.length - 1),
  "chapter(1)": () => { const k = noted.find(k => k > wanted); if (k !== undefined) go(k); },
  "chapter(-1)": () => { const k = noted.filter(k => k < wanted).pop(); if (k !== undefined) go(k); },
};
const keymap = new Map();
const keysLine = document.getElementById("keys");
keysLine.append("keys: ");
data.keys.forEach((b, i) => {
  b.keys.forEach(name => keymap.set(name, b.action));
  const kbd = document.createElement("kbd");
  kbd.textContent = b.shown;
  if (i) keysLine.append(" · ");
  keysLine.append(kbd, " " + b.description);
});
keysLine.append(" · click or drag the bar");
document.addEventListener("keydown", e => {
  const action = actions[keymap.get(e.key)];
  if (action === undefined || e.altKey || e.ctrlKey || e.metaKey) return;
  e.preventDefault();
  action();
});
document.getElementById("first").onclick = () => go(0);
document.getElementById("back").onclick = () => go(wanted - 1);
document.getElementById("next").onclick = () => go(wanted + 1);
document.getElementById("last").onclick = () => go(frames.length - 1);
let dragging = false;
const fromX = e => {
  const r = bar.getBoundingClientRect();
  return Math.floor((e.clientX - r.left) / r.width * frames.length);
};
bar.addEventListener("pointerdown", e => { dragging = true; bar.setPointerCapture(e.pointerId); go(fromX(e)); });
bar.addEventListener("pointermove", e => { if (dragging && fromX(e) !== wanted) go(fromX(e)); });
bar.addEventListener("pointerup", () => { dragging = false; });
if (typeof DecompressionStream === "undefined") {
  document.getElementById("frame").textContent =
    "This browser cannot unpack the frames (no DecompressionStream): open the page in a current " +
    "Firefox, Chrome, Edge or Safari (16.4 or newer).";
} else {
  const start = parseInt(location.hash.slice(1), 10);
  go(Number.isNaN(start) ? 0 : start);
}
</script>
</body>
</html>
"""
