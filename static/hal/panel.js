// The AI chat panel: tabs (unified + one per connection), streaming conversation,
// proposal cards with inline re-auth and the three-step confirmation, resizable,
// state saved per operator on the server.
import { api, ApiError, csrfToken } from "./app.js";
import { copyWithFeedback, renderMarkdown } from "./markdown.js";
import { refreshDaySeparators, refreshTimes, replyFacts, timeElement } from "./chat_meta.js";
import { Drawer } from "./drawer.js";
import { fetchProposal, renderCard, renderReview } from "./proposal_card.js";
import { refreshEditable, renderVersionTools } from "./message_versions.js";

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
  texts: new Map(), // message id -> raw Markdown text as received
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

const toggleButton = $("#ai-panel-toggle");
const drawer = new Drawer({ layout, panel, toggle: toggleButton, behind: [$("#menu"), $("#main")] });

function applyPanel() {
  layout.classList.toggle("panel-closed", !state.panel.open);
  if (drawer.active) drawer.apply();
  else toggleButton?.setAttribute("aria-expanded", String(state.panel.open));
  const width = clampWidth(state.panel.width);
  document.documentElement.style.setProperty("--panel-width", `${width}px`);
  resizer?.setAttribute("aria-valuenow", String(width));
}

function clampWidth(width) {
  const max = Math.max(MIN_WIDTH, window.innerWidth - 480);
  return Math.round(Math.min(Math.max(Number(width) || 400, MIN_WIDTH), max));
}

function setOpen(open) {
  state.panel.open = open;
  if (open) setUnread(0);
  applyPanel();
  savePanel();
}

// On wide screens the AI button docks/undocks the panel (a saved preference); on narrow
// ones it opens the overlay drawer (never saved: a page load starts with it closed).
function togglePanel() {
  if (drawer.active) drawer.set(!drawer.isOpen);
  else setOpen(!state.panel.open);
}

function panelVisible() {
  return !document.hidden && (drawer.active ? drawer.isOpen : state.panel.open);
}

toggleButton?.addEventListener("click", togglePanel);
$("#ai-panel-close")?.addEventListener("click", () => (drawer.active ? drawer.set(false) : setOpen(false)));
document.addEventListener("keydown", (ev) => {
  if (ev.altKey && !ev.ctrlKey && !ev.metaKey && ev.code === "KeyA") {
    ev.preventDefault();
    togglePanel();
  }
});

// Replies that arrive while the panel is out of sight are counted on the AI button.
let unread = 0;
const unreadBadge = $("#ai-unread");
function setUnread(n) {
  unread = n;
  if (!unreadBadge) return;
  unreadBadge.hidden = n === 0;
  unreadBadge.textContent = String(n);
  unreadBadge.setAttribute("aria-label", `${n} ${T.unread}`);
}
drawer.onChange((open) => open && setUnread(0));
document.addEventListener("visibilitychange", () => panelVisible() && setUnread(0));

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
        badge.textContent = (T.status_labels || {})[conn.status] || conn.status;
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
  state.texts.clear();
  state.proposals.clear();
  const rows = list(data, "messages");
  for (const m of rows) renderMessage(m);
  refreshEditable(logEl);
  refreshDaySeparators(logEl);
  state.oldestId = rows[0]?.id ?? null;
  state.exhausted = !data.has_more;
  await loadProposals(roomId);
  refreshWaiting();
  renderEmpty();
  scrollToEnd();
}

function renderEmpty() {
  const flags = $("#ai-room-flags");
  flags.textContent = state.connections.length ? "" : T.no_models;
  logEl.querySelector(":scope > li.ai-empty")?.remove();
  if (!state.connections.length || logEl.querySelector(":scope > li.ai-msg")) return;
  logEl.append(emptyRoom());
}

