// The gallery's first page, asked for while the page's modules are still loading.
//
// A classic, async script that imports nothing (index.html names it first), so the request
// leaves as soon as this file has arrived, instead of after the stylesheets and the modules:
// on a busy machine that is a few hundred milliseconds of the first screen. It sends what the
// API client would (the tab's bearer token, in the header only); gallery.js adopts the answer
// for its first page, and api.js decodes it like any other (errors, 401, connection state).
"use strict";

(function askForTheFirstPage() {
  let token;
  try {
    token = window.sessionStorage.getItem("imagegen-bridge.dashboard.bearer") || "";
  } catch {
    token = ""; // storage may be unavailable (private mode)
  }
  const headers = { Accept: "application/json" };
  if (token) headers.Authorization = `Bearer ${token}`;
  // gallery.js's FIRST_PAGE_SIZE, the mine / active / unfiltered first page
  const request = fetch("/v1/gallery?limit=32&visibility=active", { headers, credentials: "omit", cache: "no-store" });
  window.imagebridgeFirstGallery = request.catch(() => null);
})();
