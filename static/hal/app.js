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

export async function api(method, url, body) {
  const opts = { method, headers: { Accept: "application/json" }, credentials: "same-origin" };
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

for (const el of document.querySelectorAll("select[data-autosubmit]")) {
  el.addEventListener("change", () => el.form.requestSubmit());
}

// The colour theme: applied at once, stored on the server for every browser of this operator.
document.getElementById("theme-select")?.addEventListener("change", async (ev) => {
  const theme = ev.target.value;
  document.documentElement.dataset.theme = theme;
  await api("PUT", "/api/ai/panel", { theme }).catch(() => {});
});
