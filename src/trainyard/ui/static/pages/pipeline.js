// /pipelines/:id — a run: its DAG with each step's state (live), retry, cancel and delete, its artifacts' lineage.
// A foreach step is one box; past FANOUT_OPEN items it shows its counts until opened, then its items wrap
// in a grid, so a fan-out of hundreds stays one column of the graph.
import { api, poll, toast } from "../api.js";
import { navigate } from "../app.js";
import { css } from "../css.js";
import { drawDag } from "../dag.js";
import { gated, whoami, whyNot } from "../may.js";
import { DONE, stepBadge, stepClass, statusMix } from "../steps.js";
import { ago, badge, bytes, duration, goneNote, h, when } from "../ui.js";

const ENDED = new Set(["succeeded", "failed", "cancelled"]);
const FANOUT_OPEN = 8;   // items shown without asking
const COLS = 8;          // items per row of an open fan-out
const TILE = { w: 92, h: 40 };

export function render(root, { params, query }) {
  css("dag.css");
  const id = params.id;
  const open = new Set((query.get("open") || "").split(",").filter(Boolean));
  let artifact = query.get("artifact");
  let run = null;
  let drawn = "";
  let shown = null;  // the artifact whose lineage is open, redrawn as the run moves
  let me;  // the signed-in person (may.js), read with the run the first time
  const head = h("div");
  const graph = h("div.panel.dag-scroll", null, h("p.muted", null, "Loading…"));
  const problems = h("div");
  const arts = h("div");
  const lineage = h("div");
  root.append(head, graph, problems, arts, lineage);

  const remember = () => {
    const q = new URLSearchParams(location.search);
    open.size ? q.set("open", [...open].join(",")) : q.delete("open");
    artifact ? q.set("artifact", artifact) : q.delete("artifact");
    history.replaceState(history.state, "", location.pathname + (q.toString() ? `?${q}` : ""));
  };
  const act = async (verb) => {
    try {
      run = await api(`pipelines/${encodeURIComponent(id)}/${verb}`, { method: "POST" });
      toast(`${verb === "retry" ? "Retrying" : "Cancelling"} run ${id}`, { kind: "info" });
      show(true);
    } catch (e) { toast(e); }
  };
  const remove = async () => {
    if (!confirm(`Delete pipeline run ${run.name} (${id}) with its steps' jobs, their logs, metrics, outputs and ` +
      "artifacts? This cannot be undone.")) return;
    try {
      await api(`pipelines/${encodeURIComponent(id)}`, { method: "DELETE" });
      toast(`Deleted pipeline run ${run.name}`, { kind: "info" });
      navigate("/pipelines");
    } catch (e) { toast(e); }
  };
  const toggle = (step) => { open.has(step) ? open.delete(step) : open.add(step); remember(); show(true); };
  const pick = (key) => { artifact = key; remember(); showLineage(); };

  function show(force = false) {
    // redrawn only when something changed: a click in progress is not lost under a poll
    const sig = JSON.stringify([run.status, run.reason, [...open], run.steps.map((s) => [s.name, s.status, s.job_id])]);
    if (!force && sig === drawn) { head.querySelector(".took")?.replaceChildren(took(run)); return; }
    drawn = sig;
    head.replaceChildren(header(run, act, remove, me));
    const groups = grouped(run.steps);
    drawDag(graph, groups.map((g) => ({ ...g, ...size(g, open) })), edges(groups), (g) => node(g, open, toggle));
    problems.replaceChildren(...[troubles(run)].filter(Boolean));
    arts.replaceChildren(...[artifacts(run, pick)].filter(Boolean));
    // "used by" follows the run: a fan-out's items name the artifact as they are submitted
    if (shown && artifact) lineage.replaceChildren(lineagePanel(shown, run, pick));
  }

  async function showLineage() {
    shown = null;
    if (!artifact) { lineage.replaceChildren(); return; }
    try {
      const art = await api(`artifacts/${encodeURIComponent(artifact)}`);
      shown = art;
      lineage.replaceChildren(lineagePanel(art, run, pick));
      lineage.scrollIntoView({ block: "nearest" });
    } catch (e) {
      lineage.replaceChildren(h("p.error", null, `Artifact ${artifact}: ${e.message}`));
    }
  }

  let stop = null;
  stop = poll(async () => {
    try {
      [run, me] = await Promise.all([api(`pipelines/${encodeURIComponent(id)}`), me === undefined ? whoami() : me]);
    } catch (e) {
      if (e.status === 404) {  // never there, or deleted while shown: said once, no more reads
        stop();
        root.replaceChildren(goneNote(`No pipeline run ${id}`, "/pipelines", "All pipeline runs"));
        return;
      }
      if (!run) graph.replaceChildren(h("p.error", null, e.message));
      throw e;
    }
    show();
  }, 2000);
  showLineage();
  return () => stop();
}

