// /queues — each queue's quota against what its running jobs hold (per resource and GPU type), what it
// borrows past its quota, its running and waiting jobs, and where its team stands in fair share.
import { api, poll } from "../api.js";
import { css } from "../css.js";
import { meter } from "../meter.js";
import { bytes, h } from "../ui.js";

export function render(root) {
  css("meters.css");
  const teams = h("div");
  const list = h("div");
  root.append(h("h1", null, "Queues"), teams, list);
  let drawn = "";
  return poll(async () => {
    const [queues, nodes] = await Promise.all([api("queues"), api("nodes")]);
    // redrawn only when something changed: a click on a count (a link to those jobs) under the poll is not lost
    const sig = JSON.stringify([queues, nodes]);
    if (sig === drawn) return;
    drawn = sig;
    const cap = capacity(nodes);
    list.replaceChildren(...(queues.length ? queues.map((q) => panel(q, cap)) : [h("p.muted", null, "No queue is defined and no job has run.")]));
    teams.replaceChildren(...[standing(queues)].filter(Boolean));
  }, 3000);
}

function capacity(nodes) {
  const gpu = {};
  for (const n of nodes) if (n.gpu) gpu[n.gpu_type || "gpu"] = (gpu[n.gpu_type || "gpu"] || 0) + n.gpu;
  return { cpu: nodes.reduce((s, n) => s + n.cpu, 0), memory: nodes.reduce((s, n) => s + n.memory, 0), gpu };
}

function panel(info, cap) {
  const { queue: q, usage: u } = info;
  const quota = q.quota || {};
  const rows = [
    ["cpu", "cores", u.cpu, quota.cpu, cap.cpu, (v) => `${+v.toFixed(2)}`],
    ["memory", "memory", u.memory, quota.memory, cap.memory, bytes],
  ];
  const qgpu = quota.gpu || {};
  const types = new Set([...Object.keys(qgpu).filter((t) => t !== "*"), ...Object.keys(u.gpu)]);
  if ("*" in qgpu) {
    const all = Object.values(u.gpu).reduce((s, n) => s + n, 0);
    rows.push(["gpu:*", "GPUs (all types)", all, qgpu["*"], Object.values(cap.gpu).reduce((s, n) => s + n, 0), String]);
  }
  for (const t of [...types].sort()) rows.push([`gpu:${t}`, `${t} GPUs`, u.gpu[t] || 0, qgpu[t], cap.gpu[t] || 0, String]);
  if (quota.jobs !== null && quota.jobs !== undefined) rows.push(["jobs", "running jobs", u.running, quota.jobs, null, String]);
  const fs = info.fair_share;
  return h("div.panel.queue", { dataset: { queue: q.name } },
    h("div.row", null,
      h("h2", null, q.name), h("span.muted", null, `team ${q.team}`), h("span.muted", null, `priority ${q.priority}`),
      h("span.muted", { title: "the highest priority a job of anyone but an admin may have on this queue" },
        `jobs up to priority ${q.max_priority ?? "100 (normal)"}`),
      h("span.muted", null, q.borrowing ? "may borrow idle room" : "never borrows"),
      h("span.grow"),
      h("a.count.running", { title: "running jobs", href: jobsOf(q, ["starting", "running"]) }, `${u.running} running`),
      u.borrowed ? h("span.count.borrowed", { title: "running past the quota on idle room; preempted first" }, `${u.borrowed} borrowing`) : null,
      h("a.count.waiting", { title: "jobs waiting in line", href: jobsOf(q, ["pending"]) }, `${info.pending} waiting`)),
    h("table.meters", null, rows.map(([key, label, used, limit, total, fmt]) => meter({ key, label, used, limit, total, fmt }))),
    fs && h("p.muted.share", null, `Fair share: team ${fs.team} holds ${(100 * fs.share).toFixed(1)}% of the cluster's `
      + `${fs.dominant || "resources"}; ${fs.rank === 1 ? "first" : `#${fs.rank}`} of ${fs.teams} in line at equal priority.`));
}

// the jobs list narrowed to this queue's jobs in these states
const jobsOf = (q, states) => `/jobs?${new URLSearchParams([["queue", q.name], ...states.map((s) => ["status", s])])}`;

// every team's dominant share: the one that holds least goes next at equal priority
function standing(queues) {
  const byTeam = new Map();
  for (const q of queues) if (q.fair_share) byTeam.set(q.fair_share.team, q.fair_share);
  if (!byTeam.size) return null;
  const ranked = [...byTeam.values()].sort((a, b) => a.rank - b.rank);
  return h("div.panel", null,
    h("h2", null, "Fair share"),
    h("p.muted", null, "Within one priority, the team holding the smallest share of its most-used resource goes next."),
    h("table.meters", null, ranked.map((t) => h("tr", { dataset: { team: t.team } },
      h("td", null, `#${t.rank}`), h("td", null, h("b", null, t.team)),
      h("td.meter", null, h("div.bar", null, h("span", { style: `width:${Math.min(100, 100 * t.share)}%` }))),
      h("td.amount", null, `${(100 * t.share).toFixed(1)}%`), h("td.muted", null, t.dominant || "holds nothing")))));
}
