// Parts of the job page: the header facts, the attempt timeline, artifacts, and the params form.
import { download, toast } from "./api.js";
import { badge, bytes, duration, h, when } from "./ui.js";

// A job that has ended changes no more; until then its page, and a comparison of it, read it again every LIVE_MS
export const TERMINAL = new Set(["succeeded", "failed", "cancelled", "lost"]);
export const LIVE_MS = 2000;
// How long to wait before reading a job's metrics again: each read brings every point, so one of many waits longer
export const metricsWait = (points) => (points > 20000 ? 15000 : 0);

// How long a job has taken: from its first attempt's start to its end, retries and the waits between them counted
// (what one waits for, as kubectl says of a Job); so far while it has not ended. Null before any attempt started.
// `trainyard ls` and `show` say the same (cli/render.py, job_time); each attempt's own time is in its row.
export function jobTime(job, now = Date.now() / 1000) {
  const attempts = job.attempts || [];
  const started = attempts.map((a) => a.started_at).filter((t) => t !== null && t !== undefined);
  if (!started.length) return null;
  const ends = attempts.map((a) => a.ended_at ?? a.started_at ?? -Infinity);
  const end = TERMINAL.has(job.status) ? Math.max(...ends) : now;
  return end - Math.min(...started);
}

export function resources(spec) {
  const r = spec.resources || {};
  const parts = [`${r.cpu ?? 1} cpu`, r.memory ? bytes(r.memory) : null,
    r.gpu ? `${r.gpu} × ${r.gpu_type || "GPU"}` : null, spec.replicas > 1 ? `× ${spec.replicas} replicas` : null];
  return parts.filter(Boolean).join(" · ");
}

export function facts(job) {
  const row = (k, v) => (v === null || v === undefined || v === "" ? [] : [h("dt", {}, k), h("dd", {}, v)]);
  const pending = ["pending", "queued"].includes(job.status);
  return h("dl.kv.facts", {},
    row("id", h("code", {}, job.id)), row("queue", job.queue), row("owner", [job.owner || "local", job.team ? ` (team ${job.team})` : ""]),
    row("resources", resources(job.spec)), row("priority", job.priority), row("submitted", when(job.created_at)),
    row("labels", Object.keys(job.spec.labels || {}).length ? h("span.labels", {}, Object.entries(job.spec.labels)
      .flatMap(([k, v], i) => [i ? " " : "", h("code", {}, `${k}=${v}`)])) : null),
    row("after", (job.spec.after || []).length ? h("span.after", {}, job.spec.after.flatMap((d, i) => [i ? ", " : "",
      h("a", { href: `/jobs/${encodeURIComponent(d.job)}`, dataset: { job: d.job } }, d.job), ` ${d.when}`])) : null),
    row("part of", partOf(job.spec.labels || {})),
    row(pending ? "waiting because" : "reason", h("span.reason", {}, job.reason || "")),
    row("position in line", pending && job.position !== null && job.position !== undefined ? `${job.position} job(s) ahead` : null));
}

// What started the job (trainyard's own labels name it): a link back to its pipeline run, sweep, service or schedule
function partOf(labels) {
  const own = (k) => labels[`trainyard.io/${k}`];
  const to = (kind, path, id, more) => [`${kind} `, h("a", { href: `${path}/${encodeURIComponent(id)}` }, id),
    more || ""];
  const step = own("step") && `, step ${own("step")}`;
  const version = own("service-version") && `, version ${own("service-version")}`;
  const parts = [
    own("pipeline-run") && to("pipeline run", "/pipelines", own("pipeline-run"), step),
    own("sweep") && to("sweep", "/sweeps", own("sweep"), own("trial") && `, trial ${own("trial")}`),
    own("service") && to("service", "/services", own("service"), version),
    own("schedule") && to("schedule", "/schedules", own("schedule")),
  ].filter(Boolean);
  return parts.length ? h("span.part-of", {}, parts.flatMap((p, i) => (i ? ["; ", ...p] : p))) : null;
}

// One row per attempt, with a bar placing its queue wait and run time on the job's whole span
export function attemptsTable(job, now = Date.now() / 1000) {
  if (!job.attempts.length) return h("p.muted", {}, "No attempt yet.");
  const t0 = job.created_at;
  const t1 = Math.max(now, ...job.attempts.map((a) => a.ended_at || 0)) - t0 || 1;
  const bar = (a) => {
    const start = (a.started_at ?? a.created_at) - t0;
    const end = (a.ended_at ?? now) - t0;
    return h("div.span", { title: `${duration(start)} → ${duration(end)} after submit` },
      h("span", { style: `left:${(100 * start) / t1}%;width:${Math.max(0.5, (100 * (end - start)) / t1)}%` }));
  };
  const replicas = (a) => (a.replicas.length > 1 ? h("div.muted", {}, a.replicas.map((r) =>
    `r${r.index}: ${r.node}${r.gpus.length ? ` [${r.gpus.join(",")}]` : ""} ${r.status}${r.exit_code !== null && r.exit_code !== undefined ? ` (${r.exit_code})` : ""}`).join(" · ")) : null);
  return h("table.list.attempts", {},
    h("thead", {}, h("tr", {}, ["#", "status", "node", "GPUs", "exit", "reason", "started", "ended", "waited", "ran", "timeline"].map((c) => h("th", {}, c)))),
    h("tbody", {}, job.attempts.map((a, i) => h("tr", { dataset: { attempt: a.number } },
      h("td", {}, String(a.number)), h("td", {}, badge(a.status)), h("td", {}, a.node || ""), h("td", {}, a.gpus.join(", ")),
      h("td", {}, a.exit_code ?? ""),
      h("td.reason", {}, [a.reason, a.message, a.stop_reason && `stop: ${a.stop_reason}`, a.preempted_by && `preempted by ${a.preempted_by}`]
        .filter(Boolean).join(" · "), replicas(a)),
      h("td", {}, when(a.started_at)), h("td", {}, when(a.ended_at)),
      waitedCell(job, a, i),
      h("td", {}, a.started_at ? duration((a.ended_at ?? now) - a.started_at) : ""),
      h("td", { style: "min-width:160px" }, h("div.timeline", {}, bar(a)))))));
}

