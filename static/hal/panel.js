// The AI chat panel: tabs (unified + one per connection), streaming conversation,
// proposal cards with inline re-auth and the three-step confirmation, resizable,
// state saved per operator on the server.
import { api, ApiError, csrfToken } from "./app.js";

const T = JSON.parse(document.getElementById("ai-panel-strings")?.textContent || "{}");
const $ = (sel, root = document) => root.querySelector(sel);
const layout = $("#layout");
const panel = $("#ai-panel");
const tabsEl = $("#ai-tabs");
const logEl = $("#ai-log");
const input = $("#ai-input");
const sendError = $("#ai-send-error");
const completeEl = $("#ai-complete");

const MIN_WIDTH = 280;
const FRAME_MS = 40;
const PAGE = 50;

const state = {
  panel: { open: true, width: 400, active_room_id: null },
  rooms: [],
  connections: [],
  roomId: null,
  messages: new Map(), // message id -> element
  proposals: new Map(), // proposal id -> element
  oldestId: null,
  renaming: false,
  loadingOlder: false,
  exhausted: false,
  ws: null, // the live /ws/ai/ socket
  snapshotAsked: new Set(), // reply ids whose text so far was asked for after a gap
};

const list = (data, key) => (Array.isArray(data) ? data : data?.[key] || []);

// ---------- panel state: open / width, saved on the server ----------
let saveTimer = null;
function savePanel() {
  clearTimeout(saveTimer);
  saveTimer = setTimeout(flushPanel, 250);
}

function flushPanel({ keepalive = false } = {}) {
  if (saveTimer === null) return;
  clearTimeout(saveTimer);
  saveTimer = null;
  const body = JSON.stringify(state.panel);
  fetch("/api/ai/panel", {
    method: "PUT",
    credentials: "same-origin",
    keepalive,
    headers: { "Content-Type": "application/json", Accept: "application/json", "X-CSRFToken": csrfToken() },
    body,
  }).catch(() => {});
}

// A change made just before leaving the page is still saved.
window.addEventListener("pagehide", () => flushPanel({ keepalive: true }));

function applyPanel() {
  layout.classList.toggle("panel-closed", !state.panel.open);
  const toggle = $("#ai-panel-toggle");
  if (toggle) toggle.setAttribute("aria-expanded", String(state.panel.open));
  const width = clampWidth(state.panel.width);
  document.documentElement.style.setProperty("--panel-width", `${width}px`);
}

function clampWidth(width) {
  const max = Math.max(MIN_WIDTH, window.innerWidth - 480);
  return Math.round(Math.min(Math.max(Number(width) || 400, MIN_WIDTH), max));
}

function setOpen(open) {
  state.panel.open = open;
  applyPanel();
  savePanel();
}

$("#ai-panel-toggle")?.addEventListener("click", () => setOpen(!state.panel.open));
$("#ai-panel-close")?.addEventListener("click", () => setOpen(false));

const resizer = $("#ai-panel-resizer");
resizer?.addEventListener("pointerdown", (ev) => {
  ev.preventDefault();
  resizer.setPointerCapture(ev.pointerId);
  const startX = ev.clientX;
  const startWidth = panel.getBoundingClientRect().width;
  const move = (e) => {
    state.panel.width = clampWidth(startWidth + (startX - e.clientX));
    applyPanel();
  };
  const up = () => {
    resizer.removeEventListener("pointermove", move);
    resizer.removeEventListener("pointerup", up);
    savePanel();
  };
  resizer.addEventListener("pointermove", move);
  resizer.addEventListener("pointerup", up);
});
resizer?.addEventListener("keydown", (ev) => {
  const step = ev.shiftKey ? 50 : 10;
  if (ev.key === "ArrowLeft") state.panel.width = clampWidth(state.panel.width + step);
  else if (ev.key === "ArrowRight") state.panel.width = clampWidth(state.panel.width - step);
  else return;
  ev.preventDefault();
  applyPanel();
  savePanel();
});

// ---------- tabs ----------
function connectionOf(room) {
  return state.connections.find((c) => c.id === room.connection_id);
}

function tabTitle(room) {
  return room.kind === "unified" ? T.unified || room.title : room.title;
}

