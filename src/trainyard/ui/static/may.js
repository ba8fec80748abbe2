// What the signed-in person may do, read in the page by the server's own rule (trainyard/auth/permissions.py,
// Caller.may) from /api/v1/whoami ({user, admin, teams: {team: role}}) and a thing's owner and team: an admin
// anything; in the thing's team a viewer nothing, a member what it submitted, a maintainer all of the team's.
// Pages disable what the server would refuse (403) and say why in the button's title, so a click never fails
// for a reason known beforehand. The server still decides: it refuses as before whatever a page shows.
import { api } from "./api.js";

const DEFAULT_QUEUE = "default";  // takes any team's jobs: the one submitting picks the team (services/queues.py)

// Who is signed in, read once by a page; null where it cannot be read, and then every action is offered (a page
// must not block on a guess: the server's answer says why). A 401 still throws, as every read's does.
export async function whoami() {
  try { return await api("whoami"); } catch (e) { if (e.status === 401) throw e; return null; }
}

// Why `me` may not `verb` (cancel, delete, pause…) this `noun` (job, sweep…) of {owner, team}; null when it may
export function whyNot(me, verb, noun, { owner, team } = {}) {
  if (!me || me.admin) return null;
  const role = team ? me.teams[team] : undefined;
  if (!role) return team ? `you are not in team ${team}, so you cannot ${verb} its ${noun}s`
    : `only admins ${verb} ${noun}s of no team`;
  if (role === "viewer") return `viewers cannot ${verb} ${noun}s`;
  if (role === "maintainer" || owner === me.user) return null;
  return `members ${verb} only their own ${noun}s; this one is ${owner || "the server"}'s `
    + `(a maintainer of ${team} may)`;
}

// Why `me` may not submit a job like `job` ({team, queue}: its own team's queue, or the default queue, which takes
// any team's job); with no job, why it may submit none at all; null when it may
export function whyNotSubmit(me, { team, queue } = {}) {
  if (!me || me.admin) return null;
  const teams = Object.keys(me.teams);
  const submitting = teams.filter((t) => me.teams[t] !== "viewer");
  if (!submitting.length) return teams.length ? "viewers cannot submit jobs"
    : "you belong to no team, so you cannot submit jobs: an admin adds you to one";
  if (!team || queue === DEFAULT_QUEUE || submitting.includes(team)) return null;
  return me.teams[team] ? `viewers of team ${team} cannot submit to its queues`
    : `you are not in team ${team}, so you cannot submit to its queues`;
}

// Why `me` may not change team `team`'s secrets (a maintainer's to set; no team's, an admin's); null when it may
export function whyNotSecrets(me, team) {
  if (!me || me.admin) return null;
  if (!team) return "only admins change secrets of no team";
  const role = me.teams[team];
  if (role === "maintainer") return null;
  return role ? `${role}s cannot change team ${team}'s secrets (maintainers do)` : `you are not in team ${team}`;
}

// `attrs` for a button that `why` (a whyNot… answer) may forbid: disabled with the reason as its title, else as
// given (`disabled` by the thing's state, a `title` saying what it does)
export function gated(why, attrs) {
  return why ? { ...attrs, disabled: true, title: why } : attrs;
}
