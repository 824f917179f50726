// The console's shell: sign in, the hash router, and the pages' refresh timers.

import { ApiError, get, session, signIn, signOut } from "./api.js";
import { h, mount } from "./dom.js";
import { fieldBox, showErrors } from "./forms.js";
import { machinesPage } from "./machines.js";
import { newRunPage } from "./newrun.js";
import { runPage } from "./runpage.js";
import { runsPage } from "./runs.js";

const ROUTES = [
  [/^#\/runs\/?$/, "runs", runsPage],
  [/^#\/new$/, "new", newRunPage],
  [/^#\/runs\/([a-z0-9-]+)$/, "runs", runPage],
  [/^#\/machines$/, "machines", machinesPage],
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
  const { token, workspace } = session();
  const signedIn = Boolean(token);
  document.getElementById("nav").hidden = !signedIn;
  document.getElementById("sign-out").hidden = !signedIn;
  document.getElementById("who").textContent = signedIn && workspace ? `workspace ${workspace}` : "";
  signingIn = !signedIn;
  if (!signedIn) {
    signInPage(context(main));
    return;
  }
  const hash = window.location.hash || "#/runs";
  for (const [pattern, nav, page] of ROUTES) {
    const match = hash.match(pattern);
    if (!match) continue;
    for (const link of document.querySelectorAll("[data-nav]")) {
      link.classList.toggle("current", link.dataset.nav === nav);
    }
    await page(context(main), ...match.slice(1).map(decodeURIComponent));
    return;
  }
  mount(main, h("h1", {}, "Not found"), h("p", {}, "No page here. ", h("a", { href: "#/runs" }, "See the runs.")));
}

function signInPage(ctx, refused = "") {
  const token = h("input", { id: "token", name: "token", type: "password", autocomplete: "off", required: true });
  const workspace = h("input", { id: "workspace", name: "workspace", autocomplete: "off" });
  const form = h(
    "form",
    { class: "card narrow", novalidate: true },
    h("h1", {}, "Sign in"),
    h("p", { class: "form-error", role: "alert", hidden: true }),
    fieldBox("Token", token, { field: "token", hint: "Your API token: an admin or workspace member token." }),
    fieldBox("Workspace", workspace, { field: "workspace", hint: "Admins only: the workspace to act in." }),
    h("button", { type: "submit", id: "sign-in" }, "Sign in"),
  );
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const secret = token.value.trim();
    if (!secret) {
      showErrors(form, new ApiError(400, { error: "", fields: [{ field: "token", problem: "is required" }] }));
      return;
    }
    signIn(secret, workspace.value.trim());
    try {
      await get("/runs");
    } catch (err) {
      signOut();
      const fields = err.fields.length ? err.fields : [{ field: err.status === 401 ? "token" : "", problem: err.message }];
      showErrors(form, new ApiError(err.status, { error: err.message, fields }));
      return;
    }
    render(); // the page asked for, or the runs
  });
  mount(ctx.main, form);
  if (refused) showErrors(form, new ApiError(401, { error: "", fields: [{ field: "token", problem: `${refused} Sign in again.` }] }));
  token.focus();
}

document.getElementById("sign-out").addEventListener("click", () => {
  signOut();
  window.location.hash = "#/runs";
  render();
});
window.addEventListener("hashchange", render);
// A page's call answered 401: the token is no longer good. The sign-in form handles its own.
window.addEventListener("astraeus:refused", (event) => {
  if (signingIn) return;
  if (cleanup) cleanup();
  cleanup = null;
  signingIn = true;
  for (const id of ["nav", "sign-out"]) document.getElementById(id).hidden = true;
  document.getElementById("who").textContent = "";
  signInPage(context(document.getElementById("main")), event.detail || "Your token was refused.");
});
render();