function renderTabs() {
  // Never rebuild under an open rename field (a live event must not eat the operator's typing).
  if (state.renaming) return;
  tabsEl.replaceChildren();
  for (const room of state.rooms) {
    const tab = document.createElement("button");
    tab.type = "button";
    tab.setAttribute("role", "tab");
    tab.setAttribute("aria-controls", "ai-room");
    tab.id = `ai-tab-${room.id}`;
    tab.dataset.roomId = room.id;
    tab.dataset.kind = room.kind;
    tab.className = "ai-tab";
    const label = document.createElement("span");
    label.className = "ai-tab-label";
    label.textContent = tabTitle(room);
    tab.append(label);
    if (room.kind === "unified") {
      tab.dataset.pinned = "true";
    } else {
      const conn = connectionOf(room);
      if (conn && conn.status !== "active") {
        const badge = document.createElement("span");
        badge.className = `badge ${conn.status}`;
        badge.textContent = conn.status;
        badge.title = T.inactive;
        tab.append(badge);
        tab.dataset.inactive = "true";
      }
      tab.addEventListener("dblclick", () => startRename(tab, room));
    }
    tab.addEventListener("click", () => selectRoom(room.id));
    tab.addEventListener("keydown", tabKeys);
    tabsEl.append(tab);
  }
  markSelected();
}

function markSelected() {
  for (const tab of tabsEl.querySelectorAll("[role=tab]")) {
    const selected = Number(tab.dataset.roomId) === state.roomId;
    tab.setAttribute("aria-selected", String(selected));
    tab.tabIndex = selected ? 0 : -1;
  }
}

function tabKeys(ev) {
  const tabs = [...tabsEl.querySelectorAll("[role=tab]")];
  const i = tabs.indexOf(ev.currentTarget);
  let next = null;
  if (ev.key === "ArrowRight") next = tabs[(i + 1) % tabs.length];
  else if (ev.key === "ArrowLeft") next = tabs[(i - 1 + tabs.length) % tabs.length];
  else if (ev.key === "Home") next = tabs[0];
  else if (ev.key === "End") next = tabs[tabs.length - 1];
  else if (ev.key === "F2" && ev.currentTarget.dataset.pinned !== "true") {
    const room = state.rooms.find((r) => String(r.id) === ev.currentTarget.dataset.roomId);
    if (room) startRename(ev.currentTarget, room);
    return;
  }
  if (!next) return;
  ev.preventDefault();
  selectRoom(Number(next.dataset.roomId));
  next.focus();
}

// The tab is swapped for a text field (an input inside a <button> cannot be typed into
// reliably); Enter saves, Escape or leaving the field cancels, an empty name is refused.
function startRename(tab, room) {
  if (room.kind === "unified" || state.renaming) return;
  const field = document.createElement("input");
  field.className = "ai-tab-rename";
  field.id = `ai-tab-rename-${room.id}`;
  field.value = room.title;
  field.maxLength = 60;
  field.setAttribute("aria-label", room.title);
  state.renaming = true;
  tab.replaceWith(field);
  field.focus();
  field.select();
  let done = false;
  const finish = async (save) => {
    if (done) return;
    const title = field.value.trim();
    if (save && !title) {
      field.setCustomValidity(T.rename_empty);
      field.reportValidity();
      field.classList.add("invalid");
      field.setAttribute("aria-invalid", "true");
      return;
    }
    done = true;
    if (save && title !== room.title) {
      try {
        const updated = await api("PATCH", `/api/ai/rooms/${room.id}`, { title });
        room.title = updated.title ?? updated.room?.title ?? title;
      } catch (err) {
        showError(err);
      }
    }
    state.renaming = false;
    renderTabs();
    tabsEl.querySelector(`#ai-tab-${room.id}`)?.focus();
  };
  field.addEventListener("keydown", (ev) => {
    ev.stopPropagation();
    if (ev.key === "Enter") {
      ev.preventDefault();
      finish(true);
    } else if (ev.key === "Escape") {
      ev.preventDefault();
      finish(false);
    }
  });
  field.addEventListener("input", () => {
    field.setCustomValidity("");
    field.classList.remove("invalid");
    field.removeAttribute("aria-invalid");
  });
  field.addEventListener("blur", () => finish(false));
}

