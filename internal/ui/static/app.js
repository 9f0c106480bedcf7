// drover's web UI: one page, hash routes, the /v1 API with the session
// cookie, and a followed event stream that redraws the page when the
// cluster changes. Plain JavaScript modules, no build step, nothing fetched
// from elsewhere (docs/ui.md says why).
import { html } from "./html.js";
import { api, APIError, enc } from "./api.js";
import { execPanel, execAfterRender } from "./exec.js";

const main = document.getElementById("main");
const live = document.getElementById("live");
const flash = document.getElementById("flash");

// me is GET /v1/ui/whoami's answer: who is logged in and what they may do
// where; null before a login.
let me = null;
let loginError = "";
// ns is the namespace the lists show; "" is every one the token may read.
let ns = localStorage.getItem("drover-namespace") || "";

// ---- what the user may do ----

function can(namespace, capability) {
  const n = me?.namespaces.find((x) => x.name === (namespace || "default"));
  return !!n && n.capabilities.includes(capability);
}
const canNode = (capability) => (me?.node || []).includes(capability);
const nsReason = (namespace, capability) =>
  `token "${me?.token}" may not ${capability} in namespace "${namespace || "default"}": a policy with namespace "${namespace || "default"}" { capabilities = ["${capability}"] } grants it`;
const nodeReason = (capability) => `token "${me?.token}" may not ${capability} nodes: a policy with node { capabilities = ["${capability}"] } grants it`;

// ---- helpers ----

const status = (s) => html`<span class="status ${s}">${s}</span>`;
const short = (id) => String(id || "").slice(0, 8);
const when = (t) => (t && !t.startsWith("0001") ? new Date(t).toLocaleString() : "-");
const link = (href, text) => html`<a href="${href}">${text}</a>`;
const nodeLink = (id, name) => (id ? link(`#/nodes/${enc(id)}`, name || short(id)) : "-");
function table(head, rows, empty, cls = "", id = "") {
  if (!rows.length) return html`<p class="muted">${empty}</p>`;
  return html`<table class="${cls}" ${id ? html`id="${id}"` : ""}><thead><tr>${head.map((h) => html`<th>${h}</th>`)}</tr></thead><tbody>${rows.map((r) => html`<tr>${r}</tr>`)}</tbody></table>`;
}
const td = (v, cls) => html`<td class="${cls || ""}">${v}</td>`;
function bar(alloc, used, total) {
  const p = (x) => (total > 0 ? Math.min(100, (100 * x) / total).toFixed(1) : 0);
  return html`<div class="bar"><span class="alloc" style="width:${p(alloc)}%"></span><span class="used" style="width:${p(used)}%"></span></div>`;
}
function allocStatus(a) {
  if (a.node_down && !["complete", "failed"].includes(a.status?.client_status)) return "lost";
  return a.status?.client_status || "pending";
}
const restarts = (a) => Object.values(a.status?.tasks || {}).reduce((n, t) => n + (t.restarts || 0), 0);
const nsQuery = (sep) => (ns ? `${sep}namespace=${enc(ns)}` : "");
const jobRow = (j) => [td(link(`#/jobs/${enc(j.name)}`, j.name)), td(j.namespace), td(j.type),
  td(j.version, "num"), td(status(j.stopped ? "stopped" : j.summary.state)),
  td(j.summary.progress, "num progress"), td(j.summary.reason || "")];

// Long lists are shown 50 rows a page; the page is in the address
// (?page=2, or another name where a page has more than one list).
const pageSize = 50;
function paged(rows, params, param = "page") {
  const pages = Math.max(1, Math.ceil(rows.length / pageSize));
  const p = Math.min(pages, Math.max(1, Math.floor(Number(params.get(param))) || 1));
  const from = (p - 1) * pageSize;
  const href = (k) => {
    const q = new URLSearchParams(params);
    q.set(param, k);
    return `${location.hash.split("?")[0]}?${q}`;
  };
  const nav = pages > 1
    ? html`<p class="pager" id="pager-${param}"><span class="muted">${from + 1}–${Math.min(rows.length, from + pageSize)} of ${rows.length}</span>
        ${p > 1 ? html`<a href="${href(p - 1)}" class="prev">‹ previous</a>` : ""} page ${p} of ${pages}
        ${p < pages ? html`<a href="${href(p + 1)}" class="next">next ›</a>` : ""}</p>`
    : "";
  return { rows: rows.slice(from, from + pageSize), nav, page: p, total: rows.length };
}

// ---- actions: each a button that asks before it acts, or a disabled one
// that says why ----

// actions are the buttons on the page now; building, those of the page
// being drawn, which replace them when it is shown.
// denied holds why the page's disabled buttons are, said once above them.
let actions = new Map(), building = new Map(), denied = new Set();
let actionSeq = 0;

// action renders a button. confirm is the question (a string, or a
// function of the page's inputs); run does it and returns what to say.
// elem is the button's element id; waiting draws it disabled until the
// page enables it (Run, until a plan).
function action(label, { allowed = true, reason = "", confirm, run, danger = false, elem = "", waiting = false }) {
  if (!allowed) {
    denied.add(reason);
    return html`<button type="button" disabled title="${reason}" ${elem ? html`id="${elem}"` : ""}>${label}</button>`;
  }
  const id = "a" + ++actionSeq;
  building.set(id, { confirm, run, label });
  return html`<button type="button" class="${danger ? "danger" : ""}" data-action="${id}" ${elem ? html`id="${elem}"` : ""} ${waiting ? html`disabled` : ""}>${label}</button>`;
}

const dialog = document.getElementById("confirm");
let pending = null;
main.addEventListener("click", (ev) => {
  const b = ev.target.closest("[data-action]");
  if (b) {
    const a = actions.get(b.dataset.action);
    if (!a) return;
    pending = a;
    document.getElementById("confirm-text").textContent = typeof a.confirm === "function" ? a.confirm() : a.confirm;
    document.getElementById("confirm-ok").textContent = a.label;
    dialog.showModal();
    return;
  }
  const f = ev.target.closest("[data-filter]");
  if (f) {
    jobFilter = f.dataset.filter;
    if (route().params.has("page")) location.hash = "#/jobs"; else render();
    return;
  }
  if (ev.target.closest("#plan-btn")) { planSource(); return; }
  if (ev.target.closest("#whatif-btn")) {
    const picked = [...document.querySelectorAll("input[data-whatif]:checked")].map((i) => "node=" + enc(i.dataset.whatif));
    location.hash = "#/whatif" + (picked.length ? "?" + picked.join("&") : "");
    return;
  }
  const l = ev.target.closest("[data-line]");
  if (l) { ev.preventDefault(); goToLine(Number(l.dataset.line)); }
});
main.addEventListener("input", (ev) => {
  const keep = ev.target.closest("[data-keep]");
  if (keep) keep.dataset.dirty = "1";
  if (ev.target.id === "log-search") showLogs();
  if (ev.target.id === "job-source" && planned && ev.target.value !== planned.source) {
    planned = null;
    const run = document.getElementById("run-btn");
    if (run) run.disabled = true;
  }
});
main.addEventListener("change", (ev) => {
  if (ev.target.id !== "log-follow") return;
  const pre = document.getElementById("logs");
  if (ev.target.checked && pre) followLogs(pre.dataset.src, pre, true);
  else if (logAbort) logAbort.abort();
});
document.getElementById("confirm-cancel").addEventListener("click", () => { pending = null; dialog.close(); });
// Escape closes the dialog (the browser's own for a modal <dialog>): nothing is done.
dialog.addEventListener("cancel", () => { pending = null; });
document.getElementById("confirm-form").addEventListener("submit", async (ev) => {
  ev.preventDefault();
  const a = pending;
  pending = null;
  dialog.close();
  if (!a) return;
  let done = false;
  try {
    say(await a.run(), false);
    done = true;
  } catch (e) {
    say(e.message, true);
  }
  // What was typed for the action is used: the page may redraw now (a
  // form whose action failed keeps what was typed in it).
  if (document.activeElement && main.contains(document.activeElement)) document.activeElement.blur();
  if (done) document.querySelectorAll("[data-keep][data-dirty]").forEach((f) => delete f.dataset.dirty);
  render();
});

// say shows what an action did until the user goes to another page (an
// action that goes elsewhere itself, as a purge, keeps it).
let flashHash = "";
function say(msg, bad) {
  flashHash = location.hash;
  flash.textContent = msg || "";
  flash.className = bad ? "flash error" : "flash ok";
  flash.hidden = !msg;
}

// ---- views ----

let jobFilter = "all";

