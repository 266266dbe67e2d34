// memproxy web console: a small single-page app over the management API.
// All data is user-controlled text (memories, messages): it is only ever put into the page with
// textContent / value, never as HTML. The key travels in the Authorization header (not a cookie,
// so no cross-site request can use it) and lives in sessionStorage, never in a URL.
"use strict";

const KEY = "memproxy-key";
const TENANT = "memproxy-tenant";
const view = document.getElementById("view");

// ---- DOM helpers -------------------------------------------------------------------------
function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs || {})) {
    if (name === "onclick" || name === "onsubmit" || name === "onchange") node[name] = value;
    else if (name === "text") node.textContent = value;
    else node.setAttribute(name, value);
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}
function table(headers, rows) {
  return el("table", {}, el("tr", {}, headers.map((h) => el("th", { text: h }))),
    rows.map((cells) => el("tr", {}, cells.map((c) => el("td", {}, c)))));
}
function when(ms) { return ms ? new Date(ms).toISOString().replace("T", " ").slice(0, 16) : ""; }
function show(...nodes) { view.replaceChildren(...nodes.flat().filter((n) => n !== null && n !== undefined)); }
function enc(part) { return encodeURIComponent(part); }

// ---- API -------------------------------------------------------------------------------------
async function api(method, path, body) {
  const headers = { "Authorization": "Bearer " + (sessionStorage.getItem(KEY) || "") };
  const tenant = sessionStorage.getItem(TENANT);
  if (tenant) headers["X-Memproxy-Tenant"] = tenant;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const response = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  const data = await response.json().catch(() => ({}));
  if (response.status === 401) { showLogin("The key was refused."); throw new Error("unauthorized"); }
  if (!response.ok) throw new Error((data.error && data.error.message) || response.statusText);
  return data;
}
function failure(error) { return el("p", { class: "error", text: "Error: " + error.message }); }

// ---- Login -----------------------------------------------------------------------------------
const login = document.getElementById("login");
function showLogin(message) {
  login.hidden = false;
  document.getElementById("nav").hidden = true;
  document.getElementById("login-error").textContent = message || "";
  view.replaceChildren();
}
login.onsubmit = async (event) => {
  event.preventDefault();
  sessionStorage.setItem(KEY, document.getElementById("login-key").value);
  const tenant = document.getElementById("login-tenant").value.trim();
  if (tenant) sessionStorage.setItem(TENANT, tenant); else sessionStorage.removeItem(TENANT);
  await start();
};
document.getElementById("logout").onclick = () => { sessionStorage.clear(); showLogin(); };

// ---- Users and memories ----------------------------------------------------------------------
async function usersPage() {
  const users = await api("GET", "/memproxy/v1/users");
  return [el("h1", { text: "Users" }),
    users.data.length ? el("ul", {}, users.data.map((u) => el("li", {}, el("a", { href: "#/users/" + enc(u), text: u }))))
      : el("p", { class: "muted", text: "No users yet." })];
}

const MEMORIES_PER_PAGE = 100;

