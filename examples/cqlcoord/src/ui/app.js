// cqlcoord ui: renders /api/overview or /api/queues/NAME and reads it again every refresh,
// without reloading the page. Data goes into the page as text only (never as HTML).
"use strict";

const queuePath = location.pathname.match(/^\/queue\/([^/]+)$/);
const queueName = queuePath ? decodeURIComponent(queuePath[1]) : null;
const api = queueName ? "/api/queues/" + encodeURIComponent(queueName) : "/api/overview";
let refreshMs = 2000;

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (key === "class") node.className = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value);
  }
  for (const child of children) {
    if (child === null || child === undefined) continue;
    node.append(child instanceof Node ? child : String(child));
  }
  return node;
}

function duration(secs) {
  if (secs === null || secs === undefined) return "–";
  if (secs < 1) return Math.round(secs * 1000) + " ms";
  if (secs < 120) return secs.toFixed(1) + " s";
  if (secs < 7200) return Math.round(secs / 60) + " min";
  return (secs / 3600).toFixed(1) + " h";
}

function table(headings, rows, empty) {
  if (rows.length === 0) return el("p", { class: "muted" }, empty);
  return el("table", {},
    el("thead", {}, el("tr", {}, ...headings.map((h) => el("th", {}, h)))),
    el("tbody", {}, ...rows));
}

function failed(entry, columns) {
  return el("td", { colspan: String(columns), class: "error" }, "cannot read: " + entry.error);
}

function since(ms, now) {
  if (ms === null || ms === undefined) return el("span", { class: "muted" }, "before this dashboard's first look");
  const at = new Date(ms).toLocaleTimeString();
  return duration((now - ms) / 1000) + " ago (" + at + ")";
}

function renderOverview(data) {
  const elections = data.elections.map((e) => {
    const row = el("tr", { "data-election": e.name }, el("td", {}, el("code", {}, e.name)));
    if (e.error) row.append(failed(e, 5));
    else if (!e.leader) row.append(el("td", { class: "leader free", colspan: "5" }, "no leader"));
    else row.append(
      el("td", { class: "leader" }, e.leader),
      el("td", { class: "term num mono" }, e.term),
      el("td", {}, e.value ?? "–"),
      el("td", {}, since(e.since_ms, data.now_ms)),
      el("td", { class: "num" }, duration(e.expires_within_secs)));
    return row;
  });
  const leases = data.leases.map((l) => {
    const row = el("tr", { "data-lease": l.kind + "/" + l.name },
      el("td", {}, el("code", {}, l.name)), el("td", {}, l.kind));
    if (l.error) row.append(failed(l, 4));
    else if (!l.holder) row.append(el("td", { class: "holder free", colspan: "4" }, "free"));
    else row.append(
      el("td", { class: "holder" }, l.holder),
      el("td", { class: "token num mono" }, l.token),
      el("td", {}, l.value ?? "–"),
      el("td", { class: "num" }, duration(l.expires_within_secs)));
    return row;
  });
  const queues = data.queues.map((q) => {
    const link = el("a", { href: "/queue/" + encodeURIComponent(q.name) }, q.name);
    const row = el("tr", { "data-queue": q.name }, el("td", {}, link));
    if (q.error) row.append(failed(q, 5));
    else row.append(...counts(q));
    return row;
  });
  // A section with no names is left out, unless no section has any.
  const sections = [
    ["Elections", ["election", "leader", "term", "value", "leading since", "expires within"], elections],
    ["Leases and locks", ["name", "kind", "holder", "fencing token", "value", "expires within"], leases],
    ["Queues", ["queue", "available", "scheduled", "running", "dead", "oldest available"], queues],
  ];
  const shown = sections.filter(([, , rows]) => rows.length > 0);
  const parts = shown.flatMap(([title, headings, rows]) => [el("h2", {}, title), table(headings, rows, "")]);
  if (parts.length === 0) {
    parts.push(el("p", { class: "muted" },
      "Nothing to show: start the dashboard with --election NAME, --lock NAME, --lease NAME or --queue NAME."));
  }
  document.getElementById("main").replaceChildren(...parts);
}

function counts(q) {
  const bound = q.complete ? "" : "≥ ";
  const cell = (name, value, extra) =>
    el("td", { class: "num " + name + (extra ? " " + extra : "") }, bound + value);
  return [cell("available", q.available), cell("scheduled", q.scheduled),
    cell("running", q.running), cell("dead", q.dead, q.dead > 0 ? "has-dead" : ""),
    el("td", { class: "num age" }, oldest(q, bound), lag(q))];
}

// The oldest available item's age: at least that when not every entry was read.
function oldest(q, bound) {
  const age = q.oldest_available_age_secs;
  return age === null || age === undefined ? "–" : bound + duration(age);
}