const views = {
  async jobs(_, __, params) {
    const jobs = await api(`/v1/jobs${nsQuery("?")}`);
    const states = ["all", "running", "pending", "failed", "complete", "stopped"];
    const shown = paged(jobs.filter((j) => jobFilter === "all" || (j.stopped ? "stopped" : j.summary.state) === jobFilter), params);
    return html`<h1>Jobs <small>${jobs.length}${ns ? ` in ${ns}` : ""}</small></h1>
      <div class="actions">${link("#/run", "Run a job")}</div>
      <div class="filters">${states.map((s) => html`<button type="button" data-filter="${s}" class="${s === jobFilter ? "on" : ""}">${s}</button>`)}</div>
      ${table(["Name", "Namespace", "Type", "Version", "Status", "Instances", "Why"],
        shown.rows.map(jobRow), jobFilter === "all" ? "No jobs yet: drover run FILE submits one." : `No ${jobFilter} jobs.`, "", "job-table")}
      ${shown.nav}`;
  },

  async job(name, sub, params) {
    if (sub === "definition") return jobDefinition(name);
    if (sub === "diff") return jobDiff(name, params);
    if (sub === "edit") return jobEditor(name);
    const e = enc(name);
    const [st, versions, events, dep] = await Promise.all([
      api(`/v1/jobs/${e}`), api(`/v1/jobs/${e}/versions`),
      api(`/v1/events?job=${e}&since=168h`), api(`/v1/jobs/${e}/deployment`).catch(() => null)]);
    const j = st.job, s = st.summary;
    const submit = can(j.namespace, "submit");
    const why = nsReason(j.namespace, "submit");
    const stopped = j.stopped;
    const bar = html`<div class="actions">
      ${stopped ? "" : action("Restart", { allowed: submit, reason: why, confirm: `Replace every instance of ${name}, a batch at a time?`,
        run: async () => { await api(`/v1/jobs/${e}/restart`, { method: "POST" }); return `Restart of ${name} requested.`; } })}
      ${stopped ? "" : action("Stop", { allowed: submit, reason: why, danger: true, confirm: `Stop job ${name}? Its instances get SIGTERM.`,
        run: async () => { await api(`/v1/jobs/${e}`, { method: "DELETE" }); return `Job ${name} stopped.`; } })}
      ${action(stopped ? "Purge" : "Stop and purge", { allowed: submit, reason: why, danger: true,
        confirm: `Stop job ${name} and forget it (its versions and deployments)?`,
        run: async () => { await api(`/v1/jobs/${e}?purge=true`, { method: "DELETE" }); location.hash = "#/jobs"; return `Job ${name} purged.`; } })}
      ${link(`#/jobs/${e}/definition`, "Definition")}
      ${stopped ? "" : link(`#/jobs/${e}/edit`, "Edit")}
    </div>`;

    // A job purged and submitted again keeps its name: the history before
    // the last purge belongs to the earlier job and is shown apart.
    const lastPurge = events.filter((ev) => ev.topic === "job" && ev.type === "Purged").reduce((m, ev) => Math.max(m, ev.index), 0);
    const mine = events.filter((ev) => ev.index > lastPurge);
    const earlier = events.length - mine.length;

    let depHTML = html`<p class="muted">No deployment: the job has no update block.</p>`;
    if (dep) {
      const running = dep.status === "running";
      const canaries = Object.values(dep.groups || {}).some((g) => g.desired_canaries > 0 && !g.promoted);
      depHTML = html`<p>${status(dep.status)} version ${dep.job_version} <span class="id">${short(dep.id)}</span> ${dep.description || ""}</p>
        ${table(["Group", "Desired", "Placed", "Healthy", "Unhealthy", "Canaries"],
          Object.entries(dep.groups || {}).map(([g, d]) => [td(g), td(d.desired, "num"), td(d.placed, "num"), td(d.healthy, "num"),
            td(d.unhealthy, "num"), td(d.desired_canaries || 0, "num")]), "")}
        <div class="actions">
        ${running && canaries ? action("Promote", { allowed: submit, reason: why, confirm: `Promote the canaries of ${name} version ${dep.job_version}: replace the rest of the old version?`,
          run: async () => { await api(`/v1/deployments/${enc(dep.id)}/promote`, { method: "POST" }); return `Deployment ${short(dep.id)} promoted.`; } }) : ""}
        ${running ? action("Fail", { allowed: submit, reason: why, danger: true, confirm: `Fail the deployment of ${name} version ${dep.job_version}? With auto_revert the job goes back to its last stable version.`,
          run: async () => { await api(`/v1/deployments/${enc(dep.id)}/fail`, { method: "POST" }); return `Deployment ${short(dep.id)} failed.`; } }) : ""}
        </div>`;
    }
    const groups = j.type === "system" ? [] : j.groups;
    const inst = paged(st.allocations.slice().sort((a, b) => a.name.localeCompare(b.name) || a.id.localeCompare(b.id)), params, "ipage");
    return html`<h1>${j.name} <small>${j.namespace} · ${j.type} · version ${j.version}</small></h1>
      ${bar}
      <div class="grid">
        <div class="card">Status<b>${status(stopped ? "stopped" : s.state)}</b></div>
        <div class="card">Instances<b id="progress">${s.progress}</b></div>
        <div class="card">Pending<b>${s.pending}</b></div>
        <div class="card">Failed<b>${s.failed}</b></div>
        <div class="card">Lost<b>${s.lost}</b></div>
      </div>
      ${s.reason ? html`<p class="reason">${s.reason}</p>` : ""}
      ${st.placement_failures?.length && !stopped ? html`<h2>Why not placed</h2>${whyBlock(st.placement_failures)}` : ""}
      ${groups.length && !stopped ? html`<h2>Groups</h2>${table(["Group", "Count", "Scale to"], groups.map((g) => [td(g.name), td(g.count, "num"),
        td(html`<input type="number" min="0" max="10000" value="${g.count}" id="scale-${g.name}" aria-label="count of group ${g.name}">
          ${action("Scale", { allowed: submit, reason: why,
            confirm: () => `Scale group ${g.name} of ${name} from ${g.count} to ${scaleInput(g.name)}? This submits a new version.`,
            run: () => scale(name, g.name, scaleInput(g.name)) })}`)]), "")}` : ""}
      <h2>Instances</h2>
      ${table(["Instance", "ID", "Node", "Status", "Desired", "Version", "Restarts", "Created"],
        inst.rows.map((a) => [
          td(link(`#/allocs/${a.id}`, a.name)), td(html`<span class="id">${short(a.id)}</span>`), td(nodeLink(a.node_id, a.node_name)),
          td(status(allocStatus(a))), td(a.desired_status), td(a.job_version, "num"), td(restarts(a), "num"), td(when(a.create_time))]),
        "No instances.", "", "instance-table")}
      ${inst.nav}
      <h2>Deployment</h2>${depHTML}
      <h2>Versions</h2>
      ${table(["Version", "Submitted", "", ""], versions.map((v) => [td(v.version, "num"), td(when(v.submit_time)),
        td(v.version === j.version ? html`<span class="muted">current</span>` : link(`#/jobs/${e}/diff?from=${v.version}&to=${j.version}`, `diff to ${j.version}`)),
        td(v.version === j.version ? "" : action(`Revert to ${v.version}`, { allowed: submit, reason: why,
          confirm: `Submit version ${v.version}'s spec of ${name} again, as its next version?`,
          run: async () => { const r = await api(`/v1/jobs/${e}/revert`, { method: "POST", body: { version: v.version } });
            return `Job ${name} reverted to version ${v.version}: now version ${r.job.version}.`; } }))]), "")}
      <h2>Events</h2>${eventTable(mine.slice(-50).reverse())}
      ${earlier ? html`<p class="muted" id="earlier">${earlier} earlier events belong to a purged job of the same name: ${link(`#/events?job=${e}`, "all events of the name")}.</p>` : ""}`;
  },

  async nodes() {
    const [nodes, allocs] = await Promise.all([api("/v1/nodes"), api("/v1/allocations")]);
    const used = allocatedByNode(allocs);
    return html`<h1>Nodes <small>${nodes.length}</small></h1>
      <div class="actions">${link("#/topology", "Topology")} ${link("#/whatif", "What if nodes were lost")}</div>` + table(
      ["Name", "ID", "Status", "Drivers", "CPU MHz: allocated / used / total", "Memory MB: allocated / used / total", "Instances"],
      nodes.map((n) => {
        const a = used[n.id] || { cpu: 0, memory: 0, n: 0 };
        const u = n.usage?.tasks || { cpu: 0, memory: 0 };
        return [td(html`<b>${nodeLink(n.id, n.name)}</b>`), td(html`<span class="id">${short(n.id)}</span>`), td(status(nodeState(n))), td((n.drivers || []).join(", ")),
          td(html`${a.cpu} / ${u.cpu} / ${n.resources.cpu}${bar(a.cpu, u.cpu, n.resources.cpu)}`, "num"),
          td(html`${a.memory} / ${u.memory} / ${n.resources.memory}${bar(a.memory, u.memory, n.resources.memory)}`, "num"),
          td(a.n, "num")];
      }), "No nodes: start an agent (drover agent) or drover dev.");
  },

  async node(id, _, params) {
    const [n, allocs] = await Promise.all([api(`/v1/nodes/${enc(id)}`), api(`/v1/allocations?node=${enc(id)}`)]);
    const a = allocatedByNode(allocs)[n.id] || { cpu: 0, memory: 0, n: 0 };
    const u = n.usage?.tasks || { cpu: 0, memory: 0 };
    const write = canNode("write");
    const why = nodeReason("write");
    const draining = !!n.drain;
    const inst = paged(allocs.filter((x) => !ns || x.namespace === ns), params, "ipage");
    const kv = (o) => table(["Name", "Value"], Object.keys(o || {}).sort().map((k) => [td(k), td(o[k])]), "None.", "kv");
    return html`<h1>${n.name} <small><span class="id">${n.id}</span></small></h1>
      <div class="grid">
        <div class="card">Status<b>${status(nodeState(n))}</b></div>
        <div class="card">Scheduling<b id="eligibility">${n.ineligible ? "ineligible" : "eligible"}</b></div>
        <div class="card">Drain<b id="drain-state">${draining ? (n.drain.deadline ? `until ${when(n.drain.deadline)}` : "no deadline") : "none"}</b>${
          draining && n.drain.ignore_system_jobs ? html`<span class="muted" id="drain-system">system jobs stay</span>` : ""}</div>
        <div class="card">Instances<b>${a.n}</b></div>
      </div>
      <div class="actions">
        ${draining
          ? action("End drain", { allowed: write, reason: why, confirm: `End the drain of ${n.name}? It becomes eligible for new work.`,
              run: async () => { await api(`/v1/nodes/${enc(n.id)}/drain`, { method: "PUT", body: { enable: false } }); return `Drain of ${n.name} ended.`; } })
          : html`<label>deadline <input id="drain-deadline" placeholder="e.g. 1h (none: wait for all)" size="18"></label>
              <label><input type="checkbox" id="drain-ignore-system"> leave system jobs running</label>
              ${action("Drain", { allowed: write, reason: why, danger: true, confirm: () => drainQuestion(n, a.n), run: () => drainNode(n) })}`}
        ${draining ? "" : n.ineligible
          ? action("Make eligible", { allowed: write, reason: why, confirm: `Let the scheduler place new work on ${n.name}?`,
              run: async () => { await api(`/v1/nodes/${enc(n.id)}/eligibility`, { method: "PUT", body: { eligible: true } }); return `${n.name} is eligible.`; } })
          : action("Make ineligible", { allowed: write, reason: why, confirm: `Take ${n.name} out of scheduling? What runs there keeps running.`,
              run: async () => { await api(`/v1/nodes/${enc(n.id)}/eligibility`, { method: "PUT", body: { eligible: false } }); return `${n.name} is ineligible.`; } })}
      </div>
      ${draining ? "" : html`<p class="muted" id="drain-note">A drain moves the node's service instances elsewhere; batch instances finish where they are;
        system jobs' instances stop once nothing else is left, unless left running. With a deadline, whatever is left then is stopped.</p>`}
      <p>${link(`#/whatif?node=${enc(n.id)}`, `What if ${n.name} were lost or drained`)}</p>
      ${usageSection(n)}
      <h2>Resources</h2>
      ${table(["", "Allocated", "Used", "Total"], [
        [td("CPU MHz"), td(a.cpu, "num"), td(u.cpu, "num"), td(html`${n.resources.cpu}${bar(a.cpu, u.cpu, n.resources.cpu)}`, "num")],
        [td("Memory MB"), td(a.memory, "num"), td(u.memory, "num"), td(html`${n.resources.memory}${bar(a.memory, u.memory, n.resources.memory)}`, "num")]], "")}
      <p>Address ${n.address || "-"} · datacenter ${n.datacenter || "-"} · class ${n.node_class || "-"} · pool ${n.node_pool || "-"} · registered ${when(n.register_time)}</p>
      <h2>Drivers</h2><p id="drivers">${(n.drivers || []).map((d) => html`<span class="status">${d}</span> `)}</p>
      <h2>Instances</h2>
      ${table(["Instance", "Job", "Status", "Desired", "CPU", "Memory"], inst.rows.map((x) => [
        td(link(`#/allocs/${x.id}`, x.name)), td(link(`#/jobs/${enc(x.job)}`, x.job)), td(status(allocStatus(x))), td(x.desired_status),
        td(x.resources.cpu, "num"), td(x.resources.memory, "num")]), "None.", "", "instance-table")}
      ${inst.nav}
      <h2>Attributes</h2>${kv(n.attributes)}
      ${n.meta ? html`<h2>Meta</h2>${kv(n.meta)}` : ""}`;
  },

  async allocs(id, _, params) {
    const a = await api(`/v1/allocations/${enc(id)}`);
    const tasks = a.tasks.map((t) => t.name);
    const task = params.get("task") || tasks[0];
    const type = params.get("type") === "stderr" ? "stderr" : "stdout";
    const ts = a.status?.tasks?.[task] || {};
    const st = allocStatus(a);
    const here = (t, ty) => `#/allocs/${a.id}?task=${enc(t)}&type=${ty}`;
    const submit = can(a.namespace, "submit");
    const why = nsReason(a.namespace, "submit");
    const canExec = can(a.namespace, "exec");
    const live = a.desired_status === "run" && !["complete", "failed", "lost"].includes(st);
    const logs = `/v1/allocations/${enc(a.id)}/logs?task=${enc(task)}&type=${type}`;
    setTimeout(() => startLogs(logs), 0);
    return html`<h1>${a.name} <small><span class="id">${a.id}</span></small></h1>
      <p>${status(st)} on node ${nodeLink(a.node_id, a.node_name)} · job ${link(`#/jobs/${enc(a.job)}`, a.job)} version ${a.job_version}
        · ${a.status?.description || a.desired_reason || ""}</p>
      ${live ? html`<div class="actions">
        ${action("Restart", { allowed: submit, reason: why, confirm: `Restart every task of ${a.name} in place: a new process, the same instance, on ${a.node_name}?`,
          run: async () => { await api(`/v1/allocations/${enc(a.id)}/restart`, { method: "POST" }); return `${a.name}: restart requested.`; } })}
        ${a.job_type === "system"
          ? action("Stop", { allowed: false, reason: `${a.name} is an instance of system job ${a.job}, which runs on every node that fits: stop the job, or drain the node` })
          : action("Stop", { allowed: submit, reason: why, danger: true, confirm: `Stop ${a.name}? The scheduler places a replacement.`,
            run: async () => { await api(`/v1/allocations/${enc(a.id)}/stop`, { method: "POST" }); return `${a.name}: stop requested; a replacement is placed.`; } })}
        ${canExec ? html`<button type="button" id="exec-open">Exec</button>` : action("Exec", { allowed: false, reason: nsReason(a.namespace, "exec") })}
      </div>` : ""}
      <div class="filters">${tasks.map((t) => html`<a href="${here(t, type)}"><button type="button" class="${t === task ? "on" : ""}">${t}</button></a>`)}</div>
      <p class="muted" id="task-state">Task ${task}: ${ts.state || "pending"}, ${ts.restarts || 0} restarts${ts.pid ? ", pid " + ts.pid : ""}</p>
      ${live && canExec ? execPanel(a, tasks, task) : ""}
      <h2>Logs</h2>
      <div class="filters">${["stdout", "stderr"].map((x) => html`<a href="${here(task, x)}"><button type="button" class="${x === type ? "on" : ""}" id="log-${x}">${x}</button></a>`)}</div>
      <div id="log-panel">
        <div class="actions">
          <label><input type="checkbox" id="log-follow" checked> follow</label>
          <input type="search" id="log-search" placeholder="show lines containing…" aria-label="show only the lines containing">
          <span id="log-count" class="muted"></span>
          <a id="log-download" href="${logs}" download="${a.name}.${task}.${type}.log">Download ${type}</a>
        </div>
        <pre class="logs" id="logs"></pre>
      </div>
      <h2>Task events</h2>${table(["Time", "Type", "Message"], (ts.events || []).slice().reverse().map((e) => [td(when(e.time)), td(e.type), td(e.message || "")]), "None yet.")}`;
  },

  run() { return jobEditor(""); },

  acl(_, __, params) { return aclPage(params); },

  whatif(_, __, params) { return whatIf(params.getAll("node")); },

  topology(_, __, params) { return topology(params.get("by") === "memory" ? "memory" : "cpu"); },

  async services(name) {
    if (name) return serviceView(name);
    const list = await api("/v1/services");
    return html`<h1>Services <small>${list.length}</small></h1>${table(["Service", "Tags", "Healthy", "Instances"],
      list.map((x) => [td(link(`#/services/${enc(x.name)}`, x.name)), td((x.tags || []).join(", ")), td(x.healthy, "num"), td(x.instances, "num")]),
      "No services: a task registers one with a service block.")}`;
  },

  async deployments() {
    const all = await api("/v1/deployments");
    const ds = all.filter((d) => !ns || (d.namespace || "default") === ns);
    const groups = (d) => Object.entries(d.groups || {}).map(([g, x]) => `${g} ${x.healthy}/${x.desired}`).join(", ");
    return html`<h1>Deployments <small>${ds.length}${ds.length > 200 ? ", the newest 200 shown" : ""}</small></h1>${table(
      ["ID", "Job", "Namespace", "Version", "Status", "Healthy / desired", "Description", "Created"],
      ds.slice(0, 200).map((d) => [td(html`<span class="id">${short(d.id)}</span>`), td(link(`#/jobs/${enc(d.job)}`, d.job)), td(d.namespace || "default"),
        td(d.job_version, "num"), td(status(d.status)), td(groups(d), "num"), td(d.description || ""), td(when(d.create_time))]),
      "No deployments: a job with an update block gets one for each new version.")}`;
  },

  async servers() {
    const l = await api("/v1/status/leader");
    return html`<h1>Servers</h1>
      <div class="grid"><div class="card">Leader<b id="leader">${l.leader || "none"}</b></div></div>
      <p class="muted">The leader is the server that schedules; this server reads its name from the registry. drover keeps no list of
        servers yet: <code>drover servers --address A,B,C</code> asks each of a list of addresses which server leads.</p>`;
  },

  async events(_, __, params) {
    const job = params.get("job") || "", topic = params.get("topic") || "";
    const evs = await api(`/v1/events?since=24h${job ? "&job=" + enc(job) : ""}${topic ? "&topic=" + enc(topic) : ""}${nsQuery("&")}`);
    const shown = paged(evs.reverse(), params);
    return html`<h1>Events <small>${job ? `of the name ${job}, ` : ""}${topic ? `${topic} events, ` : ""}the last 24 hours${shown.page === 1 ? ", live" : ""}</small></h1>
      <form id="events-form" class="actions">
        <label>topic <select id="events-topic">${["", "job", "alloc", "node", "deployment", "leader"].map((x) =>
          html`<option value="${x}" ${x === topic ? html`selected` : ""}>${x || "all"}</option>`)}</select></label>
        <label>job <input id="events-job" value="${job}" placeholder="any" size="16"></label>
        <button type="submit">Filter</button>
      </form>
      <div id="event-table">${eventTable(shown.rows)}</div>${shown.nav}`;
  },

  async search(_, __, params) {
    const q = (params.get("q") || "").trim().toLowerCase();
    const [jobs, nodes, allocs] = await Promise.all([api(`/v1/jobs${nsQuery("?")}`), api("/v1/nodes"), api(`/v1/allocations${nsQuery("?")}`)]);
    const has = (...xs) => xs.some((x) => String(x || "").toLowerCase().includes(q));
    const js = paged(q ? jobs.filter((j) => has(j.name)) : [], params, "jpage");
    const nd = paged(q ? nodes.filter((n) => has(n.name, n.id, n.address)) : [], params, "npage");
    const al = paged(q ? allocs.filter((a) => has(a.name, a.id, a.node_name)) : [], params, "apage");
    const count = (p, what) => html`<small id="count-${what}">${p.total}</small>`;
    return html`<h1>Search <small>${q ? `"${params.get("q")}"` : "type in the box above"}</small></h1>
      <h2>Jobs ${count(js, "jobs")}</h2>
      ${table(["Name", "Namespace", "Type", "Version", "Status", "Instances", "Why"], js.rows.map(jobRow), "No job matches.", "", "search-jobs")}${js.nav}
      <h2>Nodes ${count(nd, "nodes")}</h2>
      ${table(["Name", "ID", "Status", "Address"], nd.rows.map((n) => [td(nodeLink(n.id, n.name)), td(html`<span class="id">${short(n.id)}</span>`),
        td(status(nodeState(n))), td(n.address || "-")]), "No node matches.", "", "search-nodes")}${nd.nav}
      <h2>Instances ${count(al, "instances")}</h2>
      ${table(["Instance", "ID", "Job", "Node", "Status"], al.rows.map((a) => [td(link(`#/allocs/${a.id}`, a.name)), td(html`<span class="id">${short(a.id)}</span>`),
        td(link(`#/jobs/${enc(a.job)}`, a.job)), td(nodeLink(a.node_id, a.node_name)), td(status(allocStatus(a)))]), "No instance matches.", "", "search-instances")}${al.nav}`;
  },
};

function nodeState(n) {
  if (n.status === "ready" && n.drain) return "draining";
  if (n.status === "ready" && n.ineligible) return "ineligible";
  return n.status;
}

function allocatedByNode(allocs) {
  const used = {};
  for (const a of allocs) {
    if (a.desired_status !== "run" || ["complete", "failed"].includes(a.status?.client_status)) continue;
    const u = (used[a.node_id] ||= { cpu: 0, memory: 0, n: 0 });
    u.cpu += a.resources.cpu; u.memory += a.resources.memory; u.n++;
  }
  return used;
}

const scaleInput = (group) => Number(document.getElementById(`scale-${group}`)?.value);
const drainDeadline = () => (document.getElementById("drain-deadline")?.value || "").trim();
const drainIgnoreSystem = () => !!document.getElementById("drain-ignore-system")?.checked;

// The drain form's question and request: the deadline and whether the
// node's system jobs' instances stay (PUT /v1/nodes/{id}/drain).
function drainQuestion(n, count) {
  return `Drain ${n.name}: move its ${count} instances elsewhere${drainDeadline() ? ", within " + drainDeadline() : ""}${
    drainIgnoreSystem() ? ", leaving its system jobs' instances running" : ""}, and take it out of scheduling?`;
}
async function drainNode(n) {
  const body = { enable: true };
  if (drainDeadline()) body.deadline = drainDeadline();
  if (drainIgnoreSystem()) body.ignore_system_jobs = true;
  await api(`/v1/nodes/${enc(n.id)}/drain`, { method: "PUT", body });
  return `Drain of ${n.name} started.`;
}

// scale submits the job again with one group's count changed, refused
// (409) if the job changed since it was read.
async function scale(name, group, count) {
  if (!Number.isInteger(count) || count < 0) throw new Error(`the count must be a whole number of 0 or more, not ${count}`);
  const st = await api(`/v1/jobs/${enc(name)}`);
  const g = st.job.groups.find((x) => x.name === group);
  if (!g) throw new Error(`job ${name} has no group ${group} any more`);
  g.count = count;
  const r = await api(`/v1/jobs?check_index=${st.job.modify_index}`, { method: "POST", body: st.job });
  return `Group ${group} of ${name} scaled to ${count}: version ${r.job.version}.`;
}

// The spec as submitted: the fields the server keeps are left out.
const serverFields = ["version", "stopped", "submit_time", "modify_index", "restart_requested"];
const specOf = (job) => Object.fromEntries(Object.entries(job).filter(([k]) => !serverFields.includes(k)));
async function jobDefinition(name) {
  const st = await api(`/v1/jobs/${enc(name)}`);
  const spec = specOf(st.job);
  return html`<h1>${name} <small>definition · version ${st.job.version}</small></h1>
    <p>${link(`#/jobs/${enc(name)}`, "back to the job")} · JSON, as <code>drover job inspect ${name}</code> prints it; <code>drover run</code> takes it back.</p>
    <pre class="code" id="definition">${JSON.stringify(spec, null, 2)}</pre>`;
}

async function jobDiff(name, params) {
  const versions = await api(`/v1/jobs/${enc(name)}/versions`);
  const newest = versions[0].version;
  const from = params.get("from") || String(versions[Math.min(1, versions.length - 1)].version);
  const to = params.get("to") || String(newest);
  const d = await api(`/v1/jobs/${enc(name)}/diff?from=${enc(from)}&to=${enc(to)}`);
  const pick = (id, cur) => html`<select id="${id}">${versions.map((v) => html`<option value="${v.version}" ${String(v.version) === cur ? html`selected` : ""}>version ${v.version}</option>`)}</select>`;
  return html`<h1>${name} <small>changes from version ${d.from} to ${d.to}</small></h1>
    <p>${link(`#/jobs/${enc(name)}`, "back to the job")}</p>
    <form id="diff-form" class="actions">from ${pick("diff-from", from)} to ${pick("diff-to", to)} <button type="submit">Compare</button></form>
    ${d.changes.length
      ? html`<pre class="code diff" id="diff">${d.changes.map((c) => html`<span class="op${c.op === "+" ? "add" : c.op === "-" ? "del" : "mod"}">${c.op} ${c.path}: ${c.op === "+" ? c.to : c.op === "-" ? c.from : `${c.from} -> ${c.to}`}</span>\n`)}</pre>`
      : html`<p class="muted" id="diff">No change to the spec.</p>`}`;
}
main.addEventListener("submit", (ev) => {
  // Enter in an ACL form's field asks its action's question, as its
  // button does; the form itself never goes anywhere.
  if (ev.target.classList.contains("aclform")) {
    ev.preventDefault();
    ev.target.querySelector("button[data-action]")?.click();
    return;
  }
  if (ev.target.id === "events-form") {
    ev.preventDefault();
    const q = new URLSearchParams();
    for (const [k, id] of [["topic", "events-topic"], ["job", "events-job"]]) {
      const v = document.getElementById(id).value.trim();
      if (v) q.set(k, v);
    }
    document.activeElement?.blur();
    location.hash = "#/events" + (q.size ? "?" + q : "");
    return;
  }
  if (ev.target.id !== "diff-form") return;
  ev.preventDefault();
  const [name] = route().args;
  location.hash = `#/jobs/${enc(name)}/diff?from=${enc(document.getElementById("diff-from").value)}&to=${enc(document.getElementById("diff-to").value)}`;
});

// ---- why: what the scheduler could not place, and why ----

// whyBlock shows placement failures as the server words them (text,
// never, each dimension's text and too_small: spec.PlacementFailure.Shown),
// so that the page says what drover status and drover plan say.
function whyBlock(fs, id = "why") {
  return html`<div class="whybox" ${id ? html`id="${id}"` : ""}>${fs.map((f) => html`<div class="failure" data-group="${f.group}">
    <p class="ftitle"><b>${f.no_node_matched ? `group ${f.group} runs on no node` : `${f.missing} instance(s) of group ${f.group} not placed`}</b>:
      <span class="ftext">${f.text}</span></p>
    ${f.dimensions?.length
      ? table(["Ruled out by", "Nodes", "Why"], f.dimensions.map((d) => [td(d.dimension, "dim"), td(d.nodes, "num"),
          td(html`${d.too_small ? html`<span class="status failed">too small</span> ` : ""}<span class="dtext">${d.text}</span>`)]), "", "dims")
      : ""}
    ${f.hints?.length ? html`<p>The smallest change that would make it fit:</p><ul class="hints">${f.hints.map((h) => html`<li>${h}</li>`)}</ul>` : ""}
    ${f.never
      ? html`<p class="error never">Never, as written: no node there is could run it, whatever else stopped. Change the job, or add a node that has what it needs.</p>`
      : html`<p class="muted">It is placed as soon as a node can take it.</p>`}
  </div>`)}</div>`;
}

// whatIf plans every job as if the nodes picked were down
// (GET /v1/plan/without): where their work would go, and what would not
// fit. A drain moves the same instances (but a system job's, with
// ignore_system_jobs): the plan answers both.
async function whatIf(picked) {
  const nodes = await api("/v1/nodes");
  nodes.sort((a, b) => a.name.localeCompare(b.name));
  const p = picked.length ? await api(`/v1/plan/without?text=1&${picked.map((x) => "node=" + enc(x)).join("&")}`) : null;
  const on = new Set(picked);
  const failing = p ? p.jobs.filter((j) => j.failures?.length) : [];
  return html`<h1>What if <small>nodes were lost or drained</small></h1>
    <p>Pick nodes: the plan shows where their instances would go and what would not be placed, as <code>drover plan --without</code>
      does. Nothing changes: it is a plan.</p>
    <div class="picks" id="whatif-nodes">${nodes.map((n) => html`<label><input type="checkbox" data-whatif="${n.name}" ${on.has(n.name) || on.has(n.id) ? html`checked` : ""}> ${n.name}</label>`)}</div>
    <div class="actions"><button type="button" id="whatif-btn">Plan without the checked nodes</button></div>
    ${p ? html`<h2>Without ${p.without.join(", ")}: ${!failing.length
        ? html`<span class="status running" id="whatif-verdict">everything fits</span>`
        : html`<span class="status failed" id="whatif-verdict">some would not be placed</span>`}</h2>
      ${failing.length ? html`<div id="whatif-why">${failing.map((j) => html`<h3>Job ${link(`#/jobs/${enc(j.job)}`, j.job)}</h3>${whyBlock(j.failures, "")}`)}</div>` : ""}
      <pre class="code" id="whatif-plan">${p.text}</pre>` : ""}`;
}

// ---- topology: every node a box, its instances blocks sized by what they
// hold, coloured by job ----

const plural = (n, what) => `${n} ${what}${n === 1 ? "" : "s"}`;
const jobColour = (name) => {
  let h = 0;
  for (const ch of name) h = (h * 31 + ch.codePointAt(0)) >>> 0;
  return `hsl(${h % 360} 55% 55%)`;
};

async function topology(by) {
  const [nodes, allocs] = await Promise.all([api("/v1/nodes"), api("/v1/allocations")]);
  const held = {};
  for (const a of allocs) {
    if (a.desired_status !== "run" || ["complete", "failed"].includes(a.status?.client_status)) continue;
    if (ns && a.namespace !== ns) continue;
    (held[a.node_id] ||= []).push(a);
  }
  nodes.sort((a, b) => (a.datacenter || "").localeCompare(b.datacenter || "") || a.name.localeCompare(b.name));
  const dcs = new Map();
  for (const n of nodes) {
    const dc = n.datacenter || "-";
    if (!dcs.has(dc)) dcs.set(dc, []);
    dcs.get(dc).push(n);
  }
  const compact = nodes.length > 120;
  const unit = by === "cpu" ? "MHz" : "MB";
  const jobs = new Map();
  const box = (n) => {
    const total = n.resources[by] || 0;
    const mine = (held[n.id] || []).slice().sort((x, y) => x.job.localeCompare(y.job) || x.name.localeCompare(y.name));
    const used = mine.reduce((k, a) => k + (a.resources[by] || 0), 0);
    const pct = (x) => (total > 0 ? Math.min(100, (100 * x) / total).toFixed(2) : 0);
    for (const a of mine) jobs.set(a.job, (jobs.get(a.job) || 0) + 1);
    return html`<a class="tnode ${nodeState(n)}" href="#/nodes/${enc(n.id)}" data-node="${n.id}" data-free="${total - used}"
        title="${n.name}: ${used} of ${total} ${unit} held by ${mine.length} instance(s), ${total - used} free">
      ${compact ? "" : html`<span class="tname">${n.name} <span class="muted">${total - used} ${unit} free</span></span>`}
      <span class="tbar">${mine.map((a) => html`<span class="tblock" data-alloc="${a.id}" data-size="${a.resources[by] || 0}"
        style="width:${pct(a.resources[by] || 0)}%;background:${jobColour(a.job)}" title="${a.name}: ${a.resources[by] || 0} ${unit}"></span>`)}</span>
    </a>`;
  };
  const sections = [...dcs].map(([dc, ns_]) => {
    // Room counts on ready nodes only: a down node's is no use.
    const ready = ns_.filter((n) => n.status === "ready");
    const total = ready.reduce((k, n) => k + (n.resources[by] || 0), 0);
    const used = ready.reduce((k, n) => k + (held[n.id] || []).reduce((m, a) => m + (a.resources[by] || 0), 0), 0);
    const count = ns_.reduce((k, n) => k + (held[n.id] || []).length, 0);
    const out = ns_.length - ready.length;
    return html`<section class="dc" data-dc="${dc}"><h2>${dc} <small class="muted dcsum">${plural(ns_.length, "node")}${out ? `, ${out} not ready` : ""} ·
      ${plural(count, "instance")} · ${used} of ${total} ${unit} held on ready nodes, ${total - used} free</small></h2>
      <div class="topo ${compact ? "compact" : ""}">${ns_.map(box)}</div></section>`;
  });
  const legend = [...jobs].sort((a, b) => b[1] - a[1]).slice(0, 30);
  return html`<h1>Topology <small>${plural(nodes.length, "node")}${ns ? `, instances in ${ns}` : ""}</small></h1>
    <div class="filters">${["cpu", "memory"].map((x) => html`<a href="#/topology?by=${x}"><button type="button" class="${x === by ? "on" : ""}" id="topo-${x}">${x}</button></a>`)}</div>
    <p class="muted">Each box is a node; each block an instance, as wide as the share of the node's ${by} it holds, coloured by job; the rest is free.
      ${compact ? "Hover a box for its numbers; click it for the node." : ""}</p>
    <p class="legend">${legend.map(([j, k]) => html`<span><i style="background:${jobColour(j)}"></i>${j} (${k})</span>`)}</p>
    ${nodes.length ? sections : html`<p class="muted">No nodes: start an agent (drover agent) or drover dev.</p>`}`;
}

function eventTable(evs) {
  return table(["Time", "Topic", "Type", "Subject", "Message"], evs.map(eventRow), "No events.");
}
function eventRow(e) {
  let subject = e.job || "";
  if (e.alloc) subject = e.alloc + (e.task ? "/" + e.task : "");
  if (e.topic === "node") subject = e.node;
  const subj = e.alloc_id ? link(`#/allocs/${e.alloc_id}`, subject) : e.job ? link(`#/jobs/${enc(e.job)}`, subject) : subject;
  return [td(when(e.time)), td(e.topic), td(e.type), td(subj), td(e.message || "")];
}

// ---- logs ----

// logText is what the open log stream has read; the page shows its lines
// containing the search, if any.
let logAbort = null, logText = "";

// startLogs follows url's log into the page's #logs, unless that is what
// it follows already (a redraw keeps the log panel).
function startLogs(url) {
  const pre = document.getElementById("logs");
  if (!pre || pre.dataset.src === url) return;
  followLogs(url, pre, document.getElementById("log-follow")?.checked !== false);
}

async function followLogs(url, pre, follow) {
  if (logAbort) logAbort.abort();
  const abort = (logAbort = new AbortController());
  pre.dataset.src = url;
  logText = "";
  showLogs();
  try {
    const resp = await fetch(`${url}&tail=200${follow ? "&follow=true" : ""}`, { signal: abort.signal });
    if (!resp.ok) { logText = `(${resp.status}) ` + (await resp.text()); showLogs(); return; }
    const reader = resp.body.getReader();
    const dec = new TextDecoder();
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      logText += dec.decode(value, { stream: true });
      if (logText.length > 400000) logText = logText.slice(-300000);
      showLogs();
    }
  } catch (e) {
    if (e.name !== "AbortError" && logAbort === abort) { logText += "\n(log stream ended: " + e.message + ")"; showLogs(); }
  }
}

