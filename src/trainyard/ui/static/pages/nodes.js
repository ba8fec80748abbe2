// /nodes — each node's capacity and what running jobs hold of it (cores, memory, GPUs), and which job
// holds each GPU. Refreshed every few seconds.
import { api, poll } from "../api.js";
import { css } from "../css.js";
import { meter } from "../meter.js";
import { bytes, h } from "../ui.js";

export function render(root) {
  css("meters.css");
  const summary = h("p.muted");
  const list = h("div");
  root.append(h("div.row", null, h("h1", null, "Nodes"), h("span.grow"), summary), list);
  return poll(async () => {
    const nodes = await api("nodes");
    const gpus = nodes.reduce((s, n) => s + n.gpu, 0);
    const held = nodes.reduce((s, n) => s + n.gpus_used.length, 0);
    summary.textContent = `${nodes.length} node${nodes.length === 1 ? "" : "s"} · ${held}/${gpus} GPUs in use`;
    list.replaceChildren(...(nodes.length ? nodes.map(panel) : [h("p.muted", null, "The engine reports no node.")]));
  }, 3000);
}

function panel(n) {
  const labels = Object.entries(n.labels || {});
  return h("div.panel.node", { dataset: { node: n.name } },
    h("div.row", null, h("h2", null, n.name), n.gpu ? h("span", null, `${n.gpu} × ${n.gpu_type || "GPU"}`) : h("span.muted", null, "no GPU"),
      h("span.muted", { title: "how a job's memory limit holds on this node" }, `memory limit: ${n.memory_enforcement}`),
      labels.length ? h("span.muted.mono", null, labels.map(([k, v]) => `${k}=${v}`).join(" ")) : null),
    h("table.meters", null,
      meter({ key: "cpu", label: "cores", used: n.cpu_used, limit: n.cpu, fmt: (v) => `${+v.toFixed(2)}` }),
      meter({ key: "memory", label: "memory", used: n.memory_used, limit: n.memory, fmt: bytes }),
      n.gpu ? meter({ key: "gpu", label: "GPUs", used: n.gpus_used.length, limit: n.gpu }) : null),
    n.gpu ? h("div.gpus", null, gpuIds(n).map((id) => gpu(id, n.gpu_holders?.[id]))) : null);
}

function gpuIds(n) {
  const ids = n.gpu_ids.length ? [...n.gpu_ids] : Array.from({ length: n.gpu }, (_, i) => String(i));
  for (const id of n.gpus_used) if (!ids.includes(id)) ids.push(id);
  return ids;
}

function gpu(id, job) {
  return h(`div.gpu${job ? ".held" : ""}`, { dataset: { gpu: id, job: job || "" } },
    h("b", null, `GPU ${id}`), " ",
    job ? h("a", { href: `/jobs/${encodeURIComponent(job)}`, title: "the job holding this GPU" }, job) : h("span.muted", null, "free"));
}