async function userPage(user, params) {
  const base = "/memproxy/v1/users/" + enc(user);
  const offset = Math.max(0, parseInt(params.get("offset") || "0", 10) || 0);
  const [memories, events, conversations] = await Promise.all([
    api("GET", `${base}/memories?include_invalid=true&limit=${MEMORIES_PER_PAGE}&offset=${offset}`),
    api("GET", base + "/events"), api("GET", base + "/conversations")]);
  const pageLink = (at, text) => el("a", { href: `#/users/${enc(user)}?offset=${at}`, text });
  const pager = el("p", { class: "pager" },
    offset > 0 ? pageLink(Math.max(0, offset - MEMORIES_PER_PAGE), "← previous") : null,
    ` memories ${memories.data.length ? offset + 1 : 0}–${offset + memories.data.length} `,
    memories.data.length === MEMORIES_PER_PAGE ? pageLink(offset + MEMORIES_PER_PAGE, "next →") : null);
  const results = el("div", {});
  const query = el("input", { id: "memory-query", placeholder: "search memories and past turns" });
  const search = el("form", { id: "memory-search", onsubmit: async (e) => {
    e.preventDefault();
    try {
      const hits = await api("POST", base + "/memories/search", { query: query.value, top_k: 10, corpora: ["memory", "message"] });
      results.replaceChildren(table(["score", "kind", "text", "when"], hits.data.map((h) =>
        [h.score.toFixed(3), h.corpus, h.text, when(h.created_at_ms)])));
    } catch (error) { results.replaceChildren(failure(error)); }
  } }, query, el("button", { type: "submit", text: "Search" }));
  const newText = el("input", { id: "memory-new", placeholder: "a new memory" });
  const add = el("form", { onsubmit: async (e) => {
    e.preventDefault();
    try { await api("POST", base + "/memories", { text: newText.value, kind: "fact" }); route(); } catch (error) { add.append(failure(error)); }
  } }, newText, el("button", { type: "submit", text: "Add" }));
  const rows = memories.data.map((m) => {
    const history = events.data.filter((e) => e.memory_id === m.id)
      .map((e) => `${when(e.created_at_ms)} ${e.action}${e.new_value ? ": " + e.new_value : ""} (${e.cause})`).join("\n");
    const actions = el("span", {},
      el("button", { text: "Edit", onclick: async () => {
        const text = prompt("New text", m.text);
        if (text !== null) { await api("PATCH", `${base}/memories/${m.id}`, { text }); route(); }
      } }),
      m.valid_until_ms
        ? el("button", { text: "Restore", onclick: async () => { await api("POST", `${base}/memories/${m.id}/restore`); route(); } })
        : el("button", { text: "Invalidate", onclick: async () => { await api("DELETE", `${base}/memories/${m.id}?invalidate=true`); route(); } }),
      el("button", { text: "Delete", onclick: async () => { if (confirm("Delete this memory?")) { await api("DELETE", `${base}/memories/${m.id}`); route(); } } }));
    return [String(m.id), el("span", { class: "memory-text", text: m.text }), m.kind, m.subject || "",
      el("span", { class: "memory-source", text: m.sources.map((s) =>
        `${s.conversation} #${s.position}` + (s.quote ? `: “${s.quote}”` : "")).join(", ") }),
      when(m.created_at_ms) + (m.valid_until_ms ? " (invalid since " + when(m.valid_until_ms) + ")" : ""),
      el("pre", { text: history }), actions];
  });
  return [el("h1", { text: "User " + user }), search, results, el("h2", { text: "Memories" }), add, pager,
    table(["id", "text", "kind", "about", "from (conversation #turn: the user's words)", "created", "history", ""], rows),
    el("h2", { text: "Conversations" }),
    table(["conversation", "branch of (from turn)", "agent", "turns", "updated"], conversations.data.map((c) => [
      el("a", { href: `#/users/${enc(user)}/conversations/${enc(c.id)}`, text: c.id }),
      c.parent ? el("span", {}, el("a", { href: `#/users/${enc(user)}/conversations/${enc(c.parent)}`, text: c.parent }),
        ` #${c.fork_position}`) : "",
      c.agent, String(c.messages), when(c.updated_at_ms)]))];
}

async function conversationPage(user, conversation) {
  const log = await api("GET", `/memproxy/v1/users/${enc(user)}/conversations/${enc(conversation)}/messages?limit=1000`);
  return [el("h1", { text: `Recall log: ${conversation}` }), el("p", {}, el("a", { href: "#/users/" + enc(user), text: "← " + user })),
    table(["#", "role", "text", "when"], log.data.map((m) =>
      [String(m.position), m.role + (m.superseded ? " (superseded)" : ""), m.search_text || m.content, when(m.created_at_ms)]))];
}

