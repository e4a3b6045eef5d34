// The dashboard's HTTP client for the bridge's /v1 routes.
//
// The bearer token lives in this tab's sessionStorage and travels only in the
// Authorization header: images are fetched as authenticated blobs, so a token never
// appears in a URL. Every failure becomes an ApiError carrying the envelope's native
// code, message, details and suggestions. Listeners learn about the connection state
// ("online", "offline", "unauthorized") through "connection" events.

export const TOKEN_KEY = "imagegen-bridge.dashboard.bearer";
export const REQUEST_TIMEOUT_MS = 30000;
export const MAX_TOKEN_LENGTH = 4096;

/** A failed call: HTTP status 0 means the bridge could not be reached at all. */
export class ApiError extends Error {
  constructor(status, message, { code = "", details = {}, suggestions = [], retryable = false, requestId = "", param = null } = {}) {
    super(message);
    this.name = "ApiError";
    this.status = status;
    this.code = code;
    this.details = details || {};
    this.suggestions = suggestions || [];
    this.retryable = retryable;
    this.requestId = requestId;
    this.param = param;
  }

  /** Validation issues ({field, code, message}) when the bridge rejected a request. */
  get issues() {
    const issues = this.details && this.details.issues;
    return Array.isArray(issues) ? issues : [];
  }

  static async fromResponse(response) {
    const requestId = response.headers.get("x-request-id") || "";
    let body;
    try {
      body = await response.json();
    } catch {
      body = null;
    }
    const error = body && typeof body === "object" ? body.error : null;
    if (!error || typeof error !== "object") {
      return new ApiError(response.status, `The bridge answered HTTP ${response.status}.`, { requestId });
    }
    const native = error.imagegen_bridge && typeof error.imagegen_bridge === "object" ? error.imagegen_bridge : {};
    return new ApiError(response.status, String(error.message || `HTTP ${response.status}`), {
      code: String(native.code || error.code || ""),
      details: native.details || {},
      suggestions: Array.isArray(native.suggestions) ? native.suggestions.map(String) : [],
      retryable: native.retryable === true,
      requestId: String(body.request_id || requestId),
      param: error.param ?? null,
    });
  }
}

function segment(value) {
  return encodeURIComponent(String(value));
}

function queryString(query) {
  if (!query) return "";
  const params = new URLSearchParams();
  for (const [key, value] of Object.entries(query)) {
    if (value === undefined || value === null || value === "") continue;
    params.append(key, String(value));
  }
  const text = params.toString();
  return text ? `?${text}` : "";
}

function combinedSignal(signal, timeoutMs) {
  const timeout = AbortSignal.timeout(timeoutMs);
  if (!signal) return timeout;
  if (typeof AbortSignal.any === "function") return AbortSignal.any([signal, timeout]);
  return signal;
}

export class BridgeApi extends EventTarget {
  constructor({ storage = window.sessionStorage, timeoutMs = REQUEST_TIMEOUT_MS } = {}) {
    super();
    this.storage = storage;
    this.timeoutMs = timeoutMs;
    this.state = "connecting";
    this.viewKey = null; // the admin's view of one API key's work (?key=<id>), or null
  }

  /** The query of a read, with the key the admin is looking at (when it is). */
  _viewing(query = {}) {
    return this.viewKey ? { ...query, key: this.viewKey } : query;
  }

  get token() {
    try {
      return this.storage.getItem(TOKEN_KEY) || "";
    } catch {
      return "";
    }
  }

  setToken(token) {
    const value = String(token || "").trim();
    if (!value) {
      this.clearToken();
      return;
    }
    if (value.length > MAX_TOKEN_LENGTH || /[^\x21-\x7e]/.test(value)) {
      throw new ApiError(0, "A bearer token is visible ASCII without spaces, at most 4096 characters.", { code: "invalid_token" });
    }
    this.storage.setItem(TOKEN_KEY, value);
  }

  clearToken() {
    try {
      this.storage.removeItem(TOKEN_KEY);
    } catch {
      // storage may be unavailable (private mode); nothing to clear then
    }
  }

  _setState(state) {
    if (state === this.state) return;
    this.state = state;
    this.dispatchEvent(new CustomEvent("connection", { detail: state }));
  }

  async _fetch(method, path, { query, json, headers = {}, signal } = {}) {
    const sent = { Accept: "application/json", ...headers };
    const token = this.token;
    if (token) sent.Authorization = `Bearer ${token}`;
    const init = { method, headers: sent, credentials: "omit", cache: "no-store", signal: combinedSignal(signal, this.timeoutMs) };
    if (json !== undefined) {
      sent["Content-Type"] = "application/json";
      init.body = JSON.stringify(json);
    }
    let response;
    try {
      response = await fetch(path + queryString(query), init);
    } catch (cause) {
      if (signal && signal.aborted) throw cause;
      this._setState("offline");
      const timedOut = cause && cause.name === "TimeoutError";
      throw new ApiError(0, timedOut ? "The bridge did not answer in time." : "The bridge could not be reached.", { code: timedOut ? "timeout" : "network" });
    }
    if (response.status === 401) {
      this._setState("unauthorized");
      this.dispatchEvent(new CustomEvent("unauthorized"));
    } else {
      this._setState("online");
    }
    if (!response.ok) throw await ApiError.fromResponse(response);
    return response;
  }