// An empty room says who is in it and offers three prompts that fit the current page.
function emptyRoom() {
  const room = state.rooms.find((r) => r.id === state.roomId);
  const people =
    room?.kind === "individual"
      ? state.connections.filter((c) => c.id === room.connection_id)
      : state.connections.filter((c) => c.status === "active");
  const li = document.createElement("li");
  li.className = "ai-empty";
  const who = document.createElement("p");
  who.textContent = people.length ? `${T.in_this_room}: ${people.map((c) => "@" + c.name).join(", ")}` : T.nobody_active;
  const list = document.createElement("div");
  list.className = "ai-suggestions";
  const { page, selectedType, selectedLabel } = document.body.dataset;
  const key = selectedType || page;
  const prompts = T.suggestions?.[key] || T.suggestions?.default || [];
  for (const template of prompts.slice(0, 3)) {
    const b = document.createElement("button");
    b.type = "button";
    b.className = "ai-suggestion";
    b.textContent = template.replace("{label}", selectedLabel || "");
    b.addEventListener("click", () => {
      input.value = b.textContent;
      input.focus();
    });
    list.append(b);
  }
  li.append(who, list);
  return li;
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
    const tools = document.createElement("div");
    tools.className = "ai-msg-tools";
    const copy = document.createElement("button");
    copy.type = "button";
    copy.className = "ai-copy";
    copy.textContent = T.copy;
    copy.setAttribute("aria-label", T.copy_message);
    copy.addEventListener("click", () => copyWithFeedback(copy, state.texts.get(li.dataset.messageId) ?? ""));
    tools.append(copy);
    li.append(who, body, tools);
    state.messages.set(m.id, li);
    logEl.querySelector(":scope > li.ai-empty")?.remove();
    if (prepend) logEl.prepend(li);
    else logEl.append(li);
  }
  renderHeader(li, m);
  li.dataset.status = m.status;
  li.dataset.relayDepth = m.relay_depth ?? 0;
  setText(li, m.text || "");
  li.dataset.proposalIds = (m.proposal_ids || []).join(",");
  renderStatus(li, m);
  if (m.author_kind !== "hal") renderVersionTools(li, m, versionContext);
  if (m.author_kind === "operator") refreshEditable(logEl);
  markWaiting(li);
  return li;
}

// A version change (here or in another tab) reloads the room once, even when the API
// answer and the "message.versions" event arrive together.
let reloadTimer = null;
function reloadRoom() {
  clearTimeout(reloadTimer);
  reloadTimer = setTimeout(() => selectRoom(state.roomId, { save: false, force: true }), 60);
}

const versionContext = {
  T,
  roomId: () => state.roomId,
  reload: reloadRoom,
  showError: (err) => showError(err),
  textOf: (li) => state.texts.get(li.dataset.messageId) ?? "",
};

// Who wrote it, when, and for a relay reply whom it answers.
function renderHeader(li, m) {
  const who = li.querySelector(".ai-who");
  const name = document.createElement("span");
  name.className = "ai-name";
  name.textContent = m.author_kind === "operator" ? m.author || T.operator : m.author || T.hal;
  const parts = [name];
  if (m.relay_depth > 0 && m.author_kind === "model") {
    const asked = state.messages.get(m.reply_to)?.querySelector(".ai-name")?.textContent;
    const relay = document.createElement("span");
    relay.className = "ai-relay";
    relay.textContent = asked ? `${T.answering} @${asked}` : T.relay_reply;
    parts.push(relay);
  }
  if (m.created_at) {
    li.dataset.createdAt = m.created_at;
    parts.push(timeElement(m.created_at));
  }
  who.replaceChildren(...parts);
  if (m.author_kind === "model") {
    let facts = li.querySelector(".ai-facts");
    const text = m.status === "complete" ? replyFacts(m) : "";
    if (text) {
      if (!facts) {
        facts = document.createElement("div");
        facts.className = "ai-facts";
        li.querySelector(".ai-msg-tools").prepend(facts);
      }
      facts.textContent = text;
    } else facts?.remove();
  }
}