async function selectRoom(roomId, { save = true, force = false } = {}) {
  if (state.roomId === roomId && !force) return;
  state.roomId = roomId;
  if (save && state.panel.active_room_id !== roomId) {
    state.panel.active_room_id = roomId;
    savePanel();
  }
  markSelected();
  $("#ai-room").setAttribute("aria-labelledby", `ai-tab-${roomId}`);
  const data = await api("GET", `/api/ai/rooms/${roomId}/messages?limit=${PAGE}`);
  if (state.roomId !== roomId) return; // another tab was chosen meanwhile
  logEl.replaceChildren();
  state.messages.clear();
  state.proposals.clear();
  const rows = list(data, "messages");
  for (const m of rows) renderMessage(m);
  state.oldestId = rows[0]?.id ?? null;
  state.exhausted = !data.has_more;
  await loadProposals(roomId);
  renderEmpty();
  scrollToEnd();
}

function renderEmpty() {
  const flags = $("#ai-room-flags");
  flags.textContent = state.connections.length ? "" : T.no_models;
}

// ---------- messages ----------
function speakerClass(m) {
  if (m.author_kind === "operator") return "from-operator";
  if (m.author_kind === "hal") return "from-hal";
  return `from-model model-${(m.connection_id ?? 0) % 6}`;
}

function renderMessage(m, { prepend = false } = {}) {
  if (m.room_id !== undefined && m.room_id !== state.roomId) return null;
  let li = state.messages.get(m.id);
  if (!li) {
    li = document.createElement("li");
    li.className = `ai-msg ${speakerClass(m)}`;
    li.dataset.messageId = m.id;
    const who = document.createElement("div");
    who.className = "ai-who";
    const body = document.createElement("div");
    body.className = "ai-text";
    li.append(who, body);
    state.messages.set(m.id, li);
    if (prepend) logEl.prepend(li);
    else logEl.append(li);
  }
  li.querySelector(".ai-who").textContent =
    m.author_kind === "operator" ? m.author || T.operator : m.author || T.hal;
  li.dataset.status = m.status;
  li.dataset.relayDepth = m.relay_depth ?? 0;
  li.querySelector(".ai-text").textContent = m.text || "";
  renderStatus(li, m);
  return li;
}

function renderStatus(li, m) {
  li.querySelector(".ai-status")?.remove();
  li.classList.toggle("failed", m.status === "failed");
  li.classList.toggle("streaming", m.status === "streaming");
  if (m.status === "failed") {
    const err = document.createElement("div");
    err.className = "ai-status error";
    const code = m.error?.code || "failed";
    err.dataset.code = code;
    err.textContent = `${T.failed}: ${code}${m.error?.message ? " — " + m.error.message : ""}`;
    li.append(err);
  } else if (m.status === "streaming") {
    const s = document.createElement("div");
    s.className = "ai-status";
    s.textContent = T.streaming;
    li.append(s);
  }
  if (m.retry_url || m.turn_id_to_retry) {
    const b = document.createElement("button");
    b.type = "button";
    b.className = "ai-retry";
    b.textContent = T.retry;
    b.addEventListener("click", () => api("POST", m.retry_url).catch(showError));
    li.append(b);
  }
}

function appendDelta(d) {
  const li = state.messages.get(d.id ?? d.message_id);
  if (!li) return;
  if (li.dataset.status !== "streaming") return; // completed text is already final
  const body = li.querySelector(".ai-text");
  const piece = d.delta ?? d.text ?? "";
  const have = body.textContent.length;
  if (typeof d.offset === "number" && d.offset < have) {
    if (d.offset + piece.length <= have) return; // already shown
    body.textContent = body.textContent.slice(0, d.offset) + piece;
  } else if (typeof d.offset === "number" && d.offset > have) {
    // Text is missing before this piece (a reconnect): wait for the snapshot of the text
    // so far, asked for once per reply, rather than show words out of place.
    if (!state.snapshotAsked.has(d.id)) {
      state.snapshotAsked.add(d.id);
      requestResume();
    }
    return;
  } else {
    body.textContent += piece;
  }
  stickToEnd();
}

function scrollToEnd() {
  logEl.scrollTop = logEl.scrollHeight;
}

function stickToEnd() {
  if (logEl.scrollHeight - logEl.scrollTop - logEl.clientHeight < 80) scrollToEnd();
}