// ---- Agents ----------------------------------------------------------------------------------
async function agentsPage() {
  const users = await api("GET", "/memproxy/v1/users");
  const lists = await Promise.all(users.data.map(async (u) => [u, (await api("GET", `/memproxy/v1/users/${enc(u)}/agents`)).data]));
  const rows = lists.flatMap(([u, agents]) => agents.map((a) => [u,
    el("a", { href: `#/agents/${enc(u)}/${enc(a.name)}`, text: a.name }), (a.tags || []).join(", "), String(a.counts.messages), String(a.counts.in_context), String(a.counts.passages)]));
  return [el("h1", { text: "Explicit-mode agents" }),
    rows.length ? table(["user", "agent", "tags", "messages", "in context", "archival passages"], rows) : el("p", { class: "muted", text: "No agents yet." })];
}

async function agentPage(user, agent) {
  const base = `/memproxy/v1/users/${enc(user)}/agents/${enc(agent)}`;
  const shelf = `/memproxy/v1/users/${enc(user)}/blocks`;
  const [detail, queue, steps, log, listed, shared] = await Promise.all([api("GET", base), api("GET", base + "/messages?in_context=true"),
    api("GET", `/memproxy/v1/agents/${enc(agent)}/steps?user=${enc(user)}&turns=5`), api("GET", base + "/messages?limit=1000"),
    api("GET", `/memproxy/v1/users/${enc(user)}/agents`), api("GET", shelf)]);
  const own = listed.data.find((a) => a.name === agent);
  const tags = el("input", { "data-tags": agent, placeholder: "tags, comma-separated" });
  tags.value = own && own.tags ? own.tags.join(", ") : "";
  const tagStatus = el("span", {});
  const tagForm = el("form", { onsubmit: async (e) => {
    e.preventDefault();
    try {
      await api("PUT", `${base}/tags`, { tags: tags.value.split(",").map((t) => t.trim()).filter((t) => t) });
      tagStatus.textContent = "saved";
    } catch (error) { tagStatus.replaceChildren(failure(error)); }
  } }, tags, el("button", { type: "submit", text: "Save tags" }), tagStatus);
  // Messages between this agent and the user's other agents, both ways.
  const exchanges = log.data.flatMap((m) => {
    let payload = null;
    try { payload = JSON.parse(m.content); } catch (_) { /* not an envelope */ }
    if (payload && payload.type === "agent_message") return [[when(m.created_at_ms), `from ${payload.from}`, payload.message]];
    if (payload && payload.type === "agent_reply") return [[when(m.created_at_ms), `reply from ${payload.from}`, payload.message]];
    let calls = [];
    try { calls = m.tool_calls ? JSON.parse(m.tool_calls) : []; } catch (_) { calls = []; }
    return calls.filter((c) => c.function.name.startsWith("send_message_to_agent")).map((c) => {
      let args = {};
      try { args = JSON.parse(c.function.arguments); } catch (_) { args = {}; }
      return [when(m.created_at_ms), `to ${args.agent || (args.tags || []).join("+")}`, args.message || ""];
    });
  });
  const blocks = detail.blocks.map((b) => {
    const text = el("textarea", { "data-label": b.label });
    text.value = b.value;
    const count = el("span", { class: "muted" });
    const recount = () => {
      const n = [...text.value].length;
      count.textContent = `${n}/${b.char_limit} characters`;
      count.className = n > b.char_limit ? "over" : "muted";
    };
    text.oninput = recount;
    recount();
    const status = el("span", {});
    const sharing = b.shared ? ` (shared block ${b.shared}: an edit reaches every agent it is attached to)` : "";
    return el("div", { class: "card" }, el("strong", { text: b.label + (b.read_only ? " (read only)" : "") }), " ", count,
      el("span", { class: "muted", text: sharing }), text,
      el("button", { text: "Save " + b.label, onclick: async () => {
        try {
          await api("PUT", `${base}/blocks/${enc(b.label)}`, { value: text.value, char_limit: b.char_limit, read_only: b.read_only });
          status.textContent = "saved";
        } catch (error) { status.replaceChildren(failure(error)); }
      } }), b.shared ? el("button", { text: "Detach " + b.shared, onclick: async () => {
        try { await api("DELETE", `${base}/shared/${enc(b.shared)}`); route(); } catch (error) { status.replaceChildren(failure(error)); }
      } }) : null, status);
  });
  // Attach one of the user's shared blocks, or share a new one with this agent.
  const attachStatus = el("span", {});
  const attachable = shared.data.filter((s) => !s.agents.includes(agent));
  const pick = el("select", { "data-attach": agent }, ...attachable.map((s) => el("option", { value: s.name, text: `${s.name} (as ${s.label}, with ${s.agents.join(", ") || "no agent"})` })));
  const attachForm = attachable.length ? el("form", { onsubmit: async (e) => {
    e.preventDefault();
    try { await api("PUT", `${base}/shared/${enc(pick.value)}`); route(); } catch (error) { attachStatus.replaceChildren(failure(error)); }
  } }, pick, el("button", { type: "submit", text: "Attach shared block" })) : null;
  const newName = el("input", { placeholder: "new shared block name", "data-new-shared": agent });
  const newLabel = el("input", { placeholder: "label (default: the name)" });
  const newValue = el("input", { placeholder: "value" });
  const shareForm = el("form", { onsubmit: async (e) => {
    e.preventDefault();
    try {
      await api("PUT", `${shelf}/${enc(newName.value)}`, { value: newValue.value, ...(newLabel.value ? { label: newLabel.value } : {}) });
      await api("PUT", `${base}/shared/${enc(newName.value)}`);
      route();
    } catch (error) { attachStatus.replaceChildren(failure(error)); }
  } }, newName, newLabel, newValue, el("button", { type: "submit", text: "Share with this agent" }));
  const found = el("div", {});
  const query = el("input", { placeholder: "search archival memory" });
  const archival = el("form", { onsubmit: async (e) => {
    e.preventDefault();
    try {
      const hits = await api("GET", `${base}/archival?query=${enc(query.value)}`);
      found.replaceChildren(table(["score", "passage", "when"], hits.data.map((h) => [h.score.toFixed(3), h.text, when(h.created_at_ms)])));
    } catch (error) { found.replaceChildren(failure(error)); }
  } }, query, el("button", { type: "submit", text: "Search" }));
  return [el("h1", { text: `Agent ${agent} of ${user}` }),
    el("p", { class: "muted", text: `${detail.counts.messages} messages (${detail.counts.in_context} in context), ${detail.counts.passages} archival passages` }),
    el("h2", { text: "Tags" }), tagForm,
    el("h2", { text: "Core memory" }), blocks, attachForm, shareForm, attachStatus,
    el("h2", { text: "Conversations with other agents" }),
    exchanges.length ? table(["when", "direction", "message"], exchanges) : el("p", { class: "muted", text: "None yet." }),
    el("h2", { text: "Archival memory" }), archival, found,
    el("h2", { text: "Summary of evicted messages" }), el("pre", { text: detail.summary ? detail.summary.text : "(none)" }),
    el("h2", { text: "Message queue" }), table(["#", "role", "content", ""], queue.data.map((m) => [String(m.position), m.role, m.search_text || m.content || m.tool_calls || "",
      // A tool result goes with the call that made it.
      m.role === "tool" ? "" : el("button", { text: "Delete", onclick: async () => {
        if (!confirm(`Delete message ${m.position}${m.tool_calls ? " and its tool results" : ""}?`)) return;
        try { await api("DELETE", `${base}/messages/${m.position}`); route(); } catch (error) { alert(error.message); }
      } })])),
    el("h2", { text: "Recent steps" }), table(["turn", "step", "tool", "arguments", "status", "result", "tokens", "ms"],
      steps.data.map((s) => [s.turn.slice(0, 8), String(s.step), s.tool, s.arguments, s.status, s.result,
        `${s.prompt_tokens}+${s.completion_tokens}`, s.latency_ms.toFixed(0)]))];
}

