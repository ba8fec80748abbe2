// /services/:name — one service: its replicas (each a job, linked) with state and readiness, restarts,
// traffic, a scale control, and the model server's try page embedded (fetched with this page's token,
// which the page then sends with its own requests: /serve/NAME/ needs it like the API does).
import { api, poll, toast, token } from "../api.js";
import { css } from "../css.js";
import { gated, whoami, whyNot } from "../may.js";
import { SANDBOX, bridge } from "../serve_bridge.js";
import { ago, badge, h, pairs, when } from "../ui.js";

let unbridge = null;  // the try frame's relay, one at a time

export function errorRate(t) {
  return t.requests ? `${((100 * t.errors) / t.requests).toFixed(1)}%` : "–";
}

export function latency(ms) {
  return ms === null || ms === undefined ? "–" : `${ms.toFixed(1)} ms`;
}

export async function render(root, { params }) {
  css("views.css");
  css("services.css");
  const path = `services/${encodeURIComponent(params.name)}`;
  const title = h("h1"); const facts = h("dl.kv"); const traffic = h("dl.kv.traffic");
  const scale = h("form.row.scale"); const replicas = h("div"); const tryBox = h("div.try");
  root.append(title, h("div.panel", null, facts), h("h2", null, "Traffic"), h("div.panel", null, traffic),
    h("h2", null, "Replicas"), h("div.panel", null, scale, replicas), h("h2", null, "Try it"), tryBox);
  let shownScale = "";
  let tried = null;
  const me = await whoami();

  let drawn = "";
  function draw(s) {
    // redrawn only when something changed: a click on a link (the address, a replica's job) under the poll is not lost
    const sig = JSON.stringify(s);
    if (sig === drawn) return;
    drawn = sig;
    title.replaceChildren(s.name, " ", badge(s.status));
    const auto = s.spec.service.autoscale;
    facts.replaceChildren(...pairs([
      ["reason", s.reason || ""], ["address", h("a.mono", { href: s.url, target: "_blank", rel: "noopener" }, s.url)],
      ["version", String(s.version)], ["replicas", h("span.ready", null, `${s.ready} ready of ${s.wanted} wanted`)],
      ["scaling", auto ? `autoscale ${auto.min}..${auto.max}, ${auto.target_concurrency} in flight each` : "fixed"],
      ["restarts", h("span.restarts", null, String(s.restarts))],
      ["queue", s.queue], ["owner", s.owner || "–"],
      ["created", h("span", { title: when(s.created_at) }, ago(s.created_at))], ["id", h("span.mono", null, s.id)]]));
    const t = s.traffic;
    traffic.replaceChildren(...pairs([
      ["requests", h("span.requests", null, String(t.requests))], ["errors", h("span.errors", null, `${t.errors} (${errorRate(t)})`)],
      ["in flight", String(t.in_flight)], ["last request", t.last_request_at ? ago(t.last_request_at) : "–"],
      ["p50", h("span.p50", null, latency(t.p50_ms))], ["p95", latency(t.p95_ms)]]));
    const key = JSON.stringify([s.status, auto, s.spec.service.replicas]);
    if (key !== shownScale) { shownScale = key; drawScale(s); }  // not while someone types in it
    replicas.replaceChildren(s.replicas.length ? replicaTable(s) : h("p.muted", null, "No replica runs now."));
    if (!String(s.spec.command).includes("trainyard.serving.model_server")) {
      tryBox.replaceChildren(h("p.muted", null, "This service is not the built-in model server: reach it at ",
        h("a.mono", { href: s.url, target: "_blank", rel: "noopener" }, s.url), "."));
    } else if (s.status === "running" && s.ready && !tried) {
      tried = tryPage(s, tryBox);
    } else if (!s.ready && !tried) tryBox.replaceChildren(h("p.muted", null, "The try page shows once a replica is ready."));
  }

  function drawScale(s) {
    const auto = s.spec.service.autoscale;
    const num = (name, value, min) => h("input", { type: "number", name, min, max: 100, value, required: true, style: "width:5em" });
    const fields = auto ? [h("label", null, "min ", num("min", auto.min, 0)), h("label", null, "max ", num("max", auto.max, 1))]
      : [h("label", null, "replicas ", num("replicas", s.spec.service.replicas ?? s.wanted, 0))];
    scale.replaceChildren(...fields, h("button", gated(whyNot(me, "scale", "service", s),
      { type: "submit", name: "scale", disabled: s.status !== "running" }), "Scale"),
      ...[auto && h("span.muted", null, "or a fixed number: ", h("a", { href: "#", onclick: (e) => { e.preventDefault(); drawScale({ ...s, spec: { ...s.spec, service: { ...s.spec.service, autoscale: null } } }); } }, "switch"))].filter(Boolean));
    scale.onsubmit = async (e) => {
      e.preventDefault();
      const body = Object.fromEntries([...new FormData(scale)].map(([k, v]) => [k, Number(v)]));
      try { draw(await api(`${path}/scale`, { method: "POST", body })); toast(`scaled ${s.name}`, { kind: "info" }); } catch (err) { toast(err); }
    };
  }

  // a service deleted (or a link to one that never was): say so where the page was, with the way to the others
  let stop = null;
  const gone = () => {
    if (stop) stop();
    const why = `No service named ${params.name}: it was deleted, or is not one you may see. `;
    root.replaceChildren(h("p.error.gone", null, why, h("a", { href: "/services" }, "All services")));
  };
  stop = poll(async () => {
    try { draw(await api(path)); } catch (e) { if (e.status === 404) gone(); else throw e; }
  }, 2000);
  return () => stop();
}

function replicaTable(s) {
  return h("table.list.replicas", null,
    h("thead", null, h("tr", null, ["#", "job", "version", "state", "ready", "address", "node", "reason"].map((c) => h("th", null, c)))),
    h("tbody", null, s.replicas.map((r, i) => h("tr", { dataset: { job: r.job_id } },
      h("td", null, String(i)),
      h("td.mono", null, h("a", { href: `/jobs/${encodeURIComponent(r.job_id)}` }, r.job_id)),
      h("td.num", null, String(r.version)),
      h("td", null, badge(r.status)),
      h("td.readiness", null, r.draining ? "draining" : r.ready ? "yes" : "no"),
      h("td.mono", null, r.address || "–"),
      h("td", null, r.node || "–"),
      h("td.muted", null, r.reason || "")))));
}

// The model server's page from /serve/NAME/, shown in a frame: fetched here with the token (a frame's own
// navigation could not send it), with a <base> so its relative requests go to /serve/NAME/ too. The frame is
// sandboxed (an origin of its own: the page is the service owner's, and must not read this page's token); its
// requests come here to be sent to that service only (serve_bridge.js)
async function tryPage(s, box) {
  const base = s.url.endsWith("/") ? s.url : `${s.url}/`;
  const path = new URL(base, location.origin).pathname;
  try {
    const res = await fetch(base, { headers: token() ? { Authorization: `Bearer ${token()}` } : {} });
    if (!res.ok) throw new Error(`${base}: ${res.status} ${res.statusText}`);
    const html = (await res.text()).replace(/<head>/i, `<head><base href="${path}">`);
    const frame = h("iframe", { title: `try ${s.name}`, name: "try", sandbox: SANDBOX });
    unbridge?.();
    unbridge = bridge(frame, path);
    frame.srcdoc = html;
    box.replaceChildren(h("p.muted", null, "The model server's own page, through ", h("span.mono", null, base), ":"), frame);
  } catch (e) {
    box.replaceChildren(h("p.error", null, `The try page did not load: ${e.message}`));
    return null;
  }
  return true;
}
