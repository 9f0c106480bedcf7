// drover's web UI: one page, hash routes, the /v1 API with the operator's
// token, and a followed event stream that redraws the page when the
// cluster changes. Plain JavaScript: no build step, nothing fetched from
// elsewhere.
"use strict";

const main = document.getElementById("main");
const live = document.getElementById("live");
let token = localStorage.getItem("drover-token") || "";

// ---- API ----

class APIError extends Error {
  constructor(status, msg) { super(msg); this.status = status; }
}

async function api(path) {
  const resp = await fetch(path, { headers: { "X-Drover-Token": token } });
  if (resp.status === 401 || (resp.status === 403 && (await peekUnknownToken(resp)))) {
    askToken("That token is not accepted: " + resp.status);
    throw new APIError(resp.status, "no usable token");
  }
  if (!resp.ok) {
    let msg = resp.statusText;
    try { msg = (await resp.json()).error || msg; } catch (e) { /* not JSON */ }
    throw new APIError(resp.status, msg);
  }
  return resp.json();
}

async function peekUnknownToken(resp) {
  try {
    const body = await resp.clone().json();
    return /not known/.test(body.error || "");
  } catch (e) { return false; }
}

// ---- helpers ----

function esc(s) {
  return String(s ?? "").replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" }[c]));
}
const status = (s) => `<span class="status ${esc(s)}">${esc(s)}</span>`;
const short = (id) => esc(String(id || "").slice(0, 8));
const when = (t) => (t && !t.startsWith("0001") ? new Date(t).toLocaleString() : "-");
const link = (href, text) => `<a href="${esc(href)}">${esc(text)}</a>`;
function table(head, rows, empty) {
  if (!rows.length) return `<p class="muted">${esc(empty)}</p>`;
  return `<table><thead><tr>${head.map((h) => `<th>${esc(h)}</th>`).join("")}</tr></thead><tbody>${rows.map((r) => `<tr>${r.join("")}</tr>`).join("")}</tbody></table>`;
}
const td = (html, cls) => `<td${cls ? ` class="${cls}"` : ""}>${html}</td>`;
function bar(alloc, used, total) {
  const p = (x) => (total > 0 ? Math.min(100, (100 * x) / total) : 0);
  return `<div class="bar"><span class="alloc" style="width:${p(alloc)}%"></span><span class="used" style="width:${p(used)}%"></span></div>`;
}

function allocStatus(a) {
  if (a.node_down && !["complete", "failed"].includes(a.status?.client_status)) return "lost";
  return a.status?.client_status || "pending";
}
function restarts(a) {
  return Object.values(a.status?.tasks || {}).reduce((n, t) => n + (t.restarts || 0), 0);
}

// ---- views ----

let jobFilter = "all";

