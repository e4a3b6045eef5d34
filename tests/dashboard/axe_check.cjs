// Runs @axe-core/playwright on pages the Python tests drive, in the same Chromium.
//
// Usage: node axe_check.cjs <axe prefix> <CDP endpoint>. It attaches to the browser over CDP
// (playwright-core's connectOverCDP; no browser is downloaded or launched), then reads one
// page marker a line on stdin: the page whose window.name equals it is analysed as it is at
// that moment (a dialog open, a phone viewport), and one JSON line is written on stdout:
// {"violations": [{id, impact, help, nodes: [{target, html, summary}]}]} or {"error": "..."}.

"use strict";

const path = require("path");
const readline = require("readline");

const [prefix, endpoint] = process.argv.slice(2);
const { chromium } = require(path.join(prefix, "node_modules", "playwright-core"));
const { AxeBuilder } = require(path.join(prefix, "node_modules", "@axe-core", "playwright"));

const TAGS = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa", "wcag22aa", "best-practice"];

async function find(browser, marker) {
  for (const context of browser.contexts()) {
    for (const page of context.pages()) {
      const name = await page.evaluate(() => window.name).catch(() => "");
      if (name === marker) return page;
    }
  }
  return null;
}

async function analyse(browser, marker) {
  const page = await find(browser, marker);
  if (!page) return { error: `no page is marked ${marker}` };
  const results = await new AxeBuilder({ page }).withTags(TAGS).analyze();
  return {
    violations: results.violations.map((violation) => ({
      id: violation.id,
      impact: violation.impact,
      help: violation.help,
      nodes: violation.nodes.map((node) => ({ target: node.target, html: node.html.slice(0, 300), summary: node.failureSummary })),
    })),
  };
}

async function main() {
  const browser = await chromium.connectOverCDP(endpoint);
  process.stdout.write(JSON.stringify({ ready: true }) + "\n");
  const lines = readline.createInterface({ input: process.stdin });
  for await (const line of lines) {
    const marker = line.trim();
    if (!marker) continue;
    let answer;
    try {
      answer = await analyse(browser, marker);
    } catch (error) {
      answer = { error: String(error && error.stack ? error.stack : error) };
    }
    process.stdout.write(JSON.stringify(answer) + "\n");
  }
  process.exit(0);
}

main().catch((error) => {
  process.stdout.write(JSON.stringify({ error: String(error) }) + "\n");
  process.exit(1);
});
