// A web page of another origin against a local memproxy with no keys, in a real headless
// Chromium (driven by playwright-core): the cross-site requests a page can make without asking
// (no-cors fetches with text/plain, form posts) and a DNS-rebinding read (the attacker's name
// resolved to 127.0.0.1) must all fail, while memproxy's own pages still write.
// Usage: node foreign_page.mjs MEMPROXY_BASE_URL SCREENSHOT_DIR. Prints "ok <check>" per check;
// any failure throws (non-zero exit). The Rust test then checks that nothing was stored.
import { createRequire } from "node:module";
import http from "node:http";
import path from "node:path";
import fs from "node:fs";

const [base, shots] = process.argv.slice(2);
const require = createRequire(path.resolve(process.env.MEMPROXY_UI_TEST_DIR || "target/ui-test", "node_modules/"));
const { chromium } = require("playwright-core");
fs.mkdirSync(shots, { recursive: true });
const profile = fs.mkdtempSync(path.join(shots, "profile-"));
const target = new URL(base);
const port = target.port;

// The attacker's page, on another port of loopback (another origin).
const attack = `<!doctype html><html><body>
<form id="form" method="POST" enctype="text/plain" action="${base}/memproxy/v1/users/default/memories">
<input name='{"text": "Planted by a form.", "x": "' value='"}'></form>
<form id="import" method="POST" enctype="application/x-www-form-urlencoded" action="${base}/memproxy/v1/users/default/import">
<input name="line" value='{"type":"memory","text":"Planted by an import."}'></form>
<script>
window.results = {};
async function run() {
  const json = (text) => JSON.stringify({text});
  const quiet = (p) => p.then((r) => r.type + ":" + r.status, (e) => "error:" + e.message);
  results.textPlain = await quiet(fetch("${base}/memproxy/v1/users/default/memories",
    {method: "POST", mode: "no-cors", headers: {"content-type": "text/plain"}, body: json("Planted by fetch.")}));
  results.blob = await quiet(fetch("${base}/memproxy/v1/users/default/memories",
    {method: "POST", mode: "no-cors", body: new Blob([json("Planted by a blob.")])}));
  results.chat = await quiet(fetch("${base}/v1/chat/completions", {method: "POST", mode: "no-cors",
    headers: {"content-type": "text/plain"},
    body: JSON.stringify({model: "m", messages: [{role: "user", content: "Planted chat."}]})}));
  results.corsJson = await quiet(fetch("${base}/memproxy/v1/users/default/memories",
    {method: "POST", headers: {"content-type": "application/json"}, body: json("Planted by CORS.")}));
  results.read = await fetch("${base}/memproxy/v1/users/default/export").then((r) => r.text(), (e) => "blocked:" + e.message);
  results.done = true;
}
run();
</script></body></html>`;
const server = http.createServer((req, res) => {
  res.writeHead(200, { "content-type": "text/html" });
  res.end(attack);
});
await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
const attackerUrl = `http://127.0.0.1:${server.address().port}/`;

const browser = await chromium.launchPersistentContext(profile, {
  executablePath: "/usr/bin/chromium",
  headless: true,
  args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    // DNS rebinding, as the browser sees it: the attacker's name now resolves to loopback.
    "--host-resolver-rules=MAP rebind.example 127.0.0.1"],
});
const check = (condition, name, detail) => {
  if (!condition) throw new Error(`check ${name} failed: ${detail || ""}`);
  console.log(`ok ${name}`);
};

try {
  const page = browser.pages()[0] || await browser.newPage();
  await page.goto(attackerUrl);
  await page.waitForFunction(() => window.results && window.results.done, null, { timeout: 20000 });
  const results = await page.evaluate(() => window.results);
  check(!String(results.read).includes("Planted") && !String(results.read).includes('"type"'),
    "cross-origin-read-blocked", JSON.stringify(results));
  check(String(results.corsJson).startsWith("error:"), "cors-json-blocked", JSON.stringify(results));
  // The form posts navigate the page to memproxy's answer: a refusal, not a stored memory.
  const answer = async (form) => {
    await page.goto(attackerUrl);
    await Promise.all([page.waitForNavigation(), page.evaluate((id) => document.getElementById(id).submit(), form)]);
    return page.content();
  };
  const formAnswer = await answer("form");
  check(formAnswer.includes("origin_not_allowed") || formAnswer.includes("unsupported_media_type"), "form-post-refused", formAnswer);
  const importAnswer = await answer("import");
  check(importAnswer.includes("origin_not_allowed") || importAnswer.includes("unsupported_media_type"), "form-import-refused", importAnswer);
  await page.screenshot({ path: path.join(shots, "foreign-form.png") });

  // After rebinding, the attacker's page reads memproxy as its own origin: refused by Host.
  const rebound = await page.goto(`http://rebind.example:${port}/memproxy/v1/users/default/export`);
  const reboundText = await page.content();
  check(rebound.status() === 403 && reboundText.includes("host_not_allowed"), "rebinding-refused", `${rebound.status()} ${reboundText}`);

  // memproxy's own page (the console's origin) still writes.
  await page.goto(`${base}/ui`);
  const own = await page.evaluate(async () => {
    const response = await fetch("/memproxy/v1/users/console-user/memories",
      { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ text: "Written from the console's origin." }) });
    return response.status;
  });
  check(own === 201, "same-origin-write", String(own));
} finally {
  await browser.close();
  server.close();
  fs.rmSync(profile, { recursive: true, force: true });
}
