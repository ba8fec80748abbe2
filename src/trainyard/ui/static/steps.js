// A pipeline step's status as colour and text, shared by the runs list and the run page.
import { STATUS_CLASS, h } from "./ui.js";

// the step statuses beyond a job's own: waiting for what it needs, reused from the cache, skipped
export const STEP_CLASS = { ...STATUS_CLASS, waiting: "off", submitted: "wait", cached: "ok", skipped: "off" };
export const DONE = new Set(["succeeded", "cached"]);

export function stepClass(status) { return STEP_CLASS[status] || "off"; }

export function stepBadge(status) {
  return h(`span.badge.${stepClass(status)}`, { "data-status": status }, status);
}

// "3 succeeded · 1 running · 46 waiting", most advanced first
const ORDER = ["failed", "running", "starting", "cancelling", "pending", "succeeded", "cached", "waiting", "skipped", "cancelled"];
export function counts(steps) {
  const c = new Map();
  for (const s of steps) c.set(s.status, (c.get(s.status) || 0) + 1);
  return [...c].sort((a, b) => rank(a[0]) - rank(b[0]));
}
function rank(s) { const i = ORDER.indexOf(s); return i < 0 ? ORDER.length : i; }

// a bar of coloured parts, one per status, with the counts as text beside it
export function statusMix(steps) {
  const parts = counts(steps);
  return h("div.mix", null,
    h("div.stack", { title: parts.map(([s, n]) => `${n} ${s}`).join(", ") },
      parts.map(([s, n]) => h(`span.st-${stepClass(s)}`, { style: `width:${(100 * n) / steps.length}%` }))),
    h("span.mix-text", null, parts.map(([s, n]) => `${n} ${s}`).join(" · ")));
}