logEl.addEventListener("scroll", async () => {
  if (logEl.scrollTop > 40 || state.loadingOlder || state.exhausted || !state.oldestId) return;
  state.loadingOlder = true;
  const before = logEl.scrollHeight;
  try {
    const data = await api("GET", `/api/ai/rooms/${state.roomId}/messages?before=${state.oldestId}&limit=${PAGE}`);
    const older = list(data, "messages");
    if (!older.length || !data.has_more) state.exhausted = true;
    for (const m of [...older].reverse()) renderMessage(m, { prepend: true });
    if (older.length) state.oldestId = older[0].id;
    logEl.scrollTop = logEl.scrollHeight - before;
  } finally {
    state.loadingOlder = false;
  }
});

// ---------- sending ----------
function screenContext() {
  const b = document.body.dataset;
  const ctx = { page: b.page || "", path: location.pathname };
  if (b.selectedType) ctx.selected = { type: b.selectedType, id: b.selectedId, label: b.selectedLabel };
  return ctx;
}

function showError(err) {
  sendError.textContent = err instanceof ApiError ? `${err.code}: ${err.message}` : String(err);
  sendError.dataset.code = err.code || "";
}

$("#ai-compose").addEventListener("submit", async (ev) => {
  ev.preventDefault();
  const text = input.value.trim();
  if (!text || !state.roomId) return;
  sendError.textContent = "";
  sendError.dataset.code = "";
  try {
    const data = await api("POST", `/api/ai/rooms/${state.roomId}/messages`, { text, context: screenContext() });
    input.value = "";
    renderMessage(data.message || data);
    scrollToEnd();
  } catch (err) {
    showError(err);
  }
});

input.addEventListener("keydown", (ev) => {
  if (!completeEl.hidden && ["ArrowDown", "ArrowUp", "Enter", "Tab", "Escape"].includes(ev.key)) {
    completionKeys(ev);
    return;
  }
  if (ev.key === "Enter" && !ev.shiftKey && !ev.isComposing) {
    ev.preventDefault();
    $("#ai-compose").requestSubmit();
  }
});

$("#ai-reset").addEventListener("click", async () => {
  if (!state.roomId || !window.confirm(T.reset_confirm)) return;
  try {
    await api("POST", `/api/ai/rooms/${state.roomId}/reset`);
    logEl.replaceChildren();
    state.messages.clear();
    state.proposals.clear();
  } catch (err) {
    showError(err);
  }
});

// ---------- @ autocomplete ----------
function mentionAtCursor() {
  const upto = input.value.slice(0, input.selectionStart);
  const m = upto.match(/(^|\s)@([\p{L}\p{N}_-]*)$/u);
  return m ? { start: upto.length - m[2].length, prefix: m[2] } : null;
}

input.addEventListener("input", () => {
  const at = mentionAtCursor();
  if (!at) {
    completeEl.hidden = true;
    return;
  }
  const names = state.connections
    .filter((c) => c.name.toLowerCase().startsWith(at.prefix.toLowerCase()))
    .map((c) => c.name);
  if (!names.length) {
    completeEl.hidden = true;
    return;
  }
  completeEl.replaceChildren(
    ...names.map((name, i) => {
      const opt = document.createElement("div");
      opt.setAttribute("role", "option");
      opt.className = "ai-option";
      opt.textContent = name;
      opt.setAttribute("aria-selected", String(i === 0));
      opt.addEventListener("mousedown", (e) => {
        e.preventDefault();
        acceptCompletion(name);
      });
      return opt;
    }),
  );
  completeEl.hidden = false;
});

function completionKeys(ev) {
  const opts = [...completeEl.querySelectorAll("[role=option]")];
  let i = opts.findIndex((o) => o.getAttribute("aria-selected") === "true");
  ev.preventDefault();
  if (ev.key === "Escape") {
    completeEl.hidden = true;
    return;
  }
  if (ev.key === "Enter" || ev.key === "Tab") {
    acceptCompletion(opts[Math.max(i, 0)].textContent);
    return;
  }
  i = ev.key === "ArrowDown" ? (i + 1) % opts.length : (i - 1 + opts.length) % opts.length;
  opts.forEach((o, j) => o.setAttribute("aria-selected", String(i === j)));
}

