// The documented JSON API under /api/v1, called with the token the user signed in with.
// The token lives in sessionStorage: it is gone when the tab closes.

const TOKEN = "astraeus.token";
const WORKSPACE = "astraeus.workspace";

export function session() {
  return {
    token: sessionStorage.getItem(TOKEN) || "",
    workspace: sessionStorage.getItem(WORKSPACE) || "",
  };
}

export function signIn(token, workspace) {
  sessionStorage.setItem(TOKEN, token);
  if (workspace) sessionStorage.setItem(WORKSPACE, workspace);
  else sessionStorage.removeItem(WORKSPACE);
}

export function signOut() {
  sessionStorage.removeItem(TOKEN);
  sessionStorage.removeItem(WORKSPACE);
}

/** An answer of 4xx or 5xx: the API's `error` sentence and its `fields` list. */
export class ApiError extends Error {
  constructor(status, body) {
    super(body && body.error ? body.error : `the coordinator answered ${status}`);
    this.status = status;
    this.fields = (body && Array.isArray(body.fields)) ? body.fields : [];
  }
}

export async function api(method, path, body) {
  const { token, workspace } = session();
  const url = new URL(`/api/v1${path}`, window.location.origin);
  // Admins act in the workspace they named at sign-in; a member's token already has one.
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
    throw new ApiError(0, { error: `cannot reach the coordinator: ${err.message}` });
  }
  const text = await response.text();
  let data = null;
  try {
    data = text ? JSON.parse(text) : null;
  } catch {
    data = { error: text.slice(0, 200) };
  }
  if (response.status === 401) {
    // The token was revoked or mistyped: forget it; the shell asks to sign in again.
    signOut();
    window.dispatchEvent(new CustomEvent("astraeus:refused", { detail: data && data.error }));
  }
  if (!response.ok) throw new ApiError(response.status, data);
  return data;
}

export const get = (path) => api("GET", path);
export const post = (path, body) => api("POST", path, body);

export function enc(name) {
  return encodeURIComponent(name);
}

/** Every machine the token may see, as the list shows them: GPUs counted by model and health,
 * topology; no GPU table, no report (that is each machine's detail). */
export async function machineList() {
  return (await get("/machines")).machines;
}
