// ESLint flat config for the dashboard's browser ES modules (run by scripts/check).
// Only ESLint's own recommended rules plus a few that catch real mistakes; no plugins.
// The packages live in .cache/eslint/ (scripts/install-test-deps), not in a package.json
// of the repository, so they are resolved from there.
import { createRequire } from "node:module";

const require = createRequire(new URL("./.cache/eslint/node_modules/", import.meta.url));
const js = require("@eslint/js");
const globals = require("globals");

export default [
  js.configs.recommended,
  {
    files: ["src/imagebridge/server/dashboard/static/**/*.js"],
    languageOptions: {
      ecmaVersion: 2022,
      sourceType: "module",
      globals: { ...globals.browser },
    },
    rules: {
      "no-undef": "error",
      "no-unused-vars": ["error", { args: "after-used", caughtErrors: "none" }],
      eqeqeq: ["error", "always"],
      "prefer-const": "error",
    },
  },
  {
    // The one classic script (index.html loads it before the modules).
    files: ["src/imagebridge/server/dashboard/static/boot.js"],
    languageOptions: { sourceType: "script" },
  },
];
