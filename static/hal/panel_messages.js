// The AI panel's messages: each one's element (author, time, facts, status, stop/retry,
// copy, versions), its Markdown text, streamed deltas merged by offset, and the
// "waiting for approval" and "stop all" marks that follow from them.
import { api } from "./app.js";
import { copyWithFeedback, renderMarkdown } from "./markdown.js";
import { icon } from "./panel_icons.js";
import { replyFacts, timeElement } from "./chat_meta.js";
import { refreshEditable, renderVersionTools } from "./message_versions.js";
import { renderAttachments } from "./panel_files.js";
import { $, T, input, logEl, showError, state } from "./panel_state.js";
import { stickToEnd } from "./panel_scroll.js";
import { requestResume } from "./panel_socket.js";

function speakerClass(m) {
  if (m.author_kind === "operator") return "from-operator";
  if (m.author_kind === "hal") return "from-hal";
  return `from-model model-${(m.connection_id ?? 0) % 6}`;
}

export function renderMessage(m, { prepend = false } = {}) {
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
    // What an operator or a model wrote is content, not UI text (HAL's notices are UI).
    if (m.author_kind !== "hal") body.setAttribute("translate", "no");
    const tools = document.createElement("div");
    tools.className = "ai-msg-tools";
    const copy = document.createElement("button");
    copy.type = "button";
    copy.className = "ai-copy ai-icon";
    copy.append(icon("copy"));
    copy.title = T.copy;
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
  renderAttachments(li, m);
  li.dataset.proposalIds = (m.proposal_ids || []).join(",");
  renderStatus(li, m);
  renderToolCalls(li, m);
  if (m.author_kind !== "hal") renderVersionTools(li, m, versionContext);
  if (m.author_kind === "operator") refreshEditable(logEl);
  markWaiting(li);
  return li;
}

// Reloading the room after a version change is panel_rooms.js's, which renders through
// this module: it hands its reload in here rather than be imported back.
let reloadRoom = () => {};
export function onVersionChange(reload) {
  reloadRoom = reload;
}

const versionContext = {
  T,
  roomId: () => state.roomId,
  reload: () => reloadRoom(),
  showError: (err) => showError(err),
  textOf: (li) => state.texts.get(li.dataset.messageId) ?? "",
  shown: (id) => logEl.querySelector(`:scope > li.ai-msg[data-message-id="${id}"]`),
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

// The reply's tool calls as chips (every provider's, the local CLI's included): the tool's
// name, and whether it answered, failed, was unknown, or became a proposal — whose chip
// then follows the proposal to its end (executed, rejected, …), live and after a reload.
const PROPOSAL_ENDS = new Set(["executed", "failed", "rejected", "cancelled", "expired"]);
const CHIP_STATES = ["ok", "error", "unknown", "pending", ...PROPOSAL_ENDS];

function chipState(chip, status) {
  const known = CHIP_STATES.includes(status) ? status : "ok";
  chip.className = `ai-tool-chip ${known}`;
  chip.dataset.status = known;
  chip.title = T[`tool_call_${known}`] || known;
  // ok and error speak through colour and title; the others also say it in words.
  let word = "";
  if (known === "unknown") word = T.tool_unknown || known;
  else if (known !== "ok" && known !== "error") word = T.status_labels?.[known] || known;
  let label = chip.querySelector(".ai-tool-chip-state");
  if (!word) label?.remove();
  else {
    if (!label) {
      label = document.createElement("span");
      label.className = "ai-tool-chip-state";
      chip.append(label);
    }
    label.textContent = word;
  }
}

function renderToolCalls(li, m) {
  const calls = Array.isArray(m.tool_calls) ? m.tool_calls : [];
  let box = li.querySelector(":scope > .ai-tool-calls");
  if (!calls.length) {
    box?.remove();
    return;
  }
  if (!box) {
    box = document.createElement("div");
    box.className = "ai-tool-calls";
    li.querySelector(".ai-text").after(box);
  }
  box.replaceChildren(
    ...calls.map((c) => {
      const chip = document.createElement("span");
      const name = document.createElement("span");
      name.className = "ai-tool-chip-name";
      name.textContent = String(c.name || "");
      chip.append(name);
      let status = c.status;
      if (c.proposal_id !== undefined && c.proposal_id !== null) {
        chip.dataset.proposalId = c.proposal_id;
        // The card may know its end already (its event came before this reply's).
        const card = state.proposals.get(Number(c.proposal_id))?.dataset.status;
        if (status === "pending" && PROPOSAL_ENDS.has(card)) status = card;
      }
      chipState(chip, status);
      if (c.redacted) {
        // Secrets in this call's result went to the model as placeholders.
        const mark = document.createElement("span");
        mark.className = "ai-tool-chip-redacted";
        mark.textContent = T.tool_redacted || "secrets held back";
        mark.title = T.tool_call_redacted || "";
        chip.dataset.redacted = "true";
        chip.append(mark);
      }
      return chip;
    }),
  );
}

// A proposal changed (`proposal.updated`, or the card's own answer): the chip of its call
// takes its final status.
export function settleChips(p) {
  if (!p || !PROPOSAL_ENDS.has(p.status)) return;
  for (const chip of logEl.querySelectorAll(`.ai-tool-chip[data-proposal-id="${Number(p.id)}"]`)) {
    chipState(chip, p.status);
  }
}

// A streaming reply's tool calls as each one ends (`message.tools`, every provider's): the
// same chips its final event carries.
export function applyToolCalls(d) {
  const li = state.messages.get(d.id);
  if (!li || li.dataset.status !== "streaming") return;
  renderToolCalls(li, d);
  stickToEnd();
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

export function refreshWaiting() {
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
    ev.preventDefault(); // this Esc stopped the replies, nothing else
    stopAll();
  }
});

function renderStatus(li, m) {
  // A message can be rendered again (its event and a resume's answer): replace, not add.
  li.querySelector(".ai-status")?.remove();
  li.querySelector(":scope > .ai-retry")?.remove();
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

export function setText(li, text) {
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

export function applyDeltas(deltas) {
  const touched = new Set();
  for (const d of deltas) appendDelta(d, touched);
  for (const li of touched) renderMarkdown(li.querySelector(".ai-text"), state.texts.get(li.dataset.messageId));
  if (touched.size) stickToEnd();
}
