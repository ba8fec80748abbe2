// The jobs list. The server filters, sorts and pages (GET /api/v1/jobs); every filter, the sort and the
// page live in the URL, so a reload or a shared link shows the same view. Only one page is ever rendered.
import { api, poll, toast } from "../api.js";
import { navigate } from "../app.js";
import { jobTime } from "../jobparts.js";
import { whoami, whyNot } from "../may.js";
import { resourceText } from "../resources.js";
import { ago, badge, duration, h, when, withQuery } from "../ui.js";

const STATUSES = ["pending", "starting", "running", "cancelling", "succeeded", "failed", "cancelled"];
const SIZES = [25, 50, 100, 200];
const TEXT_FILTERS = [["q", "search name or id", "search"], ["queue", "queue"], ["team", "team"], ["owner", "owner"],
  ["label", "labels: key=value, key!=value, key in (a,b), …"]];
// column → the server's sort key, and the direction a first click sorts in
const SORTABLE = { name: ["name", ""], status: ["status", ""], queue: ["queue", ""], submitted: ["created", "-"] };
const REFRESH_MS = 3000;

function cssOnce() {
  if (document.getElementById("jobs-css")) return;
  document.head.append(h("link", { id: "jobs-css", rel: "stylesheet", href: "/ui/pages/jobs.css" }));
}

// A local calendar day (YYYY-MM-DD) as Unix seconds at its start; `next`: the start of the day after
function dayStart(day, next = false) {
  if (!/^\d{4}-\d{2}-\d{2}$/.test(day || "")) return undefined;
  const [y, m, d] = day.split("-").map(Number);
  return new Date(y, m - 1, d + (next ? 1 : 0)).getTime() / 1000;
}

// The filters in the URL as the API's query (`withStatus` false: the live counts, which show every status)
function filters(query, withStatus = true) {
  const q = {};
  for (const [k] of TEXT_FILTERS) if (query.get(k)) q[k] = query.get(k);
  if (withStatus) q.status = query.getAll("status");
  q.since = dayStart(query.get("from"));
  q.until = dayStart(query.get("to"), true);
  return q;
}

