// The bridge's request bounds, as the server wrote them into this page.
//
// The dashboard route fills <meta name="imagebridge-limits"> from the running bridge's
// configuration (runtime.request.*, server.max_body_bytes), so the composer counts and
// checks against the values this bridge enforces rather than copies kept in JavaScript.

const NAMES = ["prompt_bytes", "negative_prompt_bytes", "identifier_bytes", "inputs", "outputs", "timeout_ms", "body_bytes", "api_keys"];

function read() {
  const element = document.querySelector('meta[name="imagebridge-limits"]');
  const parsed = element ? JSON.parse(element.content || "null") : null;
  if (!parsed || typeof parsed !== "object") throw new Error("the page carries no request limits from the bridge");
  const limits = {};
  for (const name of NAMES) {
    if (!Number.isInteger(parsed[name]) || parsed[name] < 0) throw new Error(`the bridge sent no valid limit ${name}`);
    limits[name] = parsed[name];
  }
  return Object.freeze(limits);
}

const LIMITS = read();

/** The bounds of the bridge that served this page (read once, when the page loads). */
export function serverLimits() {
  return LIMITS;
}