function took(run) {
  return duration((run.ended_at || Date.now() / 1000) - run.created_at);
}

function header(run, act, remove, me) {
  const not = (verb) => whyNot(me, verb, "pipeline run", run);
  const done = run.steps.filter((s) => DONE.has(s.status)).length;
  const live = run.status === "running";
  const retryable = run.status === "failed" || run.status === "cancelled";
  return h("div", null,
    h("div.row", null,
      h("h1", null, run.name), h("span.run-status", null, badge(run.status)), h("span.grow"),
      h("a.button", { href: `/jobs?label=${encodeURIComponent(`trainyard.io/pipeline-run=${run.id}`)}`, id: "step-jobs",
        title: "its steps in the jobs list (trainyard ls -l trainyard.io/pipeline-run=…)" }, "Steps' jobs"),
      h("a.button", { href: `/compare?pipeline=${encodeURIComponent(run.id)}` }, "Compare trainers"),
      h("button", gated(not("retry"), { name: "retry", disabled: !retryable, onclick: () => act("retry"),
        title: "run the failed, cancelled and skipped steps again" }), "Retry"),
      h("button.danger", gated(not("cancel"), { name: "cancel", disabled: !live, onclick: () => act("cancel") }),
        "Cancel"),
      h("button.danger", gated(not("delete"), { name: "delete", disabled: !ENDED.has(run.status), onclick: remove,
        title: "delete this ended run with its steps' jobs and artifacts (their usage stays counted)" }), "Delete")),
    h("p.muted.row", null,
      h("span.mono", null, run.id), h("span", null, `${done}/${run.steps.length} steps done`),
      h("span", { title: when(run.created_at) }, `started ${ago(run.created_at)}`),
      h("span", null, "took ", h("span.took", null, took(run))),
      run.owner && h("span", null, `by ${run.owner}`), run.team && h("span", null, `team ${run.team}`),
      run.retries ? h("span", null, `${run.retries} retries`) : null),
    run.reason && h("p", { class: run.status === "failed" ? "error" : "muted" }, run.reason),
    run.warnings.map((w) => h("p.muted", null, `⚠ ${w}`)));
}

// one box per step of the pipeline; a foreach step's items stay together
function grouped(steps) {
  const stepOf = new Map(steps.map((s) => [s.name, s.step]));
  const byStep = new Map();
  for (const s of steps) {
    if (!byStep.has(s.step)) byStep.set(s.step, { id: s.step, steps: [], needs: new Set(), foreach: false });
    const g = byStep.get(s.step);
    g.steps.push(s);
    g.foreach ||= s.index !== null && s.index !== undefined;
    s.needs.forEach((n) => g.needs.add(stepOf.get(n) || n));  // an item of a fan-out (train-3) needs its box
  }
  return [...byStep.values()];
}

function edges(groups) {
  const names = new Set(groups.map((g) => g.id));
  return groups.flatMap((g) => [...g.needs].filter((n) => names.has(n)).map((n) => [n, g.id]));
}

const isOpen = (g, open) => g.steps.length <= FANOUT_OPEN || open.has(g.id);

function size(g, open) {
  if (!g.foreach) return { w: 200, h: 58 };
  if (!isOpen(g, open)) return { w: 250, h: 92 };
  const n = g.steps.length;
  const cols = Math.min(n, COLS);
  return { w: Math.max(250, cols * (TILE.w + 6) + 18), h: 62 + Math.ceil(n / COLS) * (TILE.h + 6) };
}

