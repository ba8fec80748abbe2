// /usage — resource-hours of the jobs you may see (every team's for an admin), from the attempts' records: by team,
// user, queue or GPU type over a period (both in the address); GPU, CPU and memory hours, each with the part lost
// to preemption and to failures, and the cost where the server has prices; the rows as CSV. `trainyard usage`.
import { api, poll } from "../api.js";
import { navigate } from "../app.js";
import { css } from "../css.js";
import { h, when, withQuery } from "../ui.js";

const BY = [["team", "team"], ["user", "user"], ["queue", "queue"], ["gpu_type", "GPU type"]];
const SINCE = [["24h", "24 hours"], ["7d", "7 days"], ["30d", "30 days"], ["90d", "90 days"], ["365d", "a year"]];
// the report's columns: [field, heading]; each resource's lost parts follow it
const KINDS = [["gpu_hours", "GPU-h"], ["cpu_hours", "CPU-h"], ["memory_gib_hours", "memory GiB-h"]];

export function render(root, { query }) {
  css("usage.css");
  const by = BY.some(([v]) => v === query.get("by")) ? query.get("by") : "team";
  const since = SINCE.some(([v]) => v === query.get("since")) ? query.get("since") : "30d";
  const go = (changes) => navigate(`/usage${withQuery(query, changes)}`, { replace: true });
  const select = (name, options, value) => h("select", { name, onchange: (e) => go({ [name]: e.target.value }) },
    options.map(([v, label]) => h("option", { value: v, selected: v === value }, label)));
  const period = h("p.muted.period");
  const table = h("div.usage");
  let report = null;
  const csv = h("button.small", { type: "button", name: "csv", onclick: () => report && save(report) }, "CSV");
  root.append(
    h("div.row", null, h("h1", null, "Usage"), h("span.grow"),
      h("label", null, "by ", select("by", BY, by)), h("label", null, "over the last ", select("since", SINCE, since)),
      csv),
    period, table,
    h("p.muted", null, "Hours a job held, from its attempts' start to end: GPU-hours are GPUs × hours, CPU-hours "
      + "cores × hours. Lost to preemption: attempts stopped to make room, whose work a retry redid from its last "
      + "checkpoint; failed: attempts that ended in an error."));
  return poll(async () => {
    report = await api("usage", { query: { by, since } });
    period.textContent = `${when(report.since)} to ${when(report.until)}; jobs you may see`;
    table.replaceChildren(draw(report));
  }, 10_000);
}

function hours(x) {
  if (!x) return "–";
  return x < 0.01 ? "< 0.01" : x.toLocaleString(undefined, { maximumFractionDigits: x < 10 ? 2 : 1 });
}

// The rows summed, as one more row
function total(rows) {
  const sum = { key: "all", attempts: 0, cost: null };
  for (const r of rows) {
    for (const [k, v] of Object.entries(r)) if (k !== "key" && typeof v === "number") sum[k] = (sum[k] || 0) + v;
  }
  return sum;
}

function draw(report) {
  const rows = [...report.rows].sort((a, b) => b.gpu_hours - a.gpu_hours || b.cpu_hours - a.cpu_hours);
  const priced = rows.some((r) => r.cost !== null && r.cost !== undefined);
  // the bar shows each row's share of the most-used resource (GPU-hours where any were used)
  const lead = rows.some((r) => r.gpu_hours > 0) ? "gpu_hours" : "cpu_hours";
  const most = Math.max(0, ...rows.map((r) => r[lead]));
  const heads = [BY.find(([v]) => v === report.by)[1], "attempts", "",
    ...KINDS.flatMap(([, label]) => [label, "preempted", "failed"]), ...(priced ? [`cost (${report.currency})`] : [])];
  const cells = (r) => KINDS.flatMap(([k]) => [
    h(`td.num.${k}`, null, hours(r[k])),
    h("td.num.lost", null, hours(r[`${k}_preempted`])),
    h("td.num.lost", null, hours(r[`${k}_failed`]))]);
  const line = (r, sum = false) => h(sum ? "tr.total" : "tr", { dataset: sum ? {} : { key: r.key } },
    h("td", null, r.key || "–"),
    h("td.num.attempts", null, String(r.attempts)),
    h("td.share", { title: `${lead === "gpu_hours" ? "GPU" : "CPU"}-hours, against the most-used row's` },
      sum ? null : h("div.bar", null, h("div", { style: `width: ${most ? (100 * r[lead]) / most : 0}%` }))),
    ...cells(r),
    priced ? h("td.num.cost", null, r.cost === null || r.cost === undefined ? "–" : r.cost.toFixed(2)) : null);
  return h("table.list.usage", null, h("thead", null, h("tr", null, heads.map((c) => h("th", null, c)))),
    h("tbody", null, rows.length ? rows.map((r) => line(r))
      : h("tr", null, h("td.muted", { colspan: heads.length }, "No attempt ran in this period."))),
    rows.length > 1 ? h("tfoot", null, line(total(rows), true)) : null);
}

// The report's rows as CSV (the field names as the API writes them), saved by the browser
function save(report) {
  const fields = Object.keys(report.rows[0] || { key: "" });
  const quote = (v) => {
    if (v === null || v === undefined) return "";
    const s = /^[=+\-@]/.test(String(v)) ? `'${v}` : String(v);  // a spreadsheet would run a name like =cmd()
    return /[",\n']/.test(s) ? `"${s.replaceAll('"', '""')}"` : s;
  };
  const text = [fields.join(","), ...report.rows.map((r) => fields.map((f) => quote(r[f])).join(","))].join("\n");
  const a = h("a", { href: URL.createObjectURL(new Blob([`${text}\n`], { type: "text/csv" })),
    download: `usage-by-${report.by}.csv` });
  a.click();
  URL.revokeObjectURL(a.href);
}
