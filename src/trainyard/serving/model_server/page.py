"""The try page at ``/``: one HTML file with its script inline, built from the model's metadata.

Each of the model's inputs gets a box: text (a BYTES input) a text box, rows of up to 256 features a
field per feature (a checkbox for BOOL) and a JSON box for whole rows, a scalar one field, an image
(``[N, 1 or 3, H, W]`` or ``[N, H, W]``) a pad to draw on or an image file to pick, scaled to its size, any
other shape a JSON box. It shows the label and, for a classifier, each class's probability; a model's other
outputs by name. Every URL it fetches is relative to the page (its ``<base>``, when the platform's UI embeds it),
so it works at ``/`` and behind the platform's ``/serve/NAME/`` proxy alike; there it sends the UI's token (same
origin), which the proxy asks for like the API, or, sandboxed in a frame on a server with users, asks the page
around it to send its requests.
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
fieldset{border:0;padding:0;margin:0 0 .8rem} legend{font-weight:600;margin-bottom:.3rem}
textarea{width:100%;box-sizing:border-box;font:inherit;padding:.5rem;border:1px solid #c8ced8;border-radius:6px}
.grid{display:grid;grid-template-columns:repeat(auto-fill,minmax(110px,1fr));gap:.4rem}
.grid label{font-size:.8rem;color:#556} .grid input{width:100%;box-sizing:border-box} .grid input[type=checkbox]{width:auto;display:block}
button{font:inherit;background:#2457d6;color:#fff;border:0;border-radius:6px;padding:.45rem 1.1rem;cursor:pointer}
#result .label{font-size:1.6rem;font-weight:600;overflow-wrap:anywhere} #result .label .sub{font-size:1rem;font-weight:400} .bar{height:8px;background:#2457d6;border-radius:4px}
.row{display:grid;grid-template-columns:8rem 1fr 4rem;gap:.6rem;align-items:center;margin:.2rem 0}
canvas.draw{display:block;max-width:100%;border-radius:6px;touch-action:none;cursor:crosshair}
button.plain{background:#eef0f4;color:#1d2330}
.error{color:#b3261e;white-space:pre-wrap} code{background:#eef0f4;padding:0 .25rem;border-radius:3px}
</style></head>
<body><main>
<h1 id="title">__TITLE__</h1><p class="sub" id="sub">loading the model's signature…</p>
<section id="form-section" hidden><form id="form"><div id="fields"></div>
<p><button type="submit" id="predict">Predict</button></p></form></section>
<section id="result" aria-live="polite" hidden></section>
<section><p class="sub">The same through the API: <code>POST <span id="endpoint"></span></code>
(Open Inference Protocol v2)<span id="v1-alt">, or <code>POST <span id="v1"></span></code> with
<code>{"instances": [...]}</code></span>.</p>
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

// the widget an input gets: a text box, a field per feature of a row, one value, an image, or JSON of its shape
function kind(input) {
  if (input.datatype === "BYTES") return "text";
  if (input.shape.length === 0) return "scalar";
  if (imageSize(input)) return "image";
  const n = input.shape.length === 2 ? input.shape[1] : -1;
  return n > 0 && n <= 256 ? "grid" : "json";
}

// an image's size: [N, C, H, W] with 1 or 3 channels, or [N, H, W] (c: 0), each side 8 to 1024; else null
function imageSize(input) {
  const s = input.shape, side = (d) => d >= 8 && d <= 1024;
  if (!["FP16", "FP32", "FP64", "UINT8"].includes(input.datatype)) return null;
  if (s.length === 4 && (s[1] === 1 || s[1] === 3) && side(s[2]) && side(s[3])) return {c: s[1], h: s[2], w: s[3]};
  if (s.length === 3 && side(s[1]) && side(s[2])) return {c: 0, h: s[1], w: s[2]};
  return null;
}

function blank(pad) {
  const ctx = pad.getContext("2d");
  ctx.fillStyle = "#000";
  ctx.fillRect(0, 0, pad.width, pad.height);
}

// white strokes on black, as MNIST's digits are written
function drawable(pad) {
  const ctx = pad.getContext("2d");
  let down = false;
  const at = (e) => {
    const r = pad.getBoundingClientRect();
    return [(e.clientX - r.left) * pad.width / r.width, (e.clientY - r.top) * pad.height / r.height];
  };
  pad.addEventListener("pointerdown", (e) => {
    down = true;
    pad.setPointerCapture(e.pointerId);
    ctx.beginPath();
    ctx.moveTo(...at(e));
  });
  pad.addEventListener("pointermove", (e) => {
    if (!down) return;
    Object.assign(ctx, {strokeStyle: "#fff", lineWidth: pad.width / 12, lineCap: "round", lineJoin: "round"});
    ctx.lineTo(...at(e));
    ctx.stroke();
  });
  for (const t of ["pointerup", "pointercancel"]) pad.addEventListener(t, () => { down = false; });
}

// the pad's picture scaled to the input's size: values 0..1 (0..255 for UINT8), channels first
function pixels(pad, {c, h, w}, datatype) {
  const small = document.createElement("canvas");
  Object.assign(small, {width: w, height: h});
  const ctx = small.getContext("2d");
  ctx.imageSmoothingQuality = "high";
  ctx.drawImage(pad, 0, 0, w, h);
  const rgba = ctx.getImageData(0, 0, w, h).data, n = w * h, out = new Array(Math.max(c, 1) * n);
  const scale = datatype === "UINT8" ? (v) => Math.round(v) : (v) => v / 255;
  for (let p = 0; p < n; p++) {
    if (c === 3) {
      for (let k = 0; k < 3; k++) out[k * n + p] = scale(rgba[4 * p + k]);
    } else {
      out[p] = scale((rgba[4 * p] + rgba[4 * p + 1] + rgba[4 * p + 2]) / 3);
    }
  }
  return out;
}

const suffix = (i) => (i ? "-" + i : "");
const shapeHint = (input) => "JSON of shape [" + input.shape.join(", ") + "]";
const number = (input, attrs) => el("input", input.datatype === "BOOL" ? {type: "checkbox", ...attrs}
  : {type: "number", step: "any", ...attrs});

function build() {
  const fields = $("fields"), many = meta.inputs.length > 1;
  $("sub").textContent = meta.platform + " model, version " + meta.versions.join(", ");
  $("v1-alt").hidden = many;  // KServe v1 takes one input
  meta.inputs.forEach((input, i) => {
    const box = el("fieldset", {"data-input": String(i)});
    if (many) box.append(el("legend", {}, input.name + " · " + input.datatype + " [" + input.shape.join(", ") + "]"));
    const how = kind(input);
    if (how === "text") {
      box.append(el("label", {for: "text" + suffix(i)}, "Text"), el("textarea", {id: "text" + suffix(i), rows: "6",
        placeholder: "Type something for the model to read…"}));
    } else if (how === "scalar") {
      box.append(number(input, {id: "value" + suffix(i), "aria-label": input.name}));
    } else if (how === "image") {
      const {h, w} = imageSize(input), zoom = Math.max(1, Math.floor(280 / Math.max(h, w)));
      const pad = el("canvas", {id: "draw" + suffix(i), class: "draw", width: String(w * zoom),
        height: String(h * zoom), "aria-label": "draw here"});
      const file = el("input", {type: "file", accept: "image/*", id: "image" + suffix(i)});
      const wipe = el("button", {type: "button", class: "plain"}, "Clear"), tools = el("p");
      tools.append(wipe, " ", file);
      blank(pad);
      drawable(pad);
      wipe.addEventListener("click", () => blank(pad));
      file.addEventListener("change", async () => {
        if (!file.files.length) return;
        blank(pad);
        pad.getContext("2d").drawImage(await createImageBitmap(file.files[0]), 0, 0, pad.width, pad.height);
        pad.dataset.loaded = file.files[0].name;
      });
      box.append(el("p", {class: "sub"}, "Draw here, or pick an image file: it is scaled to " + w + "×" + h + "."),
        pad, tools,
        el("p", {class: "sub"}, "…or the tensor as JSON (this box wins when filled):"),
        el("textarea", {id: "rows" + suffix(i), rows: "3", placeholder: shapeHint(input)}));
    } else {
      const n = how === "grid" ? input.shape[1] : -1;
      const names = (!i && meta.parameters && meta.parameters.feature_names) || [];
      if (n > 0) {
        const grid = el("div", {class: "grid"});
        for (let f = 0; f < n; f++) {
          const label = el("label", {}, names[f] || "x" + f);
          label.append(number(input, {value: "0", "data-feature": String(f), "aria-label": names[f] || "x" + f}));
          grid.append(label);
        }
        box.append(grid, el("p", {class: "sub"}, "…or whole rows as JSON (this box wins when filled):"));
      }
      const zero = input.datatype === "BOOL" ? "false" : 0;
      const hint = n > 0 ? "[[" + Array(Math.min(n, 4)).fill(zero).join(", ") + (n > 4 ? ", …" : "") + "]]"
        : shapeHint(input);
      box.append(el("textarea", {id: "rows" + suffix(i), rows: "4", placeholder: hint}));
    }
    fields.append(box);
  });
  $("form-section").hidden = false;
}

// a JSON value's shape and its values in order; a ragged array is refused, naming the input
function flatten(value, where) {
  const dims = [];
  for (let x = value; Array.isArray(x); x = x[0]) dims.push(x.length);
  const data = [];
  const walk = (x, d) => {
    if (d === dims.length) {
      if (Array.isArray(x)) throw new Error(where + ": rows of different lengths");
      data.push(x);
    } else if (!Array.isArray(x) || x.length !== dims[d]) {
      throw new Error(where + ": rows of different lengths");
    } else {
      x.forEach((y) => walk(y, d + 1));
    }
  };
  walk(value, 0);
  return {dims, data};
}

function tensor(input, i) {
  const box = document.querySelector("fieldset[data-input='" + i + "']"), how = kind(input);
  const made = (shape, data) => ({name: input.name, datatype: input.datatype, shape, data});
  if (how === "text") return made([1], [$("text" + suffix(i)).value]);
  if (how === "scalar") {
    const v = $("value" + suffix(i));
    if (input.datatype === "BOOL") return made([], [v.checked]);
    if (v.value.trim() === "") throw new Error(input.name + ": a value is needed");
    return made([], [Number(v.value)]);
  }
  const raw = $("rows" + suffix(i)).value.trim();
  if (!raw && how === "image") {
    const size = imageSize(input);
    return made(size.c ? [1, size.c, size.h, size.w] : [1, size.h, size.w], pixels($("draw" + suffix(i)), size,
      input.datatype));
  }
  if (!raw) {
    const row = [...box.querySelectorAll("[data-feature]")].map((b) => b.type === "checkbox" ? b.checked
      : Number(b.value));
    if (!row.length) throw new Error(input.name + ": a value is needed");
    return made([1, row.length], row);
  }
  let value;
  try { value = JSON.parse(raw); } catch (e) { throw new Error(input.name + ": not JSON: " + e.message); }
  let {dims, data} = flatten(value, input.name);
  if (dims.length === input.shape.length - 1) dims = [1, ...dims];  // one row without its batch
  return made(dims, data);
}

function show(outputs) {
  const box = $("result"), by = Object.fromEntries(outputs.map((o) => [o.name, o]));
  box.replaceChildren();
  const first = by.predict || outputs[0];
  const proba = by.predict_proba, classes = (meta.parameters && meta.parameters.classes) || [];
  const rowsN = first.shape.length ? first.shape[0] : 1;
  const part = (o, r) => {  // row r of an output
    const n = o.shape.length && o.shape[0] === rowsN ? o.data.length / rowsN : o.data.length;
    return o.shape.length && o.shape[0] === rowsN ? o.data.slice(r * n, (r + 1) * n) : o.data;
  };
  // shown to 6 significant digits (the exact values in data-values)
  const fmt = (v) => typeof v === "number" && !Number.isInteger(v) ? String(Number(v.toPrecision(6))) : String(v);
  const text = (values) => values.length === 1 ? fmt(values[0]) : "[" + values.map(fmt).join(", ") + "]";
  for (let r = 0; r < Math.min(rowsN, 20); r++) {
    const values = part(first, r);
    const line = el("div", {class: "label", "data-row": String(r), "data-values": JSON.stringify(values)},
      text(values));
    box.append(line);
    if (!by.predict && !proba && values.length > 1 && values.every((v) => typeof v === "number")) {
      const k = values.indexOf(Math.max(...values));  // scores, as a classifier's logits: which is largest
      line.append(el("span", {class: "sub", "data-largest": String(k)}, "  largest: " + (classes[k] ?? "#" + k)));
    }
    for (const o of outputs) {
      if (o === first || o === proba) continue;
      box.append(el("div", {class: "sub", "data-output": o.name}, o.name + ": " + text(part(o, r))));
    }
    if (proba) {
      const k = proba.shape[1], p = proba.data.slice(r * k, (r + 1) * k);
      const best = Math.max(...p);
      line.append(el("span", {class: "sub", "data-probability": best.toFixed(4)},
        "  probability " + (100 * best).toFixed(1) + "%"));
      p.forEach((v, i) => {
        const bars = el("div", {class: "row"});
        const bar = el("div", {class: "bar"}); bar.style.width = (100 * v).toFixed(1) + "%";
        const track = el("div"); track.append(bar);
        bars.append(el("span", {}, String(classes[i] ?? i)), track, el("span", {}, (100 * v).toFixed(1) + "%"));
        box.append(bars);
      });
    }
  }
  box.hidden = false;
}

$("form").addEventListener("submit", async (ev) => {
  ev.preventDefault();
  const box = $("result");
  try {
    const doc = await call("v2/models/" + encodeURIComponent(MODEL) + "/infer", {inputs: meta.inputs.map(tensor)});
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
