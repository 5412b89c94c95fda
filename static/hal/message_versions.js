// Regenerate a model reply, edit any of the operator's messages (an edit in the middle
// forks the conversation), and move between the versions of a message (‹ n/m ›) in place. The server decides what is shown (and what
// models see); after each change the panel reloads the room.
import { api } from "./app.js";
import { icon } from "./panel_icons.js";

// A change made here reaches this tab twice: the API's answer, which reloads the room, and
// the room's `message.versions` event, in either order and on a busy machine seconds apart.
// Each change is sent with an X-Request-ID of this tab's own, which the event carries back
// (chatrooms/versions.py): that event is an echo and reloads nothing. A second reload drew
// the log anew for nothing, replacing under the operator what they were reading or about
// to click.
const TAB = [...crypto.getRandomValues(new Uint8Array(6))]
  .map((b) => b.toString(16).padStart(2, "0"))
  .join("");
const mine = new Set();
let changes = 0;

function change(method, url, body) {
  const id = `panel.${TAB}.${++changes}`;
  mine.add(id);
  return api(method, url, body, { "X-Request-ID": id });
}

// Whether a `message.versions` event is the echo of a change made here (taken once).
export function ownChange(requestId) {
  return mine.delete(requestId);
}

// Message actions are icons on one line; their names are for screen readers and hover.
const ICONS = { "ai-regenerate": "regenerate", "ai-edit": "edit" };

function button(cls, text, label, onClick) {
  const b = document.createElement("button");
  b.type = "button";
  b.className = cls in ICONS ? `${cls} ai-icon` : cls;
  if (cls in ICONS) b.append(icon(ICONS[cls]));
  else b.textContent = text;
  if (cls in ICONS) b.title = text;
  if (label) b.setAttribute("aria-label", label);
  b.addEventListener("click", onClick);
  return b;
}

// ctx: { T, roomId(), reload(), showError(err), textOf(li), shown(id) → the message's li }
export function renderVersionTools(li, m, ctx) {
  const { T } = ctx;
  const tools = li.querySelector(".ai-msg-tools");
  tools.querySelector(".ai-versions")?.remove();
  tools.querySelector(".ai-regenerate")?.remove();
  tools.querySelector(".ai-edit")?.remove();
  li.dataset.versionGroup = m.version_group ?? "";
  // Streaming events carry no version counts: keep those of the last listing.
  if (m.versions) li.hxVersions = m.versions;
  else if (!m.version_group) li.hxVersions = null;
  const v = li.hxVersions;
  if (v && v.count > 1) {
    const nav = document.createElement("span");
    nav.className = "ai-versions";
    const show = (id) => () =>
      change("POST", `/api/ai/rooms/${ctx.roomId()}/messages/${id}/show`).then(ctx.reload, ctx.showError);
    const prev = button("ai-version-prev", "‹", T.previous_version, show(v.ids[v.index - 2]));
    const next = button("ai-version-next", "›", T.next_version, show(v.ids[v.index]));
    prev.disabled = v.index <= 1;
    next.disabled = v.index >= v.count;
    const where = document.createElement("span");
    where.className = "ai-version-index";
    where.textContent = `${v.index}/${v.count}`;
    nav.append(prev, where, next);
    tools.append(nav);
  }
  if (m.author_kind === "model" && m.status !== "streaming" && m.reply_to) {
    tools.append(
      button("ai-regenerate", T.regenerate, T.regenerate_reply, () =>
        change("POST", `/api/ai/rooms/${ctx.roomId()}/messages/${m.id}/regenerate`).then(ctx.reload, ctx.showError),
      ),
    );
  }
  if (m.author_kind === "operator") {
    li.hxEdit = (draft) => startEdit(li, m, ctx, draft); // restoreEdits opens it again after a reload
    tools.append(button("ai-edit", T.edit, T.edit_message, () => li.hxEdit()));
  }
}

// Every shown operator message offers Edit (issue 49: editing forks, branches nest).
export function refreshEditable(logEl) {
  for (const li of logEl.querySelectorAll(":scope > li.ai-msg.from-operator")) {
    const edit = li.querySelector(".ai-edit");
    if (edit) edit.hidden = false;
  }
}

// A reload of the room draws its log anew (a version change here or in another tab; in
// this tab the `message.versions` event can land after the API answer's reload), which
// dropped an open editor and the draft typed in it. selectRoom takes the drafts before the
// log is emptied and gives each back to its message if that message is still shown.
export function takeEdits(logEl) {
  const editors = logEl.querySelectorAll(":scope > li.ai-msg.from-operator > textarea.ai-editor");
  return [...editors]
    .filter((editor) => !editor.disabled) // being saved: its answer closes it and reloads
    .map((editor) => ({
      id: editor.closest("li").dataset.messageId,
      value: editor.value,
      start: editor.selectionStart,
      end: editor.selectionEnd,
      direction: editor.selectionDirection,
      focused: document.activeElement === editor,
    }));
}

// Whether an editor is open again. A message that left the shown branch takes its edit along.
export function restoreEdits(logEl, drafts) {
  const shown = new Map();
  for (const li of logEl.querySelectorAll(":scope > li.ai-msg.from-operator")) shown.set(li.dataset.messageId, li);
  let restored = false;
  for (const draft of drafts) {
    const li = shown.get(draft.id);
    if (!li?.hxEdit) continue;
    li.hxEdit(draft);
    restored = true;
  }
  return restored;
}

function startEdit(li, m, ctx, draft = null) {
  const body = li.querySelector(".ai-text");
  if (li.querySelector(".ai-editor")) return;
  const editor = document.createElement("textarea");
  editor.className = "ai-editor";
  editor.setAttribute("aria-label", ctx.T.edit_message);
  editor.value = draft ? draft.value : ctx.textOf(li);
  editor.rows = Math.min(8, editor.value.split("\n").length + 1);
  body.hidden = true;
  body.after(editor);
  if (!draft) editor.focus();
  else {
    editor.setSelectionRange(draft.start, draft.end, draft.direction);
    // Focus goes back only where it was (never taken from the composer), and without
    // scrolling: the page (on a phone the panel lies below it) stays where the operator is.
    if (draft.focused) editor.focus({ preventScroll: true });
  }
  const close = () => {
    editor.remove();
    body.hidden = false;
  };
  editor.addEventListener("keydown", (ev) => {
    if (ev.key === "Escape") {
      ev.preventDefault();
      ev.stopPropagation(); // Esc cancels the edit, not the replies
      close();
    } else if (ev.key === "Enter" && !ev.shiftKey && !ev.isComposing) {
      ev.preventDefault();
      const text = editor.value.trim();
      if (!text) return;
      editor.disabled = true;
      change("PATCH", `/api/ai/rooms/${ctx.roomId()}/messages/${m.id}`, { text }).then(
        () => {
          close();
          ctx.reload();
        },
        (err) => {
          ctx.showError(err);
          // Disabling it took its focus: it comes back unless the operator went elsewhere.
          const focused = document.activeElement === document.body || document.activeElement === null;
          if (editor.isConnected) {
            editor.disabled = false;
            if (focused) editor.focus();
            return;
          }
          // A reload redrew the log while the save was on its way (takeEdits leaves an editor
          // being saved to its answer): the draft goes back to its message, if still shown.
          const { value, selectionStart: start, selectionEnd: end, selectionDirection: direction } = editor;
          ctx.shown(m.id)?.hxEdit?.({ value, start, end, direction, focused });
        },
      );
    }
  });
}