function acceptCompletion(name) {
  const at = mentionAtCursor();
  if (!at) return;
  const before = input.value.slice(0, at.start);
  const after = input.value.slice(input.selectionStart);
  input.value = `${before}${name} ${after}`;
  const pos = before.length + name.length + 1;
  input.setSelectionRange(pos, pos);
  completeEl.hidden = true;
  input.focus();
}

// ---------- proposals ----------
async function loadProposals(roomId) {
  try {
    const data = await api("GET", `/api/ai/proposals?room_id=${roomId}&limit=100`);
    if (state.roomId !== roomId) return;
    // Decided cards stay next to their message; a cleared conversation takes its cards along.
    const rows = [...list(data, "proposals")]
      .filter((p) => p.status === "pending" || state.messages.has(p.message_id))
      .sort((a, b) => a.id - b.id);
    for (const p of rows) renderProposal(p);
  } catch {
    /* proposals are optional for rendering the room */
  }
}

// Events and API answers can cross: never let a late "executing" undo an "executed", and
// never rebuild a pending card (that would drop a three-step flow in progress).
const STATUS_RANK = { pending: 0, approved: 1, executing: 1 };
const rank = (status) => STATUS_RANK[status] ?? 2;

function renderProposal(p) {
  if (!p || p.id === undefined) return;
  if (p.room_id !== undefined && p.room_id !== null && p.room_id !== state.roomId) return;
  let card = state.proposals.get(p.id);
  if (card && rank(p.status) < rank(card.dataset.status)) return;
  if (card && p.status === "pending" && card.dataset.status === "pending") return;
  if (!card) {
    card = document.createElement("li");
    card.className = "ai-proposal";
    card.dataset.proposalId = p.id;
    state.proposals.set(p.id, card);
    const anchor = p.message_id && state.messages.get(p.message_id);
    if (anchor) anchor.after(card);
    else logEl.append(card);
  }
  card.dataset.status = p.status;
  card.dataset.tier = p.tier;
  card.replaceChildren();
  const head = document.createElement("div");
  head.className = "ai-proposal-head";
  const tierLabel = p.tier === "high_risk" ? T.high_risk : p.tier === "write" ? T.write : T.read;
  const tool = document.createElement("strong");
  tool.textContent = p.tool;
  const tier = document.createElement("span");
  tier.className = `badge tier-${p.tier}`;
  tier.textContent = tierLabel;
  const status = document.createElement("span");
  status.className = `badge ${p.status} ai-proposal-status`;
  status.textContent = p.status;
  head.append(tool, " ", tier, " ", status);
  const args = document.createElement("pre");
  args.className = "ai-proposal-args";
  args.textContent = JSON.stringify(p.arguments ?? {}, null, 2);
  card.append(head, args);
  const impact = p.impact?.summary || (typeof p.impact === "string" ? p.impact : "");
  if (impact) {
    const im = document.createElement("p");
    im.className = "ai-proposal-impact";
    im.textContent = `${T.impact}: ${impact}`;
    card.append(im);
  }
  if (p.result !== undefined && p.result !== null && p.status !== "pending") {
    const res = document.createElement("pre");
    res.className = "ai-proposal-result";
    res.textContent = `${T.result}: ${JSON.stringify(p.result)}`;
    card.append(res);
  }
  if (p.error) {
    const e = document.createElement("p");
    e.className = "error";
    e.textContent = `${p.error.code || p.error}: ${p.error.message || ""}`;
    card.append(e);
  }
  if (p.status === "pending") card.append(proposalActions(p));
  stickToEnd();
}

function button(label, cls, onClick) {
  const b = document.createElement("button");
  b.type = "button";
  b.className = cls;
  b.textContent = label;
  b.addEventListener("click", onClick);
  return b;
}

