// Console-wide behaviour: language autosubmit, CSRF helper, JSON API helper.
export function csrfToken() {
  const m = document.cookie.match(/(?:^|; )csrftoken=([^;]+)/);
  return m ? decodeURIComponent(m[1]) : "";
}

export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

export async function api(method, url, body, headers = {}) {
  const opts = { method, headers: { Accept: "application/json", ...headers }, credentials: "same-origin" };
  if (body !== undefined) {
    opts.headers["Content-Type"] = "application/json";
    opts.body = JSON.stringify(body);
  }
  if (method !== "GET") opts.headers["X-CSRFToken"] = csrfToken();
  const res = await fetch(url, opts);
  const data = res.headers.get("content-type")?.includes("json") ? await res.json() : {};
  if (!res.ok) {
    const err = data.error || {};
    throw new ApiError(res.status, err.code || "http_" + res.status, err.message || res.statusText);
  }
  return data;
}

// The login page: a fragment (/proposals/#proposal-12, a link from a notification) never
// reaches the server, so the page hands it on — in the form's `next` and in the language
// switch's own address — and the redirect after logging in lands on it.
const loginNext = document.querySelector("#login-form input[name=next]");
if (loginNext && location.hash.length > 1) {
  if (loginNext.value && !loginNext.value.includes("#")) loginNext.value += location.hash;
  const switchNext = document.querySelector("#login-language input[name=next]");
  if (switchNext && !switchNext.value.includes("#")) switchNext.value += location.hash;
}

for (const el of document.querySelectorAll("select[data-autosubmit]")) {
  el.addEventListener("change", () => el.form.requestSubmit());
}

// The colour theme: applied at once, stored on the server for every browser of this operator.
document.getElementById("theme-select")?.addEventListener("change", async (ev) => {
  const theme = ev.target.value;
  document.documentElement.dataset.theme = theme;
  await api("PUT", "/api/ai/panel", { theme }).catch(() => {});
});

// Phones: the menu and the top bar's preferences fold behind the Menu button.
const menuToggle = document.getElementById("menu-toggle");
menuToggle?.addEventListener("click", () => {
  const open = document.getElementById("layout").classList.toggle("menu-open");
  menuToggle.setAttribute("aria-expanded", String(open));
});

// "?" opens the list of keyboard shortcuts (not while typing in a field).
function typing(el) {
  return el?.closest?.("input, textarea, select, [contenteditable=''], [contenteditable=true]");
}
document.addEventListener("keydown", (ev) => {
  if (ev.key !== "?" || ev.ctrlKey || ev.metaKey || ev.altKey || typing(ev.target)) return;
  const dialog = document.getElementById("shortcuts");
  if (!dialog || dialog.open || document.querySelector("dialog[open]")) return;
  ev.preventDefault();
  dialog.showModal();
});

// Tables become stacked cards when the page area is narrow (app.css): each cell carries its
// column's name as a label. Rows added later (live lists) are labelled as they come.
function labelCells(root) {
  for (const table of root.querySelectorAll("table.grid")) {
    const heads = [...table.querySelectorAll(":scope > thead th")].map((th) => th.textContent.trim());
    if (!heads.length) continue;
    for (const row of table.querySelectorAll(":scope > tbody > tr")) {
      let col = 0;
      for (const cell of row.cells) {
        if (cell.colSpan === 1 && !("label" in cell.dataset)) cell.dataset.label = heads[col] ?? "";
        col += cell.colSpan;
      }
    }
  }
}
const mainEl = document.getElementById("main");
if (mainEl) {
  labelCells(mainEl);
  let queued = false;
  new MutationObserver(() => {
    if (queued) return;
    queued = true;
    requestAnimationFrame(() => {
      queued = false;
      labelCells(mainEl);
    });
  }).observe(mainEl, { childList: true, subtree: true });
}

// SSO operators re-authenticate at their identity provider (issue 45): in a small window,
// so the page, the panel and a card's three steps stay as they are; the caller retries
// when the window's last page (/oidc/reauth/done/) says so on a same-origin
// BroadcastChannel (the window's handle is no use: the console's Cross-Origin-Opener-Policy
// severs it once the window goes to the provider). Blocked pop-ups fall back to a full
// round trip that comes back to this page.
export function ssoStepUp() {
  const start = document.body.dataset.ssoReauth;
  if (!start) return null;
  const done = "/oidc/reauth/done/";
  const channel = new BroadcastChannel("hal-sso-reauth");
  const finished = new Promise((resolve) => {
    channel.onmessage = () => {
      channel.close();
      resolve(true);
    };
  });
  const win = window.open(`${start}?next=${encodeURIComponent(done)}`, "hal-sso-reauth", "popup,width=520,height=640");
  if (!win) {
    channel.close();
    window.location.assign(`${start}?next=${encodeURIComponent(location.pathname + location.search + location.hash)}`);
    return new Promise(() => {});
  }
  return finished;
}