// A cursor minutes behind: a backlog holds it, or no worker has scanned for a while.
function lag(q) {
  if (!(q.cursor_lag_secs > 300)) return null;
  return el("span", { class: "muted lag" }, " (cursor " + duration(q.cursor_lag_secs) + " behind)");
}

function renderQueue(data, writable) {
  const summary = table(["queue", "available", "scheduled", "running", "dead", "oldest available"],
    [el("tr", { "data-queue": data.name }, el("td", {}, el("code", {}, data.name)), ...counts(data))], "");
  const letters = data.dead_letters.map((d) => el("tr", { "data-dead": d.id },
    el("td", { class: "mono" }, d.id),
    el("td", { class: "num" }, d.attempts),
    el("td", { class: "error" }, d.last_error ?? "–"),
    el("td", { class: "mono" }, d.payload),
    el("td", {},
      el("button", { class: "requeue", onclick: () => write(d.id, "requeue"), ...(writable ? {} : { disabled: "" }) }, "Requeue"),
      " ",
      el("button", { class: "purge", onclick: () => write(d.id, "purge"), ...(writable ? {} : { disabled: "" }) }, "Purge"))));
  const shown = data.dead > data.dead_letters.length
    ? el("p", { class: "muted" }, "The first " + data.dead_letters.length + " dead letters (oldest first).")
    : null;
  const parts = [el("h1", {}, "Queue ", el("code", {}, data.name)), summary,
    el("h2", {}, "Dead letters"), tokenForm(writable)];
  if (shown) parts.push(shown);
  parts.push(table(["id", "attempts", "last error", "payload", ""], letters, "No dead letters."));
  document.getElementById("main").replaceChildren(...parts);
}

let tokenInput = null;
function tokenForm(writable) {
  if (!writable) return el("p", { class: "muted token" }, "Read-only: start the dashboard with --write-token to requeue or purge.");
  if (!tokenInput) {
    tokenInput = el("input", { id: "token", type: "password", autocomplete: "off", placeholder: "write token" });
    tokenInput.value = sessionStorage.getItem("cqlcoord-token") || "";
    tokenInput.addEventListener("change", () => sessionStorage.setItem("cqlcoord-token", tokenInput.value));
  }
  return el("p", { class: "token" }, el("label", { for: "token" }, "Write token: "), tokenInput);
}

async function write(id, action) {
  const token = tokenInput ? tokenInput.value : "";
  sessionStorage.setItem("cqlcoord-token", token);
  const url = api + "/dead/" + encodeURIComponent(id) + "/" + action;
  const answer = await fetch(url, {
    method: "POST",
    headers: { "X-CQLCOORD-CSRF": "1", "X-CQLCOORD-TOKEN": token },
  }).catch((e) => ({ ok: false, json: async () => ({ error: String(e) }) }));
  const body = await answer.json().catch(() => ({}));
  showError(answer.ok ? null : action + " " + id + ": " + (body.error || "failed"));
  refresh();
}

function showError(message) {
  const node = document.getElementById("error");
  node.hidden = !message;
  node.textContent = message || "";
}

let timer = null;
let readFailed = false;
async function refresh() {
  clearTimeout(timer);
  try {
    const answer = await fetch(api, { headers: { Accept: "application/json" } });
    const data = await answer.json();
    if (!answer.ok) throw new Error(data.error || answer.statusText);
    // Every row failing is the cluster out of reach, not news about each row.
    const rows = [...(data.elections || []), ...(data.leases || []), ...(data.queues || [])];
    if (!queueName && rows.length > 0 && rows.every((row) => row.error)) throw new Error(rows[0].error);
    refreshMs = data.refresh_ms;
    if (queueName) renderQueue(data, data.writable); else renderOverview(data);
    document.getElementById("cost").textContent = data.cost;
    document.getElementById("refresh").textContent = duration(refreshMs / 1000);
    document.getElementById("refreshed").textContent = new Date().toLocaleTimeString();
    document.getElementById("status").textContent = data.writable ? "writes need the token" : "read-only";
    document.body.dataset.refreshes = String(Number(document.body.dataset.refreshes || 0) + 1);
    document.getElementById("main").classList.remove("stale");
    if (readFailed) showError(null);
    readFailed = false;
  } catch (e) {
    document.getElementById("status").textContent = "cannot read";
    // What is on screen is from the last good read: say so, and grey it out.
    document.getElementById("main").classList.add("stale");
    readFailed = true;
    showError("Cannot read from the dashboard or the cluster (" + e.message + "); the figures shown are from " +
      document.getElementById("refreshed").textContent + ". Trying again every " + duration(refreshMs / 1000) + ".");
  }
  timer = setTimeout(() => refresh(), refreshMs);
}

document.getElementById("title").textContent = queueName ? "queue " + queueName : "overview";
refresh();