const views = {
  async jobs() {
    const jobs = await api("/v1/jobs");
    const states = ["all", "running", "pending", "failed", "complete", "stopped"];
    const shown = jobs.filter((j) => jobFilter === "all" || (j.stopped ? "stopped" : j.summary.state) === jobFilter);
    return `<h1>Jobs <small>${jobs.length}</small></h1>
      <div class="filters">${states.map((s) => `<button type="button" data-filter="${s}" class="${s === jobFilter ? "on" : ""}">${s}</button>`).join("")}</div>
      ${table(["Name", "Namespace", "Type", "Version", "Status", "Running", "Why"],
        shown.map((j) => [td(link(`#/jobs/${encodeURIComponent(j.name)}`, j.name)), td(esc(j.namespace)), td(esc(j.type)),
          td(esc(j.version), "num"), td(status(j.stopped ? "stopped" : j.summary.state)),
          td(`${j.summary.running}/${j.summary.desired}`, "num"), td(esc(j.summary.reason || ""))]),
        jobFilter === "all" ? "No jobs yet: drover run FILE submits one." : `No ${jobFilter} jobs.`)}`;
  },

  async job(name) {
    const enc = encodeURIComponent(name);
    const [st, versions, events, dep] = await Promise.all([
      api(`/v1/jobs/${enc}`), api(`/v1/jobs/${enc}/versions`),
      api(`/v1/events?job=${enc}&since=24h`), api(`/v1/jobs/${enc}/deployment`).catch(() => null)]);
    const j = st.job, s = st.summary;
    let depHTML = `<p class="muted">No deployment: the job has no update block.</p>`;
    if (dep) {
      depHTML = `<p>${status(dep.status)} version ${esc(dep.job_version)} <span class="id">${short(dep.id)}</span> ${esc(dep.description || "")}</p>` +
        table(["Group", "Desired", "Placed", "Healthy", "Unhealthy", "Canaries"],
          Object.entries(dep.groups || {}).map(([g, d]) => [td(esc(g)), td(d.desired, "num"), td(d.placed, "num"), td(d.healthy, "num"),
            td(d.unhealthy, "num"), td(d.desired_canaries || 0, "num")]), "");
    }
    return `<h1>${esc(j.name)} <small>${esc(j.namespace)} · ${esc(j.type)} · version ${esc(j.version)}</small></h1>
      <div class="grid">
        <div class="card">Status<b>${status(j.stopped ? "stopped" : s.state)}</b></div>
        <div class="card">Running<b>${s.running}/${s.desired}</b></div>
        <div class="card">Pending<b>${s.pending}</b></div>
        <div class="card">Failed<b>${s.failed}</b></div>
        <div class="card">Lost<b>${s.lost}</b></div>
      </div>
      ${s.reason ? `<p class="error">${esc(s.reason)}</p>` : ""}
      <h2>Instances</h2>
      ${table(["Instance", "ID", "Node", "Status", "Desired", "Version", "Restarts", "Created"],
        st.allocations.slice().sort((a, b) => a.name.localeCompare(b.name)).map((a) => [
          td(link(`#/allocs/${a.id}`, a.name)), td(`<span class="id">${short(a.id)}</span>`), td(esc(a.node_name)),
          td(status(allocStatus(a))), td(esc(a.desired_status)), td(esc(a.job_version), "num"), td(restarts(a), "num"), td(when(a.create_time))]),
        "No instances.")}
      <h2>Deployment</h2>${depHTML}
      <h2>Versions</h2>
      ${table(["Version", "Submitted", "Stopped"], versions.map((v) => [td(esc(v.version), "num"), td(when(v.submit_time)), td(v.stopped ? "yes" : "")]), "")}
      <h2>Events</h2>${eventTable(events.slice(-50).reverse())}`;
  },

  async nodes() {
    const [nodes, allocs] = await Promise.all([api("/v1/nodes"), api("/v1/allocations")]);
    const used = {};
    for (const a of allocs) {
      if (a.desired_status !== "run" || ["complete", "failed"].includes(a.status?.client_status)) continue;
      const u = (used[a.node_id] ||= { cpu: 0, memory: 0, n: 0 });
      u.cpu += a.resources.cpu; u.memory += a.resources.memory; u.n++;
    }
    return `<h1>Nodes <small>${nodes.length}</small></h1>` + table(
      ["Name", "ID", "Status", "Drivers", "CPU MHz: allocated / used / total", "Memory MB: allocated / used / total", "Instances"],
      nodes.map((n) => {
        const a = used[n.id] || { cpu: 0, memory: 0, n: 0 };
        const u = n.usage?.tasks || { cpu: 0, memory: 0 };
        let st = n.status;
        if (n.status === "ready" && n.drain) st = "draining";
        else if (n.status === "ready" && n.ineligible) st = "ineligible";
        return [td(`<b>${esc(n.name)}</b>`), td(`<span class="id">${short(n.id)}</span>`), td(status(st)), td(esc((n.drivers || []).join(", "))),
          td(`${a.cpu} / ${u.cpu} / ${n.resources.cpu}${bar(a.cpu, u.cpu, n.resources.cpu)}`, "num"),
          td(`${a.memory} / ${u.memory} / ${n.resources.memory}${bar(a.memory, u.memory, n.resources.memory)}`, "num"),
          td(a.n, "num")];
      }), "No nodes: start an agent (drover agent) or drover dev.");
  },

  async allocs(id) {
    const a = await api(`/v1/allocations/${encodeURIComponent(id)}`);
    const tasks = a.tasks.map((t) => t.name);
    const task = new URLSearchParams(location.hash.split("?")[1] || "").get("task") || tasks[0];
    const ts = a.status?.tasks?.[task] || {};
    setTimeout(() => followLogs(a.id, task), 0);
    return `<h1>${esc(a.name)} <small><span class="id">${esc(a.id)}</span></small></h1>
      <p>${status(allocStatus(a))} on node <b>${esc(a.node_name)}</b> · job ${link(`#/jobs/${encodeURIComponent(a.job)}`, a.job)} version ${esc(a.job_version)}
        · ${esc(a.status?.description || a.desired_reason || "")}</p>
      <div class="filters">${tasks.map((t) => `<a href="#/allocs/${esc(a.id)}?task=${encodeURIComponent(t)}"><button type="button" class="${t === task ? "on" : ""}">${esc(t)}</button></a>`).join("")}</div>
      <p class="muted">Task ${esc(task)}: ${esc(ts.state || "pending")}, ${ts.restarts || 0} restarts${ts.pid ? ", pid " + esc(ts.pid) : ""}</p>
      <h2>Live logs <small class="muted">stdout</small></h2><pre class="logs" id="logs"></pre>
      <h2>Task events</h2>${table(["Time", "Type", "Message"], (ts.events || []).slice().reverse().map((e) => [td(when(e.time)), td(esc(e.type)), td(esc(e.message || ""))]), "None yet.")}`;
  },

  async events() {
    const evs = await api("/v1/events?since=24h");
    return `<h1>Events <small>live</small></h1><div id="event-table">${eventTable(evs.slice(-200).reverse())}</div>`;
  },
};

function eventTable(evs) {
  return table(["Time", "Topic", "Type", "Subject", "Message"], evs.map(eventRow), "No events.");
}
function eventRow(e) {
  let subject = e.job || "";
  if (e.alloc) subject = e.alloc + (e.task ? "/" + e.task : "");
  if (e.topic === "node") subject = e.node;
  const subj = e.alloc_id ? link(`#/allocs/${e.alloc_id}`, subject) : e.job ? link(`#/jobs/${encodeURIComponent(e.job)}`, subject) : esc(subject);
  return [td(when(e.time)), td(esc(e.topic)), td(esc(e.type)), td(subj), td(esc(e.message || ""))];
}