function proposalActions(p) {
  const box = document.createElement("div");
  box.className = "ai-proposal-actions";
  const err = document.createElement("p");
  err.className = "error ai-proposal-error";
  err.setAttribute("role", "alert");
  const fail = (e) => {
    err.textContent = e instanceof ApiError ? `${e.code}: ${e.message}` : String(e);
    err.dataset.code = e.code || "";
  };
  const reject = button(T.reject, "ai-reject", () =>
    withReauth(() => api("POST", `/api/ai/proposals/${p.id}/reject`)).then(renderProposal, fail),
  );
  if (p.tier !== "high_risk") {
    const approve = button(T.approve, "primary ai-approve", () =>
      withReauth(() => api("POST", `/api/ai/proposals/${p.id}/approve`)).then(renderProposal, fail),
    );
    box.append(approve, reject, err);
    return box;
  }
  // High risk: impact → retype the target → execute, inside the card.
  const step1 = button(T.show_impact, "ai-show-impact", async () => {
    err.textContent = "";
    try {
      const data = await withReauth(() =>
        api("POST", `/api/ai/proposals/${p.id}/confirm`, { step: "impact" }),
      { raw: true });
      const conf = data.confirmation || {};
      const target = conf.target_identifier ?? p.target_identifier ?? "";
      const summary = conf.impact?.summary ?? p.impact?.summary ?? "";
      step1.disabled = true;
      const info = document.createElement("div");
      info.className = "ai-proposal-impact-detail";
      if (summary && summary !== p.impact?.summary) {
        const sum = document.createElement("p");
        sum.textContent = `${T.impact}: ${summary}`;
        info.append(sum);
      }
      const ask = document.createElement("label");
      ask.className = "ai-retype-label";
      ask.append(`${T.retype}: `);
      const code = document.createElement("code");
      code.className = "ai-target";
      code.textContent = target;
      ask.append(code);
      const field = document.createElement("input");
      field.className = "ai-retype";
      field.autocomplete = "off";
      field.spellcheck = false;
      field.setAttribute("aria-label", T.retype);
      info.append(ask, field);
      const step2 = button(T.confirm_target, "ai-confirm-target", async () => {
        err.textContent = "";
        try {
          await withReauth(
            () => api("POST", `/api/ai/proposals/${p.id}/confirm`, { step: "target", target: field.value }),
            { raw: true },
          );
          step2.disabled = true;
          field.disabled = true;
          execute.disabled = false;
          execute.focus();
        } catch (e) {
          fail(e);
        }
      });
      field.addEventListener("keydown", (ev) => {
        if (ev.key === "Enter") {
          ev.preventDefault();
          step2.click();
        }
      });
      const execute = button(T.execute, "danger ai-execute", () =>
        withReauth(() => api("POST", `/api/ai/proposals/${p.id}/approve`)).then(renderProposal, fail),
      );
      execute.disabled = true;
      box.before(info);
      step1.after(step2, execute);
      field.focus();
    } catch (e) {
      fail(e);
    }
  });
  box.append(step1, reject, err);
  return box;
}

// On 403 reauth_required: ask for the password inline, re-authenticate, then retry once.
async function withReauth(call, { raw = false } = {}) {
  const done = (data) => (raw ? data : unwrap(data));
  try {
    return done(await call());
  } catch (err) {
    if (!(err instanceof ApiError) || err.code !== "reauth_required") throw err;
    await askPassword();
    return done(await call());
  }
}

function unwrap(data) {
  return data?.proposal ?? data;
}

function askPassword() {
  const dialog = $("#ai-reauth");
  const field = $("#ai-reauth-password");
  const error = $("#ai-reauth-error");
  error.textContent = "";
  field.value = "";
  return new Promise((resolve, reject) => {
    const submit = async (ev) => {
      ev.preventDefault();
      try {
        await api("POST", "/api/auth/reauth", { password: field.value });
        cleanup();
        dialog.close();
        resolve();
      } catch (e) {
        error.textContent = e.message;
        error.dataset.code = e.code || "";
      }
    };
    const cancel = () => {
      cleanup();
      dialog.close();
      reject(new ApiError(403, "reauth_required", "Re-authentication cancelled."));
    };
    const cleanup = () => {
      $("#ai-reauth-form").removeEventListener("submit", submit);
      $("#ai-reauth-cancel").removeEventListener("click", cancel);
    };
    $("#ai-reauth-form").addEventListener("submit", submit);
    $("#ai-reauth-cancel").addEventListener("click", cancel);
    dialog.showModal();
    field.focus();
  });
}

// ---------- live updates over /ws/ai/ ----------
const pendingDeltas = [];
let flushTimer = null;
function queueDelta(d) {
  pendingDeltas.push(d);
  if (!flushTimer) {
    flushTimer = setTimeout(() => {
      flushTimer = null;
      for (const x of pendingDeltas.splice(0)) appendDelta(x);
    }, FRAME_MS);
  }
}

