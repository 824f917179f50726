// The console's shell: sign in, the hash router, and the pages' refresh timers.

import { ApiError, enc, get, getIn, isAdmin, session, setWorkspace, signIn, signOut } from "./api.js";
import { errorBox, h, mount } from "./dom.js";
import { fieldBox, showErrors } from "./forms.js";
import { machinePage, machinesPage, mapPage } from "./machines.js";
import { newRunPage } from "./newrun.js";
import { runPage } from "./runpage.js";
import { runsPage } from "./runs.js";
import { usagePage } from "./usage.js";

// [hash, the nav link it lights, the page, whether it acts in a workspace]
const ROUTES = [
  [/^#\/map$/, "map", mapPage, false],
  [/^#\/runs\/?$/, "runs", runsPage, true],
  [/^#\/new$/, "new", newRunPage, true],
  [/^#\/runs\/([a-z0-9-]+)$/, "runs", runPage, true],
  // A run's link in the guide's form (`<console_url>jobs/<cluster>/<run>`, sent here by the
  // server): it names the cluster, any text; the workspace is found, so it asks for none.
  [/^#\/jobs\/([^/]+)\/([a-z0-9-]+)$/, "runs", jobPage, false],
  [/^#\/machines$/, "machines", machinesPage, false],
  [/^#\/machines\/(.+)$/, "machines", machinePage, false],
  [/^#\/usage$/, "usage", usagePage, false],
];

let generation = 0;
let cleanup = null;
let signingIn = false;

/** What a page gets: where to draw, whether it is still the page shown, and a refresh timer. */
function context(main) {
  const mine = ++generation;
  const alive = () => mine === generation;
  return {
    main,
    alive,
    // Calls `step` now and again every `ms` while it answers true and the page is shown.
    every(ms, step) {
      if (!alive()) return Promise.resolve();
      let timer = null;
      const tick = async () => {
        if (!alive()) return;
        const again = await step();
        if (again && alive()) timer = setTimeout(tick, ms);
      };
      cleanup = () => clearTimeout(timer);
      return tick();
    },
  };
}

async function render() {
  if (cleanup) cleanup();
  cleanup = null;
  const main = document.getElementById("main");
  main.className = ""; // a page that needs the whole width (the map, the table) asks for it
  const { token, workspace } = session();
  const signedIn = Boolean(token);
  showSignedIn(signedIn, workspace);
  signingIn = !signedIn;
  if (!signedIn) {
    signInPage(context(main));
    return;
  }
  // Admins start on the cluster map, members on their workspace's runs.
  const hash = window.location.hash.length > 2 ? window.location.hash : isAdmin() ? "#/map" : "#/runs";
  for (const [pattern, nav, page, inWorkspace] of ROUTES) {
    const match = hash.match(pattern);
    if (!match) continue;
    for (const link of document.querySelectorAll("[data-nav]")) {
      link.classList.toggle("current", link.dataset.nav === nav);
    }
    if (inWorkspace && isAdmin() && !workspace) {
      await workspacePage(context(main));
      return;
    }
    const names = decoded(match.slice(1));
    if (names === null) break; // a `%` that escapes nothing: no page of ours
    await page(context(main), ...names);
    return;
  }
  notFound(main, "No page here.");
}

/** The route's names, unescaped; null if one is not validly escaped. */
function decoded(parts) {
  try {
    return parts.map(decodeURIComponent);
  } catch {
    return null;
  }
}

function notFound(main, what) {
  mount(main, h("h1", {}, "Not found"), h("p", {}, `${what} `, h("a", { href: "#/runs" }, "See the runs.")));
}

/** A link to a run in the guide's form, `jobs/<cluster>/<run>`. Another cluster's link is Not
 * found, saying which cluster this console serves. Else the run opens in the visitor's
 * workspace: a member's token has one, and a run it may not see reads as one that does not
 * exist (nothing is told of other workspaces). An admin's current workspace is tried first;
 * then every workspace: one has the run, the admin now acts there and the run opens; several
 * have one, the admin chooses; none, Not found. */
async function jobPage(ctx, cluster, name) {
  mount(ctx.main, h("p", { class: "muted" }, "Loading…"));
  let found;
  try {
    const here = (await get("/cluster")).name;
    if (!ctx.alive()) return;
    if (cluster !== here) {
      notFound(ctx.main, `This console serves cluster ${here}; the link is for cluster ${cluster}.`);
      return;
    }
    found = await workspacesWithRun(name);
  } catch (err) {
    if (ctx.alive()) mount(ctx.main, errorBox(err));
    return;
  }
  if (!ctx.alive()) return;
  if (found.length === 0) {
    notFound(ctx.main, `There is no run ${name} that you may see.`);
    return;
  }
  if (found.length === 1) {
    if (isAdmin()) setWorkspace(found[0]);
    // The run's own page, in place of this one in the history (Back does not come here again).
    window.location.replace(`#/runs/${enc(name)}`);
    return;
  }
  const choices = found.map((workspace) =>
    h("li", {}, h("a", { href: `#/runs/${enc(name)}`, "data-workspace": workspace, onclick: () => setWorkspace(workspace) }, workspace)),
  );
  mount(
    ctx.main,
    h("h1", {}, `Runs named ${name}`),
    h("p", {}, `${found.length} workspaces have a run named ${name}. Choose the workspace to open it in:`),
    h("ul", { id: "run-workspaces" }, choices),
  );
}

/** The workspaces in which this token sees a run of that name: for a member, its own or none
 * ("" stands for it); for an admin, the current workspace if it has one, else every workspace
 * that does, asked a few at a time. */
async function workspacesWithRun(name) {
  if (!isAdmin()) return (await hasRun("", name)) ? [""] : [];
  const current = session().workspace;
  if (current && (await hasRun(current, name))) return [current];
  const { workspaces } = await get("/workspaces");
  const others = workspaces.map((w) => w.name).filter((w) => w !== current);
  const found = [];
  for (let i = 0; i < others.length; i += ASKED_AT_ONCE) {
    const batch = others.slice(i, i + ASKED_AT_ONCE);
    const has = await Promise.all(batch.map((w) => hasRun(w, name)));
    found.push(...batch.filter((_, j) => has[j]));
  }
  return found;
}

/** How many workspaces an admin's run link asks at once. */
const ASKED_AT_ONCE = 8;

/** Whether the run is there for this token: 404 is no (no such run, or one it may not see). */
async function hasRun(workspace, name) {
  try {
    await getIn(workspace, `/runs/${enc(name)}`);
    return true;
  } catch (err) {
    if (err.status === 404) return false;
    throw err;
  }
}

/** Nav, the workspace and Sign out show only to someone signed in. */
function showSignedIn(signedIn, workspace = "") {
  document.getElementById("nav").hidden = !signedIn;
  document.getElementById("sign-out").hidden = !signedIn;
  const who = [isAdmin() ? "admin" : "", workspace ? `workspace ${workspace}` : ""].filter(Boolean).join(", ");
  document.getElementById("who").textContent = signedIn ? who : "";
}

function signInPage(ctx, refused = "") {
  const token = h("input", { id: "token", name: "token", type: "password", autocomplete: "off", required: true });
  const workspace = h("input", { id: "workspace", name: "workspace", autocomplete: "off" });
  const form = h(
    "form",
    { class: "card narrow", novalidate: true },
    h("h1", {}, "Sign in"),
    h("p", { class: "form-error", role: "alert", hidden: true }),
    fieldBox("Token", token, { field: "token", hint: "Your API token: a workspace member's or an admin's." }),
    fieldBox("Workspace", workspace, { field: "workspace", hint: "Admins only, and optional: the workspace whose runs to see and start." }),
    h("button", { type: "submit", id: "sign-in" }, "Sign in"),
  );
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const secret = token.value.trim();
    if (!secret) {
      showErrors(form, new ApiError(400, { fields: [{ field: "token", problem: "is required" }] }));
      return;
    }
    try {
      await checkSignIn(secret, workspace.value.trim());
    } catch (err) {
      signOut();
      const fields = err.fields.length ? err.fields : [{ field: err.status === 401 ? "token" : "", problem: err.message }];
      showErrors(form, { message: err.fields.length ? err.message : "", fields });
      return;
    }
    render(); // the page asked for, or the home page
  });
  mount(ctx.main, form);
  if (refused) showErrors(form, { message: "", fields: [{ field: "token", problem: refused }] });
  token.focus();
}

/** Keep the token if the coordinator knows it, with its role (an admin may list workspaces)
 * and, for an admin, the workspace named, if it exists. Throws an ApiError otherwise. */
async function checkSignIn(secret, workspace) {
  signIn(secret, "");
  await get("/cluster");
  let admin = true;
  try {
    await get("/workspaces");
  } catch (err) {
    if (err.status !== 403) throw err;
    admin = false;
  }
  if (admin && workspace) {
    try {
      await get(`/workspaces/${encodeURIComponent(workspace)}`);
    } catch (err) {
      throw new ApiError(err.status, { error: err.said, fields: [{ field: "workspace", problem: err.message }] });
    }
  }
  signIn(secret, admin ? workspace : "", admin ? "admin" : "member");
}

/** An admin who named no workspace, on a page that acts in one: choose it here. */
async function workspacePage(ctx) {
  const select = h("select", { id: "choose-workspace" });
  const form = h(
    "form",
    { class: "card narrow", id: "workspace-form" },
    h("h1", {}, "Choose a workspace"),
    h("p", {}, "Runs belong to a workspace. Choose the one whose runs to see and start; the map and the machines need none."),
    fieldBox("Workspace", select, { field: "workspace" }),
    h("button", { type: "submit", id: "use-workspace" }, "Use this workspace"),
  );
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    if (!select.value) return;
    setWorkspace(select.value);
    render();
  });
  mount(ctx.main, form);
  try {
    const { workspaces } = await get("/workspaces");
    if (!ctx.alive()) return;
    select.append(...workspaces.map((w) => h("option", { value: w.name }, w.name)));
    if (!workspaces.length) mount(ctx.main, h("p", { class: "card narrow" }, "There is no workspace yet: an admin creates one with astra astraeus workspace set (see the operator guide)."));
  } catch (err) {
    if (ctx.alive()) mount(ctx.main, errorBox(err));
  }
}

document.getElementById("sign-out").addEventListener("click", () => {
  signOut();
  window.location.hash = "#/runs";
  render();
});
window.addEventListener("hashchange", render);
// A page's call answered 401: the token is no longer good. The sign-in form handles its own.
window.addEventListener("astraeus:refused", () => {
  if (signingIn) return;
  if (cleanup) cleanup();
  cleanup = null;
  signingIn = true;
  showSignedIn(false);
  signInPage(context(document.getElementById("main")), "This token is no longer accepted: it may have been revoked. Sign in again with a current token.");
});
render();