// ---- Context simulator -----------------------------------------------------------------------
const COLORS = { "instructions": "#1f77b4", "memory": "#2ca02c", "core memory": "#2ca02c", "summary": "#9467bd", "tools": "#8c564b", "history": "#ff7f0e", "new message": "#d62728" };

function simulation(result) {
  const total = result.sections.reduce((sum, s) => sum + s.tokens, 0) || 1;
  const bar = el("div", { class: "bar" }, result.sections.filter((s) => s.tokens > 0).map((s) =>
    el("div", { style: `width:${(100 * s.tokens / total).toFixed(2)}%;background:${COLORS[s.name] || "#555"}`, title: `${s.name}: ${s.tokens}`, text: `${s.name} ${s.tokens}` })));
  return el("div", { class: "card simulation", "data-strategy": result.strategy },
    el("h3", { text: `${result.strategy}: ${result.tokens_after} tokens (client sent ${result.tokens_before})` }), bar,
    table(["section", "tokens"], result.sections.map((s) => [s.name, String(s.tokens)])),
    result.degraded ? el("p", { class: "error", text: "degraded: " + result.degraded }) : null,
    result.retrieved.length ? el("div", {}, el("h4", { text: "Retrieved" }),
      table(["score", "similarity", "kind", "text"], result.retrieved.map((h) => [h.score.toFixed(3), h.similarity === undefined ? "" : h.similarity.toFixed(3), h.corpus, h.text]))) : null,
    el("h4", { text: "Payload sent upstream" }), el("pre", { class: "payload", text: JSON.stringify(result.payload, null, 2) }));
}

