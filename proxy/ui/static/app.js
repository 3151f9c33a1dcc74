// Ruyi's dashboard: reads the /ruyi/v1 API of the Ruyi that serves it. Every text from the API goes into the page
// as text (never as HTML). A key the person types is kept in this tab's session storage and sent as X-Ruyi-Key.
"use strict";

const $ = (id) => document.getElementById(id);
const state = { key: sessionStorage.getItem("ruyi-key") || "", agents: [], timer: null, lastCount: -1 };
const TIERS = [0.5, 0.7, 0.8, 0.85, 0.95];

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
    else node.setAttribute(name, value === true ? "" : String(value));
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function svg(tag, attrs, ...children) {
  const node = document.createElementNS("http://www.w3.org/2000/svg", tag);
  for (const [name, value] of Object.entries(attrs || {})) node.setAttribute(name, String(value));
  for (const child of children.flat()) {
    if (child !== null && child !== undefined) node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

const fmt = (n) => (n === null || n === undefined ? "—" : Number(n).toLocaleString("en-US"));
const pct = (x) => (x === null || x === undefined ? "—" : (100 * x).toFixed(1) + " %");

async function api(path, options) {
  const headers = Object.assign({ Accept: "application/json" }, (options || {}).headers || {});
  if (state.key) headers["X-Ruyi-Key"] = state.key;
  const agent = (options || {}).agent;
  if (agent) headers["X-Ruyi-Agent"] = agent;
  const init = { method: (options || {}).method || "GET", headers };
  if ((options || {}).body !== undefined) {
    headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(options.body);
  }
  const resp = await fetch(path, init);
  const type = resp.headers.get("Content-Type") || "";
  const data = type.includes("json") ? await resp.json() : await resp.text();
  if (resp.status === 401) {
    $("keybox").hidden = false;
    throw new Error("a key is needed");
  }
  if (!resp.ok) {
    const message = data && data.error ? (data.error.message || data.error) : resp.statusText;
    throw new Error(`${resp.status}: ${message}`);
  }
  return data;
}

function status(text, isError) {
  $("status").textContent = text || "";
  $("status").className = isError ? "error" : "";
}

function query() {
  const days = $("days").value || "14";
  const price = $("price").value;
  const agent = $("agent").value;
  const q = new URLSearchParams({ days });
  if (price) q.set("price", price);
  if (agent) q.set("agent", agent);
  return q.toString();
}

async function loadAgents() {
  const data = await api("/ruyi/v1/agents");
  state.agents = data.agents;
  const select = $("agent");
  const chosen = select.value;
  select.replaceChildren(el("option", { value: "" }, "all agents"),
    ...data.agents.map((a) => el("option", { value: a.agent_id }, `${a.agent_id} (${a.sessions})`)));
  select.value = data.agents.some((a) => a.agent_id === chosen) ? chosen : "";
}

function tile(label, value, title) {
  return el("div", { class: "tile", title }, el("b", {}, value), el("span", {}, label));
}

async function overview() {
  await loadAgents();
  const r = await api(`/ruyi/v1/overview?${query()}`);
  const cost = r.cost || {};
  const main = $("main");
  main.replaceChildren(
    el("h1", {}, "Overview"),
    el("div", { class: "tiles" },
      tile("requests", fmt(r.requests.total)),
      tile("sessions", fmt(r.requests.sessions)),
      tile("tokens the clients sent", fmt(r.tokens.before)),
      tile("tokens forwarded", fmt(r.tokens.after)),
      tile("saved", pct(r.tokens.saved_share)),
      tile("cost with caching, vs sending everything", cost.ratio === null || cost.ratio === undefined ? "—" : cost.ratio.toFixed(2) + "×",
        `${fmt(cost.with_ruyi)} vs ${fmt(cost.without_ruyi)} token-prices (cached tokens at ${cost.cache_read_ratio} of the price)`),
      cost.usd_saved !== undefined ? tile("US dollars saved", "$" + cost.usd_saved) : null,
      tile("cache hit (upstream's count)", pct(r.cache.hit_rate)),
      tile("archives", fmt(r.archives.total)),
      tile("over the window, not prevented", fmt(r.overflows.not_prevented))),
    el("h2", {}, "Agents"),
    table(["agent", "sessions", "last seen"], state.agents.map((a) => [
      el("a", { href: `#/memory/${encodeURIComponent(a.agent_id)}` }, a.agent_id), a.sessions,
      typeof a.last_seen === "number" ? new Date(a.last_seen * 1000).toISOString() : a.last_seen])),
    el("h2", {}, "Sessions, newest first"),
    table(["session", "agent", "requests", "client sent", "forwarded", "saved", "archives", "last seen"], r.sessions.map((s) => [
      el("a", { href: `#/session/${encodeURIComponent(s.agent_id)}/${encodeURIComponent(s.session_id)}`, class: "session-link" }, s.session_id),
      s.agent_id, s.requests, s.tokens_before, s.tokens_after, s.tokens_before ? pct(s.saved / s.tokens_before) : "—", s.archives, s.last_seen])),
  );
  status(`${r.requests.total} requests since ${r.since || "the start"}`);
}

function table(heads, rows) {
  const numeric = (v) => typeof v === "number";
  return el("table", {},
    el("thead", {}, el("tr", {}, heads.map((h) => el("th", { scope: "col" }, h)))),
    el("tbody", {}, rows.length ? rows.map((row) => el("tr", {}, row.map((v) => el("td", { class: numeric(v) ? "num" : null }, numeric(v) ? fmt(v) : v))))
      : el("tr", {}, el("td", { colspan: heads.length, class: "muted" }, "nothing yet"))));
}

function chart(points) {
  const W = 1000, H = 360, L = 70, R = 20, T = 20, B = 40;
  const n = points.length;
  const top = Math.max(1, ...points.map((p) => Math.max(p.est_before || 0, p.est_after || 0, p.window || 0)));
  const x = (i) => L + (n <= 1 ? (W - L - R) / 2 : (i * (W - L - R)) / (n - 1));
  const y = (v) => T + (H - T - B) * (1 - v / top);
  const line = (key, color, cls) => svg("polyline", {
    class: cls, fill: "none", stroke: color, "stroke-width": 2,
    points: points.map((p, i) => `${x(i).toFixed(1)},${y(p[key] || 0).toFixed(1)}`).join(" "),
  });
  const parts = [];
  const usable = points.length ? points[points.length - 1].usable : null;
  if (usable) {  // the tier bands of the usable window (50/70/80/85/95 %), warmer toward the top
    const names = ["normal", "compact", "prepare", "prune", "archive"];
    TIERS.forEach((t, i) => {
      const hi = i + 1 < TIERS.length ? TIERS[i + 1] : 1;
      parts.push(svg("rect", { class: "band", x: L, width: W - L - R, y: y(usable * hi), height: Math.max(0, y(usable * t) - y(usable * hi)),
        fill: "var(--prune)", opacity: 0.04 + 0.035 * i }, svg("title", {}, `${names[i]} tier: ${Math.round(t * 100)} % of the usable window`)));
      parts.push(svg("text", { x: L + 4, y: y(usable * t) - 2, "font-size": 10, fill: "var(--muted)" }, `${Math.round(t * 100)} % ${names[i]}`));
    });
    parts.push(svg("line", { x1: L, x2: W - R, y1: y(usable), y2: y(usable), stroke: "var(--muted)", "stroke-dasharray": "6 4" }));
  }
  const windows = points.map((p) => p.window || 0);
  if (windows.some(Boolean)) parts.push(line("window", "var(--muted)", "window"));
  parts.push(svg("g", { class: "cached" }, points.map((p, i) => p.cached_tokens ? svg("rect", {
    x: x(i) - 3, width: 6, y: y(p.cached_tokens), height: y(0) - y(p.cached_tokens), fill: "var(--cached)", opacity: 0.35,
  }, svg("title", {}, `cached ${fmt(p.cached_tokens)}`)) : null)));
  parts.push(line("est_before", "var(--client)", "client"));
  parts.push(line("est_after", "var(--sent)", "sent"));
  points.forEach((p, i) => {
    const label = `request ${i + 1}: client sent ${fmt(p.est_before)}, forwarded ${fmt(p.est_after)}, tier ${p.tier}, batch ${p.batch || "none"}`;
    parts.push(svg("circle", { class: "point", cx: x(i), cy: y(p.est_after || 0), r: 3.5, fill: "var(--sent)", tabindex: 0 }, svg("title", {}, label)));
    if (["applied", "economic", "overflow"].includes(p.batch)) {
      parts.push(svg("path", { class: "prune", d: `M${x(i) - 5},${y(p.est_after || 0) - 12} h10 l-5,8 z`, fill: "var(--prune)" }, svg("title", {}, `prune batch (${p.batch})`)));
    }
    if (p.archive) {
      parts.push(svg("line", { class: "archive", x1: x(i), x2: x(i), y1: T, y2: H - B, stroke: "var(--archive)", "stroke-width": 2 },
        svg("title", {}, `archive ${p.archive.number}: ${p.archive.reason}`)));
      const right = x(i) > W * 0.8;
      parts.push(svg("text", { x: x(i) + (right ? -4 : 4), y: T + 12, "font-size": 11, fill: "var(--archive)", "text-anchor": right ? "end" : "start" },
        `archive ${p.archive.number}`));
    }
  });
  for (let k = 0; k <= 4; k++) {
    const v = (top * k) / 4;
    parts.push(svg("text", { x: L - 6, y: y(v) + 4, "text-anchor": "end", "font-size": 11, fill: "var(--muted)" }, fmt(Math.round(v))));
  }
  parts.push(svg("text", { x: (W + L) / 2, y: H - 8, "text-anchor": "middle", "font-size": 12, fill: "var(--muted)" }, `requests (${n})`));
  return el("div", { class: "chart" },
    svg("svg", { viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": `Context of the session over ${n} requests` }, parts),
    el("div", { class: "legend" },
      el("span", {}, el("i", { style: null, class: "l-client" }), "tokens the client sent"),
      el("span", {}, el("i", { class: "l-sent" }), "tokens forwarded"),
      el("span", {}, el("i", { class: "l-cached" }), "cached (upstream)"),
      el("span", {}, el("i", { class: "l-window" }), "window; dashed: usable"),
      el("span", {}, el("i", { class: "l-archive" }), "archive"),
      el("span", {}, el("i", { class: "l-prune" }), "prune batch")));
}

async function showRef(agent, ref, into) {
  try {
    const r = await api(`/ruyi/v1/refs/${encodeURIComponent(ref)}`, { agent });
    into.replaceChildren(el("pre", {}, r.original));
  } catch (err) {
    into.replaceChildren(el("span", { class: "error" }, String(err.message)));
  }
}

async function session(agent, id) {
  const base = `/ruyi/v1/sessions/${encodeURIComponent(id)}`;
  const [tl, info, report, archive] = await Promise.all([
    api(`${base}/timeline`, { agent }), api(base, { agent }), api(`${base}/report`, { agent }),
    api(`${base}/archive`, { agent }).catch(() => null)]);
  const main = $("main");
  state.lastCount = tl.points.length;
  const replaced = el("div", {});
  for (const d of tl.replaced || []) {
    const target = el("div", {});
    replaced.append(el("details", {},
      el("summary", {}, `${d.strategy}: message ${d.message}${d.tokens_saved ? `, ~${fmt(d.tokens_saved)} tokens` : ""}`),
      el("pre", {}, d.placeholder || ""),
      d.ref ? el("button", { type: "button", onclick: () => showRef(agent, d.ref, target) }, `show the original (${d.ref})`) : null, target));
  }
  const archives = el("div", {});
  for (const a of (archive && archive.archives) || []) {
    const turns = el("div", {});
    archives.append(el("details", {},
      el("summary", {}, `Archive ${a.number}: messages ${a.head}–${a.end}, ${a.reason || ""}`),
      el("pre", {}, a.summary || a.text || JSON.stringify(a, null, 2)),
      el("button", { type: "button", onclick: async () => {
        const t = await api(`${base}/archive?number=${a.number}&form=expanded`, { agent });
        turns.replaceChildren(el("pre", {}, t.turns.map((x) => `#${x.turn} ${x.message && x.message.role}: ${JSON.stringify(x.message && x.message.content)}`).join("\n")));
      } }, "show the raw turns it covers"), turns));
  }
  for (const c of (archive && archive.chunks) || []) {
    archives.append(el("details", {}, el("summary", {}, `S2 chunk ${c.chunk_id} (messages ${c.first}–${c.last})`), el("pre", {}, c.summary)));
  }
  const forms = el("div", { class: "row" });
  for (const name of ["compact", "normal", "expanded"]) {
    const out = el("div", {});
    forms.append(el("button", { type: "button", onclick: async () => {
      try {
        const f = await api(`${base}/forms/${name}`, { agent });
        out.replaceChildren(el("pre", {}, f.text));
      } catch (err) { out.replaceChildren(el("span", { class: "error" }, String(err.message))); }
    } }, `${name} form`), out);
  }
  const children = await api(`${base}/children`, { agent }).catch(() => null);
  const s = report.summary || {};
  main.replaceChildren(
    el("p", {}, el("a", { href: "#/" }, "← overview")),
    el("h1", {}, `Session ${id}`),
    el("p", { class: "muted" }, `agent ${agent} · ${info.requests} requests · window ${fmt(info.window)} · tier ${info.tier}` +
      (info.parent_id ? ` · sub-agent of ${info.parent_id}` : "")),
    chart(tl.points),
    el("h2", {}, "What each strategy replaced"),
    table(["strategy", "items", "tokens saved"], Object.entries(s.strategies || {}).map(([k, v]) => [k, v.items, v.tokens_saved])),
    replaced,
    el("h2", {}, "Archives"), archives.childNodes.length ? archives : el("p", { class: "muted" }, "no archive yet"),
    el("h2", {}, "Forms"), forms,
    el("h2", {}, "Sub-agents"),
    children && children.results && children.results.length
      ? table(["child", "importance", "result"], children.results.map((c) => [c.child_id, c.importance, c.text]))
      : el("p", { class: "muted" }, "none"),
  );
  status(`live: ${tl.points.length} requests`);
  clearInterval(state.timer);
  state.timer = setInterval(async () => {  // live: the chart follows new requests without a reload
    if (!location.hash.startsWith("#/session/")) return clearInterval(state.timer);
    try {
      const again = await api(`${base}/timeline`, { agent });
      if (again.points.length !== state.lastCount) {
        state.lastCount = again.points.length;
        main.querySelector(".chart").replaceWith(chart(again.points));
        status(`live: ${again.points.length} requests`);
      }
    } catch (err) { status(String(err.message), true); }
  }, 2000);
}

async function memory(agent) {
  await loadAgents();
  agent = agent || $("agent").value || (state.agents[0] && state.agents[0].agent_id) || "default";
  const [anchors, notebook, versions, drafts, cards] = await Promise.all([
    api("/ruyi/v1/anchors", { agent }), api("/ruyi/v1/notebook", { agent }), api("/ruyi/v1/notebook/versions", { agent }),
    api("/ruyi/v1/cards/drafts", { agent }), api("/ruyi/v1/cards", { agent }).catch(() => ({ cards: [] }))]);
  const main = $("main");
  const redo = () => memory(agent).catch((err) => status(String(err.message), true));
  const act = (fn) => async () => {
    try { await fn(); await redo(); status("done"); } catch (err) { status(String(err.message), true); }
  };
  main.replaceChildren(
    el("h1", {}, `Memory of ${agent}`),
    el("h2", {}, "Anchors"),
    table(["id", "status", "title", ""], anchors.anchors.map((a) => [a.id, a.status, a.title,
      a.status === "pending" ? el("span", { class: "row" },
        el("button", { type: "button", class: "accept-anchor", onclick: act(() => api(`/ruyi/v1/anchors/${a.id}`, { agent, method: "PATCH", body: { status: "active" } })) }, "accept"),
        el("button", { type: "button", onclick: act(async () => {
          const title = prompt("Title", a.title);
          if (title !== null) await api(`/ruyi/v1/anchors/${a.id}`, { agent, method: "PATCH", body: { title } });
        }) }, "edit")) : ""])),
    el("h2", {}, `Notebook (version ${notebook.version})`),
    ...Object.entries(notebook.sections).map(([name, sec]) => el("details", { open: true },
      el("summary", {}, `${sec.title} · ${sec.english} (${sec.entries.length})`),
      el("ul", {}, sec.entries.map((e) => el("li", {}, typeof e === "string" ? e : e.text))))),
    table(["version", "when", "why", ""], versions.versions.map((v) => [v.version, new Date(v.created_at * 1000).toISOString(), v.reason,
      v.version !== notebook.version ? el("button", { type: "button", onclick: act(() => api(`/ruyi/v1/notebook/rollback/${v.version}`, { agent, method: "POST" })) }, "roll back to this") : "current"])),
    el("h2", {}, "Draft cards"),
    table(["#", "status", "title", "tags", ""], drafts.drafts.map((d) => [d.id, d.status, d.title, d.tags.join(", "),
      d.status === "proposed" ? el("span", { class: "row" },
        el("button", { type: "button", class: "accept-draft", "data-id": d.id, onclick: act(() => api(`/ruyi/v1/cards/drafts/${d.id}/accept`, { agent, method: "POST" })) }, "accept"),
        el("button", { type: "button", class: "reject-draft", onclick: act(() => api(`/ruyi/v1/cards/drafts/${d.id}/reject`, { agent, method: "POST" })) }, "reject")) : ""])),
    el("h2", {}, "Knowledge cards"),
    table(["title", "tags", "path"], (cards.cards || []).map((c) => [c.title, (c.tags || []).join(", "), c.path || ""])),
  );
  status(`memory of ${agent}`);
}

async function route() {
  clearInterval(state.timer);
  const parts = location.hash.replace(/^#\/?/, "").split("/").map(decodeURIComponent);
  try {
    if (parts[0] === "session" && parts.length >= 3) await session(parts[1], parts.slice(2).join("/"));
    else if (parts[0] === "memory") await memory(parts[1]);
    else await overview();
    $("keybox").hidden = true;
  } catch (err) {
    status(String(err.message), true);
  }
}

$("keyform").addEventListener("submit", (event) => {
  event.preventDefault();
  state.key = $("key").value.trim();
  sessionStorage.setItem("ruyi-key", state.key);
  $("key").value = "";
  route();
});
$("filters").addEventListener("change", () => route());
$("filters").addEventListener("submit", (event) => { event.preventDefault(); route(); });
$("price").value = localStorage.getItem("ruyi-price") || "";
$("price").addEventListener("change", () => localStorage.setItem("ruyi-price", $("price").value));
window.addEventListener("hashchange", route);
route();