  /** JSON body of a successful call, or null for an empty (204) answer. */
  async json(method, path, options = {}) {
    const response = await this._fetch(method, path, options);
    if (response.status === 204) return null;
    const text = await response.text();
    return text ? JSON.parse(text) : null;
  }

  /** An image as a Blob; with allowMissing, a 404 yields null instead of an error. */
  async blob(path, { query, signal, allowMissing = false } = {}) {
    try {
      const response = await this._fetch("GET", path, { query, signal, headers: { Accept: "image/*" } });
      return await response.blob();
    } catch (error) {
      if (allowMissing && error instanceof ApiError && error.status === 404) return null;
      throw error;
    }
  }

  // -- providers and diagnostics ---------------------------------------------------------
  providers() {
    return this.json("GET", "/v1/providers", { query: { limit: 100 } });
  }

  capabilities(provider, model) {
    return this.json("GET", `/v1/providers/${segment(provider)}/capabilities`, { query: { model } });
  }

  async diagnostics() {
    // The extended document: the original's keys plus circuit breakers, leases and each
    // provider's extras (quota windows), which the system view shows. It is the operator's:
    // a named API key gets 403 and reads the original's document instead, its own view of
    // it (readiness, queues, its own requests; docs/keys.md "Operator views").
    try {
      return await this.json("GET", "/v1/diagnostics/extended");
    } catch (error) {
      if (error instanceof ApiError && error.status === 403) return this.json("GET", "/v1/diagnostics");
      throw error;
    }
  }

  // -- API keys (admin only; a key gets 403) ----------------------------------------------
  listKeys() {
    return this.json("GET", "/v1/keys");
  }

  createKey(body) {
    return this.json("POST", "/v1/keys", { json: body });
  }

  revokeKey(id) {
    return this.json("DELETE", `/v1/keys/${segment(id)}`);
  }

  keyUsage(query = {}) {
    return this.json("GET", "/v1/usage", { query });
  }

  // -- jobs ------------------------------------------------------------------------------
  listJobs({ limit = 24, cursor, status, hidden = false, favorite = false, search } = {}) {
    return this.json("GET", "/v1/jobs", {
      query: this._viewing({
        limit,
        cursor,
        status,
        visibility: hidden ? "hidden" : "active",
        favorite: favorite ? "true" : undefined,
        search,
      }),
    });
  }

  getJob(id, options = {}) {
    return this.json("GET", `/v1/jobs/${segment(id)}`, { ...options, query: this._viewing(options.query) });
  }

  createJob(request) {
    const headers = {};
    if (request.idempotency_key) headers["Idempotency-Key"] = request.idempotency_key;
    return this.json("POST", "/v1/jobs", { json: request, headers });
  }

  cancelJob(id) {
    return this.json("DELETE", `/v1/jobs/${segment(id)}`);
  }

  updateJob(id, update) {
    return this.json("PATCH", `/v1/jobs/${segment(id)}`, { json: update });
  }

  partialPreview(id) {
    return this.blob(`/v1/jobs/${segment(id)}/partial`, { query: this._viewing(), allowMissing: true });
  }

  artifact(id) {
    return this.blob(`/v1/artifacts/${segment(id)}`, { query: this._viewing() });
  }

  thumbnail(id, edge = 640) {
    return this.blob(`/v1/artifacts/${segment(id)}/thumbnail`, { query: this._viewing({ edge }) });
  }

  // -- presets ---------------------------------------------------------------------------
  async listPresets({ maxPages = 20 } = {}) {
    const items = [];
    let cursor;
    for (let page = 0; page < maxPages; page += 1) {
      const body = await this.json("GET", "/v1/presets", { query: { limit: 100, cursor } });
      items.push(...(body.items || []));
      if (!body.next_cursor) break;
      cursor = body.next_cursor;
    }
    return items;
  }

  createPreset(preset) {
    return this.json("POST", "/v1/presets", { json: preset });
  }

  replacePreset(name, body) {
    return this.json("PUT", `/v1/presets/${segment(name)}`, { json: body });
  }

  deletePreset(name) {
    return this.json("DELETE", `/v1/presets/${segment(name)}`);
  }

  // -- sessions --------------------------------------------------------------------------
  session(key, provider) {
    return this.json("GET", `/v1/sessions/${segment(key)}`, { query: { provider } });
  }

  deleteSession(key, provider) {
    return this.json("DELETE", `/v1/sessions/${segment(key)}`, { query: { provider } });
  }
}
