// Preloaded into node (NODE_OPTIONS=--require) by tests that run npm tools which must stay
// offline. Every attempt to leave the machine is written, one line each, to the file named
// by $IMAGEBRIDGE_NETWORK_LOG and then refused: fetch(), net/tls connections to anything
// but loopback, and git/curl/wget child processes. The test reads the log afterwards.
"use strict";
const fs = require("node:fs");
const net = require("node:net");
const childProcess = require("node:child_process");

const LOG = process.env.IMAGEBRIDGE_NETWORK_LOG;
function record(kind, target) {
  if (LOG) fs.appendFileSync(LOG, `${kind} ${String(target).slice(0, 200)}\n`);
}
function loopback(host) {
  return host === undefined || host === "localhost" || host === "::1" || /^127\./.test(host);
}

globalThis.fetch = async (input) => {
  const url = typeof input === "string" ? input : input && input.url;
  record("fetch", url);
  throw new Error(`offline test: fetch(${url}) refused`);
};

const connect = net.Socket.prototype.connect;
net.Socket.prototype.connect = function (...args) {
  const first = args[0];
  const options = Array.isArray(first) ? first[0] : first;
  // A Unix socket (a path and no port) stays on this machine; a missing host is localhost.
  const host =
    typeof options === "object" && options !== null
      ? options.port === undefined && options.path !== undefined
        ? "localhost"
        : options.host
      : args[1];
  if (!loopback(host)) {
    record("connect", host);
    throw new Error(`offline test: connection to ${host} refused`);
  }
  return connect.apply(this, args);
};

for (const name of ["spawn", "spawnSync", "execFile", "execFileSync", "exec", "execSync"]) {
  const original = childProcess[name];
  childProcess[name] = function (command, ...rest) {
    const program = String(command).trim().split(/\s+/)[0].split("/").pop();
    if (["git", "curl", "wget"].includes(program)) {
      record("spawn", command);
      throw new Error(`offline test: ${program} refused`);
    }
    return original.call(this, command, ...rest);
  };
}