function node(g, open, toggle) {
  if (!g.foreach) {
    const s = g.steps[0];
    return h(`${s.job_id ? "a" : "div"}.dag-node.st-${stepClass(s.status)}`,
      { href: s.job_id ? `/jobs/${encodeURIComponent(s.job_id)}` : undefined, title: s.reason || s.name,
        dataset: { step: s.name, status: s.status } },
      h("div.dag-name", null, s.name),
      h("div.row", null, stepBadge(s.status), h("span.muted", null, stepTime(s))));
  }
  const n = g.steps.length;
  const shown = isOpen(g, open);
  return h("div.dag-group", { dataset: { step: g.id, count: n } },
    h("div.row", null, h("b", null, `${g.id} × ${n}`), h("span.grow"),
      n > FANOUT_OPEN && h("button.small", { onclick: () => toggle(g.id), "aria-expanded": String(shown) },
        shown ? "fold" : `show ${n}`)),
    statusMix(g.steps),
    shown && h("div.dag-tiles", { style: `grid-template-columns: repeat(${Math.min(n, COLS)}, ${TILE.w}px)` },
      g.steps.map((s) => h(`${s.job_id ? "a" : "div"}.dag-tile.st-${stepClass(s.status)}`,
        { href: s.job_id ? `/jobs/${encodeURIComponent(s.job_id)}` : undefined,
          title: `${s.name}: ${s.status}${s.item !== null && s.item !== undefined ? ` (item ${JSON.stringify(s.item)})` : ""}${s.reason ? ` — ${s.reason}` : ""}`,
          dataset: { step: s.name, status: s.status } },
        h("span", null, `#${s.index}`), h("small", null, s.status)))));
}

function stepTime(s) {
  if (!s.started_at) return "";
  return duration((s.ended_at || Date.now() / 1000) - s.started_at);
}

function troubles(run) {
  const bad = run.steps.filter((s) => ["failed", "cancelled", "skipped"].includes(s.status) && s.reason);
  if (!bad.length) return null;
  return h("div.panel", null, h("h2", null, "Why steps did not run"),
    // a step that ran links to its job: its logs say why it failed
    h("ul", null, bad.slice(0, 50).map((s) => h("li", { dataset: { step: s.name } },
      s.job_id ? h("a", { href: `/jobs/${encodeURIComponent(s.job_id)}`, title: "its job: logs, attempts, events" },
        h("b", null, s.name)) : h("b", null, s.name), " ", stepBadge(s.status), " ", s.reason))),
    bad.length > 50 ? h("p.muted", null, `and ${bad.length - 50} more`) : null);
}

function artifacts(run, pick) {
  const rows = run.steps.flatMap((s) => Object.entries(s.artifacts).map(([out, key]) => ({ s, out, key })));
  if (!rows.length) return null;
  return h("div", null, h("h2", null, "Artifacts"),
    h("table.list.artifacts", null,
      h("thead", null, h("tr", null, ["output", "step", "artifact", ""].map((c) => h("th", null, c)))),
      h("tbody", null, rows.map(({ s, out, key }) => h("tr", { dataset: { artifact: key } },
        h("td", null, out), h("td", null, s.job_id ? h("a", { href: `/jobs/${encodeURIComponent(s.job_id)}` }, s.name) : s.name),
        h("td.mono", null, key.slice(0, 16)),
        h("td", null, h("button.small", { onclick: () => pick(key) }, "lineage")))))));
}

// where an artifact came from (its step's inputs, themselves artifacts) and where it went (the steps
// of this run whose inputs name it, and later runs that reused it from the cache)
function lineagePanel(art, run, pick) {
  const stepLink = (name, job) => (job ? h("a", { href: `/jobs/${encodeURIComponent(job)}` }, name) : name);
  const consumers = (run ? run.steps : []).filter((s) =>
    Object.values(s.inputs || {}).some((i) => (i.artifacts || []).includes(art.id)));
  const inputs = Object.entries(art.inputs || {});
  return h("div.panel.lineage", { dataset: { artifact: art.id } },
    h("h2", null, `Lineage of ${art.output} `, h("span.mono.muted", null, art.id.slice(0, 16))),
    h("p", null, "Made by step ", h("b", null, stepLink(art.step, art.job_id)), ` (attempt ${art.attempt}) `,
      h("span.muted", null, `${when(art.created_at)} · ${bytes(art.size)} in ${art.files} file${art.files === 1 ? "" : "s"}`)),
    h("p.mono.muted", null, `sha256 ${art.digest}`),
    h("h3", null, "From"),
    inputs.length ? h("ul", null, inputs.map(([name, ref]) => h("li", null, h("b", null, name), " ",
      (ref.artifacts || []).length
        ? (ref.artifacts || []).map((k) => h("button.small.mono", { onclick: () => pick(k) }, k.slice(0, 12)))
        : h("span.muted", null, ref.value !== undefined ? "a value" : "no artifact"))))
      : h("p.muted", null, "no inputs"),
    h("h3", null, "Used by"),
    consumers.length || art.used_by.length
      ? h("ul", null, consumers.map((s) => h("li", null, "step ", stepLink(s.name, s.job_id), " ", stepBadge(s.status))),
        art.used_by.map((u) => h("li", null, "reused from the cache by ", u)))
      : h("p.muted", null, "no step has read it yet"));
}
