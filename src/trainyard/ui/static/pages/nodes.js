// /nodes — each node's capacity and what running jobs hold of it (cores, memory, GPUs), which job holds each
// GPU (another team's only as busy), and whether it takes new work (ready, cordoned, draining, drained: the CLI's
// words) with why and who.
// An admin cordons, drains and uncordons a node from its panel. Refreshed every few seconds.
import { api, poll, toast } from "../api.js";
import { css } from "../css.js";
import { meter } from "../meter.js";
import { bytes, h, when } from "../ui.js";

const STATE_CLASS = { ready: "ok", cordoned: "warn", draining: "wait", drained: "off" };

export async function render(root) {
  css("meters.css");
  const me = await api("whoami");  // a server without auth answers as its local admin
  const summary = h("p.muted");
  const list = h("div");
  root.append(h("div.row", null, h("h1", null, "Nodes"), h("span.grow"), summary), list);
  let drawn = "";

  const refresh = async () => {
    const nodes = await api("nodes");
    // redrawn only when something changed: a click on a panel's button under the poll is not lost
    const sig = JSON.stringify(nodes);
    if (sig === drawn) return;
    drawn = sig;
    const gpus = nodes.reduce((s, n) => s + n.gpu, 0);
    const held = nodes.reduce((s, n) => s + n.gpus_used.length, 0);
    const cordoned = nodes.filter((n) => n.cordon).length;
    summary.textContent = [`${nodes.length} node${nodes.length === 1 ? "" : "s"}`, cordoned ? `${cordoned} cordoned` : null,
      `${held}/${gpus} GPUs in use`].filter(Boolean).join(" · ");
    list.replaceChildren(...(nodes.length ? nodes.map((n) => panel(n, me.admin && controls(n, refresh)))
      : [h("p.muted", null, "The engine reports no node.")]));
  };
  return poll(refresh, 3000);
}

function panel(n, buttons) {
  const labels = Object.entries(n.labels || {});
  const s = state(n);
  const word = s.split(" ")[0];  // "draining (2)" is draining
  return h("div.panel.node", { dataset: { node: n.name, state: word, attempts: n.attempts } },
    h("div.row", null, h("h2", null, n.name), h(`span.badge.state.${STATE_CLASS[word]}`, null, s),
      n.gpu ? h("span", null, `${n.gpu} × ${n.gpu_type || "GPU"}`) : h("span.muted", null, "no GPU"),
      h("span.muted", { title: "how a job's memory limit holds on this node" }, `memory limit: ${n.memory_enforcement}`),
      labels.length ? h("span.muted.mono", null, labels.map(([k, v]) => `${k}=${v}`).join(" ")) : null,
      h("span.grow"), buttons || null),
    n.cordon ? h("p.cordon", null, "Takes no new work: ",
      h("span.reason", null, n.cordon.reason || "no reason given"),
      h("span.muted", null, ` — ${n.cordon.by ? `by ${n.cordon.by} ` : ""}since ${when(n.cordon.at)}`)) : null,
    h("table.meters", null,
      meter({ key: "cpu", label: "cores", used: n.cpu_used, limit: n.cpu, fmt: (v) => `${+v.toFixed(2)}` }),
      meter({ key: "memory", label: "memory", used: n.memory_used, limit: n.memory, fmt: bytes }),
      n.gpu ? meter({ key: "gpu", label: "GPUs", used: n.gpus_used.length, limit: n.gpu }) : null),
    n.gpu ? h("div.gpus", null, gpuIds(n).map((id) => gpu(id, n.gpu_holders?.[id]))) : null);
}

// as `trainyard nodes` says it (cli/render.py's node_state)
function state(n) {
  if (!n.cordon) return "ready";
  if (!n.cordon.drained_at) return "cordoned";
  return n.attempts ? `draining (${n.attempts})` : "drained";
}

function controls(n, refresh) {
  const path = `nodes/${encodeURIComponent(n.name)}`;
  const run = (fn) => async (e) => {
    const button = e.currentTarget;
    button.disabled = true;
    try {
      await fn();
      await refresh();
    } catch (err) {
      toast(`${n.name}: ${err.message}`);
    } finally {
      button.disabled = false;
    }
  };
  // prompt() answers null for Cancel, which calls the action off; an empty reason keeps the one already given
  const cordon = run(async () => {
    const reason = prompt(`Cordon node ${n.name}? No new attempt is placed there`
      + `${n.attempts ? `; the ${attemptsText(n)} there go on` : ""}.\n\nReason (optional):`);
    if (reason === null) return;
    await api(`${path}/cordon`, { method: "POST", body: { reason } });
    toast(`Node ${n.name} cordoned`, { kind: "info" });
  });
  const drain = run(async () => {
    const stops = n.attempts ? `It stops the ${attemptsText(n)} running there; their jobs go back in line.` : "Nothing runs there now.";
    const reason = prompt(`Drain node ${n.name}? ${stops} It takes no new work until uncordoned.\n\nReason (optional):`,
      n.cordon?.reason || "");
    if (reason === null) return;
    const r = await api(`${path}/drain`, { method: "POST", body: { reason } });
    toast(`Node ${n.name} cordoned; ${r.stopped.length} attempt${r.stopped.length === 1 ? "" : "s"} told to stop`, { kind: "info" });
  });
  const uncordon = run(async () => {
    await api(`${path}/uncordon`, { method: "POST" });
    toast(`Node ${n.name} uncordoned`, { kind: "info" });
  });
  const button = (name, label, onclick, title) =>
    h(`button.small${name === "drain" ? ".danger" : ""}`, { type: "button", name, title, onclick }, label);
  return [
    n.cordon ? null : button("cordon", "Cordon", cordon, "place no new attempt here; what runs goes on"),
    n.cordon?.drained_at ? null : button("drain", "Drain", drain, "cordon, and stop what runs here (its jobs go back in line)"),
    n.cordon ? button("uncordon", "Uncordon", uncordon, "take new work again") : null];
}

function attemptsText(n) {
  return `${n.attempts} attempt${n.attempts === 1 ? "" : "s"}`;
}

function gpuIds(n) {
  const ids = n.gpu_ids.length ? [...n.gpu_ids] : Array.from({ length: n.gpu }, (_, i) => String(i));
  for (const id of n.gpus_used) if (!ids.includes(id)) ids.push(id);
  return ids;
}

// the server names the holder "hidden" where its job is one the caller may not see: busy, but no link to follow
function gpu(id, job) {
  const holder = job === "hidden"
    ? h("span.muted", { title: "held by a job you may not see" }, "another team's job")
    : job ? h("a", { href: `/jobs/${encodeURIComponent(job)}`, title: "the job holding this GPU" }, job) : null;
  return h(`div.gpu${job ? ".held" : ""}`, { dataset: { gpu: id, job: job || "" } },
    h("b", null, `GPU ${id}`), " ", holder || h("span.muted", null, "free"));
}