function showLogs() {
  const pre = document.getElementById("logs");
  if (!pre) return;
  const atEnd = pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 4;
  const q = (document.getElementById("log-search")?.value || "").toLowerCase();
  const count = document.getElementById("log-count");
  if (q) {
    const lines = logText.split("\n").filter((l, i, all) => l !== "" || i < all.length - 1);
    const hits = lines.filter((l) => l.toLowerCase().includes(q));
    pre.textContent = hits.join("\n");
    if (count) count.textContent = `${hits.length} of ${lines.length} lines`;
  } else {
    pre.textContent = logText;
    if (count) count.textContent = "";
  }
  if (atEnd) pre.scrollTop = pre.scrollHeight;
}

// ---- services ----

async function serviceView(name) {
  const ins = await api(`/v1/services/${enc(name)}?all=1`);
  const healthy = ins.filter((i) => i.health === "healthy").length;
  const checks = (i) => (i.checks || []).map((c) => html`<div>${status(c.status)} ${c.check} <span class="muted">${c.output || ""}</span></div>`);
  return html`<h1>${name} <small>service · ${healthy} of ${ins.length} healthy</small></h1>
    <p>${link("#/services", "all services")}</p>
    ${table(["Instance", "Job", "Task", "Node", "Address", "Health", "Checks"], ins.map((i) => [
      td(link(`#/allocs/${i.alloc_id}`, i.alloc_name)), td(link(`#/jobs/${enc(i.job)}`, i.job)), td(i.task), td(nodeLink(i.node_id, i.node_name)),
      td(i.port ? `${i.address}:${i.port}` : i.address, "num"), td(status(i.health)), td(checks(i))]), "No instances.")}`;
}

// ---- submit and edit a job ----

// planned is what Plan read and planned: the text, the job the server
// decoded from it, and the plan. Run submits exactly that job, checked
// against the planned job's index.
let planned = null;

async function jobEditor(name) {
  let source = "", namespace = "default", title = html`<h1>Run a job</h1>`;
  if (name) {
    const st = await api(`/v1/jobs/${enc(name)}`);
    source = JSON.stringify(specOf(st.job), null, 2);
    namespace = st.job.namespace || "default";
    title = html`<h1>${name} <small>edit · version ${st.job.version}</small></h1>`;
  }
  const allowed = name ? can(namespace, "submit") : (me?.namespaces || []).some((n) => n.capabilities.includes("submit"));
  const why = name ? nsReason(namespace, "submit")
    : `token "${me?.token}" may submit in no namespace: a policy with namespace "NAME" { capabilities = ["submit"] } grants it`;
  return html`${title}
    <p>${name ? html`${link(`#/jobs/${enc(name)}`, "back to the job")} · ` : ""}The job file: HCL, JSON or YAML, as <code>drover run</code> takes it.
      <b>Plan</b> shows what would change, as <code>drover plan</code> prints it; <b>Run</b> submits what was planned.</p>
    <textarea id="job-source" class="source" rows="22" spellcheck="false" aria-label="the job file">${source}</textarea>
    <div class="actions">
      ${allowed ? html`<button type="button" id="plan-btn">Plan</button>` : action("Plan", { allowed, reason: why })}
      ${action("Run", { allowed, reason: why, elem: "run-btn", waiting: true, confirm: runQuestion, run: runPlanned })}
    </div>
    <div id="plan-out"></div>`;
}

async function planSource() {
  const src = document.getElementById("job-source")?.value ?? "";
  const out = document.getElementById("plan-out");
  const run = document.getElementById("run-btn");
  planned = null;
  if (run) run.disabled = true;
  out.innerHTML = String(html`<p class="muted">Planning…</p>`);
  try {
    const { job, warnings } = await api("/v1/jobs/parse", { method: "POST", body: { source: src } });
    const plan = await api("/v1/jobs/plan?text=1", { method: "POST", body: job });
    planned = { key: location.hash, source: src, job, plan };
    out.innerHTML = String(html`${warnings?.length ? html`<p class="reason">Warnings:</p>${problemList(src, warnings, "reason")}` : ""}
      <pre class="code" id="plan">${plan.text}</pre>${plan.failures?.length ? whyBlock(plan.failures) : ""}`);
    if (run) run.disabled = false;
  } catch (e) {
    out.innerHTML = String(html`<p class="error" id="plan-error">${e.message}</p>${e.problems?.length ? problemList(src, e.problems, "error") : ""}`);
  }
}

// problemList shows each problem at its line ("job:LINE:COL" in pos): the
// line's text under it, and a link that selects the line in the text area.
function problemList(src, problems, cls) {
  const lines = src.split("\n");
  return html`<ul class="problems" id="problems">${problems.map((p) => {
    const m = /:(\d+)(?::(\d+))?$/.exec(p.pos || "");
    const line = m ? Number(m[1]) : 0;
    const text = line ? lines[line - 1] : undefined;
    return html`<li class="${cls}">${line ? html`<a href="#" data-line="${line}">line ${line}${m[2] ? `, column ${m[2]}` : ""}</a>: ` : ""}${p.field ? `${p.field}: ` : ""}${p.message}${
      text !== undefined ? html`<pre class="code">${String(line).padStart(4)} | ${text}</pre>` : ""}</li>`;
  })}</ul>`;
}

function goToLine(n) {
  const ta = document.getElementById("job-source");
  if (!ta) return;
  const lines = ta.value.split("\n");
  const start = lines.slice(0, n - 1).reduce((k, l) => k + l.length + 1, 0);
  ta.focus();
  ta.setSelectionRange(start, start + (lines[n - 1] || "").length);
}

function runQuestion() {
  const p = planned?.plan;
  if (!p) return "Nothing is planned: Plan first.";
  if (p.new) return `Submit the new job ${p.job}, as planned?`;
  return `Submit ${p.job} as planned (version ${p.version})? If it changed since the plan, the server refuses.`;
}

async function runPlanned() {
  if (!planned || planned.key !== location.hash) throw new Error("Nothing is planned: Plan first, then Run submits what was planned.");
  if ((document.getElementById("job-source")?.value ?? "") !== planned.source) throw new Error("The text changed since the plan: Plan again, then Run.");
  const { job, plan } = planned;
  const r = await api(`/v1/jobs${plan.check_index ? `?check_index=${plan.check_index}` : ""}`, { method: "POST", body: job });
  planned = null;
  location.hash = `#/jobs/${enc(r.job.name)}`;
  return r.changed ? `Job ${r.job.name} submitted: version ${r.job.version}.` : `Job ${r.job.name} is unchanged: version ${r.job.version}.`;
}

