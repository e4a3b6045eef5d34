// The connection indicator and the bearer-token dialog.
//
// A 401 anywhere pauses polling (store `paused`) and asks for the token once; saving a
// token calls back into the page so that everything is loaded again.

import { api } from "./bridge.js";
import * as store from "./store.js";
import { $, describeError, toast } from "./ui.js";

let authShown = false;
let onTokenSaved = () => {};

function setConnection(kind, text) {
  const node = $("connection");
  node.dataset.state = kind;
  node.textContent = text;
}

function connectionText() {
  const diagnostics = store.get("diagnostics");
  if (!diagnostics) return "Connected";
  const ready = diagnostics.providers.filter((item) => item.status === "ready").length;
  return `Connected · v${diagnostics.bridge_version} · ${ready}/${diagnostics.providers.length} providers ready`;
}

// New diagnostics (version, providers ready) update the indicator while connected.
store.subscribe("diagnostics", () => {
  if (api.state === "online") setConnection("online", connectionText());
});

api.addEventListener("connection", (event) => {
  if (event.detail === "online") setConnection("online", connectionText());
  else if (event.detail === "offline") setConnection("offline", "Offline: the bridge cannot be reached");
  else if (event.detail === "unauthorized") setConnection("unauthorized", "Authentication required");
});

api.addEventListener("unauthorized", () => {
  $("auth-button").hidden = false;
  store.set("paused", true);
  if (!authShown) {
    authShown = true;
    openAuthDialog(api.token ? "The bridge refused the saved token. Enter the current one." : "This bridge needs its bearer token.");
  }
});

function openAuthDialog(message = "") {
  const dialog = $("auth-dialog");
  $("auth-message").textContent = message;
  $("auth-token").value = "";
  if (!dialog.open) dialog.showModal();
  $("auth-token").focus();
}

/** Wire the token dialog; `reload` runs after a token is saved. */
export function wireAuth(reload) {
  onTokenSaved = reload;
  $("auth-button").addEventListener("click", () => openAuthDialog(api.token ? "A token is saved for this tab." : ""));
  $("auth-form").addEventListener("submit", (event) => {
    event.preventDefault();
    const token = $("auth-token").value;
    if (!token.trim()) {
      $("auth-message").textContent = "Enter the bearer token first.";
      return;
    }
    try {
      api.setToken(token);
    } catch (error) {
      $("auth-message").textContent = describeError(error);
      return;
    }
    $("auth-token").value = "";
    $("auth-dialog").close();
    authShown = false;
    store.set("paused", false);
    toast("Token saved for this tab.");
    onTokenSaved();
  });
  $("auth-forget").addEventListener("click", () => {
    api.clearToken();
    $("auth-token").value = "";
    $("auth-message").textContent = "The token was removed from this tab.";
  });
  $("auth-dialog").addEventListener("close", () => {
    authShown = false;
  });
}
