// /submit — paste or edit a job or pipeline spec as YAML; validate or submit it. The server reads the text
// with the CLI's own loader, so each error names a line of this text: it is marked in the gutter and
// written beside that line. A spec with `steps:` at the top is a pipeline.
import { api, toast } from "../api.js";
import { navigate } from "../app.js";
import { css } from "../css.js";
import { whoami, whyNotSubmit } from "../may.js";
import { h, prose } from "../ui.js";

const DRAFT = "trainyard.submit.draft";
const JOB = `name: hello
command: python -c "print('hello from trainyard')"
resources:
  cpu: 1
  memory: 1Gi
`;
const PIPELINE = `name: fan
params: {workers: 3}
steps:
  prepare:
    command: echo prepare
  train:
    needs: [prepare]
    foreach: "{{params.workers}}"
    command: echo train {{item}}
  report:
    needs: [train]
    command: echo done
`;

export const isPipeline = (text) => /^steps\s*:/m.test(text);

export function render(root) {
  css("editor.css");
  const text = h("textarea", { name: "spec", spellcheck: false, wrap: "off", autocomplete: "off",
    "aria-label": "spec as YAML" });
  text.value = localStorage.getItem(DRAFT) || JOB;
  const gutter = h("pre.gutter", { "aria-hidden": "true" });
  const notes = h("div.line-notes", { "aria-hidden": "true" });
  const list = h("ul.spec-errors", { role: "alert" });
  const kind = h("span.kind.muted");
  let errors = [];

  const paint = () => {
    const n = text.value.split("\n").length;
    const bad = new Map(errors.filter((e) => e.line).map((e) => [e.line, e]));
    gutter.replaceChildren(...Array.from({ length: n }, (_, i) =>
      h(`span${bad.has(i + 1) ? ".err" : ""}`, { dataset: { line: i + 1 }, title: bad.get(i + 1)?.message }, String(i + 1))));
    notes.replaceChildren(...[...bad.values()].map((e) => h("div.note", { dataset: { line: e.line },
      style: `top:calc(${e.line - 1} * var(--lh) + 8px)` }, `${e.field ? `${e.field}: ` : ""}${e.message}`)));
    list.replaceChildren(...errors.map((e) => h("li.error", { dataset: { line: e.line ?? "", field: e.field || "" } },
      e.line ? h("a", { href: "#", onclick: (ev) => { ev.preventDefault(); goTo(e.line); } }, `line ${e.line}`) : "spec",
      e.field ? [" · ", h("code", null, e.field)] : null, `: ${e.message}`)));
    kind.textContent = `as a ${isPipeline(text.value) ? "pipeline" : "job"}`;
    scrolled();
  };
  const scrolled = () => {
    gutter.scrollTop = text.scrollTop;
    notes.style.transform = `translateY(${-text.scrollTop}px)`;
  };
  const goTo = (line) => {
    const starts = text.value.split("\n").slice(0, line - 1).reduce((s, l) => s + l.length + 1, 0);
    text.focus();
    text.setSelectionRange(starts, starts + (text.value.split("\n")[line - 1] || "").length);
  };
  text.addEventListener("input", () => {
    localStorage.setItem(DRAFT, text.value);
    if (errors.length) { errors = []; }  // stale once edited
    paint();
  });
  text.addEventListener("scroll", scrolled);
  text.addEventListener("keydown", (e) => {  // Tab indents (YAML is all indentation); Shift+Tab leaves
    if (e.key !== "Tab" || e.shiftKey || e.ctrlKey || e.altKey || e.metaKey) return;
    e.preventDefault();
    text.setRangeText("  ", text.selectionStart, text.selectionEnd, "end");
    text.dispatchEvent(new Event("input"));
  });

  const send = async (dryRun, button) => {
    const pipeline = isPipeline(text.value);
    button.disabled = true;
    try {
      const res = await api(pipeline ? "pipelines" : "jobs", {
        method: "POST", query: { dry_run: dryRun || undefined },
        body: new Blob([text.value], { type: "application/yaml" }),
      });
      errors = [];
      paint();
      if (dryRun) {
        toast(`Valid ${res.kind} ${res.name}${res.steps ? ` (${res.steps} steps)` : ""}: nothing was submitted`, { kind: "info" });
        list.replaceChildren(h("li.ok", null, `✓ valid ${res.kind} “${res.name}”`), ...res.warnings.map((w) => h("li.muted", null, `⚠ ${w}`)));
      } else {
        localStorage.removeItem(DRAFT);
        navigate(pipeline ? `/pipelines/${encodeURIComponent(res.id)}` : `/jobs/${encodeURIComponent(res.id)}`);
      }
    } catch (e) {
      errors = specErrors(e);
      paint();
      if (!errors.length) toast(e);
    } finally {
      button.disabled = false;
    }
  };
  const validate = h("button", { type: "button", onclick: () => send(true, validate) }, "Validate");
  const submit = h("button.primary", { type: "button", name: "submit", onclick: () => send(false, submit) }, "Submit");
  // one whose roles submit nowhere (a viewer's) is refused a check as a submit: both say why beforehand
  whoami().then((me) => {
    const why = whyNotSubmit(me);
    if (why) for (const b of [validate, submit]) Object.assign(b, { disabled: true, title: why });
  }, () => {});
  const example = (spec) => () => { text.value = spec; errors = []; localStorage.setItem(DRAFT, spec); paint(); };

  root.append(
    h("div.row", null, h("h1", null, "Submit"), h("span.grow"), h("span.muted", null, "Start from"),
      h("button.small", { type: "button", onclick: example(JOB) }, "a job"),
      h("button.small", { type: "button", onclick: example(PIPELINE) }, "a pipeline")),
    h("p.muted", null, prose("Paste or write a job spec or a pipeline, as for `trainyard run FILE`. "
      + "Steps run in the server's folder: code from your machine goes with the CLI.")),
    h("div.editor", null, gutter, h("div.text", null, text, notes)),
    h("div.row.actions", null, validate, submit, kind),
    list);
  paint();
}

// the errors of a refused spec, each with the line and field it names
function specErrors(e) {
  if (e.errors && e.errors.length) return e.errors.map((x) => ({ line: x.line, field: x.field, message: x.message }));
  const d = (e.body && e.body.details) || {};
  if (e.status !== 422 && !d.field) return [];
  const field = d.field || "";
  const message = field && e.message.startsWith(`${field}: `) ? e.message.slice(field.length + 2) : e.message;
  return [{ line: d.line ?? null, field, message }];
}