// A reply whose turn stopped at a proposal says so until the proposal is decided.
function markWaiting(li) {
  const ids = (li.dataset.proposalIds || "").split(",").filter(Boolean).map(Number);
  const waiting = ids.some((id) => state.proposals.get(id)?.dataset.status === "pending");
  let badge = li.querySelector(".ai-status.waiting");
  if (waiting && !badge) {
    badge = document.createElement("div");
    badge.className = "ai-status waiting";
    badge.textContent = T.waiting_approval;
    li.querySelector(".ai-text").after(badge);
  } else if (!waiting) badge?.remove();
}

function refreshWaiting() {
  for (const li of logEl.querySelectorAll("li.ai-msg[data-proposal-ids]:not([data-proposal-ids=''])")) markWaiting(li);
}

// "Stop all" shows while any reply of the open room streams; Esc in the composer does it.
function updateStopAll() {
  const button = $("#ai-stop-all");
  if (button) button.hidden = !logEl.querySelector("li.ai-msg[data-status=streaming]");
}

async function stopAll() {
  if (!state.roomId) return;
  await api("POST", `/api/ai/rooms/${state.roomId}/stop`).catch(showError);
}

$("#ai-stop-all")?.addEventListener("click", stopAll);
input.addEventListener("keydown", (ev) => {
  if (ev.key === "Escape" && logEl.querySelector("li.ai-msg[data-status=streaming]")) {
    ev.preventDefault(); // the drawer stays open: this Esc stopped the replies
    stopAll();
  }
});

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
    s.className = "ai-status typing";
    s.textContent = T.streaming;
    if (m.turn_id) li.dataset.turnId = m.turn_id;
    const turnId = li.dataset.turnId;
    if (turnId) {
      const stop = document.createElement("button");
      stop.type = "button";
      stop.className = "ai-stop";
      stop.textContent = T.stop;
      stop.addEventListener("click", () =>
        api("POST", `/api/ai/rooms/${state.roomId}/turns/${turnId}/stop`).catch(showError),
      );
      s.append(" ", stop);
    }
    li.append(s);
  } else if (m.stopped) {
    const s = document.createElement("div");
    s.className = "ai-status stopped";
    s.textContent = T.stopped;
    li.append(s);
  }
  updateStopAll();
  if (m.retry_url || m.turn_id_to_retry) {
    const b = document.createElement("button");
    b.type = "button";
    b.className = "ai-retry";
    b.textContent = T.retry;
    b.addEventListener("click", () => api("POST", m.retry_url).catch(showError));
    li.append(b);
  }
}

function setText(li, text) {
  state.texts.set(li.dataset.messageId, text);
  renderMarkdown(li.querySelector(".ai-text"), text);
}

// Deltas of one frame are applied to the raw text first; each touched message is then
// rendered once, so a frame costs one Markdown render per streaming reply.
function appendDelta(d, touched) {
  const li = state.messages.get(d.id ?? d.message_id);
  if (!li) return;
  if (li.dataset.status !== "streaming") return; // completed text is already final
  const id = li.dataset.messageId;
  const piece = d.delta ?? d.text ?? "";
  let text = state.texts.get(id) ?? "";
  const have = text.length;
  if (typeof d.offset === "number" && d.offset < have) {
    if (d.offset + piece.length <= have) return; // already shown
    text = text.slice(0, d.offset) + piece;
  } else if (typeof d.offset === "number" && d.offset > have) {
    // Text is missing before this piece (a reconnect): wait for the snapshot of the text
    // so far, asked for once per reply, rather than show words out of place.
    if (!state.snapshotAsked.has(d.id)) {
      state.snapshotAsked.add(d.id);
      requestResume();
    }
    return;
  } else {
    text += piece;
  }
  state.texts.set(id, text);
  touched.add(li);
}

function applyDeltas(deltas) {
  const touched = new Set();
  for (const d of deltas) appendDelta(d, touched);
  for (const li of touched) renderMarkdown(li.querySelector(".ai-text"), state.texts.get(li.dataset.messageId));
  if (touched.size) stickToEnd();
}

function scrollToEnd() {
  logEl.scrollTop = logEl.scrollHeight;
  following = true;
  setUnseen(0);
}

