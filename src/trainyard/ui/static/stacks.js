// A running job's stacks (`trainyard stack`): ask its launchers, then show each replica's dump as it answers.
import { api, toast } from "./api.js";
import { badge, h } from "./ui.js";

const POLL_MS = 500;
const GIVE_UP_MS = 40000;  // a launcher answers within ~3 s; the server reads a request as expired after 60 s

export function stackPanel(path) {
  const body = h("div.stacks");
  const withLocals = h("input", { type: "checkbox", name: "locals" });
  const native = h("input", { type: "checkbox", name: "native" });
  const again = h("button", { type: "button", name: "stacks-again", onclick: () => ask() }, "Ask again");
  const el = h("details.panel", { hidden: true }, h("summary", {}, "Stacks"),
    h("div.row", {},
      h("label", { title: "each frame's local variables (py-spy --locals)" }, withLocals, " local variables"),
      h("label", { title: "C and C++ frames, e.g. inside NCCL or CUDA (py-spy --native)" }, native, " native frames"),
      again),
    body);

  function draw(dumps) {
    body.replaceChildren(...dumps.map((d) => h("div.stack", { dataset: { replica: d.replica, status: d.status } },
      h("div.row", {}, h("strong", {}, `replica ${d.replica}`), ` on ${d.node || "?"} `, badge(d.status),
        d.status === "pending" ? " asking its launcher…" : ""),
      d.error ? h("p.error", {}, d.error) : null,
      d.status === "expired" ? h("p.error", {}, "no answer from its launcher: the replica ended") : null,
      d.text ? h("pre.yaml.stack-text", {}, d.text) : null)));
  }

  async function ask() {
    el.hidden = false; el.open = true;
    let asked;
    const options = { locals: withLocals.checked, native: native.checked };
    try { asked = await api(`${path}/stacks`, { method: "POST", body: options }); } catch (e) { toast(e); return; }
    draw(asked);
    const ids = new Set(asked.map((d) => d.id));
    const until = Date.now() + GIVE_UP_MS;
    while (Date.now() < until) {
      await new Promise((r) => setTimeout(r, POLL_MS));
      if (!el.isConnected) return;  // left the page
      let mine;
      try { mine = (await api(`${path}/stacks`)).filter((d) => ids.has(d.id)); } catch (e) { toast(e); return; }
      mine.sort((a, b) => a.replica - b.replica);
      draw(mine);
      if (mine.every((d) => d.status !== "pending")) return;
    }
  }

  return { el, ask };
}
