// A service's page runs in a sandboxed frame (an origin of its own: it reads none of the UI's storage, cookies or
// workers; api/serve_origin.py), and reaches its own service through the page that frames it: the frame posts
// {trainyard: "fetch", id, path, method, contentType, body}, this page sends it to the service's address only,
// signed in as the viewer, and posts back {trainyard: "fetched", id, status, statusText, contentType, body}.
import { token } from "./api.js";

export const SANDBOX = "allow-scripts allow-forms allow-popups allow-modals allow-downloads";
const METHODS = new Set(["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]);
const MAX_BODY = 16 << 20;  // characters: the proxy's own bounds hold beyond that anyway

export function bridge(frame, base) {
  async function onMessage(e) {
    const m = e.data;
    if (e.source !== frame.contentWindow || !m || m.trainyard !== "fetch") return;
    const reply = (answer) => e.source.postMessage({ trainyard: "fetched", id: m.id, ...answer }, "*");
    const why = refused(m, base);
    if (why) return reply({ error: why });
    const headers = { Accept: "*/*" };
    if (m.contentType) headers["Content-Type"] = String(m.contentType);
    if (token()) headers.Authorization = `Bearer ${token()}`;  // else the /serve/ cookie, same origin
    try {
      const res = await fetch(new URL(String(m.path), location.origin + base), {
        method: String(m.method || "GET").toUpperCase(), headers, body: m.body == null ? undefined : m.body,
        credentials: "same-origin", redirect: "manual",
      });
      reply({ status: res.status, statusText: res.statusText, contentType: res.headers.get("content-type"),
              body: await res.text() });
    } catch (err) {
      reply({ error: String(err && err.message || err) });
    }
  }
  window.addEventListener("message", onMessage);
  return () => window.removeEventListener("message", onMessage);
}

// Why a frame's request is not sent: only the service's own address, plain methods, text bodies
function refused(m, base) {
  let url;
  try { url = new URL(String(m.path), location.origin + base); } catch { return "not an address"; }
  if (url.origin !== location.origin || !url.pathname.startsWith(base)) return `only ${base} is reachable from here`;
  if (!METHODS.has(String(m.method || "GET").toUpperCase())) return `method ${m.method} is not relayed`;
  if (m.body != null && (typeof m.body !== "string" || m.body.length > MAX_BODY)) return "a body is a string up to 16 MiB";
  return null;
}