async function simulatorPage() {
  const users = await api("GET", "/memproxy/v1/users");
  const user = el("select", { id: "sim-user" }, users.data.map((u) => el("option", { value: u, text: u })));
  const conversation = el("select", { id: "sim-conversation" });
  const loadConversations = async () => {
    if (!user.value) return;
    const list = await api("GET", `/memproxy/v1/users/${enc(user.value)}/conversations`);
    conversation.replaceChildren(el("option", { value: "", text: "(paste a request below)" }),
      ...list.data.map((c) => el("option", { value: c.id, text: `${c.id} (${c.messages} turns)` })));
  };
  user.onchange = loadConversations;
  await loadConversations();
  const request = el("textarea", { id: "sim-request", placeholder: '{"model": "...", "messages": [...]}' });
  request.value = JSON.stringify({ model: "gpt-4o-mini", messages: [{ role: "system", content: "You are helpful." }, { role: "user", content: "What do you remember about me?" }] }, null, 2);
  const modes = ["passthrough", "window", "summary", "implicit", "explicit"];
  const first = el("select", { id: "sim-strategy" }, modes.map((m) => el("option", { value: m, text: m })));
  first.value = "implicit";
  const second = el("select", { id: "sim-compare" }, el("option", { value: "", text: "(none)" }), modes.map((m) => el("option", { value: m, text: m })));
  const output = el("div", { id: "sim-output", class: "cols" });
  const run = async (e) => {
    e.preventDefault();
    try {
      const body = { user: user.value || "default", strategy: first.value };
      if (conversation.value) body.conversation = conversation.value; else body.request = JSON.parse(request.value);
      const results = [await api("POST", "/memproxy/v1/simulate", body)];
      if (second.value) results.push(await api("POST", "/memproxy/v1/simulate", { ...body, strategy: second.value }));
      output.replaceChildren(...results.map(simulation));
    } catch (error) { output.replaceChildren(failure(error)); }
  };
  return [el("h1", { text: "Context simulator" }),
    el("p", { class: "muted", text: "What memproxy would send upstream for this request. Nothing is stored and the upstream is not called." }),
    el("form", { id: "sim-form", onsubmit: run }, el("label", {}, "User ", user), el("label", {}, "Conversation ", conversation),
      el("label", {}, "Chat request", request), el("label", {}, "Strategy ", first, " compare with ", second),
      el("button", { type: "submit", text: "Simulate" })), output];
}

