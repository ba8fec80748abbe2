// A command run beside a running job's, on its node (`trainyard exec`): typed here, run with `sh -c`.
import { api, toast } from "./api.js";
import { badge, h } from "./ui.js";

const POLL_MS = 400;
const PICKUP_MS = 15000;  // past the command's own timeout: its launcher picks it up with its next report (≤ 3 s)

// `forbidden`: why the signed-in person may not (may.js), shown instead of a form the server would refuse
export function execBox(path, replicas, forbidden = null) {
  const line = h("input.grow", { type: "text", name: "command", placeholder: "nvidia-smi; ls -la checkpoints",
    spellcheck: false, autocomplete: "off" });
  const replica = h("select", { name: "replica" },
    ...Array.from({ length: replicas }, (_, i) => h("option", { value: i }, `replica ${i}`)));
  const run = h("button", { type: "submit", name: "run" }, "Run");
  const result = h("div.exec-result");
  const form = h("form.row", { onsubmit: (e) => { e.preventDefault(); go(); } },
    line, replicas > 1 ? replica : null, run);
  const el = h("details.panel", {}, h("summary", {}, "Run a command on its node"),
    h("p.muted", {}, "In the job's work dir, with its environment and account (in its container, for an image), "
      + "with sh -c; 30 s at most."),
    forbidden ? h("p.muted.forbidden", {}, forbidden) : form, result);

  async function go() {
    if (!line.value.trim()) return;
    run.disabled = true;
    result.replaceChildren(h("p", {}, badge("pending"), " waiting for its launcher…"));
    try {
      let got = await api(`${path}/exec`, { method: "POST",
        body: { argv: ["sh", "-c", line.value], replica: Number(replica.value || 0), timeout: 30 } });
      const until = Date.now() + 30000 + PICKUP_MS;
      while (got.status === "pending" && Date.now() < until && el.isConnected) {
        await new Promise((r) => setTimeout(r, POLL_MS));
        got = await api(`${path}/exec/${got.id}`);
      }
      result.replaceChildren(
        h("p", {}, badge(got.status), got.exit_code === null ? "" : ` exit ${got.exit_code}`,
          got.error ? h("span.error", {}, ` ${got.error}`) : null),
        got.output ? h("pre.yaml.stack-text", { dataset: { exit: got.exit_code } }, got.output) : null);
    } catch (e) { toast(e); result.replaceChildren(); }
    run.disabled = false;
  }

  return el;
}
