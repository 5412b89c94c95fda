// The conversation is one tab stop (a roving tabindex): Tab reaches the current message —
// the latest unless the operator moved — and its own controls, then leaves the list;
// ↑/↓ (Home/End) move between messages. Controls of the other messages are out of the
// tab order until their message is the current one, so the composer is a few Tab presses
// away however long the conversation is.
import { logEl } from "./panel_state.js";

const ITEMS = ":scope > li.ai-msg, :scope > li.ai-proposal";
const CONTROLS = "button, a[href], input, select, textarea, summary, [tabindex]";
let current = null; // the message that holds the tab stop

function items() {
  return [...logEl.querySelectorAll(ITEMS)];
}

// Take a control out of the tab order (remembering its own tabindex), or give it back.
function park(el, out) {
  if (out) {
    if (!("roveTab" in el.dataset)) el.dataset.roveTab = el.getAttribute("tabindex") ?? "";
    el.setAttribute("tabindex", "-1");
  } else if ("roveTab" in el.dataset) {
    if (el.dataset.roveTab === "") el.removeAttribute("tabindex");
    else el.setAttribute("tabindex", el.dataset.roveTab);
    delete el.dataset.roveTab;
  }
}

function apply() {
  const all = items();
  if (!all.includes(current)) current = all.at(-1) ?? null;
  for (const li of all) {
    const active = li === current;
    li.setAttribute("tabindex", active ? "0" : "-1");
    for (const el of li.querySelectorAll(CONTROLS)) park(el, !active);
  }
}

function move(to) {
  if (!to) return;
  current = to;
  apply();
  to.focus();
}

logEl.addEventListener("keydown", (ev) => {
  const li = ev.target.closest?.("li");
  if (!li || ev.target !== li || ev.altKey || ev.ctrlKey || ev.metaKey) return; // keys inside a field stay there
  const all = items();
  const i = all.indexOf(li);
  if (ev.key === "ArrowDown") move(all[i + 1]);
  else if (ev.key === "ArrowUp") move(all[i - 1]);
  else if (ev.key === "Home") move(all[0]);
  else if (ev.key === "End") move(all.at(-1));
  else return;
  ev.preventDefault();
});
// A message clicked or focused becomes the current one.
logEl.addEventListener("focusin", (ev) => {
  const li = ev.target.closest?.("li.ai-msg, li.ai-proposal");
  if (li && li !== current && li.parentElement === logEl) {
    current = li;
    apply();
  }
});

let queued = false;
new MutationObserver(() => {
  if (queued) return;
  queued = true;
  queueMicrotask(() => {
    queued = false;
    // While the operator reads elsewhere, the tab stop follows the latest message.
    if (!logEl.contains(document.activeElement)) current = null;
    apply();
  });
}).observe(logEl, { childList: true, subtree: true });
apply();