// ---- ACL tokens and policies: management tokens only ----

// newToken is the token this page has just created, secret and all: shown
// once, on the ACL page, until the user goes to another page. No list
// ever holds a secret (GET /v1/acl/tokens leaves them out).
let newToken = null;

async function aclPage(params) {
  const title = html`<h1>ACL <small>tokens and policies</small></h1>`;
  if (!me.acl) return html`${title}<p class="why" id="acl-denied">ACLs are off on this server (it was started with --acl=false): every request is allowed and tokens mean nothing.</p>`;
  if (!me.management) {
    return html`${title}<p class="why" id="acl-denied">token "${me.token}" is a ${me.token_type || "client"} token: only a management token may list, create
      or delete tokens and policies (<code>drover acl token create --type management</code> makes one).</p>`;
  }
  const [tokens, policies] = await Promise.all([api("/v1/acl/tokens"), api("/v1/acl/policies")]);
  tokens.sort((a, b) => a.name.localeCompare(b.name) || a.accessor_id.localeCompare(b.accessor_id));
  policies.sort((a, b) => a.name.localeCompare(b.name));
  const editing = policies.find((p) => p.name === params.get("policy"));
  const shown = newToken && newToken.hash === location.hash ? newToken.token : null;
  return html`${title}
    ${shown ? html`<div class="secret" id="new-token"><p>The secret of token <b>${shown.name}</b>, shown this once (the server never shows it again):</p>
      <pre class="code" id="new-token-secret">${shown.secret_id}</pre><p class="muted">Accessor <span class="id">${shown.accessor_id}</span>.
      Use it as <code>DROVER_TOKEN</code>, or log a browser in with <code>drover ui</code>.</p></div>` : ""}
    <h2>Tokens <small class="muted">${tokens.length}</small></h2>
    ${table(["Name", "Accessor", "Type", "Policies", "Created", ""], tokens.map((t) => [td(t.name), td(html`<span class="id">${t.accessor_id}</span>`),
      td(t.type), td((t.policies || []).join(", ") || "-"), td(when(t.create_time)),
      td(action("Delete", { danger: true, confirm: `Delete token "${t.name}" (accessor ${short(t.accessor_id)})? Whoever uses it is refused from then on${t.name === me.token ? ", this browser too if it is logged in with it" : ""}.`,
        run: async () => { await api(`/v1/acl/tokens/${enc(t.accessor_id)}`, { method: "DELETE" }); return `Token "${t.name}" deleted.`; } }))]),
      "No tokens.", "", "token-table")}
    <form class="aclform" id="token-form" data-keep>
      <h3>Create a token</h3>
      <label>name <input id="token-name" placeholder="whose it is" size="24" maxlength="128"></label>
      <label>type <select id="token-type"><option value="client">client (its policies)</option><option value="management">management (everything)</option></select></label>
      <fieldset><legend>policies (client tokens)</legend>${policies.length
        ? policies.map((p) => html`<label><input type="checkbox" data-token-policy="${p.name}"> ${p.name}</label> `)
        : html`<span class="muted">none yet: apply one below first</span>`}</fieldset>
      ${action("Create token", { confirm: tokenQuestion, run: createToken })}
    </form>
    <h2>Policies <small class="muted">${policies.length}</small></h2>
    ${table(["Name", "Description", "Rules", ""], policies.map((p) => [td(p.name), td(p.description || ""), td(html`<pre class="rules">${p.rules}</pre>`),
      td(html`${link(`#/acl?policy=${enc(p.name)}`, "Edit")}
        ${action("Delete", { danger: true, confirm: `Delete policy "${p.name}"? Tokens that hold it lose what it grants at once.`,
          run: async () => { await api(`/v1/acl/policies/${enc(p.name)}`, { method: "DELETE" }); return `Policy "${p.name}" deleted.`; } })}`)]),
      "No policies: a client token needs one.", "", "policy-table")}
    <form class="aclform" id="policy-form" data-keep>
      <h3>${editing ? `Edit policy ${editing.name}` : "Apply a policy"}</h3>
      <label>name <input id="policy-name" value="${editing?.name || ""}" placeholder="e.g. readonly" size="24"></label>
      <label>description <input id="policy-description" value="${editing?.description || ""}" size="40"></label>
      <textarea id="policy-rules" class="source" rows="8" spellcheck="false" aria-label="the policy's rules (HCL)"
        placeholder='namespace "default" { capabilities = ["read"] }'>${editing?.rules || ""}</textarea>
      ${action("Apply policy", { confirm: policyQuestion, run: applyPolicy })}
      <p class="muted">Rules as <code>drover acl policy apply</code> takes them: <code>namespace "NAME" { capabilities = [...] }</code>, <code>node { capabilities = [...] }</code>.</p>
    </form>`;
}

