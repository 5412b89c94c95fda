// The incident room "Incident #N" and the incident page's investigation section, live over
// /ws/ai/: the socket watches the room ("room.watch") and gets the chat rooms' own events
// for it — "message.created" for each investigator message and tool call, and
// "investigation.updated" for each status change. No polling; the first watch reads the
// page again (what happened since its render), a dropped socket reconnects and reloads the
// page once to pick up what it missed.
import { catchUp, swap } from "./live_sync.js";

const root = document.querySelector("[data-incident-room]");
const labels = JSON.parse(document.getElementById("incident-room-labels")?.textContent || "{}");
const ACTIVE = new Set(["queued", "running"]);

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value !== undefined && value !== null && value !== "") node.setAttribute(key, value);
  }
  node.append(...children.filter((c) => c !== null && c !== undefined));
  return node;
}

function details(summary, content, preClass) {
  return el("details", {}, el("summary", {}, summary), el("pre", { class: preClass }, content));
}

function textBlock(message, entry) {
  if (!message.text) return null;
  if (entry.seed) return details(labels.seed || "Seed", message.text, "seed");
  // A model's words stay as written (HAL's own lines come in the reader's language).
  const p = el("p", message.author_kind === "hal" ? {} : { translate: "no" });
  message.text.split("\n").forEach((line, i) => {
    if (i) p.append(el("br"));
    p.append(line);
  });
  return p;
}

function callBlock(entry) {
  if (!entry.call) return null;
  const badge = el("span", { class: entry.ok ? "badge" : "badge warn" });
  badge.textContent = entry.ok ? labels.read || "read" : labels.refused || "refused";
  return el(
    "div",
    { class: "call" },
    el("code", {}, `${entry.call.name}(${entry.arguments})`),
    " ",
    badge,
    " ",
    el("a", { href: `#${entry.anchor}`, class: "muted" }, `#${entry.call.id}`),
    details(labels.result || "Result", entry.result, "tool-result"),
  );
}

function summaryBlock(entry) {
  const summary = entry.summary;
  const claims = summary?.checked || [];
  // Findings without claims, cause or next steps: no empty "Summary" heading.
  if (!summary || (!claims.length && !summary.likely_cause && !(entry.proposals || []).length)) return null;
  const list = el("ul");
  for (const claim of claims) {
    const li = el("li", {}, el("span", { translate: "no" }, claim.claim), " ");
    const refs = claim.refs || [];
    for (const ref of refs) li.append(el("a", { href: `#${ref.anchor}` }, `[${ref.id}]`), " ");
    if (!refs.length) li.append(el("span", { class: "badge warn" }, labels.unsupported || ""));
    list.append(li);
  }
  const box = el("div", { class: "summary-box" }, el("h2", {}, labels.summary || "Summary"));
  if (claims.length) box.append(list);
  if (summary.likely_cause) {
    const cause = el("span", { translate: "no" }, summary.likely_cause);
    box.append(el("p", {}, el("strong", {}, `${labels.cause || "Likely cause"}:`), " ", cause));
  }
  if ((entry.proposals || []).length) {
    const p = el("p", {}, `${labels.next || "Next steps"}: `);
    for (const id of entry.proposals) p.append(el("a", { href: `/proposals/#proposal-${id}` }, `#${id}`), " ");
    box.append(p);
  }
  return box;
}

function addEntry(list, message) {
  if (list.querySelector(`[data-message-id="${message.id}"]`)) return; // already shown
  const entry = message.entry || {};
  const classes = ["room-entry", `author-${message.author_kind}`];
  if (entry.call) classes.push("tool-call");
  if (entry.summary) classes.push("summary");
  const who = message.author_kind === "hal" ? "HAL" : `@${message.author}`;
  const at = (message.created_at || "").replace("T", " ").slice(0, 19);
  const li = el(
    "li",
    { "data-message-id": String(message.id), class: classes.join(" "), id: entry.anchor },
    el("div", { class: "meta" }, el("strong", {}, who), " ", el("time", { datetime: message.created_at }, at)),
    textBlock(message, entry),
    callBlock(entry),
    summaryBlock(entry),
  );
  document.getElementById("incident-room-empty")?.remove();
  list.append(li);
}

