// The one BridgeApi client of this page: every view talks to the bridge through it, so
// the token, the connection state and the 401 handling are shared.

import { BridgeApi } from "./api.js";

export const api = new BridgeApi();
