// The AI panel's live socket (/ws/ai/): connects, reconnects with backoff, and after a gap
// asks the server to resume the open room from the last message shown.
import { panel, state } from "./panel_state.js";

const BEHIND_CODE = 4408;

function lastSeenId() {
  let last = 0;
  for (const id of state.messages.keys()) if (typeof id === "number" && id > last) last = id;
  return last;
}

// Replies shown as streaming: one that finished while the socket was away is neither newer
// than the last id nor streaming any more, so the server is told to send it back as it is.
function openIds() {
  const ids = [];
  for (const [id, li] of state.messages) {
    if (typeof id === "number" && li.dataset.status === "streaming") ids.push(id);
  }
  return ids.slice(-200);
}

export function requestResume(ws = state.ws) {
  if (!ws || ws.readyState !== WebSocket.OPEN || !state.roomId) return;
  ws.send(JSON.stringify({ type: "resume", rooms: { [state.roomId]: lastSeenId() }, open: openIds() }));
}

// The event handler is passed in: it renders through modules that ask this one to resume.
export function connectSocket(onEvent, attempt = 0) {
  const proto = location.protocol === "https:" ? "wss" : "ws";
  // "hal.events": a room's events of one frame tick arrive in one message (chatrooms/
  // consumers.py), not one message per streaming reply; each is handled as on its own.
  const ws = new WebSocket(`${proto}://${location.host}/ws/ai/`, ["hal.events"]);
  state.ws = ws;
  ws.addEventListener("open", () => {
    // Ask for what was missed: messages after the last one shown and the text so far of
    // replies still streaming (from whichever process runs them). On the first open too:
    // the room's history was read before this socket joined its rooms, and a message or
    // reply end in between reached no socket of this page (it stayed missing until a reload).
    if (state.roomId) requestResume(ws);
    attempt = 0;
    panel.dataset.live = "true";
  });
  ws.addEventListener("message", (ev) => {
    const msg = JSON.parse(ev.data);
    if (msg.type === "events") {
      for (const one of msg.events) onEvent(one.type, one.data ?? one);
    } else {
      onEvent(msg.type, msg.data ?? msg);
    }
  });
  ws.addEventListener("close", (ev) => {
    panel.dataset.live = "false";
    // BEHIND_CODE (hal/live/channel_queue.py): the server closed a socket that fell too far
    // behind its events; reconnect at once, and the open handler resumes what it missed.
    const wait = ev.code === BEHIND_CODE ? 0 : Math.min(5000, 500 * 2 ** attempt);
    setTimeout(() => connectSocket(onEvent, attempt + 1), wait);
  });
}