// How long an attempt waited before its command started: in line since the job was submitted (the first) or since
// the attempt before it ended (a retry's backoff, a requeue), then the launch. The attempt's own record begins only
// when the scheduler admitted it, so its start alone would say "0s" for a job that waited an hour for room.
function waitedCell(job, a, i) {
  if (!a.started_at) return h("td", {}, "");
  const since = i ? job.attempts[i - 1].ended_at ?? a.created_at : job.created_at;
  const inLine = Math.max(0, a.created_at - since);
  const title = `${duration(inLine)} in line, then ${duration(a.started_at - a.created_at)} to start`;
  return h("td.waited", { title }, duration(a.started_at - since));
}

// Each metric's latest value (the last attempt's last point), its least and greatest, and how many points: the
// numbers a person reads off a run, as `trainyard show` prints them, without hovering over every chart
export function metricSummary(points) {
  const by = new Map();
  for (const p of points) {
    const m = by.get(p.name) || { last: p, min: p.value, max: p.value, n: 0 };
    const at = (q) => [q.attempt, q.step ?? q.ts];
    const [a, x] = at(p); const [la, lx] = at(m.last);
    if (a > la || (a === la && x >= lx)) m.last = p;
    m.min = Math.min(m.min, p.value); m.max = Math.max(m.max, p.value); m.n += 1;
    by.set(p.name, m);
  }
  if (!by.size) return null;
  const num = (v) => String(+Number(v).toPrecision(6));
  return h("table.list.metric-summary", {},
    h("thead", {}, h("tr", {}, ["metric", "last", "at step", "min", "max", "points"].map((c) => h("th", {}, c)))),
    h("tbody", {}, [...by].sort((x, y) => x[0].localeCompare(y[0])).map(([name, m]) => h("tr",
      { dataset: { metric: name } },
      h("td", {}, name), h("td.num.last", {}, num(m.last.value)), h("td.num", {}, m.last.step ?? ""),
      h("td.num", {}, num(m.min)), h("td.num", {}, num(m.max)), h("td.num", {}, String(m.n))))));
}

export function eventsList(events) {
  if (!events.length) return h("p.muted", {}, "No events.");
  return h("table.list.events", {}, h("tbody", {}, events.map((e) => h("tr", {},
    h("td", {}, when(e.ts)), h("td", {}, `${e.old_status || "—"} → ${e.new_status}`), h("td", {}, e.actor), h("td.reason", {}, e.reason || "")))));
}

export function artifactsTable(jobId, items) {
  if (!items.length) return h("p.muted", {}, "No outputs from its final attempt.");
  return h("table.list.artifacts", {},
    h("thead", {}, h("tr", {}, ["path", "attempt", "size", "digest", ""].map((c) => h("th", {}, c)))),
    h("tbody", {}, items.map((a) => h("tr", {},
      h("td", {}, h("code", {}, a.path)), h("td", {}, String(a.attempt)), h("td", {}, bytes(a.size)),
      h("td", { title: a.digest }, h("code", {}, a.digest.slice(0, 19))),
      h("td", {}, h("button", { type: "button", onclick: () => download(
        `/api/v1/jobs/${encodeURIComponent(jobId)}/outputs/${a.path.split("/").map(encodeURIComponent).join("/")}?attempt=${a.attempt}`,
        a.path.split("/").pop()).catch((e) => toast(e)) }, "Download"))))));
}

// A form of the job's params, prefilled; onSubmit(newParams). A value is read as JSON (numbers, lists,
// true/false), a param that was a string stays a string. An unreadable value is named next to its field.
export function paramsForm(params, onSubmit) {
  const keys = Object.keys(params || {});
  const inputs = new Map();
  const error = h("p.error");
  const form = h("form.params", { onsubmit: (e) => {
    e.preventDefault();
    const out = {};
    for (const [k, input] of inputs) {
      if (typeof params[k] === "string") { out[k] = input.value; continue; }
      try { out[k] = JSON.parse(input.value); } catch {
        error.textContent = `params.${k}: not a number, list or JSON value: ${input.value}`;
        input.focus();
        return;
      }
    }
    error.textContent = "";
    onSubmit(out);
  } });
  for (const k of keys) {
    const v = params[k];
    const input = h("input", { name: `param-${k}`, value: typeof v === "string" ? v : JSON.stringify(v) });
    inputs.set(k, input);
    form.append(h("label", { for: `param-${k}` }, k), input);
  }
  if (!keys.length) form.append(h("p.muted", {}, "This job has no params."));
  form.append(h("span"), h("div.row", {}, h("button.primary", { type: "submit", disabled: !keys.length }, "Submit a copy with these params")), error);
  return form;
}
