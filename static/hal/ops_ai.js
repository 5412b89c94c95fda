// The AI connections screen: every form goes to the JSON API; a 403 reauth_required asks
// for the password (POST /api/auth/reauth) and retries once. Secrets are sent, never shown.
import { api, ssoStepUp } from "./app.js";

const BASE = "/api/ai/connections";
const statusBox = document.getElementById("ops-ai-status");
const flashBox = document.getElementById("ops-ai-flash");
const dialog = document.getElementById("reauth-dialog");
const STRINGS = JSON.parse(document.getElementById("ops-ai-strings")?.textContent || "{}");
const BASE_URLS = JSON.parse(document.getElementById("ops-ai-base-urls")?.textContent || "{}");
const FLASH_KEY = "hal-ops-ai-flash";
const FLASH_ERROR_KEY = "hal-ops-ai-flash-error";

// What the last verify did (the page reloads after it): shown once after the reload.
const flash = sessionStorage.getItem(FLASH_KEY);
if (flash && flashBox) {
  flashBox.textContent = flash;
  flashBox.hidden = false;
  sessionStorage.removeItem(FLASH_KEY);
}
const failedFlash = sessionStorage.getItem(FLASH_ERROR_KEY);
if (failedFlash && statusBox) {
  statusBox.textContent = failedFlash;
  statusBox.hidden = false;
  sessionStorage.removeItem(FLASH_ERROR_KEY);
}

function verifyMessage(conn) {
  const template = STRINGS[conn.model_choice] || STRINGS.kept || "";
  return template
    .replace("%(name)s", conn.name)
    .replace("%(count)s", String((conn.models || []).length))
    .replace("%(model)s", conn.model || "");
}

// The add form shows what the chosen provider and authentication need, nothing else.
function syncAddForm(form) {
  const provider = form.elements.provider.value;
  const auth = form.elements.auth_method;
  let firstAllowed = null;
  for (const option of auth.options) {
    const allowed = (option.dataset.providers || "").split(" ").includes(provider);
    option.hidden = !allowed;
    option.disabled = !allowed;
    if (allowed && firstAllowed === null) firstAllowed = option.value;
  }
  if (auth.selectedOptions[0]?.disabled) auth.value = firstAllowed;
  const method = auth.value;
  const baseUrl = document.getElementById("add-base-url");
  baseUrl.hidden = provider === "local_cli";
  form.elements.base_url.placeholder = BASE_URLS[provider] || "";
  document.getElementById("add-api-key").hidden = method !== "api_key";
  document.getElementById("add-oauth").hidden = method !== "oauth";
}

const addForm = document.querySelector('form[data-op="create"]');
if (addForm) {
  addForm.elements.provider.addEventListener("change", () => syncAddForm(addForm));
  addForm.elements.auth_method.addEventListener("change", () => syncAddForm(addForm));
  syncAddForm(addForm);
}

function show(message) {
  statusBox.textContent = message;
  statusBox.hidden = !message;
}

function askPassword() {
  return new Promise((resolve) => {
    const form = document.getElementById("reauth-form");
    const input = form.elements.password;
    const done = (value) => {
      form.removeEventListener("submit", onSubmit);
      cancel.removeEventListener("click", onCancel);
      input.value = "";
      dialog.close();
      resolve(value);
    };
    const onSubmit = (e) => { e.preventDefault(); done(input.value); };
    const onCancel = () => done(null);
    const cancel = document.getElementById("reauth-cancel");
    form.addEventListener("submit", onSubmit);
    cancel.addEventListener("click", onCancel);
    dialog.showModal();
    input.focus();
  });
}

async function withReauth(fn) {
  try {
    return await fn();
  } catch (err) {
    if (err.code !== "reauth_required") throw err;
    const sso = ssoStepUp();
    if (sso) {
      await sso;
      return fn();
    }
    const password = await askPassword();
    if (password === null) throw err;
    await api("POST", "/api/auth/reauth", { password });
    return fn();
  }
}