// ---- logs ----

let logAbort = null;
async function followLogs(id, task) {
  if (logAbort) logAbort.abort();
  logAbort = new AbortController();
  const pre = document.getElementById("logs");
  if (!pre) return;
  try {
    const resp = await fetch(`/v1/allocations/${encodeURIComponent(id)}/logs?task=${encodeURIComponent(task)}&follow=true&tail=200`,
      { headers: { "X-Drover-Token": token }, signal: logAbort.signal });
    if (!resp.ok) { pre.textContent = `(${resp.status}) ` + (await resp.text()); return; }
    const reader = resp.body.getReader();
    const dec = new TextDecoder();
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      const atEnd = pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 4;
      pre.textContent += dec.decode(value, { stream: true });
      if (pre.textContent.length > 400000) pre.textContent = pre.textContent.slice(-300000);
      if (atEnd) pre.scrollTop = pre.scrollHeight;
    }
  } catch (e) {
    if (e.name !== "AbortError") pre.textContent += "\n(log stream ended: " + e.message + ")";
  }
}

// ---- routing and rendering ----

function route() {
  const [path] = location.hash.replace(/^#\/?/, "").split("?");
  const [view, ...rest] = path.split("/");
  const arg = decodeURIComponent(rest.join("/"));
  if (view === "jobs" && arg) return { view: "job", arg }; // #/jobs/NAME
  return { view: views[view] ? view : "jobs", arg };
}

let rendering = false, again = false;
async function render() {
  if (rendering) { again = true; return; }
  rendering = true;
  const { view, arg } = route();
  document.querySelectorAll("[data-nav]").forEach((a) => a.classList.toggle("active", a.dataset.nav === view || (view === "job" && a.dataset.nav === "jobs")));
  try {
    const html = await views[view](arg);
    if (view !== "allocs" || !document.getElementById("logs") || main.dataset.alloc !== arg) {
      main.innerHTML = html;
      main.dataset.alloc = view === "allocs" ? arg : "";
    }
  } catch (e) {
    if (!(e instanceof APIError && e.status === 401)) main.innerHTML = `<p class="error">${esc(e.message)}</p>`;
  } finally {
    rendering = false;
    if (again) { again = false; setTimeout(render, 0); }
  }
}

// A change anywhere redraws the page, at most every 300 ms.
let redrawTimer = null;
function redrawSoon() {
  if (redrawTimer) return;
  redrawTimer = setTimeout(() => { redrawTimer = null; render(); }, 300);
}

// ---- the event stream: server-sent events read with fetch, so that the
// token goes in a header, never in a URL ----

let lastIndex = 0, streamAbort = null;
async function followEvents() {
  for (;;) {
    streamAbort = new AbortController();
    try {
      const resp = await fetch(`/v1/events?follow=true&index=${lastIndex}&since=1m`, { headers: { "X-Drover-Token": token }, signal: streamAbort.signal });
      if (!resp.ok) throw new Error("events: " + resp.status); // 401: the page's prompt asks for a token
      live.textContent = "● live"; live.classList.add("on");
      const reader = resp.body.getReader();
      const dec = new TextDecoder();
      let buf = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buf += dec.decode(value, { stream: true });
        let i;
        while ((i = buf.indexOf("\n\n")) >= 0) {
          const block = buf.slice(0, i); buf = buf.slice(i + 2);
          const data = block.split("\n").find((l) => l.startsWith("data: "));
          if (!data) continue;
          const e = JSON.parse(data.slice(6));
          lastIndex = Math.max(lastIndex, e.index);
          onEvent(e);
        }
      }
    } catch (e) { /* reconnect below */ }
    live.textContent = "○ reconnecting"; live.classList.remove("on");
    await new Promise((r) => setTimeout(r, 2000));
  }
}

function onEvent(e) {
  const { view } = route();
  if (view === "events") {
    const tbody = document.querySelector("#event-table tbody");
    if (tbody) { tbody.insertAdjacentHTML("afterbegin", `<tr>${eventRow(e).join("")}</tr>`); return; }
  }
  redrawSoon();
}

// ---- token ----

const dialog = document.getElementById("login");
function askToken(msg) {
  document.getElementById("login-error").textContent = msg || "";
  if (!dialog.open) dialog.showModal();
}
document.getElementById("login-form").addEventListener("submit", () => {
  token = document.getElementById("token").value.trim();
  localStorage.setItem("drover-token", token);
  if (streamAbort) streamAbort.abort();
  render();
});
document.getElementById("logout").addEventListener("click", () => askToken(""));
main.addEventListener("click", (ev) => {
  const f = ev.target.closest("[data-filter]");
  if (f) { jobFilter = f.dataset.filter; render(); }
});
window.addEventListener("hashchange", () => { if (logAbort && route().view !== "allocs") logAbort.abort(); render(); });

// No prompt up front: a server with ACLs off needs no token, and one with
// them answers 401, which opens the prompt.
render();
followEvents();
