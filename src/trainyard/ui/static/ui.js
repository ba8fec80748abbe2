// Small DOM and format helpers shared by the pages.

// h("a.cls", {href}, child…): an element; strings become text (never HTML)
export function h(tag, attrs = {}, ...children) {
  const [name, ...classes] = tag.split(".");
  const el = document.createElement(name || "div");
  if (classes.length) el.className = classes.join(" ");
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith("on") && typeof v === "function") el.addEventListener(k.slice(2).toLowerCase(), v);
    else if (k === "dataset") Object.assign(el.dataset, v);
    else if (k in el && typeof v !== "string") el[k] = v;
    else el.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children.flat(Infinity)) {
    if (c === undefined || c === null || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

// A definition list's terms and values ([[key, value]…] for a dl.kv), each value's dd marked with its key
export function pairs(items) {
  return items.flatMap(([k, v]) => [h("dt", null, k), h("dd", { dataset: { key: k } }, v)]);
}

// Text whose `commands` show as code, as the CLI's help writes them: a list of strings and <code> elements for h()
export function prose(text) {
  return String(text).split("`").map((part, i) => (i % 2 ? h("code", {}, part) : part)).filter((p) => p !== "");
}

// Where what came of a form's action shows (`tag`: the list's element and class): `say(...items)` a message,
// `failed(err)` the server's errors, each by the field it names
export function notices(tag) {
  const el = h(tag, { role: "alert" });
  const say = (...items) => el.replaceChildren(...items);
  // a refusal of one field (a name taken) names it in its details; a spec's errors each name theirs
  const failed = (e) => {
    const errors = e.errors?.length ? e.errors : [{ message: e.message, field: e.body?.details?.field }];
    say(...errors.map((x) => h("li.error", { dataset: { field: x.field || "" } },
      x.field ? [h("code", null, x.field), `: ${x.message}`] : x.message)));
  };
  return { el, say, failed };
}

// What a page says of a thing that is not there (deleted meanwhile, a mistyped link, another team's), with the way on
export function goneNote(what, href, label) {
  return h("p.error.gone", {}, `${what}: it was deleted, or is not one you may see. `, h("a", { href }, label));
}

export const STATUS_CLASS = {
  pending: "wait", queued: "wait", starting: "run", running: "run", succeeded: "ok",
  failed: "bad", cancelled: "off", cancelling: "off", preempted: "warn", lost: "bad",
  complete: "ok", pruned: "warn",  // a sweep's trials
  done: "ok", expired: "warn",  // a job's stack dumps
};

// A status as colour and text (never colour alone)
export function badge(status) {
  const s = String(status || "").toLowerCase();
  return h(`span.badge.${STATUS_CLASS[s] || "off"}`, { "data-status": s }, s || "?");
}

export function ago(t) {
  if (t === null || t === undefined) return "";
  const d = Date.now() / 1000 - t;
  if (d < 60) return `${Math.max(0, Math.round(d))}s ago`;
  if (d < 3600) return `${Math.round(d / 60)}m ago`;
  if (d < 86400) return `${Math.round(d / 3600)}h ago`;
  return new Date(t * 1000).toISOString().slice(0, 16).replace("T", " ");
}

export function when(t) {
  return t === null || t === undefined ? "" : new Date(t * 1000).toLocaleString();
}

export function duration(seconds) {
  if (seconds === null || seconds === undefined || !isFinite(seconds)) return "";
  const s = Math.max(0, Math.round(seconds));
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m ${s % 60}s`;
  return `${Math.floor(s / 3600)}h ${Math.floor((s % 3600) / 60)}m`;
}

export function bytes(n) {
  if (n === null || n === undefined) return "";
  const u = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (n >= 1024 && i < u.length - 1) { n /= 1024; i++; }
  return `${n.toFixed(i ? 1 : 0)} ${u[i]}`;
}

// The query string with `changes` applied (null/"" removes a key)
export function withQuery(query, changes) {
  const q = new URLSearchParams(query);
  for (const [k, v] of Object.entries(changes)) {
    q.delete(k);
    for (const item of Array.isArray(v) ? v : [v]) if (item !== null && item !== undefined && item !== "") q.append(k, item);
  }
  const s = q.toString();
  return s ? `?${s}` : "";
}
