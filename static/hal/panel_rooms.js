// The AI panel's rooms: the tabs (unified + one per connection; keyboard, rename), opening
// a room with its latest page of messages, older pages on scrolling up, and the empty room.
import { api } from "./app.js";
import { refreshDaySeparators } from "./chat_meta.js";
import { refreshEditable, restoreEdits, takeEdits } from "./message_versions.js";
import { $, T, held, input, list, logEl, releaseHeld, showError, state, tabsEl } from "./panel_state.js";
import { savePanel } from "./panel_dock.js";
import { scrollToEnd } from "./panel_scroll.js";
import { onVersionChange, refreshWaiting, renderMessage } from "./panel_messages.js";
import { loadProposals } from "./panel_proposals.js";

const PAGE = 50;

function connectionOf(room) {
  return state.connections.find((c) => c.id === room.connection_id);
}

function tabTitle(room) {
  return room.kind === "unified" ? T.unified || room.title : room.title;
}

export function renderTabs() {
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

export async function selectRoom(roomId, { save = true, force = false } = {}) {
  const reload = state.roomId === roomId;
  if (reload && !force) return;
  state.roomId = roomId;
  if (save && state.panel.active_room_id !== roomId) {
    state.panel.active_room_id = roomId;
    savePanel();
  }
  markSelected();
  composerPlaceholder();
  $("#ai-room").setAttribute("aria-labelledby", `ai-tab-${roomId}`);
  held.loading = roomId;
  let data;
  try {
    data = await api("GET", `/api/ai/rooms/${roomId}/messages?limit=${PAGE}`);
  } catch (err) {
    if (held.loading === roomId) releaseHeld();
    throw err;
  }
  if (state.roomId !== roomId) return; // another tab was chosen meanwhile: its load releases
  const drafts = reload ? takeEdits(logEl) : []; // drawing the same room again keeps its open edits
  const top = logEl.scrollTop;
  logEl.replaceChildren();
  state.messages.clear();
  state.texts.clear();
  state.proposals.clear();
  const rows = list(data, "messages");
  for (const m of rows) renderMessage(m);
  releaseHeld();
  refreshEditable(logEl);
  const editing = restoreEdits(logEl, drafts);
  refreshDaySeparators(logEl);
  state.oldestId = rows[0]?.id ?? null;
  state.exhausted = !data.has_more;
  await loadProposals(roomId);
  refreshWaiting();
  renderEmpty();
  // An operator editing a message stays at it; otherwise the room opens at its end.
  if (editing) logEl.scrollTop = top;
  else scrollToEnd();
}

// "@name to address one" only in a room where several models could be addressed.
export function composerPlaceholder() {
  const room = state.rooms.find((r) => r.id === state.roomId);
  const people =
    room?.kind === "individual"
      ? state.connections.filter((c) => c.id === room.connection_id)
      : state.connections.filter((c) => c.status === "active");
  const field = $("#ai-input");
  if (!field) return;
  if (people.length > 1) field.placeholder = T.placeholder_many || field.placeholder;
  else if (people.length === 1) field.placeholder = (T.placeholder_one || "").replace("{name}", people[0].name);
  else field.placeholder = T.placeholder_none || field.placeholder;
}

export function renderEmpty() {
  composerPlaceholder();
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

// A version change (here or in another tab) reloads the room once, even when the API
// answer and the "message.versions" event arrive together.
let reloadTimer = null;
export function reloadRoom() {
  clearTimeout(reloadTimer);
  reloadTimer = setTimeout(() => selectRoom(state.roomId, { save: false, force: true }), 60);
}
onVersionChange(reloadRoom);

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

export async function refreshRooms() {
  const [rooms, conns] = await Promise.all([
    api("GET", "/api/ai/rooms"),
    api("GET", "/api/ai/connections").catch(() => []),
  ]);
  state.rooms = list(rooms, "rooms");
  state.connections = list(conns, "connections");
  renderTabs();
}
