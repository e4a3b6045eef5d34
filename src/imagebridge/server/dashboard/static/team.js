// The Team view: the admin's API keys (docs/keys.md). On a bridge with keys (the page's
// limits say so) it is shown only when GET /v1/keys answers, which it does for the admin
// key alone (a key gets 403): keys with their remaining images per window, revoke, create (the secret shown
// once, never stored by the page), and a per-day usage chart.

import { ApiError } from "./api.js";
import { api } from "./bridge.js";
import { gallery } from "./gallery.js";
import { serverLimits } from "./limits.js";
import { $, confirmAction, describeError, formatTime, h, table, toast } from "./ui.js";

const WINDOWS = ["day", "week", "month"];
const CHART_DAYS = 14;

function remainingText(key) {
  const parts = WINDOWS.filter((window) => key.remaining && key.remaining[window]).map((window) => {
    const entry = key.remaining[window];
    return `${entry.remaining}/${entry.limit} this ${window}`;
  });
  return parts.length ? parts.join(" · ") : "unlimited";
}

function revokeButton(key) {
  if (key.state !== "active") return key.state;
  return h("button", {
    type: "button",
    class: "danger",
    text: "Revoke",
    dataset: { key: key.name },
    onclick: async () => {
      if (!(await confirmAction("Revoke key", `Revoke ${key.name}? Its next request is refused.`, "Revoke"))) return;
      try {
        await api.revokeKey(key.id);
        await loadTeam();
      } catch (error) {
        toast(`The key could not be revoked: ${describeError(error)}`);
      }
    },
  });
}

function renderKeys(keys) {
  $("team-keys").replaceChildren(
    keys.length
      ? table(
          ["Name", "Prefix", "State", "Remaining images", "Expires", ""],
          keys.map((key) => [key.name, key.prefix, key.state, remainingText(key), key.expires_at ? formatTime(key.expires_at) : "never", revokeButton(key)]),
        )
      : h("p", { text: "No keys yet." }),
  );
}

/** Delivered images per day (every key together), the last CHART_DAYS days with usage:
 * one bar per day, its height set through the CSSOM (no inline style markup). */
function renderUsage(rows) {
  const days = new Map();
  for (const row of rows) {
    const entry = days.get(row.day) || { delivered: 0, requested: 0 };
    entry.delivered += row.delivered;
    entry.requested += row.requested;
    days.set(row.day, entry);
  }
  const shown = [...days.entries()].sort(([a], [b]) => a.localeCompare(b)).slice(-CHART_DAYS);
  if (!shown.length) {
    $("team-usage").replaceChildren(h("p", { text: "No images yet." }));
    return;
  }
  const top = Math.max(1, ...shown.map(([, entry]) => entry.requested));
  const chart = h("div", { class: "usage-chart", role: "img", "aria-label": "Images delivered per day" });
  for (const [day, entry] of shown) {
    const bar = h("div", {
      class: "usage-bar",
      title: `${day}: ${entry.delivered} delivered of ${entry.requested} requested`,
      dataset: { day, delivered: String(entry.delivered) },
    });
    bar.style.height = `${Math.round((entry.delivered / top) * 100)}%`;
    chart.append(h("div", { class: "usage-day" }, h("span", { class: "usage-count", text: String(entry.delivered) }), bar, h("span", { class: "usage-label", text: day.slice(5) })));
  }
  $("team-usage").replaceChildren(chart);
}

/** The gallery's "Whose work" choice: the admin's own, or one key's (read-only view). */
function renderKeyFilter(keys) {
  const select = $("key-filter");
  const chosen = select.value;
  select.replaceChildren(h("option", { value: "", text: "mine" }), ...keys.map((key) => h("option", { value: key.id, text: key.name })));
  select.value = keys.some((key) => key.id === chosen) ? chosen : "";
  $("key-filter-field").hidden = false;
}

/** Load the keys and usage; hide the Team view for anyone but the admin. */
export async function loadTeam() {
  if (!serverLimits().api_keys) return; // no keys on this bridge: no Team view, no request
  let keys;
  try {
    keys = await api.listKeys();
  } catch (error) {
    if (error instanceof ApiError && [401, 403, 404].includes(error.status)) {
      $("team-button").hidden = true;
      return;
    }
    throw error;
  }
  $("team-button").hidden = false;
  renderKeys(keys.data || []);
  renderKeyFilter(keys.data || []);
  const usage = await api.keyUsage();
  renderUsage(usage.data || []);
}

function numberField(form, name) {
  const raw = form.elements[name].value.trim();
  return raw === "" ? null : Number(raw);
}

export function wireTeam() {
  $("key-filter").addEventListener("change", (event) => {
    api.viewKey = event.currentTarget.value || null;
    gallery.reset();
  });
  $("team-button").addEventListener("click", async () => {
    $("team-secret").hidden = true;
    $("team-secret-value").textContent = "";
    $("team-dialog").showModal();
    try {
      await loadTeam();
    } catch (error) {
      toast(`The team could not be loaded: ${describeError(error)}`);
    }
  });
  $("team-dialog").addEventListener("close", () => {
    $("team-secret-value").textContent = ""; // the secret is shown once, then forgotten
    $("team-secret").hidden = true;
  });
  $("team-create-form").addEventListener("submit", async (event) => {
    event.preventDefault();
    const form = event.currentTarget;
    const body = { name: form.elements.name.value.trim() };
    for (const name of ["images_per_day", "images_per_month"]) {
      const value = numberField(form, name);
      if (value !== null) body[name] = value;
    }
    try {
      const created = await api.createKey(body);
      $("team-secret-value").textContent = created.secret;
      $("team-secret").hidden = false;
      form.reset();
      await loadTeam();
    } catch (error) {
      toast(`The key could not be created: ${describeError(error)}`);
    }
  });
}
