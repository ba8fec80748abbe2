// The one way pages reach the server: the same /api/v1 as the CLI and SDK, with the browser's token.

const TOKEN_KEY = "trainyard.token";

export function token() { return localStorage.getItem(TOKEN_KEY); }
export function setToken(t) { t ? localStorage.setItem(TOKEN_KEY, t) : localStorage.removeItem(TOKEN_KEY); }

// An API error as the server sent it: code, message, and for invalid specs the fields and lines
export class ApiError extends Error {
  constructor(status, body) {
    super((body && (body.message || body.detail)) || `HTTP ${status}`);
    this.status = status;
    this.code = body && body.code;
    this.errors = (body && (body.errors || (body.details && body.details.errors))) || [];  // InvalidSpec's sit in details
    this.body = body;
  }
}

function headers(extra) {
  const h = { Accept: "application/json", ...extra };
  const t = token();
  if (t) h.Authorization = `Bearer ${t}`;
  return h;
}

async function check(res) {
  if (res.ok) return res;
  let body = null;
  try { body = await res.json(); } catch { /* not JSON: the status says it */ }
  const err = new ApiError(res.status, body);
  if (res.status === 401) window.dispatchEvent(new CustomEvent("trainyard:unauthorized", { detail: err }));
  throw err;
}

// JSON from `path` (relative to /api/v1 unless it starts with "/"); a body is sent as JSON, a Blob as
// it is with its own type (a spec as YAML text)
export async function api(path, { method = "GET", body, query, signal } = {}) {
  const raw = body instanceof Blob;
  const url = new URL(path.startsWith("/") ? path : `/api/v1/${path}`, location.origin);
  for (const [k, v] of Object.entries(query || {})) {
    if (v === undefined || v === null || v === "") continue;
    for (const item of Array.isArray(v) ? v : [v]) url.searchParams.append(k, item);
  }
  let res;
  try {
    res = await fetch(url, {
      method, signal,
      headers: headers(body === undefined ? {} : { "Content-Type": raw ? body.type : "application/json" }),
      body: body === undefined || raw ? body : JSON.stringify(body),
    });
  } catch (e) {
    if (e.name === "AbortError") throw e;
    setConnected(false);
    throw new ApiError(0, { message: `cannot reach the server (${e.message})`, code: "unreachable" });
  }
  setConnected(true);
  await check(res);
  return res.status === 204 ? null : res.json();
}

// Text from the API (a spec as YAML, a log), with the browser's token
export async function text(path) {
  const url = new URL(path.startsWith("/") ? path : `/api/v1/${path}`, location.origin);
  let res;
  try {
    res = await fetch(url, { headers: headers({ Accept: "text/plain, application/yaml" }) });
  } catch (e) {
    setConnected(false);
    throw new ApiError(0, { message: `cannot reach the server (${e.message})`, code: "unreachable" });
  }
  setConnected(true);
  return (await check(res)).text();
}

// A file from the API, fetched with the token and handed to the browser as a download
export async function download(path, filename) {
  const res = await check(await fetch(new URL(path, location.origin), { headers: headers() }));
  const a = document.createElement("a");
  a.href = URL.createObjectURL(await res.blob());
  a.download = filename;
  a.click();
  setTimeout(() => URL.revokeObjectURL(a.href), 10000);
}

// Server-sent events over fetch (EventSource cannot send the token). Reconnects by itself with
// backoff, asking for what came after the last id seen (`cursorParam`); `onEvent({event, data, id})`.
// Returns a function that stops it.
export function stream(path, { query = {}, cursorParam = "after", onEvent, onEnd }) {
  const ctl = new AbortController();
  let cursor = query[cursorParam];
  let delay = 500;
  let stopped = false;
  (async () => {
    while (!stopped) {
      try {
        const url = new URL(path.startsWith("/") ? path : `/api/v1/${path}`, location.origin);
        for (const [k, v] of Object.entries({ ...query, [cursorParam]: cursor })) {
          if (v !== undefined && v !== null) url.searchParams.set(k, v);
        }
        const res = await check(await fetch(url, { headers: headers({ Accept: "text/event-stream" }), signal: ctl.signal }));
        setConnected(true);
        delay = 500;
        const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
        let buf = "";
        let ended = false;
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          buf += value;
          let i;
          while ((i = buf.indexOf("\n\n")) >= 0) {
            const frame = buf.slice(0, i);
            buf = buf.slice(i + 2);
            const ev = { event: "message", data: "", id: null };
            const data = [];
            for (const line of frame.split("\n")) {
              if (!line || line.startsWith(":")) continue;
              const c = line.indexOf(":");
              const field = c < 0 ? line : line.slice(0, c);
              const val = c < 0 ? "" : line.slice(c + 1).replace(/^ /, "");
              if (field === "data") data.push(val);
              else if (field === "event") ev.event = val;
              else if (field === "id") ev.id = val;
            }
            if (!data.length) continue;  // a keep-alive
            ev.data = data.join("\n");
            if (ev.id !== null) cursor = ev.id;
            if (ev.event === "end") ended = true;
            onEvent(ev);
          }
        }
        if (ended) { stopped = true; if (onEnd) onEnd(); return; }
      } catch (e) {
        if (stopped || e.name === "AbortError") return;
        if (e instanceof ApiError && e.status >= 400 && e.status < 500) { toast(e); return; }
        setConnected(false);
      }
      await new Promise((r) => setTimeout(r, delay));
      delay = Math.min(delay * 2, 10000);
    }
  })();
  return () => { stopped = true; ctl.abort(); };
}

// Re-run `fn` every `ms` while the page shows; returns a stop function. Errors show once, then retry.
export function poll(fn, ms) {
  let timer = null;
  let stopped = false;
  const tick = async () => {
    try { await fn(); } catch (e) { if (e.name !== "AbortError") toast(e, { once: true }); }
    if (!stopped) timer = setTimeout(tick, document.hidden ? ms * 4 : ms);
  };
  tick();
  return () => { stopped = true; clearTimeout(timer); };
}

let connected = true;
function setConnected(ok) {
  if (ok === connected) return;
  connected = ok;
  const el = document.getElementById("conn");
  if (el) { el.textContent = ok ? "" : "reconnecting…"; el.classList.toggle("down", !ok); }
}

const shown = new Set();
// A readable message for an error, never a blank page
export function toast(err, { once = false, kind = "error" } = {}) {
  const text = err instanceof Error ? err.message : String(err);
  if (once && shown.has(text)) return;
  shown.add(text);
  const box = document.getElementById("toasts");
  const el = document.createElement("div");
  el.className = `toast ${kind}`;
  el.textContent = text;
  box.appendChild(el);
  setTimeout(() => { el.remove(); shown.delete(text); }, 8000);
}
