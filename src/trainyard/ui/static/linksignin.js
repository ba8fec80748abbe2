// A sign-in that comes in a link: `trainyard ui` opens /#token=…, and so can a link on any site, written by anyone
// with a token of their own. Signed in as the link's writer, this browser would give the writer's team whatever the
// person then uploads, submits or stores as a secret; and no mark the CLI could add would tell its links apart (a
// writer can mint real ones). So a link's token is kept only once the person has seen whose it is and said yes.
import { setToken, toast, token } from "./api.js";
import { h, prose } from "./ui.js";

// Takes the token out of the address bar and the history at once (declined or not, it stays in neither), asks the
// server whose it is, and keeps it if the person confirms that identity. Resolves once that is settled; a token the
// server does not take shows why and changes nothing.
export async function takeTokenFromHash() {
  const m = location.hash.match(/(?:^#|&)token=([^&]+)/);
  if (!m) return;
  history.replaceState(history.state, "", location.pathname + location.search);
  let given = "";
  try { given = decodeURIComponent(m[1]); } catch { /* malformed: refused below */ }
  const held = token();
  if (given && given === held) return;  // `trainyard ui` again: already signed in with it
  const offered = await whoIs(given);
  if (offered.error) {
    toast(`The sign-in in this link was not used: ${offered.error}`);
    return;
  }
  const now = held ? await whoIs(held) : null;
  if (await confirmSignIn(offered.me, now && now.me, Boolean(held))) setToken(given);
}

// {me} (the server's whoami) for token `t`, or {error}; never through api(), which would send the token this
// browser holds, and take a 401 for "this browser must sign in"
async function whoIs(t) {
  if (!/^[\x21-\x7e]+$/.test(t)) return { error: "what it holds is not an API token" };
  let res;
  try {
    res = await fetch("/api/v1/whoami", { headers: { Accept: "application/json", Authorization: `Bearer ${t}` } });
  } catch (e) {
    return { error: `cannot reach the server (${e.message})` };
  }
  if (res.status === 401) return { error: "its API token is not valid on this server" };
  if (!res.ok) return { error: `the server could not say whose its API token is (HTTP ${res.status})` };
  return { me: await res.json() };
}

// "alice (team vision)", "root (admin; teams nlp, vision)": what a person recognises as theirs, or not
export function identity(me) {
  const teams = Object.keys(me.teams || {}).sort();
  const parts = [me.admin && "admin", teams.length && `team${teams.length > 1 ? "s" : ""} ${teams.join(", ")}`];
  const said = parts.filter(Boolean).join("; ");
  return said ? `${me.user} (${said})` : me.user;
}

// A modal the person answers: resolves true for "Sign in as …", false for the other button or Escape
function confirmSignIn(me, current, holding) {
  const who = identity(me);
  const replacing = !holding ? null : current
    ? `This browser is signed in as ${identity(current)} now; that sign-in would be replaced.`
    : "This browser's current sign-in would be replaced.";
  const dialog = h("dialog.link-signin", { "aria-labelledby": "link-signin-title" },
    h("form", { method: "dialog" },
      h("h2", { id: "link-signin-title" }, `Sign in as ${who}?`),
      h("p", {}, `This link came with an API token. Signed in with it, this browser acts as ${me.user}: the jobs `
        + "you submit, the files you upload and the secrets you store here are theirs, and their teams see them."),
      replacing && h("p", {}, replacing),
      h("p.muted", {}, prose("Say yes only to a link you opened yourself (`trainyard ui` opens one).")),
      h("div.row.answers", {},
        h("button", { type: "submit", value: "decline", name: "decline" },
          holding ? "Keep the current sign-in" : "Stay signed out"),
        h("button.primary", { type: "submit", value: "confirm", name: "confirm" }, `Sign in as ${me.user}`))));
  document.body.append(dialog);
  return new Promise((resolve) => {
    dialog.addEventListener("close", () => { dialog.remove(); resolve(dialog.returnValue === "confirm"); });
    dialog.showModal();
  });
}
