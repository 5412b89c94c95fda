// The runbook page: the body (operator-written Markdown, sent as escaped text) is rendered
// with the chat panel's one renderer (markdown.js: markdown-it + DOMPurify, ADR 0007).
import { renderMarkdown } from "./markdown.js";

for (const source of document.querySelectorAll("pre[data-markdown]")) {
  const target = source.parentElement;
  renderMarkdown(target, source.textContent);
}
