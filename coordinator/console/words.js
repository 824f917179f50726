// Words for people: the API's errors as sentences a user can act on. The API's texts are for
// programs and the CLI; nothing here shows a regular expression or a header's syntax.

const NAME_PATTERN = "^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$";

// What a value that does not match a pattern should look like, by the pattern the API names.
const SHAPES = new Map([
  [NAME_PATTERN, "Use lowercase letters, digits and '-', up to 63 characters, starting and ending with a letter or digit."],
  ["^[A-Za-z_][A-Za-z0-9_]*$", "Use letters, digits and '_', not starting with a digit."],
  ["^/", "Start with '/': give an absolute path."],
  ["^(admin|member|agent)$", "Use admin, member or agent."],
]);

// A field's problem: [the API's text, the sentence]. The sentence may use what the text held.
const PROBLEMS = [
  [/^'(.*)' does not match (.+)$/s, (_, value, pattern) => SHAPES.get(pattern) || `'${value}' is not in the form this field takes.`],
  [/^is required for an admin$/, () => "An admin acts in a workspace: name one."],
  [/^is required$/, () => "Fill this in."],
  [/^must be at least (\S+), got .*$/s, (_, n) => `Use a number of at least ${n}.`],
  [/^must be at most (\S+), got .*$/s, (_, n) => `Use a number of at most ${n}.`],
  [/^must be more than (\S+), got .*$/s, (_, n) => `Use a number above ${n}.`],
  [/^must be less than (\S+), got .*$/s, (_, n) => `Use a number below ${n}.`],
  [/^at most (\S+) in workspace (\S+), got \S+$/, (_, n, ws) => `Workspace ${ws} allows a priority of at most ${n}.`],
  [/^is already used in this workspace; by a run that is (\w+): (.*)$/s, (_, state, rest) => `A run of this name is ${state}: ${rest}.`],
  [/^is already used in this workspace; (.*)$/, (_, rest) => `This name is already used in this workspace: ${rest}.`],
  [/^has not ended; (.*)$/, (_, rest) => `This run has not ended: ${rest}.`],
  [/^is not valid JSON$|^must be a JSON object$/, () => RELOAD],
  [/^min_per_machine \((\d+)\) is more than count \((\d+)\)/, (_, per, all) => `${per} GPUs on one machine is more than the ${all} the run asks for: give at most ${all}.`],
  [/^min_nodes \((\d+)\) is more than max_nodes \((\d+)\)/, (_, low, high) => `At least ${low} machines is more than at most ${high}: make the first no more than the second.`],
  [/^a reservation for a workspace needs starts_at and ends_at$/, () => "A reservation for a workspace needs a start and an end."],
  [/^a reservation needs labels, or a workspace/, () => "A reservation needs labels, or a workspace with a start and an end."],
  [/^starts_at must be before ends_at$/, () => "The start must be before the end."],
  [/^per_gpu needs GPUs/, () => "CPU and memory per GPU need GPUs: set GPUs, or give CPU and memory for the whole worker."],
  [/^must name an existing workspace/, () => "Name a workspace that exists."],
];

const RELOAD = "The console sent something the coordinator could not read. Reload the page and try again.";
const UNKNOWN_TOKEN = "This token is not known here. Ask an admin for a workspace token.";

// The whole answer's `error`: [the API's text, the sentence].
const ERRORS = [
  [/^missing or unknown bearer token/, () => UNKNOWN_TOKEN],
  [/^this needs an admin token$/, () => "Only an admin can do this. Sign in with an admin token to do it."],
  [/^an agent token may only report/, () => "This is a machine's agent token: it only reports for its machine. Sign in with a workspace token."],
  [/^an admin must name the workspace$/, () => "An admin acts in a workspace: name one when you sign in."],
  [/^no workspace named '(.*)'$/, (_, name) => `There is no workspace named ${name}. Check the name, or ask an admin which workspaces there are.`],
  [/^no run named '(.*)'$/, (_, name) => `There is no run named ${name} in this workspace.`],
  [/^no task named '(.*)'$/, (_, name) => `There is no task named ${name} in this workspace.`],
  [/^no machine named '(.*)'$/, (_, name) => `There is no machine named ${name} among the machines you may see.`],
  [/^no reservation named/, () => "That reservation is gone: someone removed it. The page shows what is left."],
  [/^send a JSON body|^body is not valid JSON$|^body must be a JSON object$/, () => RELOAD],
  [/^request body is larger than/, () => "That is more than the coordinator takes in one request: make it shorter."],
  [/^invalid \w+$|^priority too high$/, () => "Some fields need a change: see the notes beside them."],
];

/** The API's answer (`status`, `body` with `error` and `fields`) in words for people. */
export function forPeople(status, body) {
  const error = body && typeof body.error === "string" ? body.error : "";
  const fields = body && Array.isArray(body.fields) ? body.fields : [];
  return {
    error: errorSentence(status, error),
    // `said` keeps the API's text: the names of fields in it say where a problem goes.
    fields: fields.map(({ field = "", problem = "" }) => ({ field, problem: problemSentence(problem), said: problem })),
  };
}

function errorSentence(status, error) {
  if (status === 0) return "Cannot reach the coordinator. Check that it is running and that this page's address is right, then try again.";
  if (status === 401) return UNKNOWN_TOKEN;
  if (status >= 500) return `The coordinator could not answer (error ${status}). Try again; if it keeps failing, tell an admin.`;
  const found = ERRORS.find(([pattern]) => pattern.test(error));
  if (found) return found[1](...error.match(found[0]));
  if (status === 404 && !error.startsWith("no ")) return "The coordinator has no such page: it may be older than this console.";
  return error ? sentence(error) : `The coordinator refused this (error ${status}).`;
}

/** One field's problem as a sentence. */
export function problemSentence(problem) {
  const found = PROBLEMS.find(([pattern]) => pattern.test(problem));
  return found ? found[1](...problem.match(found[0])) : sentence(problem);
}

/** A capital first letter (unless it starts with a field's name) and a full stop. */
export function sentence(text) {
  const cleaned = text.trim();
  if (!cleaned) return "";
  const first = cleaned.split(/\s/, 1)[0];
  const named = /[_.'(]/.test(first) || first !== first.toLowerCase();
  const start = named ? cleaned : cleaned[0].toUpperCase() + cleaned.slice(1);
  return /[.!?]$/.test(start) ? start : `${start}.`;
}
