// Three-step confirmation for high-risk buttons: impact → retype the identifier → execute.
// A 403 reauth_required asks for the password (POST /api/auth/reauth) and retries.
import { api, ssoStepUp } from "./app.js";
import { keyValues } from "./proposal_card.js";

// Translated labels come from the page (templates/hal/fleet/_confirm_strings.html).
const STRINGS = {
  reauth: "Re-enter your password to continue",
  reason: "Reason",
  retype: "Type {target} to confirm",
  retypeCase: "Case-sensitive: type it exactly as shown.",
  ok: "OK",
  cancel: "Cancel",
  close: "Close",
  ...(document.getElementById("hr-strings")?.dataset ?? {}),
};

function el(tag, attrs = {}, text = "") {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  if (text) node.textContent = text;
  return node;
}

async function withReauth(dialog, fn) {
  try {
    return await fn();
  } catch (err) {
    if (err.code !== "reauth_required") throw err;
    const sso = ssoStepUp();
    if (sso) {
      await sso;
      return fn();
    }
    const password = await ask(dialog, STRINGS.reauth, "password");
    if (password === null) throw err;
    await api("POST", "/api/auth/reauth", { password });
    return fn();
  }
}

function ask(dialog, label, type = "text") {
  return new Promise((resolve) => {
    const form = el("form");
    const input = el("input", { type, required: "", autocomplete: type === "password" ? "current-password" : "off" });
    const lab = el("label", {}, label);
    lab.append(input);
    const ok = el("button", { type: "submit" }, STRINGS.ok);
    const cancel = el("button", { type: "button" }, STRINGS.cancel);
    form.append(lab, ok, cancel);
    dialog.replaceChildren(form);
    form.addEventListener("submit", (e) => { e.preventDefault(); resolve(input.value); });
    cancel.addEventListener("click", () => { dialog.close(); resolve(null); });
    input.focus();
  });
}

function openDialog() {
  const dialog = el("dialog", { class: "hr-dialog" });
  document.body.append(dialog);
  dialog.addEventListener("close", () => dialog.remove());
  dialog.showModal();
  return dialog;
}

function showError(dialog, err) {
  dialog.replaceChildren(el("p", { class: "error", "data-code": err.code || "" }, err.message));
  const close = el("button", { type: "button" }, STRINGS.close);
  close.addEventListener("click", () => dialog.close());
  dialog.append(close);
}

function run(button) {
  return confirmAndExecute(
    button.dataset.hrAction,
    JSON.parse(button.dataset.hrParams || "{}"),
    button.textContent.trim(),
    button.hasAttribute("data-hr-reason"),
  );
}

// A form's fields become the action's params; `data-hr-json` fields are parsed as JSON
// (an unparsable value is sent as typed, and the server refuses it with its code).
function formParams(form) {
  const params = JSON.parse(form.dataset.hrParams || "{}");
  for (const input of form.querySelectorAll("[name]")) {
    let value = input.value;
    if (input.hasAttribute("data-hr-json")) {
      try { value = value.trim() ? JSON.parse(value) : []; } catch { /* sent as typed */ }
    }
    params[input.name] = value;
  }
  return params;
}

async function confirmAndExecute(action, params, label, withReason = false) {
  const dialog = openDialog();
  try {
    if (withReason) {
      const reason = await ask(dialog, STRINGS.reason);
      if (reason === null) return;
      params.reason = reason;
    }
    const started = await api("POST", "/api/confirmations", { action, params });
    const conf = started.confirmation;
    // Step 1: the impact; step 2: retype the identifier exactly.
    const form = el("form");
    form.append(el("h2", {}, conf.impact.summary));
    // The details as the proposal cards show them: labelled fields, coded values as labels.
    form.append(keyValues(conf.impact.details || {}, "impact"));
    const lab = el("label", {}, STRINGS.retype.replace("{target}", () => conf.target_identifier));
    // No capitals, corrections or completions from a phone keyboard: the comparison is exact
    // and case-sensitive (spaces around the identifier are ignored), as the hint says.
    const input = el("input", {
      type: "text", class: "hr-retype", autocapitalize: "none", autocomplete: "off",
      autocorrect: "off", spellcheck: "false", "aria-describedby": "hr-retype-hint",
    });
    lab.append(input, el("span", { class: "hint retype-hint", id: "hr-retype-hint" }, STRINGS.retypeCase));
    const error = el("p", { class: "error" });
    const go = el("button", { type: "submit", class: "danger" }, label);
    const cancel = el("button", { type: "button" }, STRINGS.cancel);
    form.append(lab, error, go, cancel);
    dialog.replaceChildren(form);
    input.focus();
    cancel.addEventListener("click", () => dialog.close());
    form.addEventListener("submit", async (e) => {
      e.preventDefault();
      error.textContent = "";
      try {
        await api("POST", `/api/confirmations/${conf.token}/target`, { target: input.value });
        // Step 3: execute (needs a recent re-authentication).
        await withReauth(dialog, () => api("POST", `/api/confirmations/${conf.token}/execute`));
        dialog.close();
        window.location.reload();
      } catch (err) {
        error.textContent = err.message;
        error.dataset.code = err.code || "";
      }
    });
  } catch (err) {
    showError(dialog, err);
  }
}

// A write that needs a recent re-auth (e.g. a module restart): sent as JSON to its API,
// asking for the password when HAL answers reauth_required.
async function submitWithReauth(form) {
  const body = {};
  for (const input of form.querySelectorAll("[name]")) {
    if (input.name !== "csrfmiddlewaretoken") body[input.name] = input.value;
  }
  const dialog = openDialog();
  try {
    await withReauth(dialog, () => api("POST", form.dataset.reauthApi, body));
    dialog.close();
    window.location.reload();
  } catch (err) {
    showError(dialog, err);
  }
}

for (const button of document.querySelectorAll("button[data-hr-action]")) {
  button.addEventListener("click", () => run(button));
}
for (const form of document.querySelectorAll("form[data-hr-form]")) {
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    const label = form.querySelector("button[type=submit]")?.textContent.trim() ?? "";
    confirmAndExecute(form.dataset.hrForm, formParams(form), label);
  });
}
for (const form of document.querySelectorAll("form[data-reauth-api]")) {
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    submitWithReauth(form);
  });
}
