// End-to-end test of the web console in a real headless Chromium (driven by playwright-core).
// Usage: node console.mjs BASE_URL ADMIN_KEY SCREENSHOT_DIR. Prints "ok <check>" per passed check;
// any failure throws (non-zero exit). The Rust test seeds the data it expects.
import { createRequire } from "node:module";
import path from "node:path";
import fs from "node:fs";

const [base, key, shots] = process.argv.slice(2);
const require = createRequire(path.resolve(process.env.MEMPROXY_UI_TEST_DIR || "target/ui-test", "node_modules/"));
const { chromium } = require("playwright-core");
fs.mkdirSync(shots, { recursive: true });
const profile = fs.mkdtempSync(path.join(shots, "profile-"));

// A fresh profile directory each run; this machine has no network, so nothing phones home.
const browser = await chromium.launchPersistentContext(profile, {
  executablePath: "/usr/bin/chromium",
  headless: true,
  viewport: { width: 1280, height: 900 },
  args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync"],
});
const page = browser.pages()[0] || await browser.newPage();
const dialogs = [];
page.on("dialog", async (dialog) => { dialogs.push(dialog.message()); await dialog.dismiss(); });
const check = (condition, name, detail) => {
  if (!condition) throw new Error(`check ${name} failed: ${detail || ""}`);
  console.log(`ok ${name}`);
};

