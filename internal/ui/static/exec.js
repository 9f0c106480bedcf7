// The instance page's terminal: a command run in one of the instance's
// tasks, in xterm.js (vendored from npm into vendor/, loaded only when a
// terminal opens), over GET /v1/allocations/{id}/exec as a WebSocket. The
// session cookie goes with it; the server accepts it only from this page's
// own origin. Each binary message is one frame of drover exec's protocol
// (internal/execstream): its type byte, then its payload.
import { html } from "./html.js";
import { enc } from "./api.js";

// The frame types, as internal/execstream numbers them (a Go test in
// internal/ui checks that they agree).
export const frame = { stdin: 0, stdout: 1, stderr: 2, resize: 3, closeStdin: 4, exit: 5, error: 6 };

// session is the open terminal: its socket, terminal, and what watches
// its box's size; null when none is open.
let session = null;
// shown is the session whose terminal is on the page, open or ended (its
// output stays to be read until another opens).
let shown = null;

// execPanel is the instance's terminal panel for an allowed user: which
// task, which command (split at spaces; for quoting, run a shell and type
// it), and the terminal. The page keeps the panel across its redraws.
export function execPanel(a, tasks, task) {
  return html`<div id="exec-panel" hidden data-alloc="${a.id}">
    <h2>Exec</h2>
    <form id="exec-form" class="actions">
      <label>task <select id="exec-task">${tasks.map((t) => html`<option ${t === task ? html`selected` : ""}>${t}</option>`)}</select></label>
      <label>command <input id="exec-cmd" value="/bin/sh" size="30" spellcheck="false" aria-label="the command to run, split at spaces"></label>
      <button type="submit" id="exec-start">Open terminal</button>
      <button type="button" id="exec-close" disabled>Close</button>
      <span id="exec-status" class="muted" role="status"></span>
    </form>
    <div id="exec-term" class="term"></div>
  </div>`;
}

// The Exec button shows the panel; the form opens a terminal; Close ends it.
document.addEventListener("click", (ev) => {
  if (ev.target.closest("#exec-open")) {
    const p = document.getElementById("exec-panel");
    if (p) { p.hidden = false; document.getElementById("exec-cmd").focus(); }
  } else if (ev.target.closest("#exec-close") && session) {
    stop(session);
    say("closed: the command was ended");
  }
});
document.addEventListener("submit", (ev) => {
  if (ev.target.id !== "exec-form") return;
  ev.preventDefault();
  const argv = document.getElementById("exec-cmd").value.trim().split(/\s+/).filter(Boolean);
  if (!argv.length) { say("give a command to run, such as /bin/sh", true); return; }
  open(document.getElementById("exec-panel").dataset.alloc, document.getElementById("exec-task").value, argv)
    .catch((e) => say(`cannot open a terminal: ${e.message}`, true));
});

// execAfterRender ends a session whose panel the page no longer shows
// (the user went to another page).
export function execAfterRender() {
  if (shown && !shown.box.isConnected) dispose();
}

function say(msg, bad) {
  const s = document.getElementById("exec-status");
  if (!s) return;
  s.textContent = msg;
  s.className = bad ? "error" : "muted";
}

let styled = false;
async function open(allocID, task, argv) {
  dispose();
  if (!styled) {
    const l = document.createElement("link");
    l.rel = "stylesheet";
    l.href = "vendor/xterm.css";
    document.head.append(l);
    styled = true;
  }
  say("loading the terminal…");
  const [{ Terminal }, { FitAddon }] = await Promise.all([import("./vendor/xterm.mjs"), import("./vendor/addon-fit.mjs")]);
  const box = document.getElementById("exec-term");
  box.textContent = "";
  const term = new Terminal({ cursorBlink: true, fontSize: 13, scrollback: 5000, fontFamily: "ui-monospace, monospace" });
  const fit = new FitAddon();
  term.loadAddon(fit);
  term.open(box);
  fit.fit();

  const q = new URLSearchParams({ task, tty: "1" });
  argv.forEach((a) => q.append("cmd", a));
  const ws = new WebSocket(`${location.protocol === "https:" ? "wss" : "ws"}://${location.host}/v1/allocations/${enc(allocID)}/exec?${q}`);
  ws.binaryType = "arraybuffer";
  const s = { ws, term, box, exited: null, ro: null };
  session = shown = s;
  document.getElementById("exec-close").disabled = false;
  say(`connecting to ${task}…`);

  const send = (type, bytes) => {
    if (ws.readyState !== WebSocket.OPEN) return;
    const m = new Uint8Array(1 + bytes.length);
    m[0] = type;
    m.set(bytes, 1);
    ws.send(m);
  };
  const resize = () => {
    const b = new Uint8Array(4);
    const v = new DataView(b.buffer);
    v.setUint16(0, term.cols);
    v.setUint16(2, term.rows);
    send(frame.resize, b);
  };
  const te = new TextEncoder();
  term.onData((d) => send(frame.stdin, te.encode(d)));
  term.onBinary((d) => send(frame.stdin, Uint8Array.from(d, (c) => c.charCodeAt(0) & 255)));
  term.onResize(resize);
  // The terminal follows its box's size (the window's).
  s.ro = new ResizeObserver(() => { if (session === s) fit.fit(); });
  s.ro.observe(box);

  ws.onopen = () => {
    resize();
    term.focus();
    say(`${argv.join(" ")} in ${task}: running`);
  };
  ws.onmessage = (ev) => {
    const m = new Uint8Array(ev.data);
    const p = m.subarray(1);
    switch (m[0]) {
      case frame.stdout:
      case frame.stderr:
        term.write(p);
        break;
      case frame.exit:
        s.exited = Number(new TextDecoder().decode(p));
        say(`${argv.join(" ")} in ${task}: exited with code ${s.exited}`, s.exited !== 0);
        break;
      case frame.error:
        s.exited = "error";
        say(`${argv.join(" ")} in ${task} did not run: ${new TextDecoder().decode(p)}`, true);
        break;
    }
  };
  ws.onclose = (ev) => {
    if (session !== s) return;
    if (s.exited === null) {
      // A refused handshake (the instance stopped, the token lost exec)
      // tells the page nothing but 1006.
      say(ev.code === 1006 && !ev.reason
        ? "the connection closed before the command ended: is the instance still running, and may this token still exec here? (Open terminal tries again)"
        : `the connection closed: ${ev.reason || "code " + ev.code}`, true);
    }
    stop(s);
  };
}

// stop lets go of s's socket and input; its terminal stays on the page to
// be read.
function stop(s) {
  s.ro?.disconnect();
  // The page does not redraw under a focused input: with the command
  // ended, the terminal lets go of the keyboard, and the page updates again.
  s.term.blur();
  s.term.options.disableStdin = true;
  s.term.options.cursorBlink = false;
  if (s.ws.readyState <= WebSocket.OPEN) s.ws.close(1000, "closed by the user");
  if (session === s) {
    session = null;
    const c = document.getElementById("exec-close");
    if (c) c.disabled = true;
  }
}

// dispose stops the session shown, if any, and disposes of its terminal.
function dispose() {
  const s = shown;
  if (!s) return;
  stop(s);
  s.term.dispose();
  shown = null;
}
