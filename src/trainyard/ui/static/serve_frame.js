// What a browser opening a /serve/NAME/ address gets on a server with users: the service's answer in a sandboxed
// frame, its requests relayed to that service (serve_bridge.js). The frame's address differs from this page's by a
// mark the proxy takes out (a browser loads no frame at its own page's address).
import { SANDBOX, bridge } from "./serve_bridge.js";

const MARK = "trainyard-frame=1";  // api/serve_origin.py FRAME_MARK

const base = location.pathname.match(/^\/serve\/[^/]+\//)[0];
// the query as it came (not re-encoded), with the mark last
const src = `${location.pathname}${location.search}${location.search ? "&" : "?"}${MARK}`;
const frame = document.createElement("iframe");
frame.setAttribute("sandbox", SANDBOX);
frame.setAttribute("title", decodeURIComponent(base.slice(7, -1)));
Object.assign(frame.style, { border: "0", width: "100%", height: "100%", display: "block" });
for (const el of [document.documentElement, document.body]) Object.assign(el.style, { margin: "0", height: "100%" });
bridge(frame, base);
frame.src = src;
document.body.append(frame);
