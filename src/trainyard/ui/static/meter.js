// One row of "used against a limit" as a bar and as text, for queues (quota) and nodes (capacity).
import { h } from "./ui.js";

// key: data-resource; limit: the quota (null: none, then the bar is against `total`, the cluster's)
export function meter({ key, label, used, limit, total, fmt = String }) {
  const against = limit ?? total;
  const pct = against ? Math.min(100, (100 * used) / against) : 0;
  const over = limit !== null && limit !== undefined && used > limit;
  let text = limit !== null && limit !== undefined ? `${fmt(used)}/${fmt(limit)}` : `${fmt(used)}`;
  let note = "";
  if (over) note = `${fmt(used - limit)} borrowed past the quota`;
  else if (limit === null || limit === undefined) note = total ? `no quota · ${fmt(total)} in the cluster` : "no quota";
  return h("tr", { dataset: { resource: key, used, limit: limit ?? "" } },
    h("td.label", null, label),
    h("td.meter", null, h(`div.bar${limit === null || limit === undefined ? ".free" : ""}`, null,
      h(`span${over ? ".over" : ""}`, { style: `width:${pct}%` }))),
    h("td.amount", null, text),
    h("td.muted.note", null, note));
}
