// Where the AI panel's log is scrolled: it follows the conversation while the operator is
// at its end, counts what arrived below otherwise, and announces finished replies once.
import { $, T, input, logEl, state } from "./panel_state.js";

export function scrollToEnd() {
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
export function stickToEnd() {
  if (following) scrollToEnd();
}

export function isFollowing() {
  return following;
}

const newBelow = $("#ai-new-below");
let unseen = 0;
function setUnseen(n) {
  unseen = n;
  if (!newBelow) return;
  newBelow.hidden = n === 0;
  newBelow.textContent = `↓ ${T.new_messages} (${n})`;
}
export function countUnseen() {
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
export function announce(m) {
  if (!announcer || (m.room_id !== undefined && m.room_id !== state.roomId)) return;
  const text = (m.text || "").replace(/\s+/g, " ").slice(0, 200);
  announcer.textContent = `${m.author}: ${text}`;
}
