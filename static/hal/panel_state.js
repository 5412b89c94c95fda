// The AI panel's shared ground: its UI strings, its elements, and the state every part of
// it reads (which room is open, the rendered messages and proposal cards, the socket).
import { ApiError } from "./app.js";

export const T = JSON.parse(document.getElementById("ai-panel-strings")?.textContent || "{}");
export const $ = (sel, root = document) => root.querySelector(sel);
export const layout = $("#layout");
export const panel = $("#ai-panel");
export const tabsEl = $("#ai-tabs");
export const logEl = $("#ai-log");
export const input = $("#ai-input");
export const sendError = $("#ai-send-error");
export const completeEl = $("#ai-complete");

export const state = {
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

// While a room's history is on its way, the live events about rooms' messages wait here
// and are applied over the history once it is shown (panel_rooms.js selectRoom): applied at
// once, they would be wiped by a history read before them.
export const held = { loading: null, events: [], replay: (_type, _data) => {} };

export function releaseHeld() {
  held.loading = null;
  for (const [type, data] of held.events.splice(0)) held.replay(type, data);
}

export const list = (data, key) => (Array.isArray(data) ? data : data?.[key] || []);

// The composer's error line is where every part of the panel reports a failed call.
export function showError(err) {
  // The sentence only: the code stays machine-readable in data-code (never a prefix).
  sendError.textContent = err instanceof ApiError ? err.message : String(err);
  sendError.dataset.code = err.code || "";
}
