// The AI panel's place on the page: docked on the right above 1100 px (open or closed, its
// width dragged or set by keyboard, saved per operator on the server); at 1100 px or less
// below the main content at full width (SPEC §3), where the AI button and Alt+A scroll to it
// and "Back to top" returns. The unread count on the AI button counts replies that arrive
// while the panel is out of sight.
import { csrfToken } from "./app.js";
import { $, T, input, layout, panel, state } from "./panel_state.js";

const MIN_WIDTH = 280;
// The page keeps at least this much width beside the panel at its widest: tables turn into
// cards below 640 px of content (app.css), never into columns under the panel.
const MAIN_MIN = 560;
const below = window.matchMedia("(max-width: 1100px)");

let saveTimer = null;
export function savePanel() {
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

export function applyPanel() {
  layout.classList.toggle("panel-closed", !state.panel.open);
  if (below.matches) toggleButton?.removeAttribute("aria-expanded");
  else toggleButton?.setAttribute("aria-expanded", String(state.panel.open));
  const width = clampWidth(state.panel.width);
  document.documentElement.style.setProperty("--panel-width", `${width}px`);
  resizer?.setAttribute("aria-valuenow", String(width));
  resizer?.setAttribute("aria-valuemax", String(maxWidth()));
}

function maxWidth() {
  const menu = $("#menu")?.getBoundingClientRect().width ?? 0;
  return Math.max(MIN_WIDTH, Math.floor(window.innerWidth - menu - MAIN_MIN));
}

function clampWidth(width) {
  return Math.round(Math.min(Math.max(Number(width) || 400, MIN_WIDTH), maxWidth()));
}

function setOpen(open) {
  state.panel.open = open;
  if (open) setUnread(0);
  applyPanel();
  savePanel();
}

// Below the content (≤ 1100 px) the panel is always there: the AI button and Alt+A bring
// it into view with the composer focused. Docked, the AI button opens or closes it (a
// saved preference) and Alt+A goes to the composer, opening the panel if needed.
export function goToChat() {
  if (!below.matches && !state.panel.open) setOpen(true);
  const reduce = window.matchMedia("(prefers-reduced-motion: reduce)").matches;
  if (below.matches) panel.scrollIntoView({ block: "start", behavior: reduce ? "auto" : "smooth" });
  input?.focus({ preventScroll: below.matches });
  setUnread(0);
}

function togglePanel() {
  if (below.matches) goToChat();
  else setOpen(!state.panel.open);
}

// Whether the operator can see the panel now (below the content: a quarter of it, or of the
// window, scrolled into view). Measured when asked: an IntersectionObserver's answer comes
// a frame late, and a reply arriving in that frame after "Back to top" went uncounted.
const SEEN = 0.25;
function inView() {
  const r = panel.getBoundingClientRect();
  const shown = Math.min(r.bottom, window.innerHeight) - Math.max(r.top, 0);
  return shown > 0 && shown >= SEEN * Math.min(r.height, window.innerHeight);
}
export function panelVisible() {
  return !document.hidden && (below.matches ? inView() : state.panel.open);
}
// Scrolling the panel into view clears the count.
new IntersectionObserver(() => panelVisible() && setUnread(0), { threshold: SEEN }).observe(panel);

toggleButton?.addEventListener("click", togglePanel);
$("#ai-panel-close")?.addEventListener("click", () => setOpen(false));
$("#ai-back-to-top")?.addEventListener("click", () => {
  window.scrollTo({ top: 0 });
  $("#main")?.focus({ preventScroll: true });
});
$("#skip-to-ai")?.addEventListener("click", (ev) => {
  ev.preventDefault();
  goToChat();
});
document.addEventListener("keydown", (ev) => {
  if (ev.altKey && !ev.ctrlKey && !ev.metaKey && ev.code === "KeyA") {
    ev.preventDefault();
    if (below.matches || !state.panel.open || panel.contains(document.activeElement)) togglePanel();
    else goToChat();
  }
});
below.addEventListener("change", applyPanel);

// Replies that arrive while the panel is out of sight are counted on the AI button.
let unread = 0;
const unreadBadge = $("#ai-unread");
export function setUnread(n) {
  unread = n;
  if (!unreadBadge) return;
  unreadBadge.hidden = n === 0;
  unreadBadge.textContent = String(n);
  unreadBadge.setAttribute("aria-label", `${n} ${T.unread}`);
}
export function unreadCount() {
  return unread;
}
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
  else if (ev.key === "Home") state.panel.width = MIN_WIDTH;
  else if (ev.key === "End") state.panel.width = maxWidth();
  else return;
  ev.preventDefault();
  applyPanel();
  savePanel();
});

