// Changing a job's labels from its page (`trainyard label`): `key=value` sets, `key-` removes, as on the CLI.
import { api } from "./api.js";
import { h } from "./ui.js";

// "a=1 b-" as {a: "1", b: null}; an entry of neither form throws, naming it
export function parseChanges(text) {
  const out = {};
  for (const item of text.split(/[\s,]+/).filter(Boolean)) {
    const eq = item.indexOf("=");
    const [key, value] = eq > 0 ? [item.slice(0, eq), item.slice(eq + 1)]
      : item.length > 1 && item.endsWith("-") ? [item.slice(0, -1), null] : [null, null];
    if (key === null) throw new Error(`${item}: write key=value to set a label, key- to remove it`);
    if (Object.hasOwn(out, key)) throw new Error(`${item}: label ${key} is given twice`);
    out[key] = value;
  }
  return out;
}

export function labelBox(path, changed) {
  const line = h("input.grow", { type: "text", name: "labels", placeholder: "best=yes stage=eval scratch-",
    spellcheck: false, autocomplete: "off" });
  const overwrite = h("input", { type: "checkbox", name: "overwrite" });
  const apply = h("button", { type: "submit", name: "apply-labels" }, "Apply");
  const said = h("p.error.labels-error");
  const el = h("form.panel", { hidden: true, onsubmit: (e) => { e.preventDefault(); go(); } },
    h("div.row", {}, line, h("label", {}, overwrite, " overwrite"), apply), said,
    h("p.muted", {}, "key=value sets a label, key- removes it; one already set changes only with overwrite. "
      + "trainyard's own (trainyard.io/…) stay as they are."));

  async function go() {
    said.textContent = "";
    let labels;
    try { labels = parseChanges(line.value); } catch (e) { said.textContent = e.message; return; }
    if (!Object.keys(labels).length) return;
    apply.disabled = true;
    try {
      await api(`${path}/labels`, { method: "PATCH", body: { labels, overwrite: overwrite.checked } });
      line.value = "";
      await changed();
    } catch (e) {
      said.textContent = e.errors && e.errors.length ? e.errors.map((x) => x.message || x.msg).join("; ") : e.message;
    } finally {
      apply.disabled = false;
    }
  }

  return el;
}
