// What each live event from /ws/ai/ does to the AI panel: new, streamed and finished
// messages (deltas batched per frame), resumes after a reconnect, proposal cards, and
// changes to rooms and connections.
import { refreshDaySeparators } from "./chat_meta.js";
import { applyReviewDelta, fetchProposal, renderReview } from "./proposal_card.js";
import { held, logEl, state } from "./panel_state.js";
import { panelVisible, setUnread, unreadCount } from "./panel_dock.js";
import { announce, countUnseen, isFollowing, stickToEnd } from "./panel_scroll.js";
import { applyDeltas, applyToolCalls, refreshWaiting, renderMessage, setText } from "./panel_messages.js";
import { ownChange } from "./message_versions.js";
import { renderProposal } from "./panel_proposals.js";
import { refreshRooms, reloadRoom, renderEmpty, renderTabs, selectRoom } from "./panel_rooms.js";

const FRAME_MS = 40;

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

// The events about a room's messages and cards: held while a room's history loads.
const HELD = new Set([
  "message.created",
  "message.completed",
  "message.failed",
  "message.delta",
  "message.tools",
  "message.snapshot",
  "resume",
  "notice",
  "proposal.created",
  "proposal.updated",
  "proposal.review",
  "proposal.review.delta",
]);

export function onEvent(type, data) {
  if (held.loading !== null && HELD.has(type)) {
    held.events.push([type, data]);
    return;
  }
  apply(type, data);
}

// A held event replayed over the history: a message the history shows already is not
// created again (its row there is at least as new as its creation).
held.replay = (type, data) => {
  if (type === "message.created" && state.messages.has(data.id)) return;
  apply(type, data);
};

function apply(type, data) {
  switch (type) {
    case "message.created":
    case "message.completed":
    case "message.failed":
      flushDeltas();
      if (renderMessage(data)) {
        if (type === "message.created") {
          refreshDaySeparators(logEl);
          if (!isFollowing()) countUnseen();
        }
        stickToEnd();
      }
      if (type === "message.completed" && data.author_kind === "model") {
        if (!panelVisible()) setUnread(unreadCount() + 1);
        announce(data);
      }
      break;
    case "message.delta":
      if (data.room_id === undefined || data.room_id === state.roomId) queueDelta(data);
      break;
    case "message.tools":
      // After the text streamed before the calls (their deltas wait for the next frame).
      flushDeltas();
      applyToolCalls(data);
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
    case "proposal.review.delta":
      onReviewDelta(data);
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
    case "message.versions":
      if (ownChange(data.request_id)) break; // this tab's change: its answer reloaded the room
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

// A piece of a streaming second opinion. Text missing before it (a card loaded between
// saves, a reconnect): the review as stored now, fetched once at a time per proposal; the
// deltas that follow merge onto it by offset.
const reviewFetches = new Set();
function onReviewDelta(d) {
  const card = state.proposals.get(d.id);
  if (!card || applyReviewDelta(card, d) || reviewFetches.has(d.id)) return;
  reviewFetches.add(d.id);
  fetchProposal(d.id)
    .then((p) => p && renderReview(card, p.review))
    .catch(() => {})
    .finally(() => reviewFetches.delete(d.id));
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
  // Its chips so far: `message.tools` went to the socket that dropped.
  if (Array.isArray(d.tool_calls)) applyToolCalls(d);
  stickToEnd();
}