const aclValue = (id) => (document.getElementById(id)?.value || "").trim();
const tokenPolicies = () => [...document.querySelectorAll("input[data-token-policy]:checked")].map((i) => i.dataset.tokenPolicy);

function tokenQuestion() {
  const type = aclValue("token-type"), ps = tokenPolicies();
  return `Create ${type} token "${aclValue("token-name")}"${type === "client" ? ` with ${ps.length ? "policies " + ps.join(", ") : "no policy (the server refuses that)"}` : ", which may do everything"}?`;
}

async function createToken() {
  const type = aclValue("token-type");
  const body = { name: aclValue("token-name"), type };
  if (type === "client") body.policies = tokenPolicies();
  const t = await api("/v1/acl/tokens", { method: "POST", body });
  newToken = { hash: location.hash, token: t };
  return `Token "${t.name}" created: copy its secret below now; it is not shown again.`;
}

function policyQuestion() {
  const name = aclValue("policy-name");
  return `Apply policy "${name}"? If it exists its rules are replaced, and every token holding it gets the new rules at once.`;
}

async function applyPolicy() {
  const name = aclValue("policy-name");
  if (!name) throw new Error("give the policy a name (the name field above its rules)");
  const p = await api(`/v1/acl/policies/${enc(name)}`, { method: "PUT",
    body: { rules: document.getElementById("policy-rules")?.value || "", description: aclValue("policy-description") } });
  return `Policy "${p.name}" applied.`;
}