function flushDeltas() {
  if (flushTimer) {
    clearTimeout(flushTimer);
    flushTimer = null;
  }
  for (const x of pendingDeltas.splice(0)) appendDelta(x);
}

function onEvent(type, data) {
  switch (type) {
    case "message.created":
    case "message.completed":
    case "message.failed":
      flushDeltas();
      if (renderMessage(data)) stickToEnd();
      break;
    case "message.delta":
      if (data.room_id === undefined || data.room_id === state.roomId) queueDelta(data);
      break;
    case "resume":
      onResume(data);
      break;
    case "message.snapshot":
      flushDeltas();
      onSnapshot(data);
      break;
    case "proposal.created":
    case "proposal.updated":
      renderProposal(data);
      break;
    case "notice":
      if (renderMessage({ author_kind: "hal", status: "complete", ...data, id: data.id ?? `n${Date.now()}` }))
        stickToEnd();
      break;
    case "room.updated": {
      const room = state.rooms.find((r) => r.id === data.id);
      if (room) {
        Object.assign(room, data);
        renderTabs();
      }
      break;
    }
    case "room.reset":
      if ((data.room_id ?? data.id) === state.roomId) selectRoom(state.roomId, { save: false, force: true });
      break;
    case "connection.updated":
      refreshRooms().then(() => {
        if (!state.rooms.some((r) => r.id === state.roomId) && state.rooms[0]) selectRoom(state.rooms[0].id);
        renderEmpty();
      });
      break;
    default:
      break;
  }
}

function lastSeenId() {
  let last = 0;
  for (const id of state.messages.keys()) if (typeof id === "number" && id > last) last = id;
  return last;
}

function requestResume(ws = state.ws) {
  if (!ws || ws.readyState !== WebSocket.OPEN || !state.roomId) return;
  ws.send(JSON.stringify({ type: "resume", rooms: { [state.roomId]: lastSeenId() } }));
}

function onResume(data) {
  if (data.room_id !== state.roomId) return;
  flushDeltas();
  for (const m of data.messages || []) {
    const li = state.messages.get(m.id);
    const shown = li ? li.querySelector(".ai-text").textContent : "";
    // A streaming reply may already show more than the database has: keep the longer text.
    if (li && m.status === "streaming" && shown.length > (m.text || "").length) continue;
    renderMessage(m);
  }
  stickToEnd();
}

function onSnapshot(d) {
  state.snapshotAsked.delete(d.id);
  const li = state.messages.get(d.id);
  if (!li || li.dataset.status !== "streaming") return;
  const body = li.querySelector(".ai-text");
  if ((d.text || "").length >= body.textContent.length) body.textContent = d.text;
  stickToEnd();
}

function connectSocket(attempt = 0) {
  const proto = location.protocol === "https:" ? "wss" : "ws";
  const ws = new WebSocket(`${proto}://${location.host}/ws/ai/`);
  state.ws = ws;
  ws.addEventListener("open", () => {
    // After a reconnect, ask for what was missed: messages after the last one shown and
    // the text so far of replies still streaming (from whichever process runs them).
    if (attempt > 0 && state.roomId) requestResume(ws);
    attempt = 0;
    panel.dataset.live = "true";
  });
  ws.addEventListener("message", (ev) => {
    const msg = JSON.parse(ev.data);
    onEvent(msg.type, msg.data ?? msg);
  });
  ws.addEventListener("close", () => {
    panel.dataset.live = "false";
    setTimeout(() => connectSocket(attempt + 1), Math.min(5000, 500 * 2 ** attempt));
  });
}

async function refreshRooms() {
  const [rooms, conns] = await Promise.all([
    api("GET", "/api/ai/rooms"),
    api("GET", "/api/ai/connections").catch(() => []),
  ]);
  state.rooms = list(rooms, "rooms");
  state.connections = list(conns, "connections");
  renderTabs();
}

async function init() {
  try {
    const saved = await api("GET", "/api/ai/panel");
    Object.assign(state.panel, saved.panel ?? saved);
  } catch {
    /* defaults */
  }
  applyPanel();
  await refreshRooms();
  const wanted = state.rooms.find((r) => r.id === state.panel.active_room_id) || state.rooms[0];
  if (wanted) await selectRoom(wanted.id, { save: false });
  panel.dataset.ready = "true";
  connectSocket();
}

window.addEventListener("resize", applyPanel);
init();
