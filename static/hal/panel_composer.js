// The AI panel's composer: sending with the page as context, Enter to send, a new
// conversation, and @name completion of the connected models.
import { api } from "./app.js";
import { $, T, completeEl, input, logEl, sendError, showError, state } from "./panel_state.js";
import { renderMessage } from "./panel_messages.js";
import { clearPending, pendingIds } from "./panel_files.js";
import { scrollToEnd } from "./panel_scroll.js";

function screenContext() {
  const b = document.body.dataset;
  const ctx = { page: b.page || "", path: location.pathname };
  if (b.selectedType) ctx.selected = { type: b.selectedType, id: b.selectedId, label: b.selectedLabel };
  return ctx;
}

$("#ai-compose").addEventListener("submit", async (ev) => {
  ev.preventDefault();
  const text = input.value.trim();
  const attachments = pendingIds();
  if ((!text && !attachments.length) || !state.roomId) return;
  sendError.textContent = "";
  sendError.dataset.code = "";
  try {
    const body = { text, context: screenContext() };
    if (attachments.length) body.attachments = attachments;
    const data = await api("POST", `/api/ai/rooms/${state.roomId}/messages`, body);
    input.value = "";
    clearPending();
    renderMessage(data.message || data);
    scrollToEnd();
  } catch (err) {
    showError(err);
  }
});

input.addEventListener("keydown", (ev) => {
  if (!completeEl.hidden && ["ArrowDown", "ArrowUp", "Enter", "Tab", "Escape"].includes(ev.key)) {
    completionKeys(ev);
    return;
  }
  if (ev.key === "Enter" && !ev.shiftKey && !ev.isComposing) {
    ev.preventDefault();
    $("#ai-compose").requestSubmit();
  }
});

$("#ai-reset").addEventListener("click", async () => {
  if (!state.roomId || !window.confirm(T.reset_confirm)) return;
  try {
    await api("POST", `/api/ai/rooms/${state.roomId}/reset`);
    logEl.replaceChildren();
    state.messages.clear();
    state.texts.clear();
    state.proposals.clear();
  } catch (err) {
    showError(err);
  }
});

// ---------- @ autocomplete ----------
function mentionAtCursor() {
  const upto = input.value.slice(0, input.selectionStart);
  const m = upto.match(/(^|\s)@([\p{L}\p{N}_-]*)$/u);
  return m ? { start: upto.length - m[2].length, prefix: m[2] } : null;
}

input.addEventListener("input", () => {
  const at = mentionAtCursor();
  if (!at) {
    completeEl.hidden = true;
    return;
  }
  const names = state.connections
    .filter((c) => c.name.toLowerCase().startsWith(at.prefix.toLowerCase()))
    .map((c) => c.name);
  if (!names.length) {
    completeEl.hidden = true;
    return;
  }
  completeEl.replaceChildren(
    ...names.map((name, i) => {
      const opt = document.createElement("div");
      opt.setAttribute("role", "option");
      opt.className = "ai-option";
      opt.textContent = name;
      opt.setAttribute("aria-selected", String(i === 0));
      opt.addEventListener("mousedown", (e) => {
        e.preventDefault();
        acceptCompletion(name);
      });
      return opt;
    }),
  );
  completeEl.hidden = false;
});

function completionKeys(ev) {
  const opts = [...completeEl.querySelectorAll("[role=option]")];
  let i = opts.findIndex((o) => o.getAttribute("aria-selected") === "true");
  ev.preventDefault();
  if (ev.key === "Escape") {
    completeEl.hidden = true;
    return;
  }
  if (ev.key === "Enter" || ev.key === "Tab") {
    acceptCompletion(opts[Math.max(i, 0)].textContent);
    return;
  }
  i = ev.key === "ArrowDown" ? (i + 1) % opts.length : (i - 1 + opts.length) % opts.length;
  opts.forEach((o, j) => o.setAttribute("aria-selected", String(i === j)));
}

function acceptCompletion(name) {
  const at = mentionAtCursor();
  if (!at) return;
  const before = input.value.slice(0, at.start);
  const after = input.value.slice(input.selectionStart);
  input.value = `${before}${name} ${after}`;
  const pos = before.length + name.length + 1;
  input.setSelectionRange(pos, pos);
  completeEl.hidden = true;
  input.focus();
}