// ---- a node's usage over the last minutes ----

// The server keeps only each node's latest usage report, no history: the
// node page asks GET /v1/nodes/{id}/usage (its agent's sample) every
// usageEvery while it is open, and keeps the last usageKeep samples of each
// node for as long as the browser tab lives.
const usageEvery = 10000, usageKeep = 30; // 5 minutes
const usageSamples = new Map(); // node ID -> [{t, cpu, memory}], oldest first
let usageTimer = null, usageNodeID = "", usageNodeName = "", usageTotals = null;

function addUsage(id, u) {
  if (!u?.time || !u.tasks) return;
  const t = Date.parse(u.time);
  const list = usageSamples.get(id) || [];
  if (list.length && list[list.length - 1].t >= t) return;
  list.push({ t, cpu: u.tasks.cpu, memory: u.tasks.memory });
  while (list.length > usageKeep) list.shift();
  usageSamples.set(id, list);
}

async function sampleUsage() {
  const { view, args } = route();
  // The page's address names the node by ID, an ID prefix or its name.
  const shown = view === "node" && args[0] && (usageNodeID.startsWith(args[0]) || args[0] === usageNodeName);
  if (!me || !usageNodeID || !shown) {
    clearInterval(usageTimer);
    usageTimer = null;
    return;
  }
  const id = usageNodeID;
  try {
    addUsage(id, await api(`/v1/nodes/${enc(id)}/usage`, { signal: AbortSignal.timeout(8000) }));
  } catch (e) {
    const el = document.getElementById("usage-error");
    if (el) el.textContent = `The last sample failed: ${e.message}`;
    return;
  }
  const el = document.getElementById("usage");
  if (el && usageTotals) el.outerHTML = String(usageBlock(id, usageTotals));
}