function nearEnd() {
  return logEl.scrollHeight - logEl.scrollTop - logEl.clientHeight < 80;
}

// Follow the conversation only while the operator is at its end: scrolled up to read,
// the view stays put and a button counts what arrived below. Whether we follow is decided
// by the operator's scrolling, not by how far a big streamed chunk pushed the end away.
let following = true;
function stickToEnd() {
  if (following) scrollToEnd();
}

const newBelow = $("#ai-new-below");
let unseen = 0;
function setUnseen(n) {
  unseen = n;
  if (!newBelow) return;
  newBelow.hidden = n === 0;
  newBelow.textContent = `↓ ${T.new_messages} (${n})`;
}
function countUnseen() {
  setUnseen(unseen + 1);
}
newBelow?.addEventListener("click", () => {
  scrollToEnd();
  input.focus();
});
logEl.addEventListener("scroll", () => {
  following = nearEnd();
  if (unseen && following) setUnseen(0);
});

// Screen readers hear a finished reply once, not every streamed chunk: the log itself is
// not live; this region gets one line per completed reply.
const announcer = $("#ai-announce");
function announce(m) {
  if (!announcer || (m.room_id !== undefined && m.room_id !== state.roomId)) return;
  const text = (m.text || "").replace(/\s+/g, " ").slice(0, 200);
  announcer.textContent = `${m.author}: ${text}`;
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
    refreshDaySeparators(logEl);
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
    state.texts.clear();
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

// The card itself is the shared component (proposal_card.js), the same as on the
// Approvals page. A room event carries the full proposal but not its precheck (rendered in
// each reader's language by the API): a pending card fetches it once.
function renderProposal(p) {
  if (!p || p.id === undefined) return;
  if (p.room_id !== undefined && p.room_id !== null && p.room_id !== state.roomId) return;
  let card = state.proposals.get(p.id);
  if (!card) {
    card = document.createElement("li");
    card.className = "ai-proposal";
    state.proposals.set(p.id, card);
    const anchor = p.message_id && state.messages.get(p.message_id);
    if (anchor) anchor.after(card);
    else logEl.append(card);
  }
  renderCard(card, p, { onChange: renderProposal });
  if (p.status === "pending" && p.precheck === undefined) {
    fetchProposal(p.id).then((fresh) => fresh && renderProposal(fresh), () => {});
  }
  stickToEnd();
}

// ---------- live updates over /ws/ai/ ----------
const pendingDeltas = [];
let flushTimer = null;
function queueDelta(d) {
  pendingDeltas.push(d);
  if (!flushTimer) {
    flushTimer = setTimeout(() => {
      flushTimer = null;
      applyDeltas(pendingDeltas.splice(0));
    }, FRAME_MS);
  }
}

function flushDeltas() {
  if (flushTimer) {
    clearTimeout(flushTimer);
    flushTimer = null;
  }
  applyDeltas(pendingDeltas.splice(0));
}

function onEvent(type, data) {
  switch (type) {
    case "message.created":
    case "message.completed":
    case "message.failed":
      flushDeltas();
      if (renderMessage(data)) {
        if (type === "message.created") {
          refreshDaySeparators(logEl);
          if (!following) countUnseen();
        }
        stickToEnd();
      }
      if (type === "message.completed" && data.author_kind === "model") {
        if (!panelVisible()) setUnread(unread + 1);
        announce(data);
      }
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
      refreshWaiting();
      break;
    case "proposal.review": {
      const card = state.proposals.get(data.id);
      if (card) renderReview(card, data.review);
      break;
    }
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
    case "message.versions":
      if (data.room_id === state.roomId) reloadRoom();
      break;
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
    const shown = li ? (state.texts.get(li.dataset.messageId) ?? "") : "";
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
  const have = state.texts.get(li.dataset.messageId) ?? "";
  if ((d.text || "").length >= have.length) setText(li, d.text);
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
setInterval(() => refreshTimes(logEl), 60_000);
init();