// ---- Eval results ----------------------------------------------------------------------------
const SVG = "http://www.w3.org/2000/svg";
function svg(tag, attrs, ...children) {
  const node = document.createElementNS(SVG, tag);
  for (const [name, value] of Object.entries(attrs || {})) {
    if (name === "text") node.textContent = value; else node.setAttribute(name, String(value));
  }
  node.append(...children.flat(Infinity).filter((c) => c));
  return node;
}
const STRATEGY_COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b"];

// Tokens spent (chat + memory work) against answer F1: the cost/accuracy trade-off at a glance.
function scatter(strategies) {
  const [w, h, left, bottom] = [560, 300, 60, 40];
  const maxTokens = Math.max(1, ...strategies.map((s) => s.chat_tokens + s.memory_tokens));
  const x = (tokens) => left + (w - left - 20) * tokens / maxTokens;
  const y = (f1) => h - bottom - (h - bottom - 16) * f1;
  const ticks = [0, 0.25, 0.5, 0.75, 1].map((f) => [
    svg("line", { x1: left, x2: w - 20, y1: y(f), y2: y(f), stroke: "#e3e6ea" }),
    svg("text", { x: left - 8, y: y(f) + 4, "text-anchor": "end", "font-size": 11, text: f.toFixed(2) })]);
  const points = strategies.map((s, i) => {
    const tokens = s.chat_tokens + s.memory_tokens;
    const color = STRATEGY_COLORS[i % STRATEGY_COLORS.length];
    const anchor = x(tokens) > w - 140 ? "end" : "start";
    return svg("g", { class: "point", "data-strategy": s.strategy },
      svg("circle", { cx: x(tokens), cy: y(s.f1), r: 6, fill: color }),
      svg("text", { x: x(tokens) + (anchor === "end" ? -9 : 9), y: y(s.f1) - 8 - 12 * (i % 2), "text-anchor": anchor, "font-size": 12, text: `${s.strategy} (${tokens.toLocaleString()})` }));
  });
  return svg("svg", { viewBox: `0 0 ${w} ${h}`, width: w, height: h, class: "chart", role: "img" },
    ticks, points,
    svg("line", { x1: left, x2: w - 20, y1: h - bottom, y2: h - bottom, stroke: "#555" }),
    svg("text", { x: (w + left) / 2, y: h - 8, "text-anchor": "middle", "font-size": 12, text: "tokens (chat + memory work)" }),
    svg("text", { x: 14, y: (h - bottom) / 2, "font-size": 12, transform: `rotate(-90 14 ${(h - bottom) / 2})`, "text-anchor": "middle", text: "F1" }));
}

// memproxy's own time and the total per request, p50 and p95, on one log scale.
function latencyBars(strategies) {
  const rows = strategies.flatMap((s) => [
    [s.strategy, "own p50", s.overhead_p50_ms], ["", "own p95", s.overhead_p95_ms],
    ["", "total p50", s.total_p50_ms], ["", "total p95", s.total_p95_ms]].filter((r) => typeof r[2] === "number"));
  const max = Math.log10(Math.max(10, ...rows.map((r) => r[2] + 1)));
  return el("div", { class: "latency" }, rows.map(([name, label, ms]) => el("div", { class: "latency-row" },
    el("span", { class: "latency-name", text: name }), el("span", { class: "latency-label", text: label }),
    el("span", { class: "latency-bar" }, el("span", { style: `width:${(100 * Math.log10(ms + 1) / max).toFixed(1)}%`, text: `${ms.toFixed(1)} ms` })))));
}

