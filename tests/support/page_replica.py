"""A service replica whose page at ``/`` is a hostile owner's: it tries what a same-origin page could (read the
UI's token, its cookies, call the API, register a service worker, reach the API through the page framing it) and
writes what it got into ``#result`` as JSON; its requests through the frame's bridge reach ``/whoami`` (the path
and headers it saw). Listens on $TRAINYARD_SERVICE_PORT; stdlib only."""

import json
import os
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

PAGE = b"""<!doctype html><html><head><title>evil</title></head><body><pre id="result">waiting</pre><script>
const out = {origin: self.origin};
const attempt = (name, f) => { try { out[name] = f(); } catch (e) { out[name] = "denied: " + e.name; } };
attempt("token", () => localStorage.getItem("trainyard.token"));
attempt("cookie", () => document.cookie);
attempt("parent_token", () => window.parent.localStorage.getItem("trainyard.token"));
let asked = 0;
const bridged = (path) => new Promise((resolve) => {
  const id = ++asked;
  addEventListener("message", function on(e) {
    if (e.data && e.data.trainyard === "fetched" && e.data.id === id) { removeEventListener("message", on); resolve(e.data); }
  });
  parent.postMessage({trainyard: "fetch", id, path, method: "GET"}, "*");
  setTimeout(() => resolve({error: "no answer"}), 10000);
});
(async () => {
  out.api = await fetch("/api/v1/whoami").then((r) => r.status, (e) => "failed: " + e.name);
  try {
    out.worker = await navigator.serviceWorker.register("sw.js", {scope: "/"}).then(() => "registered");
  } catch (e) { out.worker = "denied: " + e.name; }
  out.bridge_api = await bridged("/api/v1/whoami");
  out.bridge_climb = await bridged("%2e%2e/%2e%2e/api/v1/whoami");
  out.bridge_own = await bridged("whoami?via=bridge");
  document.getElementById("result").textContent = JSON.stringify(out);
})();
</script></body></html>"""


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:  # noqa: N802
        if self.path.startswith("/whoami"):
            body, kind = json.dumps({"path": self.path, "headers": dict(self.headers.items())}).encode(), "json"
        elif self.path == "/sw.js":
            body, kind = b"self.addEventListener('fetch', () => {});", "javascript"
        else:
            body, kind = PAGE, "html"
        self.send_response(200)
        self.send_header("Content-Type", {"json": "application/json", "javascript": "text/javascript",
                                          "html": "text/html"}[kind])
        self.send_header("Service-Worker-Allowed", "/")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args) -> None:  # noqa: ANN002
        pass


ThreadingHTTPServer(("127.0.0.1", int(os.environ["TRAINYARD_SERVICE_PORT"])), Handler).serve_forever()
