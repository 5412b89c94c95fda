// The conversation archive, its search results and transcripts: Markdown rendered with the
// panel's safe renderer (markdown-it + DOMPurify, static/hal/markdown.js); Delete asks
// first, and the "deleted — Undo" notice counts down the server's 10 s undo window
// (chatrooms/archive.py keeps the archive restorable that long, whatever this page does).
import { renderMarkdown } from "./markdown.js";

const S = JSON.parse(document.getElementById("archive-strings")?.textContent || "{}");

for (const el of document.querySelectorAll("[data-markdown]")) {
  renderMarkdown(el, el.textContent);
  el.dataset.rendered = "true";
}

for (const form of document.querySelectorAll("form[data-confirm]")) {
  form.addEventListener("submit", (ev) => {
    if (!window.confirm(form.dataset.confirm)) ev.preventDefault();
  });
}

const undo = document.getElementById("archive-undo");
if (undo) {
  const left = undo.querySelector("[data-seconds]");
  let seconds = Number(undo.dataset.seconds || 0);
  const tick = () => {
    if (seconds <= 0) {
      // Past the window the server would refuse the restore: say so instead of offering it.
      undo.querySelector("form")?.remove();
      if (left) left.textContent = S.undo_over || "";
      return;
    }
    if (left) left.textContent = (S.undo_left || "{n}").replace("{n}", String(seconds));
    seconds -= 1;
    setTimeout(tick, 1000);
  };
  tick();
}