function evalPage() {
  const output = el("div", { id: "eval-output" });
  const input = el("input", { type: "file", accept: ".json", id: "eval-file" });
  input.onchange = async () => {
    try {
      const summary = JSON.parse(await input.files[0].text());
      const strategies = summary.strategies;
      const categories = [...new Set(strategies.flatMap((s) => Object.keys(s.by_category || {})))].sort();
      const score = (value) => value === null || value === undefined ? "-" : value.toFixed(3);
      output.replaceChildren(el("h2", { text: `${summary.dataset} (model ${summary.model || "default"})` }),
        table(["strategy", "probes", "F1", "F1 of ceiling", "contains", "judge", "evidence", "chat tokens", "memory tokens", "overhead p50/p95 ms"],
          strategies.map((s) => [s.strategy, String(s.probes), score(s.f1),
            s.f1_of_ceiling === null || s.f1_of_ceiling === undefined ? "-" : `${Math.round(s.f1_of_ceiling * 100)}%`,
            score(s.contains), score(s.judge),
            score(s.evidence_in_context), String(s.chat_tokens), String(s.memory_tokens),
            `${s.overhead_p50_ms.toFixed(1)}/${s.overhead_p95_ms.toFixed(1)}`])),
        el("h3", { text: "Tokens against F1" }), scatter(strategies),
        categories.length ? el("h3", { text: "F1 by question category" }) : null,
        categories.length ? table(["strategy", ...categories], strategies.map((s) => [s.strategy,
          ...categories.map((c) => s.by_category && s.by_category[c] ? score(s.by_category[c].f1) : "-")])) : null,
        el("h3", { text: "Latency per request (log scale)" }), latencyBars(strategies));
    } catch (error) { output.replaceChildren(failure(error)); }
  };
  return [el("h1", { text: "Eval results" }), el("p", { class: "muted", text: "Open results.json written by memproxy eval --out DIR (read in the browser; nothing is uploaded). The same run's report.html has these charts too." }), input, output];
}

// ---- Jobs ------------------------------------------------------------------------------------
// The memory jobs, newest first: what each did ("2 added, 1 rejected (question)") or why it failed.
async function jobsPage(params) {
  const state = params.get("state") || "";
  const jobs = await api("GET", "/memproxy/v1/jobs?limit=1000" + (state ? "&state=" + enc(state) : ""));
  const filter = el("p", {}, ["", "queued", "running", "done", "failed", "merged"].map((s) =>
    el("a", { href: "#/jobs" + (s ? "?state=" + s : ""), text: (s || "all") + " " })));
  const rows = jobs.data.slice().reverse().map((j) => [String(j.id), j.kind,
    j.scope ? el("a", { href: "#/users/" + enc(j.scope.user), text: j.scope.user }) : "",
    j.payload && j.payload.conversation ? j.payload.conversation : "", j.state, String(j.attempts),
    j.report || j.last_error || ""]);
  return [el("h1", { text: "Memory jobs" }), filter,
    table(["id", "kind", "user", "conversation", "state", "attempts", "report / error"], rows)];
}

// ---- Routing ---------------------------------------------------------------------------------
// Pages load asynchronously; only the latest navigation may render, so a slow page the user has
// already left never replaces the one they went to.
let navigation = 0;

function page(parts, params) {
  if (parts[0] === "users" && parts[1] && parts[2] === "conversations") return conversationPage(parts[1], parts[3]);
  if (parts[0] === "users" && parts[1]) return userPage(parts[1], params);
  if (parts[0] === "agents" && parts[2]) return agentPage(parts[1], parts[2]);
  if (parts[0] === "agents") return agentsPage();
  if (parts[0] === "jobs") return jobsPage(params);
  if (parts[0] === "simulator") return simulatorPage();
  if (parts[0] === "eval") return evalPage();
  return usersPage();
}

async function route() {
  const ticket = ++navigation;
  const hash = location.hash;
  let nodes;
  try {
    const [path, query] = hash.replace(/^#\/?/, "").split("?");
    nodes = await page(path.split("/").map(decodeURIComponent), new URLSearchParams(query || ""));
  } catch (error) {
    if (error.message === "unauthorized") return;
    nodes = [failure(error)];
  }
  if (ticket !== navigation) return;
  show(...nodes);
  view.dataset.route = hash;
}

async function start() {
  try {
    await api("GET", "/memproxy/v1/users");
  } catch (error) {
    if (error.message !== "unauthorized") showLogin(error.message);
    return;
  }
  login.hidden = true;
  document.getElementById("nav").hidden = false;
  await route();
}
window.onhashchange = route;
start();