// The incident page's timeline as the server renders it now (an ended investigation
// appended its summary): the page itself, fetched, its timeline swapped in.
async function refreshTimeline() {
  const timeline = document.getElementById("incident-timeline");
  if (!timeline) return;
  try {
    const response = await fetch(window.location.href, { credentials: "same-origin" });
    if (!response.ok) return;
    const doc = new DOMParser().parseFromString(await response.text(), "text/html");
    const fresh = doc.getElementById("incident-timeline");
    if (fresh) timeline.replaceChildren(...fresh.childNodes);
  } catch {
    // Offline for a moment: the entry is there on the next visit.
  }
}

// Status codes as the console shows them, in the operator's language (hal/i18n/labels.py).
const STATUS_LABELS = JSON.parse(document.getElementById("hal-status-labels")?.textContent || "{}");
const statusLabel = (code) => STATUS_LABELS[code] ?? code;

function setStatus(inv) {
  const active = ACTIVE.has(inv.status);
  const row = document.querySelector(`#investigations tr[data-investigation="${inv.id}"]`);
  if (row) {
    row.querySelector(".status").textContent = statusLabel(inv.status);
    row.querySelector(".rounds").textContent = String(inv.rounds || 0);
    row.querySelector(".reason").textContent = inv.reason || "";
  } else {
    const body = document.querySelector("#investigations tbody");
    body?.prepend(
      el(
        "tr",
        { "data-investigation": String(inv.id) },
        el("td", {}, String(inv.id)),
        el("td", { class: "status" }, statusLabel(inv.status)),
        el("td", {}, inv.model || ""),
        el("td", { class: "rounds" }, String(inv.rounds || 0)),
        el("td", { class: "reason" }, inv.reason || ""),
      ),
    );
  }
  const hint = document.getElementById("investigation-running");
  if (hint) hint.hidden = !active;
  const state = document.getElementById("investigation-state"); // the incident page
  if (state && state.closest("[data-incident-room]")?.dataset.incidentRoom === String(inv.room_id)) {
    state.textContent = statusLabel(inv.status);
    if (!active) {
      document.getElementById("investigation-stop")?.closest("form")?.remove();
      refreshTimeline(); // the summary's entry, written in the same transaction
    }
  }
}

// What happened between the page's render and the first watch (live_sync.js): once the
// room is watched, the page is read again and what it shows now is taken from it — room
// entries not shown yet, the investigations, the incident page's section and timeline.
function syncRoom(doc) {
  const list = document.getElementById("incident-room");
  const fresh = doc.getElementById("incident-room");
  if (list && fresh) {
    for (const li of fresh.querySelectorAll(":scope > li[data-message-id]")) {
      const id = Number(li.dataset.messageId);
      if (list.querySelector(`[data-message-id="${id}"]`)) continue;
      const later = [...list.querySelectorAll(":scope > li[data-message-id]")].find(
        (shown) => Number(shown.dataset.messageId) > id,
      );
      list.insertBefore(document.importNode(li, true), later || null);
      document.getElementById("incident-room-empty")?.remove();
    }
  }
  const hint = document.getElementById("investigation-running");
  const freshHint = doc.getElementById("investigation-running");
  if (hint && freshHint) hint.hidden = freshHint.hidden;
  swap(doc, "#investigations > tbody", "#investigation-panel", "#incident-timeline");
}

function onEvent(roomId, msg) {
  if (msg.type === "message.created" && msg.data.room_id === roomId) {
    const list = document.getElementById("incident-room");
    if (list) addEntry(list, msg.data);
  } else if (msg.type === "investigation.updated" && msg.data.investigation.room_id === roomId) {
    setStatus(msg.data.investigation);
  }
}

function connect(roomId, reconnecting) {
  const scheme = location.protocol === "https:" ? "wss" : "ws";
  const ws = new WebSocket(`${scheme}://${location.host}/ws/ai/`);
  const live = catchUp((msg) => onEvent(roomId, msg), syncRoom);
  ws.addEventListener("open", () => {
    ws.send(JSON.stringify({ type: "room.watch", room_id: roomId, ref: "watch" }));
  });
  ws.addEventListener("message", (ev) => {
    const msg = JSON.parse(ev.data);
    if (msg.type === "room.watching" && msg.data.room_id === roomId) {
      if (reconnecting) location.reload(); // events may have been missed while away
      root.dataset.live = "on";
      live.begin();
    } else live.take(msg);
  });
  ws.addEventListener("close", (ev) => {
    const wasLive = root.dataset.live === "on";
    root.dataset.live = "off";
    if (ev.code !== 4401) setTimeout(() => connect(roomId, reconnecting || wasLive), 3000);
  });
}

if (root && root.dataset.incidentRoom) connect(Number(root.dataset.incidentRoom), false);