function value(form, name) {
  const field = form.elements[name];
  return field ? field.value.trim() : "";
}

function createBody(form) {
  const body = {
    name: value(form, "name"),
    provider: value(form, "provider"),
    auth_method: value(form, "auth_method"),
    role: value(form, "role"),
    traits: value(form, "traits"),
    instructions: value(form, "instructions"),
  };
  if (value(form, "base_url") && body.provider !== "local_cli") body.base_url = value(form, "base_url");
  if (form.elements.api_key.value && body.auth_method === "api_key") body.api_key = form.elements.api_key.value;
  if (body.auth_method === "oauth") {
    body.oauth = {
      authorize_url: value(form, "oauth_authorize_url"),
      token_url: value(form, "oauth_token_url"),
      client_id: value(form, "oauth_client_id"),
      scopes: value(form, "oauth_scopes").split(/\s+/).filter(Boolean),
    };
    if (form.elements.oauth_client_secret.value) {
      body.oauth.client_secret = form.elements.oauth_client_secret.value;
    }
  }
  return body;
}

const handlers = {
  create: (form) => api("POST", BASE, createBody(form)),
  update: (form) => {
    const body = {};
    for (const name of ["name", "role", "traits", "instructions", "base_url"]) {
      if (form.elements[name]) body[name] = value(form, name);
    }
    return api("PATCH", `${BASE}/${form.elements.id.value}`, body);
  },
  model: (form) => api("PATCH", `${BASE}/${form.elements.id.value}`, { model: value(form, "model") }),
  secret: (form) => api("PUT", `${BASE}/${form.elements.id.value}/secret`, { api_key: form.elements.api_key.value }),
  verify: (form) => api("POST", `${BASE}/${form.elements.id.value}/verify`),
  enable: (form) => api("POST", `${BASE}/${form.elements.id.value}/enable`),
  disable: (form) => api("POST", `${BASE}/${form.elements.id.value}/disable`),
  delete: (form) => api("DELETE", `${BASE}/${form.elements.id.value}`),
  price: (form) => api("PUT", `${BASE}/${form.elements.id.value}/prices`, {
    model: value(form, "model"),
    input_per_million: value(form, "input_per_million") || null,
    output_per_million: value(form, "output_per_million") || null,
  }),
  // Token/cost budgets (providers/budgets.py): empty → no limit.
  budget: (form) => api("PUT", `${BASE}/${form.elements.id.value}/budget`, Object.fromEntries(
    ["tokens_per_day", "tokens_per_month", "cost_per_day", "cost_per_month"].map((n) => [n, value(form, n) || null]))),
  oauth: async (form) => {
    const data = await api("POST", `${BASE}/${form.elements.id.value}/oauth/start`);
    window.location.assign(data.authorize_url);
    return { redirecting: true };
  },
};

for (const form of document.querySelectorAll("form[data-op]")) {
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const op = form.dataset.op;
    if (op === "delete" && !window.confirm(STRINGS.delete_confirm)) return;
    const button = form.querySelector("button[type=submit]");
    if (button) button.disabled = true;
    show("");
    try {
      const result = await withReauth(() => handlers[op](form));
      for (const field of form.querySelectorAll("input[type=password]")) field.value = "";
      // A verify — or an add with a key, which verifies at once — says what it chose.
      if ((op === "verify" || op === "create") && result && result.model_choice) sessionStorage.setItem(FLASH_KEY, verifyMessage(result));
      if (op === "create" && result && result.verify_error) sessionStorage.setItem(FLASH_ERROR_KEY, result.verify_error.message);
      if (!result || !result.redirecting) window.location.reload();
    } catch (err) {
      for (const field of form.querySelectorAll("input[type=password]")) field.value = "";
      show(err.message);
      statusBox.dataset.code = err.code || "";
      // A failed verify still changed the row (status, last error): show it after a moment.
      if (op === "verify") setTimeout(() => window.location.reload(), 2500);
    } finally {
      if (button) button.disabled = false;
    }
  });
}
