// The AI panel's attachments: the composer's files (button, drag and drop, paste — a long
// pasted block becomes a file), their preview, and the files shown with sent messages.
import { ApiError, csrfToken } from "./app.js";
import { icon } from "./panel_icons.js";
import { $, T, input, showError, state } from "./panel_state.js";

// A pasted block this long (characters or lines) is attached as a file, not typed in.
const PASTE_CHARS = 4000;
const PASTE_LINES = 60;

const listEl = $("#ai-files");
const dropEl = $("#ai-drop");
const fileInput = $("#ai-file-input");
const pending = []; // {id, name, kind, ...} uploaded, not yet sent

const fill = (template, params) => template.replace(/\{(\w+)\}/g, (_m, k) => params[k] ?? "");

function sizeLabel(bytes) {
  if (bytes < 1024) return `${bytes} B`;
  if (bytes < 1024 * 1024) return `${(bytes / 1024).toFixed(1)} KB`;
  return `${(bytes / 1024 / 1024).toFixed(1)} MB`;
}

export function describe(a) {
  const parts = [sizeLabel(a.size)];
  if (a.kind === "text" && a.lines != null) parts.unshift(fill(T.file_lines, { n: a.lines }));
  if (a.kind === "image" && a.width) parts.unshift(`${a.width}×${a.height}`);
  return parts.join(" · ");
}

async function upload(file) {
  if (!state.roomId) return;
  const chip = document.createElement("li");
  chip.className = "ai-file ai-file-uploading";
  chip.textContent = fill(T.uploading, { name: file.name });
  listEl.hidden = false;
  listEl.append(chip);
  const form = new FormData();
  form.append("file", file, file.name);
  try {
    const res = await fetch(`/api/ai/rooms/${state.roomId}/attachments`, {
      method: "POST",
      body: form,
      credentials: "same-origin",
      headers: { Accept: "application/json", "X-CSRFToken": csrfToken() },
    });
    const data = res.headers.get("content-type")?.includes("json") ? await res.json() : {};
    if (!res.ok) {
      const err = data.error || {};
      throw new ApiError(res.status, err.code || "http_" + res.status, err.message || res.statusText);
    }
    pending.push(data.attachment);
    chip.replaceWith(pendingChip(data.attachment));
  } catch (err) {
    chip.remove();
    listEl.hidden = pending.length === 0;
    showError(err);
  }
}

function pendingChip(a) {
  const li = document.createElement("li");
  li.className = `ai-file ai-file-${a.kind}`;
  li.dataset.attachmentId = a.id;
  const head = document.createElement("div");
  head.className = "ai-file-head";
  const name = document.createElement("span");
  name.className = "ai-file-name";
  name.textContent = a.name;
  name.setAttribute("translate", "no");
  const meta = document.createElement("span");
  meta.className = "ai-file-meta";
  meta.textContent = describe(a);
  const remove = document.createElement("button");
  remove.type = "button";
  remove.className = "ai-file-remove ai-icon";
  remove.textContent = "×";
  remove.setAttribute("aria-label", fill(T.remove_file, { name: a.name }));
  remove.addEventListener("click", async () => {
    const at = pending.findIndex((p) => p.id === a.id);
    if (at >= 0) pending.splice(at, 1);
    li.remove();
    listEl.hidden = pending.length === 0;
    await fetch(a.url, {
      method: "DELETE",
      credentials: "same-origin",
      headers: { "X-CSRFToken": csrfToken() },
    }).catch(() => {});
  });
  head.append(name, meta, remove);
  li.append(head);
  if (a.kind === "image") {
    const img = document.createElement("img");
    img.className = "ai-file-thumb";
    img.src = a.url;
    img.alt = a.name;
    li.append(img);
  } else if (a.preview) {
    const details = document.createElement("details");
    const summary = document.createElement("summary");
    summary.textContent = T.preview;
    const pre = document.createElement("pre");
    pre.className = "ai-file-preview";
    pre.setAttribute("translate", "no");
    pre.textContent = a.preview;
    details.append(summary, pre);
    li.append(details);
  }
  return li;
}