export function render(root, { query }) {
  cssOnce();
  const limit = SIZES.includes(Number(query.get("limit"))) ? Number(query.get("limit")) : 50;
  const pageNo = Math.max(1, parseInt(query.get("page"), 10) || 1);
  const sort = query.get("sort") || "-created";
  const selected = new Set();
  const shown = new Map();  // the jobs as last read, by id: whose and which team's the ticked ones are
  let me = null;
  // from the address as it is now (a change event can come after another control moved the page on)
  const go = (changes) => navigate(location.pathname + withQuery(new URLSearchParams(location.search),
                                                                 { page: null, ...changes }), { replace: true });

  // -- filters -------------------------------------------------------------------------------------------
  const chosen = new Set(query.getAll("status"));
  const statusBoxes = STATUSES.map((s) => h("label", {}, h("input", {
    type: "checkbox", name: "status", value: s, checked: chosen.has(s),
    onchange: () => go({ status: STATUSES.filter((x) => form.querySelector(`input[name=status][value=${x}]`).checked) }),
  }), badge(s)));
  const text = TEXT_FILTERS.map(([name, placeholder, type = "text"]) => h("input", {
    type, name, placeholder, value: query.get(name) || "", "aria-label": placeholder,
    onchange: (e) => go({ [name]: e.target.value.trim() }),  // on Enter or leaving the box: no re-render per key
  }));
  const dates = ["from", "to"].map((name) => h("label", {}, name, h("input", {
    type: "date", name, value: query.get(name) || "", onchange: (e) => go({ [name]: e.target.value }),
  })));
  const form = h("form.row.jobs-filters", { onsubmit: (e) => e.preventDefault() },
    h("fieldset", { "aria-label": "status" }, statusBoxes), ...text, ...dates,
    h("button", { type: "button", onclick: () => navigate(location.pathname, { replace: true }) }, "Clear"));

  // -- header: live counts and actions -------------------------------------------------------------------
  const live = h("span.jobs-live", { id: "live-counts" }, "…");
  const cancelBtn = h("button.danger", { type: "button", id: "cancel-selected", disabled: true, onclick: cancelSelected },
    "Cancel selected");
  const deleteBtn = h("button.danger", { type: "button", id: "delete-selected", disabled: true, onclick: deleteSelected,
    title: "ended jobs only: their logs, metrics, outputs and folders go; their usage stays counted" }, "Delete selected");
  deleteBtn.dataset.title = deleteBtn.title;
  // two or more jobs side by side: their params and metrics (/compare); with none ticked, those the label filter picks
  const compareBtn = h("button", { type: "button", id: "compare-selected",
    title: "their params side by side and their metrics overlaid", onclick: () => navigate(selected.size
      ? `/compare?jobs=${[...selected].map(encodeURIComponent).join(",")}`
      : `/compare${withQuery(new URLSearchParams(), { label: query.get("label") })}`) });
  compareState();
  const head = h("div.row", {}, h("h1.grow", {}, "Jobs"), live, compareBtn, cancelBtn, deleteBtn);

  // -- table ---------------------------------------------------------------------------------------------
  const all = h("input", { type: "checkbox", "aria-label": "select all on this page", onchange: (e) => {
    for (const box of tbody.querySelectorAll("input[type=checkbox]")) {
      box.checked = e.target.checked;
      toggle(box.value, box.checked, box.closest("tr"));
    }
  } });
  const th = (label, key) => {
    if (!SORTABLE[key]) return h("th", {}, label);
    const [col, first] = SORTABLE[key];
    const on = sort.replace(/^-/, "") === col;
    const next = on ? (sort.startsWith("-") ? col : `-${col}`) : `${first}${col}`;
    return h(`th${on ? ".sorted" + (sort.startsWith("-") ? "" : ".asc") : ""}`, { dataset: { sort: col } },
      h("a", { href: location.pathname + withQuery(query, { sort: next === "-created" ? null : next, page: null }) }, label));
  };
  const tbody = h("tbody");
  const table = h("table.list", {}, h("thead", {}, h("tr", {}, h("th", {}, all), th("id"), th("name", "name"),
    th("status", "status"), th("queue", "queue"), th("resources"), th("attempts"), th("submitted", "submitted"),
    th("duration"), th("reason"))), tbody);
  const pager = h("div.row.jobs-pager");
  const problem = h("p.error", { hidden: true });
  root.append(head, h("div.panel", {}, form), problem, table, pager);

  function toggle(id, on, tr) {
    on ? selected.add(id) : selected.delete(id);
    if (tr) tr.classList.toggle("selected", on);
    for (const [btn, verb] of [[cancelBtn, "Cancel"], [deleteBtn, "Delete"]]) {
      // a ticked job the signed-in person may not change disables the button, which names it and why
      const why = [...selected].map((id) => [id, shown.has(id) && whyNot(me, verb.toLowerCase(), "job", shown.get(id))])
        .find(([, no]) => no);
      btn.disabled = !selected.size || Boolean(why);
      btn.textContent = selected.size ? `${verb} selected (${selected.size})` : `${verb} selected`;
      btn.title = why ? `${why[0]}: ${why[1]}` : btn.dataset.title || "";
    }
    compareState();
  }

  function compareState() {
    compareBtn.disabled = selected.size === 1 || (!selected.size && !query.get("label"));
    compareBtn.textContent = selected.size ? `Compare selected (${selected.size})`
      : query.get("label") ? "Compare these" : "Compare selected";
  }

  function row(job) {
    const tr = h("tr", { dataset: { id: job.id, status: job.status } },
      h("td", {}, h("input", { type: "checkbox", value: job.id, "aria-label": `select ${job.id}`, checked: selected.has(job.id),
        onchange: (e) => toggle(job.id, e.target.checked, tr) })),
      h("td.mono", {}, h("a", { href: `/jobs/${encodeURIComponent(job.id)}` }, job.id)),
      h("td", {}, h("a", { href: `/jobs/${encodeURIComponent(job.id)}` }, job.name), labelChips(job)),
      h("td", {}, badge(job.status)),
      h("td", {}, job.queue),
      h("td", {}, resourceText(job.spec)),
      h("td.num", {}, String((job.attempts || []).length)),
      h("td", { title: when(job.created_at) }, ago(job.created_at)),
      h("td", {}, duration(jobTime(job))),
      h("td.reason", {}, job.reason || ""));
    if (selected.has(job.id)) tr.classList.add("selected");
    return tr;
  }

  // a job's labels under its name; each one narrows the listing to the jobs that have it too
  function labelChips(job) {
    const labels = Object.entries(job.spec.labels || {});
    if (!labels.length) return null;
    const typed = query.get("label") || "";
    return h("span.label-chips", {}, labels.map(([k, v]) => h("a.label-chip", {
      href: location.pathname + withQuery(query, { label: typed ? `${typed},${k}=${v}` : `${k}=${v}`, page: null }),
      title: `only jobs labelled ${k}=${v}`,
    }, `${k}=${v}`)));
  }

  let ctl = null;
  async function load() {
    if (ctl) ctl.abort();
    ctl = new AbortController();
    const offset = (pageNo - 1) * limit;
    const res = await api("jobs", { query: { ...filters(query), sort, limit, offset, count: true }, signal: ctl.signal });
    problem.hidden = true;
    for (const j of res.items) shown.set(j.id, j);
    tbody.replaceChildren(...res.items.map(row));
    if (!res.items.length) tbody.append(h("tr", {}, h("td.muted.empty", { colspan: 10 }, emptyText(offset))));
    const total = `${res.total.toLocaleString()}${res.total_capped ? "+" : ""}`;
    const span = res.items.length ? `${offset + 1}–${offset + res.items.length} of ${total}` : `0 of ${total}`;
    pager.replaceChildren(
      h("span.muted", { id: "page-span" }, span),
      h("select", { "aria-label": "jobs per page", onchange: (e) => go({ limit: e.target.value }) },
        SIZES.map((n) => h("option", { value: n, selected: n === limit }, `${n} per page`))),
      h("button", { type: "button", disabled: pageNo <= 1, onclick: () => go({ page: pageNo - 1 > 1 ? pageNo - 1 : null }) }, "‹ Previous"),
      h("button", { type: "button", disabled: !res.more, onclick: () => go({ page: pageNo + 1 }) }, "Next ›"));
  }

  // why the table is empty, and what to do: a first visit, filters that match nothing, or a page past the end
  function emptyText(offset) {
    const filtered = [...TEXT_FILTERS.map(([k]) => k), "status", "from", "to"].some((k) => query.get(k));
    const first = location.pathname + withQuery(query, { page: null });
    if (offset) return ["No jobs on this page. ", h("a", { href: first }, "First page")];
    if (filtered) return ["No jobs match these filters. ", h("a", { href: location.pathname }, "Clear them")];
    return ["No jobs yet. Submit one with ", h("code", {}, "trainyard run job.yaml"), " or from ",
      h("a", { href: "/submit" }, "Submit"), "."];
  }

  async function counts() {
    const c = await api("jobs/counts", { query: filters(query, false) });
    live.textContent = `${c.running} running · ${c.pending} pending`;
  }

  const plural = (n) => `${n} job${n > 1 ? "s" : ""}`;

  function cancelSelected() {
    return onSelected(cancelBtn, (n) => `Cancel ${plural(n)}?`, (id) => api(`jobs/${id}/cancel`, { method: "POST" }),
      (n) => `Cancel requested for ${plural(n)}`);
  }

  function deleteSelected() {
    return onSelected(deleteBtn, (n) => `Delete ${plural(n)} with their logs, metrics and outputs? This cannot be undone.`,
      (id) => api(`jobs/${id}`, { method: "DELETE" }), (n) => `Deleted ${plural(n)}`);
  }

  // one request per selected job; each one refused says why (a running job cannot be deleted…)
  async function onSelected(btn, ask, call, said) {
    const ids = [...selected];
    if (!ids.length || !confirm(`${ask(ids.length)}\n${ids.join("\n")}`)) return;
    btn.disabled = true;
    const results = await Promise.allSettled(ids.map((id) => call(encodeURIComponent(id))));
    const failed = results.map((r, i) => [ids[i], r]).filter(([, r]) => r.status === "rejected");
    const done = ids.length - failed.length;
    if (done) toast(said(done), { kind: "info" });
    for (const [id, r] of failed) toast(`${id}: ${r.reason.message}`);
    for (const id of ids) toggle(id, false, null);
    await refresh();
  }

  async function refresh() {
    try {
      await Promise.all([load(), counts()]);
    } catch (e) {
      if (e.name === "AbortError") return;
      problem.textContent = `Could not load jobs: ${e.message}`;
      problem.hidden = false;
      throw e;
    }
  }

  whoami().then((m) => { me = m; }, () => {});
  const stop = poll(refresh, REFRESH_MS);
  return () => { stop(); if (ctl) ctl.abort(); };
}