// usageSection draws the node's charts and keeps sampling while the page
// shows this node.
function usageSection(n) {
  addUsage(n.id, n.usage);
  usageTotals = n.resources;
  usageNodeName = n.name;
  if (usageNodeID !== n.id || !usageTimer) {
    usageNodeID = n.id;
    clearInterval(usageTimer);
    usageTimer = setInterval(sampleUsage, usageEvery);
    setTimeout(sampleUsage, 0);
  }
  return usageBlock(n.id, n.resources);
}

function usageBlock(id, res) {
  const samples = usageSamples.get(id) || [];
  const W = 300, H = 60, span = usageEvery * usageKeep, now = Date.now();
  // Each chart's top is a little above its highest sample (a node's
  // tasks often use a sliver of it: on the node's total the line would
  // lie flat on the floor); the caption says the node's total.
  const chart = (key, total, unit, label) => {
    const top = Math.max(1, Math.ceil(1.25 * Math.max(0, ...samples.map((s) => s[key]))));
    const x = (t) => Math.max(0, W - ((now - t) / span) * W).toFixed(1);
    const y = (v) => (H - Math.min(1, v / top) * H).toFixed(1);
    const pts = samples.map((s) => `${x(s.t)},${y(s[key])}`);
    const last = samples[samples.length - 1];
    return html`<figure class="usage-chart" id="usage-${key}" data-samples="${JSON.stringify(samples.map((s) => [s.t, s[key]]))}">
      <figcaption>${label}: ${last ? `${last[key]} ${unit} now, of ${total}` : "no sample yet"}</figcaption>
      <svg viewBox="0 0 ${W} ${H}" preserveAspectRatio="none" role="img" aria-label="${label} used over the last 5 minutes, 0 to ${top} ${unit}">
        ${pts.length ? html`<polygon points="${x(samples[0].t)},${H} ${pts.join(" ")} ${x(last.t)},${H}"></polygon>
        <polyline points="${pts.length === 1 ? `${Math.max(0, Number(x(last.t)) - 3)},${y(last[key])} ` : ""}${pts.join(" ")}"></polyline>` : ""}</svg>
      <span class="muted axis">5 min ago</span><span class="muted axis right">now · top of the chart ${top} ${unit}</span></figure>`;
  };
  return html`<section id="usage"><h2>Usage <small class="muted">the last 5 minutes</small></h2>
    <p class="muted">What the node's tasks use, as its agent samples it: one sample every ${usageEvery / 1000} s while this page is open
      (the server keeps only the latest), up to the last 5 minutes. ${plural(samples.length, "sample")} so far.</p>
    <div class="usage">${chart("cpu", res.cpu, "MHz", "CPU")}${chart("memory", res.memory, "MB", "Memory")}</div>
    <p class="error" id="usage-error"></p></section>`;
}