// What the send takes along, and the composer emptied after it.
export const pendingIds = () => pending.map((a) => a.id);
export function clearPending() {
  pending.splice(0);
  if (!listEl) return;
  listEl.replaceChildren();
  listEl.hidden = true;
}

// The files a sent message carries: names (and hash on hover) linking to the file.
export function renderAttachments(li, m) {
  let box = li.querySelector(":scope > .ai-msg-files");
  if (!m.attachments?.length) {
    box?.remove();
    return;
  }
  if (!box) {
    box = document.createElement("ul");
    box.className = "ai-msg-files";
    box.setAttribute("aria-label", T.attachments);
    li.querySelector(".ai-text").after(box);
  }
  box.replaceChildren(
    ...m.attachments.map((a) => {
      const item = document.createElement("li");
      item.className = `ai-file ai-file-${a.kind}`;
      const link = document.createElement("a");
      link.href = a.url;
      link.target = "_blank";
      link.rel = "noopener";
      link.title = `sha256 ${a.sha256}`;
      link.setAttribute("translate", "no");
      if (a.kind === "image") {
        const img = document.createElement("img");
        img.className = "ai-file-thumb";
        img.src = a.url;
        img.alt = a.name;
        img.loading = "lazy";
        link.append(img);
      }
      link.append(document.createTextNode(a.name));
      const meta = document.createElement("span");
      meta.className = "ai-file-meta";
      meta.textContent = describe(a);
      item.append(link, meta);
      return item;
    }),
  );
}

// The room's record for a ticket: Markdown of the conversation on screen (JSON: ?format=json).
const exportLink = $("#ai-export");
exportLink?.addEventListener("click", () => {
  if (state.roomId) exportLink.href = `/api/ai/rooms/${state.roomId}/export?format=md`;
});

// ---------- the three ways in ----------
const attachButton = $("#ai-attach");
if (attachButton) {
  attachButton.replaceChildren(icon("attach"));
  attachButton.addEventListener("click", () => fileInput.click());
}
fileInput?.addEventListener("change", async () => {
  for (const file of [...fileInput.files]) await upload(file);
  fileInput.value = "";
});

const compose = $("#ai-compose");
let dragDepth = 0;
if (compose && dropEl) wireDrop();
if (input) input.addEventListener("paste", onPaste);

function wireDrop() {
  const carriesFiles = (ev) => [...(ev.dataTransfer?.types || [])].includes("Files");
  compose.addEventListener("dragenter", (ev) => {
    if (!carriesFiles(ev)) return;
    ev.preventDefault();
    dragDepth += 1;
    dropEl.hidden = false;
  });
  compose.addEventListener("dragover", (ev) => {
    if (!carriesFiles(ev)) return;
    ev.preventDefault();
    ev.dataTransfer.dropEffect = "copy";
  });
  compose.addEventListener("dragleave", () => {
    dragDepth = Math.max(0, dragDepth - 1);
    if (!dragDepth) dropEl.hidden = true;
  });
  compose.addEventListener("drop", async (ev) => {
    if (!carriesFiles(ev)) return;
    ev.preventDefault();
    dragDepth = 0;
    dropEl.hidden = true;
    for (const file of [...ev.dataTransfer.files]) await upload(file);
  });
}

async function onPaste(ev) {
  const files = [...(ev.clipboardData?.files || [])];
  if (files.length) {
    ev.preventDefault();
    for (const file of files) await upload(file);
    return;
  }
  const text = ev.clipboardData?.getData("text/plain") || "";
  if (text.length > PASTE_CHARS || text.split("\n").length > PASTE_LINES) {
    // A log or a stack trace pasted whole: a file with a preview, not 3,000 lines typed in.
    ev.preventDefault();
    await upload(new File([text], T.pasted_name, { type: "text/plain" }));
  }
}
