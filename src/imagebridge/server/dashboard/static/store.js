// The few values several views share, behind one small interface.
//
// Each value has a name fixed here and is replaced whole by set(); views that must follow
// a value subscribe to it instead of reading a global object that anyone may change.
// Values one view owns (its inputs, its caches) stay private to that view's module.

const values = new Map([
  ["providers", []],
  ["defaultProvider", ""],
  ["capabilities", null],
  ["diagnostics", null],
  ["paused", false],
]);
const listeners = new Map();

function known(name) {
  if (!values.has(name)) throw new Error(`the page store has no value named ${name}`);
}

/** The current value of `name`. */
export function get(name) {
  known(name);
  return values.get(name);
}

/** Replace `name` and tell its subscribers. */
export function set(name, value) {
  known(name);
  values.set(name, value);
  for (const listener of listeners.get(name) || []) listener(value);
}

/** Call `listener(value)` whenever `name` is set; returns the function that stops it. */
export function subscribe(name, listener) {
  known(name);
  if (!listeners.has(name)) listeners.set(name, new Set());
  listeners.get(name).add(listener);
  return () => listeners.get(name).delete(listener);
}