// ---- routing and rendering ----

// route reads #/VIEW/ARG/SUB?QUERY.
function route() {
  const [path, query] = location.hash.replace(/^#\/?/, "").split("?");
  const [view, ...args] = path.split("/").map(decodeURIComponent);
  const params = new URLSearchParams(query || "");
  if (view === "jobs" && args[0]) return { view: "job", args, params };
  if (view === "nodes" && args[0]) return { view: "node", args, params };
  if (view === "whatif" || view === "topology") return { view, args, params };
  return { view: views[view] ? view : "jobs", args, params };
}

let rendering = false, again = false, lastHTML = "";
async function render() {
  if (!me) return showLogin();
  if (rendering) { again = true; return; }
  rendering = true;
  // The page drawn is the one asked for now: the address may change while
  // it loads (then another render follows), and the page is marked with
  // the address it was drawn for.
  const key = location.hash;
  const { view, args, params } = route();
  document.querySelectorAll("[data-nav]").forEach((a) => a.classList.toggle("active", view.startsWith(a.dataset.nav.replace(/s$/, ""))));
  try {
    building = new Map();
    actionSeq = 0;
    denied = new Set();
    let out = String(await views[view](args[0], args[1], params));
    // Logged out while the page loaded: the login screen stays.
    if (!me) return;
    if (denied.size) out = String(html`<p class="why" id="denied">Some actions are disabled: ${[...denied].join("; ")}.</p>`) + out;
    // An open log or an input being typed into is not redrawn under the user.
    const typing = document.activeElement && main.contains(document.activeElement) && ["INPUT", "SELECT", "TEXTAREA"].includes(document.activeElement.tagName);
    const same = main.dataset.key === key;
    if (same && out === lastHTML) { actions = building; return; }
    // A job being edited is not redrawn at all; an instance's page is,
    // around its log and exec panels, which keep their streams and text.
    if (same && (typing || dialog.open || document.getElementById("job-source") || document.querySelector("[data-keep][data-dirty]"))) return;
    const panels = same ? ["log-panel", "exec-panel"].map((p) => document.getElementById(p)).filter(Boolean) : [];
    main.innerHTML = out;
    for (const p of panels) document.getElementById(p.id)?.replaceWith(p);
    lastHTML = out;
    actions = building;
    main.dataset.key = key;
  } catch (e) {
    if (!me || (e instanceof APIError && e.status === 401)) { me = null; showLogin(); return; }
    main.innerHTML = String(html`<p class="error">${e.message}</p>`);
    main.dataset.key = "";
    lastHTML = "";
    actions = new Map();
  } finally {
    execAfterRender(); // a terminal no longer on the page is closed
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

// ---- the event stream: server-sent events read with fetch ----

let lastIndex = 0, streamAbort = null, streaming = false;
async function followEvents() {
  if (streaming) return;
  streaming = true;
  try { await streamEvents(); } finally { streaming = false; }
}
async function streamEvents() {
  while (me) {
    streamAbort = new AbortController();
    try {
      const resp = await fetch(`/v1/events?follow=true&index=${lastIndex}&since=1m`, { signal: streamAbort.signal });
      if (resp.status === 401) { me = null; showLogin(); return; }
      if (!resp.ok) throw new Error("events: " + resp.status);
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
    if (!me) return;
    live.textContent = "○ reconnecting"; live.classList.remove("on");
    await new Promise((r) => setTimeout(r, 2000));
  }
}

function onEvent(e) {
  const { view, params } = route();
  if (view === "events") {
    // The first page takes the new event at its top (the page's 50 stay
    // 50); a later page, or an event the filter leaves out, stays.
    const fits = (!params.get("job") || e.job === params.get("job")) && (!params.get("topic") || e.topic === params.get("topic")) &&
      (!ns || e.namespace === ns || !e.namespace);
    if (Number(params.get("page") || 1) > 1 || !fits) return;
    const tbody = document.querySelector("#event-table tbody");
    if (tbody) {
      tbody.insertAdjacentHTML("afterbegin", String(html`<tr>${eventRow(e)}</tr>`));
      while (tbody.rows.length > pageSize) tbody.deleteRow(-1);
      return;
    }
  }
  redrawSoon();
}

// ---- login, who is logged in, namespace ----

const who = document.getElementById("who");
const nsSelect = document.getElementById("namespace");

function showLogin() {
  document.body.classList.add("out");
  if (streamAbort) streamAbort.abort();
  main.innerHTML = String(html`<section class="login" id="login">
    <h1>Log in to drover</h1>
    <p>On a machine where the <code>drover</code> CLI works, run</p>
    <pre class="code">drover ui</pre>
    <p>and open the link it prints: it logs this browser in with the CLI's token, once.
      <code>drover dev</code> prints such a link when it starts.</p>
    ${loginError ? html`<p class="error" id="login-error">${loginError}</p>` : ""}
  </section>`);
  main.dataset.key = "";
  lastHTML = "";
}

async function whoami() {
  try {
    me = await api("/v1/ui/whoami");
  } catch (e) {
    if (!(e instanceof APIError) || (e.status !== 401 && e.status !== 403)) throw e;
    me = null;
  }
  if (!me) return;
  document.body.classList.remove("out");
  who.textContent = me.acl ? `${me.token}${me.management ? " (management)" : ""}` : "ACLs off";
  const names = me.namespaces.map((n) => n.name);
  if (ns && !names.includes(ns)) ns = "";
  nsSelect.innerHTML = String(html`<option value="">all namespaces</option>${names.map((n) => html`<option value="${n}" ${n === ns ? html`selected` : ""}>${n}</option>`)}`);
}

// The search box: what is typed goes to #/search?q=..., which searches
// the jobs, nodes and instances lists.
const searchBox = document.getElementById("search");
let searchTimer = null;
searchBox.addEventListener("input", () => {
  clearTimeout(searchTimer);
  searchTimer = setTimeout(() => {
    const q = searchBox.value.trim();
    location.hash = q ? `#/search?q=${enc(q)}` : "#/jobs";
  }, 250);
});

// Keyboard: "/" goes to the search box from anywhere but a field being
// typed in; Escape there leaves it. Every action is a button or a link,
// so Tab reaches it and Enter triggers it.
document.addEventListener("keydown", (ev) => {
  const t = ev.target;
  const field = t instanceof HTMLElement && (["INPUT", "SELECT", "TEXTAREA"].includes(t.tagName) || t.isContentEditable);
  if (ev.key === "/" && !field && !dialog.open && !ev.ctrlKey && !ev.metaKey && !ev.altKey && me) {
    ev.preventDefault();
    searchBox.focus();
    searchBox.select();
  } else if (ev.key === "Escape" && t === searchBox) {
    searchBox.blur();
  }
});

nsSelect.addEventListener("change", () => {
  ns = nsSelect.value;
  localStorage.setItem("drover-namespace", ns);
  render();
});

document.getElementById("logout").addEventListener("click", async () => {
  try { await api("/v1/ui/session", { method: "DELETE" }); } catch (e) { /* logged out either way */ }
  me = null;
  loginError = "";
  say("", false);
  showLogin();
});

window.addEventListener("hashchange", () => {
  if (location.hash.startsWith("#login=")) { start(); return; }
  if (logAbort && route().view !== "allocs") logAbort.abort();
  if (location.hash !== flashHash) say("", false);
  if (newToken && location.hash !== newToken.hash) newToken = null;
  render();
});

// A login link is ADDRESS/ui/#login=CODE: the code is traded for a session
// cookie and leaves the address bar at once. Without one, a page that has
// no session shows how to log in; nothing is red before the user acts.
async function start() {
  loginError = "";
  const m = location.hash.match(/^#login=([0-9a-f]+)$/);
  if (m) {
    history.replaceState(null, "", location.pathname + "#/jobs");
    try {
      await api("/v1/ui/session", { method: "POST", body: { code: m[1] } });
    } catch (e) {
      loginError = e.message;
    }
  }
  await whoami();
  if (!me) return showLogin();
  render();
  followEvents();
}
start();
