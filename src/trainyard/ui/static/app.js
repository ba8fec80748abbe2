// The router: a path picks a page module under pages/; each exports
//   render(root, {params, query}) -> optional cleanup function
// Links inside the app navigate without reloading; the query string is the page's state
// (filters, sort, selection), so reload and shared links show the same view.
import { api, setToken, toast, token } from "./api.js";
import { takeTokenFromHash } from "./linksignin.js";

const ROUTES = [
  [/^\/$/, "jobs"],
  [/^\/jobs\/?$/, "jobs"],
  [/^\/jobs\/([^/]+)$/, "job", ["id"]],
  [/^\/compare\/?$/, "compare"],
  [/^\/pipelines\/?$/, "pipelines"],
  [/^\/pipelines\/([^/]+)$/, "pipeline", ["id"]],
  [/^\/queues\/?$/, "queues"],
  [/^\/nodes\/?$/, "nodes"],
  [/^\/usage\/?$/, "usage"],
  [/^\/secrets\/?$/, "secrets"],
  [/^\/notifications\/?$/, "notifications"],
  [/^\/submit\/?$/, "submit"],
  [/^\/services\/?$/, "services"],
  [/^\/services\/([^/]+)$/, "service", ["name"]],
  [/^\/sweeps\/?$/, "sweeps"],
  [/^\/sweeps\/([^/]+)$/, "sweep", ["id"]],
  [/^\/schedules\/?$/, "schedules"],
  [/^\/schedules\/([^/]+)$/, "schedules", ["key"]],  // one module draws the list and one schedule
  [/^\/clusters\/?$/, "clusters"],
  [/^\/clusters\/([^/]+)$/, "clusters", ["key"]],
  [/^\/account\/?$/, "account"],
  [/^\/users\/?$/, "users"],
  [/^\/login\/?$/, "login"],
];

let cleanup = null;
let seq = 0;

function match(path) {
  for (const [re, page, names = []] of ROUTES) {
    const m = path.match(re);
    if (m) return { page, params: Object.fromEntries(names.map((n, i) => [n, decodeURIComponent(m[i + 1])])) };
  }
  return null;
}

export async function show() {
  const mine = ++seq;
  if (cleanup) { try { cleanup(); } catch (e) { console.error(e); } cleanup = null; }
  const root = document.getElementById("app");
  const route = match(location.pathname);
  document.querySelectorAll("#nav a").forEach((a) => {
    // a list's link stays lit on one item's page (jobs on /jobs/ID, sweeps on /sweeps/ID…)
    a.classList.toggle("active", Boolean(route) && (a.dataset.nav === route.page || a.dataset.nav === `${route.page}s`));
  });
  if (!route) {
    root.replaceChildren(Object.assign(document.createElement("p"), { className: "error", textContent: `No page at ${location.pathname}` }));
    return;
  }
  try {
    const mod = await import(`./pages/${route.page}.js`);
    if (mine !== seq) return;  // the user went elsewhere while it loaded
    // a view of its own for each page: a render still awaiting the API when the user goes on then
    // draws into a node no longer shown, not over the page that replaced it
    const view = document.createElement("div");
    root.replaceChildren(view);
    const query = new URLSearchParams(location.search);
    const done = (await mod.render(view, { params: route.params, query })) || null;
    if (mine !== seq) {  // gone elsewhere meanwhile: its timers and streams stop now
      if (done) { try { done(); } catch (e) { console.error(e); } }
      return;
    }
    cleanup = done;
  } catch (e) {
    if (mine !== seq) return;
    if (e.status !== 404) console.error(e);  // a thing not there is said on the page, not a fault of the page
    root.replaceChildren(failed(e, route.page));
  }
}

// What a page that could not be drawn says: a thing that is not there (deleted, mistyped, another team's) leads back
// to its list; anything else names the failure
const LISTS = {
  job: ["/jobs", "All jobs"], pipeline: ["/pipelines", "All pipeline runs"], sweep: ["/sweeps", "All sweeps"],
  service: ["/services", "All services"], schedules: ["/schedules", "All schedules"],
  clusters: ["/clusters", "All clusters"],
};
function failed(e, page) {
  const p = Object.assign(document.createElement("p"), { className: "error" });
  const list = e.status === 404 && LISTS[page];
  if (!list) { p.textContent = `This page failed: ${e.message}`; return p; }
  p.classList.add("gone");
  const a = Object.assign(document.createElement("a"), { href: list[0], textContent: list[1] });
  p.append(`Not found: ${e.message}. It may have been deleted, or belong to a team you are not in. `, a);
  return p;
}

// Go to `url` inside the app (pushState), or replace the current entry (filters changing)
export function navigate(url, { replace = false } = {}) {
  history[replace ? "replaceState" : "pushState"](null, "", url);
  show();
}

document.addEventListener("click", (e) => {
  const a = e.target.closest("a");
  if (!a || e.defaultPrevented || e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || a.target || a.hasAttribute("download")) return;
  const url = new URL(a.href, location.href);
  if (url.origin !== location.origin || url.pathname.startsWith("/api/") || url.pathname.startsWith("/serve/")) return;
  e.preventDefault();
  navigate(url.pathname + url.search);
});
window.addEventListener("popstate", show);

window.addEventListener("trainyard:unauthorized", () => {
  if (location.pathname !== "/login") navigate(`/login?next=${encodeURIComponent(location.pathname + location.search)}`);
});

// Who is signed in, in the header (a link to their account page), with the way out while this browser keeps a
// token; the Users page's link for an admin
export function signedIn(user, admin = false) {
  const el = document.getElementById("who");
  el.textContent = user || "";
  el.title = user ? "signed in: your account and tokens" : "";
  document.getElementById("signout").hidden = !(user && token());
  document.querySelector("#nav a[data-nav=users]").hidden = !admin;
}

// The server clears the /serve/ pages' cookie (HttpOnly: no script here can), asked while the token
// still works; then the token is forgotten whatever the answer, and the sign-in page shows
async function signOut() {
  try {
    await api("serve-session", { method: "DELETE" });
  } catch (e) {
    if (e.status !== 401) toast(e);  // a token no longer valid: its cookie opens nothing either
  }
  setToken(null);
  sessionStorage.removeItem("trainyard.serve-retry");
  signedIn("");
  navigate("/login");
}
document.getElementById("signout").addEventListener("click", signOut);

async function whoami() {
  try {
    const me = await api("whoami");
    signedIn(me.user, me.admin);
    if (token()) api("serve-session", { method: "POST" }).catch(() => {});  // keeps /serve/ pages' cookie fresh
  } catch (e) {
    if (e.status !== 401) toast(e, { once: true });
  }
}

// a link's token first: the page it opens reads the API as whoever the person chose to be
takeTokenFromHash().catch((e) => toast(e)).then(() => {
  show();
  if (token() || location.pathname !== "/login") whoami();
});