try {
  // Log in: a wrong key is refused, the admin key opens the console; the key is never in a URL.
  await page.goto(`${base}/ui`);
  await page.waitForSelector("#login:not([hidden])");
  await page.fill("#login-key", "wrong");
  await page.click("#login button[type=submit]");
  await page.waitForFunction(() => document.getElementById("login-error").textContent.includes("refused"));
  await page.fill("#login-key", key);
  await page.click("#login button[type=submit]");
  await page.waitForSelector("#view a:text-is('ana')");
  check(!page.url().includes(key), "login", page.url());
  await page.screenshot({ path: path.join(shots, "01-users.png") });

  // A user's memories, searched.
  await page.click("a:text-is('ana')");
  await page.waitForSelector("#view[data-route='#/users/ana'] #memory-query");
  await page.fill("#memory-query", "peanuts");
  await page.click("#memory-search button");
  await page.waitForSelector("td:has-text('Ana is allergic to peanuts.')");
  const rows = await page.locator("td:has-text('allergic to peanuts')").count();
  check(rows >= 2, "memory-search", `${rows} cells`);
  await page.screenshot({ path: path.join(shots, "02-memories.png"), fullPage: true });

  // Invalidate a memory, then undo it with Restore (a consolidation's retirement is undone so too).
  const row = page.locator("tr:has(.memory-text:text-is('Ana is allergic to peanuts.'))");
  await row.locator("button:text-is('Invalidate')").click();
  await page.locator("tr:has(.memory-text:text-is('Ana is allergic to peanuts.')) button:text-is('Restore')").waitFor();
  check((await row.textContent()).includes("invalid since"), "invalidate", await row.textContent());
  await row.locator("button:text-is('Restore')").click();
  await page.locator("tr:has(.memory-text:text-is('Ana is allergic to peanuts.')) button:text-is('Invalidate')").waitFor();
  check(!(await row.textContent()).includes("invalid since"), "restore", await row.textContent());

  // A fact learned from a chat shows the user's words it comes from.
  await page.goto(`${base}/ui#/users/lisa`);
  await page.waitForSelector("#view[data-route='#/users/lisa'] .memory-source");
  const source = await page.locator(".memory-source").first().textContent();
  check(source.includes("“My sister Zelda moved to Lisbon”"), "source-quote", source);
  // ... and whom it is about (the column after its kind).
  const about = await page.locator("tr:has(.memory-source) td").nth(3).textContent();
  check(about === "user", "subject", about);

  // Hostile memory text renders as text and runs nothing.
  // Each navigation waits for its own page: the previous page's rows are still there until it renders.
  await page.goto(`${base}/ui#/users/mallory`);
  await page.waitForSelector("#view[data-route='#/users/mallory'] .memory-text");
  const texts = await page.locator(".memory-text").allTextContents();
  const xss = await page.evaluate(() => window.__xss);
  const injected = await page.locator("#view img, #view script").count();
  check(texts.some((t) => t.includes("<img src=x onerror=")) && texts.some((t) => t.includes("<script>"))
    && xss === undefined && injected === 0 && dialogs.length === 0, "xss-inert", JSON.stringify({ texts, xss, injected, dialogs }));
  await page.screenshot({ path: path.join(shots, "03-hostile-text.png"), fullPage: true });

  // Memories past the first page are one click away.
  await page.goto(`${base}/ui#/users/bulk`);
  await page.waitForSelector("#view[data-route='#/users/bulk'] .memory-text");
  const firstPage = await page.locator(".memory-text").count();
  await page.click("a:text-is('next →')");
  await page.waitForSelector("#view[data-route='#/users/bulk?offset=100'] .memory-text");
  const secondPage = await page.locator(".memory-text").allTextContents();
  check(firstPage === 100 && secondPage.length === 5 && secondPage.includes("Bulk note number 104.")
    && await page.locator("a:text-is('← previous')").count() === 1, "paging", JSON.stringify({ firstPage, secondPage }));

  // Edit an agent's core memory block.
  await page.goto(`${base}/ui#/agents/ana/default`);
  const human = page.locator("#view[data-route='#/agents/ana/default'] textarea[data-label=human]");
  await human.waitFor();
  await human.fill("Name: Ana. Allergic to peanuts. Loves Thai food.");
  await page.click("button:text-is('Save human')");
  await page.waitForSelector("text=saved");
  const counter = await page.locator(".card:has(textarea[data-label=human]) span.muted").first().textContent();
  check(counter.includes("48/2000"), "edit-block", counter);

  // The agent's exchanges with ana's other agent, both ways, and its tags.
  const exchanges = await page.locator("#view table").allTextContents();
  check(exchanges.some((t) => t.includes("to helper") && t.includes("Ana says hello.")
    && t.includes("reply from helper") && t.includes("Hello back to Ana.")), "agent-conversations", JSON.stringify(exchanges));
  await page.fill("input[data-tags=default]", "team, lead");
  await page.click("button:text-is('Save tags')");
  await page.waitForSelector("form:has(input[data-tags]) span:text-is('saved')");
  await page.goto(`${base}/ui#/agents`);
  const agentRow = page.locator("#view[data-route='#/agents'] tr:has(td:text-is('ana')):has(a:text-is('default'))");
  await agentRow.waitFor();
  check((await agentRow.textContent()).includes("lead, team"), "tags", await agentRow.textContent());

  // A shared block: made on one agent's page, attached on another's, edited there, and the
  // first agent's page shows the edit.
  await page.goto(`${base}/ui#/agents/ana/default`);
  await page.waitForSelector("#view[data-route='#/agents/ana/default'] input[data-new-shared=default]");
  await page.fill("input[data-new-shared=default]", "household");
  await page.fill("input[placeholder=value]", "Ana lives with two cats.");
  await page.click("button:text-is('Share with this agent')");
  await page.waitForSelector("textarea[data-label=household]");
  await page.screenshot({ path: path.join(shots, "04-agent.png"), fullPage: true });
  await page.goto(`${base}/ui#/agents/ana/helper`);
  await page.waitForSelector("#view[data-route='#/agents/ana/helper'] select[data-attach=helper]");
  await page.selectOption("select[data-attach=helper]", "household");
  await page.click("button:text-is('Attach shared block')");
  const shared = page.locator("#view[data-route='#/agents/ana/helper'] textarea[data-label=household]");
  await shared.waitFor();
  await shared.fill("Ana lives with two cats and a dog.");
  await page.click("button:text-is('Save household')");
  await page.waitForSelector(".card:has(textarea[data-label=household]) span:text-is('saved')");
  await page.goto(`${base}/ui#/agents/ana/default`);
  const seen = page.locator("#view[data-route='#/agents/ana/default'] textarea[data-label=household]");
  await seen.waitFor();
  check((await seen.inputValue()) === "Ana lives with two cats and a dog.", "shared-block", await seen.inputValue());

  // The context simulator, two strategies side by side.
  await page.goto(`${base}/ui#/simulator`);
  await page.waitForSelector("#view[data-route='#/simulator'] #sim-form");
  await page.selectOption("#sim-user", "ana");
  await page.selectOption("#sim-conversation", "");
  await page.fill("#sim-request", JSON.stringify({ model: "m", messages: [{ role: "user", content: "Which snacks are safe with my allergy to peanuts?" }] }));
  await page.selectOption("#sim-strategy", "implicit");
  await page.selectOption("#sim-compare", "passthrough");
  await page.click("#sim-form button[type=submit]");
  await page.waitForSelector(".simulation[data-strategy=passthrough]");
  const implicitPayload = await page.locator(".simulation[data-strategy=implicit] pre.payload").textContent();
  const bars = await page.locator(".simulation[data-strategy=implicit] .bar div").allTextContents();
  check(implicitPayload.includes("Ana is allergic to peanuts.") && bars.some((b) => b.startsWith("memory")), "simulator", JSON.stringify(bars));
  await page.screenshot({ path: path.join(shots, "05-simulator.png"), fullPage: true });

  // Eval results, read from a results.json file in the browser.
  const results = path.join(shots, "results.json");
  fs.writeFileSync(results, JSON.stringify({ dataset: "scenarios", model: "m", strategies: [
    { strategy: "implicit", probes: 3, f1: 0.5, contains: 0.66, judge: null, evidence_in_context: 0.8, chat_tokens: 900, memory_tokens: 300, overhead_p50_ms: 12.5, overhead_p95_ms: 20.1,
      total_p50_ms: 900, total_p95_ms: 2500, by_category: { "temporal": { probes: 1, f1: 0.25 }, "multi-hop": { probes: 2, f1: 0.625 } } },
    { strategy: "passthrough", probes: 3, f1: 0.1, contains: 0, judge: null, evidence_in_context: null, chat_tokens: 400, memory_tokens: 0, overhead_p50_ms: 0.2, overhead_p95_ms: 0.4,
      total_p50_ms: 700, total_p95_ms: 2000, by_category: { "temporal": { probes: 1, f1: 0 }, "multi-hop": { probes: 2, f1: 0.15 } } }] }));
  await page.goto(`${base}/ui#/eval`);
  await page.waitForSelector("#view[data-route='#/eval'] #eval-file");
  await page.setInputFiles("#eval-file", results);
  await page.waitForSelector("#eval-output td:text-is('implicit')");
  const cells = await page.locator("#eval-output td").allTextContents();
  const points = await page.locator("#eval-output svg .point").evaluateAll((nodes) => nodes.map((n) => n.dataset.strategy));
  const latency = await page.locator("#eval-output .latency-bar").count();
  check(cells.includes("0.500") && cells.includes("12.5/20.1") && cells.includes("0.625") && cells.includes("0.150")
    && points.join() === "implicit,passthrough" && latency === 8, "eval-results", JSON.stringify({ cells, points, latency }));
  await page.screenshot({ path: path.join(shots, "06-eval.png"), fullPage: true });
} catch (error) {
  await page.screenshot({ path: path.join(shots, "failure.png"), fullPage: true }).catch(() => {});
  console.log("page said:", await page.locator("#main").textContent().catch(() => "?"));
  throw error;
} finally {
  await browser.close();
  fs.rmSync(profile, { recursive: true, force: true });
}
