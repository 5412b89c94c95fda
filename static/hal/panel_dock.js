// The AI panel's place on the page: open or closed, its width (dragged or by keyboard),
// the overlay drawer on narrow screens, and the unread count on the AI button; the
// preference is saved per operator on the server.
import { csrfToken } from "./app.js";
import { Drawer } from "./drawer.js";
import { $, T, layout, panel, state } from "./panel_state.js";

const MIN_WIDTH = 280;

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
const drawer = new Drawer({ layout, panel, toggle: toggleButton, behind: [$("#menu"), $("#main")] });

export function applyPanel() {
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

export function panelVisible() {
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

