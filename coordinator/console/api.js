// The documented JSON API under /api/v1, called with the token the user signed in with.
// The token lives in sessionStorage: it is gone when the tab closes.

import { forPeople } from "./words.js";

const TOKEN = "astraeus.token";
const WORKSPACE = "astraeus.workspace";
const ROLE = "astraeus.role";

export function session() {
  return {
    token: sessionStorage.getItem(TOKEN) || "",
    workspace: sessionStorage.getItem(WORKSPACE) || "",
    role: sessionStorage.getItem(ROLE) || "",
  };
}

export function signIn(token, workspace, role = "") {
  sessionStorage.setItem(TOKEN, token);
  if (workspace) sessionStorage.setItem(WORKSPACE, workspace);
  else sessionStorage.removeItem(WORKSPACE);
  if (role) sessionStorage.setItem(ROLE, role);
  else sessionStorage.removeItem(ROLE);
}

export function setWorkspace(workspace) {
  sessionStorage.setItem(WORKSPACE, workspace);
}

export function signOut() {
  for (const key of [TOKEN, WORKSPACE, ROLE]) sessionStorage.removeItem(key);
}

/** Whether the signed-in token is an admin's: what decides if admin controls are shown (the
 * API decides what they may do). */
export function isAdmin() {
  return session().role === "admin";
}

/** An answer of 4xx or 5xx, in words for people: `message` and `fields` ({field, problem}) are
 * sentences a user can act on; `said` is the API's own text. */
export class ApiError extends Error {
  constructor(status, body) {
    const words = forPeople(status, body);
    super(words.error);
    this.status = status;
    this.fields = words.fields;
    this.said = body && typeof body.error === "string" ? body.error : "";
  }
}

/** A call to the API. `inWorkspace` names the workspace to act in for this call only (an
 * admin's run link looks for its run in each workspace); else an admin's is the one chosen,
 * and a member's token already has one. A member naming another workspace is answered 404, as
 * for any name the token may not see. */
export async function api(method, path, body, inWorkspace = "") {
  const { token } = session();
  const workspace = inWorkspace || session().workspace;
  const url = new URL(`/api/v1${path}`, window.location.origin);
  if (workspace) url.searchParams.set("workspace", workspace);
  const headers = { Accept: "application/json", Authorization: `Bearer ${token}` };
  const init = { method, headers, cache: "no-store" };
  if (body !== undefined) {
    headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  let response;
  try {
    response = await fetch(url, init);
  } catch (err) {
    throw new ApiError(0, { error: err.message });
  }
  const text = await response.text();
  let data = null;
  try {
    data = text ? JSON.parse(text) : null;
  } catch {
    data = null; // not the API's JSON: a proxy's page, say; the status tells what happened
  }
  if (response.status === 401) {
    // The token was revoked or mistyped: forget it; the shell asks to sign in again.
    signOut();
    window.dispatchEvent(new CustomEvent("astraeus:refused"));
  }
  if (!response.ok) throw new ApiError(response.status, data);
  return data;
}

export const get = (path) => api("GET", path);
/** GET in the named workspace, whatever the session's. */
export const getIn = (workspace, path) => api("GET", path, undefined, workspace);
export const post = (path, body) => api("POST", path, body);
export const put = (path, body) => api("PUT", path, body);
export const del = (path) => api("DELETE", path);

export function enc(name) {
  return encodeURIComponent(name);
}

/** Every machine the token may see, as the list shows them: GPUs counted by model and health,
 * topology; no GPU table, no report (that is each machine's detail). */
export async function machineList() {
  return (await get("/machines")).machines;
}


/** `GET /api/v1/cluster/map`: every visible machine with each GPU's health and holder. */
export function clusterMapData() {
  return get("/cluster/map");
}
