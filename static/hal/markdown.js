// Markdown for chat messages: CommonMark + GFM (tables, strikethrough, task lists,
// autolinks) rendered in the browser from the vendored markdown-it, highlight.js and
// DOMPurify (static/vendor/, pinned by sha256). Model text is untrusted: raw HTML is
// shown as text, links open in a new tab without an opener or referrer, only http(s)
// and mailto links survive, and images are never loaded (a prompt-injected model could
// leak data through an image URL): they become plain links.
import markdownit from "../vendor/markdown-it.esm.min.mjs";
import hljs from "../vendor/highlight.es.min.js";
import DOMPurify from "../vendor/purify.es.mjs";

const T = JSON.parse(document.getElementById("ai-panel-strings")?.textContent || "{}");
const SAFE_URL = /^(https?:|mailto:|#)/i;
const MAX_HIGHLIGHT = 100_000; // past this a code block is shown plain: highlighting is O(n) per frame

const md = markdownit({ html: false, linkify: true, breaks: true, typographer: false });
md.validateLink = (url) => SAFE_URL.test(url.trim());

const escape = md.utils.escapeHtml;

md.renderer.rules.image = (tokens, idx) => {
  const token = tokens[idx];
  const src = token.attrGet("src") || "";
  const alt = token.content || src;
  // Never an <img>: the URL is shown as a link the operator may choose to open.
  return `<a class="md-image" href="${escape(src)}">${escape(T.image || "image")}: ${escape(alt)}</a>`;
};

md.renderer.rules.fence = (tokens, idx) => {
  const token = tokens[idx];
  const lang = (token.info || "").trim().split(/\s+/)[0].toLowerCase();
  const code = token.content;
  let body = escape(code);
  let label = lang;
  if (lang && hljs.getLanguage(lang) && code.length <= MAX_HIGHLIGHT) {
    body = hljs.highlight(code, { language: lang, ignoreIllegals: true }).value;
    label = hljs.getLanguage(lang).name || lang;
  }
  const cls = lang ? ` language-${escape(lang)}` : "";
  return (
    `<div class="md-code"><div class="md-code-head"><span class="md-lang">${escape(label || T.code || "code")}</span>` +
    `<button type="button" class="md-copy" data-copy="code">${escape(T.copy || "Copy")}</button></div>` +
    `<pre><code class="hljs${cls}">${body}</code></pre></div>\n`
  );
};
md.renderer.rules.code_block = (tokens, idx) =>
  md.renderer.rules.fence([{ ...tokens[idx], info: "", content: tokens[idx].content }], 0);

md.renderer.rules.table_open = () => '<div class="md-table"><table>\n';
md.renderer.rules.table_close = () => "</table></div>\n";

// GFM task lists: "- [ ] x" / "- [x] x" become a check mark glyph (no form controls in
// message text).
md.core.ruler.after("inline", "task_lists", (state) => {
  const tokens = state.tokens;
  for (let i = 2; i < tokens.length; i++) {
    if (tokens[i].type !== "inline" || tokens[i - 2].type !== "list_item_open") continue;
    const first = tokens[i].children?.[0];
    const m = first?.type === "text" && /^\[([ xX])\]\s+/.exec(first.content);
    if (!m) continue;
    const done = m[1] !== " ";
    first.content = first.content.slice(m[0].length);
    const mark = new state.Token("html_inline", "", 0);
    mark.content = `<span class="md-task${done ? " done" : ""}" role="img" aria-label="${escape(
      done ? T.task_done || "done" : T.task_open || "open",
    )}">${done ? "☑" : "☐"}</span> `;
    tokens[i].children.unshift(mark);
    tokens[i - 2].attrJoin("class", "md-task-item");
  }
});

// Table cell alignment is the only inline style markdown-it writes; the CSP forbids style
// attributes (even in the parser's inert document), so it becomes a class before rendering.
md.core.ruler.push("align_classes", (state) => {
  for (const token of state.tokens) {
    if (token.type !== "th_open" && token.type !== "td_open") continue;
    const align = /^text-align:(left|right|center)$/.exec(token.attrGet("style") || "");
    if (!token.attrs) continue;
    token.attrs = token.attrs.filter(([name]) => name !== "style");
    if (align) token.attrJoin("class", `md-align-${align[1]}`);
  }
});

const PURIFY = {
  ALLOWED_TAGS: [
    "a", "p", "br", "hr", "em", "strong", "s", "del", "code", "pre", "blockquote",
    "ul", "ol", "li", "h1", "h2", "h3", "h4", "h5", "h6", "table", "thead", "tbody", "tr",
    "th", "td", "div", "span", "button",
  ],
  ALLOWED_ATTR: ["href", "class", "type", "role", "aria-label", "data-copy", "start"],
  ALLOW_DATA_ATTR: false,
  RETURN_DOM_FRAGMENT: true,
};

DOMPurify.addHook("afterSanitizeAttributes", (node) => {
  if (node.tagName === "A") {
    const href = node.getAttribute("href") || "";
    if (!SAFE_URL.test(href.trim())) node.removeAttribute("href");
    node.setAttribute("target", "_blank");
    node.setAttribute("rel", "noopener noreferrer");
  }
});

/** Render `text` as sanitized Markdown into `el`, replacing what it held. */
export function renderMarkdown(el, text) {
  const html = md.render(text || "");
  const frag = DOMPurify.sanitize(html, PURIFY);
  // Code blocks and tables scroll sideways: focusable, so a keyboard can scroll them too.
  for (const box of frag.querySelectorAll("pre, .md-table")) box.tabIndex = 0;
  el.replaceChildren(frag);
}

async function copyText(text) {
  try {
    await navigator.clipboard.writeText(text);
    return true;
  } catch {
    // Plain-HTTP consoles have no async clipboard: fall back to a selected textarea.
    const area = document.createElement("textarea");
    area.value = text;
    area.setAttribute("readonly", "");
    area.className = "visually-hidden";
    document.body.append(area);
    area.select();
    const ok = document.execCommand("copy");
    area.remove();
    return ok;
  }
}

/** Copy `text` and flash the button's label. */
export async function copyWithFeedback(button, text) {
  const ok = await copyText(text);
  const said = ok ? T.copied || "Copied" : T.copy_failed || "Copy failed";
  // An icon button keeps its icon (its name is in aria-label) and says it in its title.
  if (button.classList.contains("ai-icon")) {
    const title = button.title;
    button.title = said;
    button.dataset.copied = ok ? "true" : "false";
    setTimeout(() => {
      button.title = title;
      delete button.dataset.copied;
    }, 1500);
    return;
  }
  const label = button.textContent;
  button.textContent = said;
  button.dataset.copied = ok ? "true" : "false";
  setTimeout(() => {
    button.textContent = label;
    delete button.dataset.copied;
  }, 1500);
}

// One listener for every code block's Copy button (no inline handlers under the CSP).
document.addEventListener("click", (ev) => {
  const button = ev.target.closest?.("button.md-copy");
  if (!button) return;
  const code = button.closest(".md-code")?.querySelector("pre code");
  if (code) copyWithFeedback(button, code.textContent);
});
