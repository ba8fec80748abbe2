"""The try page at ``/``: one HTML file with its script inline, built from the model's metadata.

A text model (a BYTES input) gets a text box; a tabular one a field per feature (up to 256)
and a JSON box for whole rows. It shows the label and, for a classifier, each class's
probability. Every URL it fetches is relative to the page (its ``<base>``, when the platform's UI
embeds it), so it works at ``/`` and behind the platform's ``/serve/NAME/`` proxy alike; there it
sends the UI's token (same origin), which the proxy asks for like the API, or, sandboxed in a frame on a server
with users, asks the page around it to send its requests.
"""

from __future__ import annotations

import json

_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>__TITLE__ · trainyard</title>
<style>
body{font:15px/1.45 system-ui,sans-serif;margin:0;background:#f6f7f9;color:#1d2330}
main{max-width:760px;margin:2rem auto;padding:0 1rem}
h1{font-size:1.4rem;margin:0 0 .2rem} .sub{color:#667;margin:0 0 1.2rem}
section{background:#fff;border:1px solid #dde1e8;border-radius:8px;padding:1rem 1.2rem;margin-bottom:1rem}
textarea{width:100%;box-sizing:border-box;font:inherit;padding:.5rem;border:1px solid #c8ced8;border-radius:6px}
.grid{display:grid;grid-template-columns:repeat(auto-fill,minmax(110px,1fr));gap:.4rem}
.grid label{font-size:.8rem;color:#556} .grid input{width:100%;box-sizing:border-box}
button{font:inherit;background:#2457d6;color:#fff;border:0;border-radius:6px;padding:.45rem 1.1rem;cursor:pointer}
#result .label{font-size:1.6rem;font-weight:600} #result .label .sub{font-size:1rem;font-weight:400} .bar{height:8px;background:#2457d6;border-radius:4px}
.row{display:grid;grid-template-columns:8rem 1fr 4rem;gap:.6rem;align-items:center;margin:.2rem 0}
.error{color:#b3261e;white-space:pre-wrap} code{background:#eef0f4;padding:0 .25rem;border-radius:3px}
</style></head>
<body><main>
<h1 id="title">__TITLE__</h1><p class="sub" id="sub">loading the model's signature…</p>
<section id="form-section" hidden><form id="form"><div id="fields"></div>
<p><button type="submit" id="predict">Predict</button></p></form></section>
<section id="result" aria-live="polite" hidden></section>
<section><p class="sub">The same through the API: <code>POST <span id="endpoint"></span></code>
(Open Inference Protocol v2), or <code>POST <span id="v1"></span></code> with <code>{"instances": [...]}</code>.</p>
</section>
</main>
<script>
"use strict";
const MODEL = __MODEL__;
// relative to this page, which may live at / or behind a proxy at /serve/NAME/ (or be embedded by the
// platform's UI with a <base> naming that address)
const HERE = new URL(document.baseURI).pathname;
const BASE = HERE.endsWith("/") ? HERE : HERE + "/";
const api = (p) => BASE + p;
// behind the platform's proxy without users this page shares the UI's origin: its token opens /serve/NAME/ as
// it opens the API. With users it runs sandboxed (an origin of its own, "null", which reads no token): the page
// framing it sends its requests, signed in (the platform's ui/static/serve_bridge.js)
const SANDBOXED = self.origin === "null" && window.parent !== window;
const TOKEN = (() => { try { return localStorage.getItem("trainyard.token"); } catch (e) { return null; } })();
const $ = (id) => document.getElementById(id);
let meta = null;
let asked = 0;
const waiting = new Map();
window.addEventListener("message", (e) => {
  const m = e.data;
  if (e.source !== window.parent || !m || m.trainyard !== "fetched" || !waiting.has(m.id)) return;
  waiting.get(m.id)(m);
  waiting.delete(m.id);
});

function viaParent(path, init) {
  return new Promise((resolve, reject) => {
    const id = ++asked;
    const gone = () => { waiting.delete(id); reject(new Error("the page around this one did not answer")); };
    const timer = setTimeout(gone, 60000);
    waiting.set(id, (m) => { clearTimeout(timer); m.error ? reject(new Error(m.error)) : resolve(m); });
    window.parent.postMessage({trainyard: "fetch", id, path, ...init}, "*");
  });
}

function el(tag, attrs, text) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  if (text !== undefined) e.textContent = text;
  return e;
}

async function call(path, body) {
  const init = body ? {method: "POST", contentType: "application/json", body: JSON.stringify(body)} : {method: "GET"};
  let status, statusText, text;
  if (SANDBOXED) {
    ({status, statusText, body: text} = await viaParent(api(path), init));
  } else {
    const headers = TOKEN ? {authorization: "Bearer " + TOKEN} : {};
    if (init.contentType) headers["content-type"] = init.contentType;
    const r = await fetch(api(path), {method: init.method, headers, body: init.body});
    status = r.status;
    statusText = r.statusText;
    text = await r.text();
  }
  let doc;
  try { doc = JSON.parse(text); } catch (e) { doc = {error: status + " " + statusText}; }
  if (status < 200 || status > 299) throw new Error(doc.error || statusText);
  return doc;
}

function build() {
  const input = meta.inputs[0], fields = $("fields");
  $("sub").textContent = meta.platform + " model, version " + meta.versions.join(", ");
  if (input.datatype === "BYTES") {
    fields.append(el("label", {for: "text"}, "Text"), el("textarea", {id: "text", rows: "6",
      placeholder: "Type something for the model to read…"}));
  } else {
    const n = input.shape.length === 2 ? input.shape[1] : -1;
    const names = (meta.parameters && meta.parameters.feature_names) || [];
    if (n > 0 && n <= 256) {
      const grid = el("div", {class: "grid"});
      for (let i = 0; i < n; i++) {
        const label = el("label", {}, names[i] || "x" + i), box = el("input", {type: "number", step: "any",
          value: "0", "data-feature": String(i), "aria-label": names[i] || "x" + i});
        label.append(box); grid.append(label);
      }
      fields.append(grid, el("p", {class: "sub"}, "…or whole rows as JSON (this box wins when filled):"));
    }
    fields.append(el("textarea", {id: "rows", rows: "4", placeholder: "[[" + (n > 0 ? Array(Math.min(n, 4))
      .fill(0).join(", ") + (n > 4 ? ", …" : "") : "…") + "]]"}));
  }
  $("form-section").hidden = false;
}

function rows() {
  const input = meta.inputs[0];
  if (input.datatype === "BYTES") {
    const text = $("text").value;
    return {name: input.name, datatype: "BYTES", shape: [1], data: [text]};
  }
  const raw = $("rows").value.trim();
  let data;
  if (raw) {
    data = JSON.parse(raw);
    if (!Array.isArray(data[0])) data = [data];
  } else {
    data = [[...document.querySelectorAll("[data-feature]")].map((b) => Number(b.value))];
  }
  return {name: input.name, datatype: input.datatype,
          shape: [data.length, data[0].length], data: data.flat()};
}

function show(outputs) {
  const box = $("result"), by = Object.fromEntries(outputs.map((o) => [o.name, o]));
  box.replaceChildren();
  const first = by.predict || outputs[0];
  const proba = by.predict_proba, classes = (meta.parameters && meta.parameters.classes) || [];
  const rowsN = first.shape[0] || 1;
  for (let r = 0; r < Math.min(rowsN, 20); r++) {
    const label = by.predict ? String(first.data[r]) : JSON.stringify(first.data.slice(r * (first.data.length / rowsN),
      (r + 1) * (first.data.length / rowsN)));
    const line = el("div", {class: "label", "data-row": String(r)}, label);
    box.append(line);
    if (proba) {
      const k = proba.shape[1], p = proba.data.slice(r * k, (r + 1) * k);
      const best = Math.max(...p);
      line.append(el("span", {class: "sub", "data-probability": best.toFixed(4)},
        "  probability " + (100 * best).toFixed(1) + "%"));
      p.forEach((v, i) => {
        const row = el("div", {class: "row"});
        const bar = el("div", {class: "bar"}); bar.style.width = (100 * v).toFixed(1) + "%";
        const track = el("div"); track.append(bar);
        row.append(el("span", {}, String(classes[i] ?? i)), track, el("span", {}, (100 * v).toFixed(1) + "%"));
        box.append(row);
      });
    }
  }
  box.hidden = false;
}

$("form").addEventListener("submit", async (ev) => {
  ev.preventDefault();
  const box = $("result");
  try {
    const doc = await call("v2/models/" + encodeURIComponent(MODEL) + "/infer", {inputs: [rows()]});
    show(doc.outputs);
  } catch (e) {
    box.replaceChildren(el("p", {class: "error", id: "error"}, e.message));
    box.hidden = false;
  }
});

async function start() {
  $("endpoint").textContent = api("v2/models/" + MODEL + "/infer");
  $("v1").textContent = api("v1/models/" + MODEL + ":predict");
  for (;;) {
    try {
      meta = await call("v2/models/" + encodeURIComponent(MODEL));
      break;
    } catch (e) {
      $("sub").textContent = "waiting for the model: " + e.message;
      await new Promise((ok) => setTimeout(ok, 1000));
    }
  }
  build();
}
start();
</script></body></html>
"""


def render_page(model: str) -> str:
    # the name goes into a script as JSON, with "<" escaped so it can never close the tag
    name = json.dumps(model).replace("<", "\\u003c")
    title = model.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return _PAGE.replace("__TITLE__", title).replace("__MODEL__", name)
