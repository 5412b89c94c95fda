// One proposal card, the same in the AI panel and on the Approvals page: who proposed it,
// its tier, impact, a readable key/value list of the arguments (JSON on demand), the
// precheck ("cannot succeed now"), the result, and the actions — Approve/Reject for write,
// the three numbered steps (1 impact, 2 retype the target, 3 execute) for high risk. A
// stale re-authentication is asked for first, before step 1 (the server refuses the
// steps with 403 reauth_required until the password is re-entered).
import { api, ApiError, ssoStepUp } from "./app.js";

export const S = JSON.parse(document.getElementById("proposal-strings")?.textContent || "{}");
// Status codes as the operator reads them (hal/i18n/labels.py, rendered once by base.html).
const STATUS = JSON.parse(document.getElementById("hal-status-labels")?.textContent || "{}");

const el = (tag, cls, text) => {
  const node = document.createElement(tag);
  if (cls) node.className = cls;
  if (text !== undefined && text !== null) node.textContent = text;
  return node;
};

const fill = (template, values) =>
  (template || "").replace(/\{(\w+)\}/g, (_, key) => values[key] ?? "");

export const tierLabel = (tier) =>
  tier === "high_risk" ? S.high_risk : tier === "write" ? S.write : S.read || tier;

// "Proposed by @gpt in admin's Unified room".
export function originText(p) {
  const o = p.origin || {};
  const model = o.model ? `@${o.model}` : "";
  const room = o.room_kind === "unified" ? S.unified : o.room_title;
  const owner = o.room_owner || p.requested_by || "";
  if (model && room) return fill(S.proposed_by, { model, owner, room });
  if (room) return fill(S.proposed_in, { owner, room });
  if (model) return fill(S.proposed_by_model, { model });
  return "";
}

// A value as readable text: strings as they are, lists joined, objects as compact JSON.
function show(value) {
  if (value === null || value === undefined) return "—";
  if (typeof value === "string") return value === "" ? "—" : value;
  if (typeof value === "number") return String(value);
  if (typeof value === "boolean") return value ? S.yes || "yes" : S.no || "no";
  if (Array.isArray(value) && value.every((v) => typeof v !== "object" || v === null)) {
    return value.length ? value.map(show).join(", ") : "—";
  }
  return JSON.stringify(value, null, 2);
}

// Fields whose value is a status code (shown as the console's status label).
const STATUS_FIELDS = new Set(["status", "stored_status", "server_status", "release_status", "last_health_status"]);
const ISO_TIME = /^(\d{4}-\d{2}-\d{2})T(\d{2}:\d{2}:\d{2})(?:\.\d+)?(Z|[+-]\d{2}:\d{2})?$/;

// A field's name as the operator reads it: its label (the tool's field, translated), the
// name itself on hover; a name without a label is shown as the identifier it is.
function fieldName(key) {
  const label = S.fields?.[key];
  const dt = el("dt", label ? "" : "kv-raw", label ?? key);
  dt.title = key;
  if (!label) dt.setAttribute("translate", "no");
  return dt;
}

// A field's value: a coded value (status, job kind, via, type) as its label with the code on
// hover, a timestamp as date and time, yes/no; anything else — what a model, an operator
// or the fleet wrote — as it is, marked as content (translate="no").
function fieldValue(key, value) {
  const nested = typeof value === "object" && value !== null && show(value).startsWith("{");
  const dd = el("dd", nested ? "kv-json" : "");
  if (typeof value === "string" && value) {
    const coded = STATUS_FIELDS.has(key) ? STATUS[value] : S.values?.[key]?.[value];
    const time = ISO_TIME.exec(value);
    if (coded) {
      dd.textContent = coded;
      dd.title = value;
      return dd;
    }
    if (time) {
      const zone = !time[3] || time[3] === "Z" || time[3] === "+00:00" ? "UTC" : time[3];
      const node = el("time", "", `${time[1]} ${time[2]} ${zone}`);
      node.dateTime = value;
      node.title = value;
      dd.append(node);
      return dd;
    }
  }
  dd.textContent = show(value);
  if (typeof value !== "boolean" && value !== null && value !== undefined && value !== "") {
    dd.setAttribute("translate", "no");
  }
  return dd;
}

// A readable key/value list, with the exact JSON available on demand.
export function keyValues(data, cls) {
  const box = el("div", `proposal-kv ${cls}`);
  if (data !== null && typeof data === "object" && !Array.isArray(data)) {
    const dl = el("dl", "kv");
    const keys = Object.keys(data);
    for (const key of keys) dl.append(fieldName(key), fieldValue(key, data[key]));
    if (!keys.length) dl.append(el("dd", "kv-empty", S.no_arguments));
    box.append(dl);
  } else if (Array.isArray(data) && data.length && data.every((v) => v && typeof v === "object")) {
    // A list of objects (the jobs a reconcile queued): one list per object.
    for (const item of data) box.append(keyValues(item, "kv-item").firstChild);
  } else {
    const p = el("p", "kv-scalar", show(data));
    if (data !== null && data !== undefined && data !== "") p.setAttribute("translate", "no");
    box.append(p);
  }
  const raw = el("details", "proposal-json");
  raw.append(el("summary", "", S.show_json), el("pre", "", JSON.stringify(data, null, 2)));
  box.append(raw);
  return box;
}

// HAL's sentence about a call (its impact summary, in the reader's language) quotes what the
// model sent — a title, a host name: those quotes are marked as content (translate="no"),
// the rest is HAL's words.
function sentence(cls, prefix, text, p) {
  const line = el("p", cls, prefix);
  const quoted = [p.target_identifier, ...Object.values(p.arguments || {})]
    .filter((v) => typeof v === "string" && v.length > 1)
    .sort((a, b) => b.length - a.length);
  let rest = text;
  while (rest) {
    let at = -1;
    let found = "";
    for (const value of quoted) {
      const i = rest.indexOf(value);
      if (i >= 0 && (at < 0 || i < at)) [at, found] = [i, value];
    }
    if (at < 0) break;
    line.append(rest.slice(0, at), el("span", "", found));
    line.lastChild.setAttribute("translate", "no");
    rest = rest.slice(at + found.length);
  }
  line.append(rest);
  return line;
}

// Ask for the password in the console's re-auth dialog (templates/chatrooms/panel.html).
export function askPassword() {
  const sso = ssoStepUp(); // an SSO operator re-authenticates at the identity provider
  if (sso) return sso;
  const $ = (sel) => document.querySelector(sel);
  const dialog = $("#ai-reauth");
  const field = $("#ai-reauth-password");
  const error = $("#ai-reauth-error");
  error.textContent = "";
  field.value = "";
  return new Promise((resolve, reject) => {
    const submit = async (ev) => {
      ev.preventDefault();
      try {
        await api("POST", "/api/auth/reauth", { password: field.value });
        cleanup();
        dialog.close();
        resolve();
      } catch (e) {
        error.textContent = e.message;
        error.dataset.code = e.code || "";
      }
    };
    const cancel = () => {
      cleanup();
      dialog.close();
      reject(new ApiError(403, "reauth_required", S.reauth_cancelled));
    };
    const cleanup = () => {
      $("#ai-reauth-form").removeEventListener("submit", submit);
      $("#ai-reauth-cancel").removeEventListener("click", cancel);
    };
    $("#ai-reauth-form").addEventListener("submit", submit);
    $("#ai-reauth-cancel").addEventListener("click", cancel);
    dialog.showModal();
    field.focus();
  });
}

// On 403 reauth_required: ask for the password, re-authenticate, then retry once.
export async function withReauth(call) {
  try {
    return await call();
  } catch (err) {
    if (!(err instanceof ApiError) || err.code !== "reauth_required") throw err;
    await askPassword();
    return call();
  }
}

// Events and API answers can cross: never let a late "executing" undo an "executed".
const RANK = { pending: 0, approved: 1, executing: 1 };
const rank = (status) => RANK[status] ?? 2;

// Draw (or update) `card` for proposal `p`. A pending card keeps its action buttons (and
// any three-step flow in progress); only its information is redrawn. `onChange(p)` gets
// every newer state the card's own actions produce.
export function renderCard(card, p, { onChange = () => {} } = {}) {
  if (!p || p.id === undefined) return card;
  if (card.dataset.status && rank(p.status) < rank(card.dataset.status)) return card;
  card.classList.add("proposal-card");
  card.dataset.proposalId = p.id;
  card.dataset.status = p.status;
  card.dataset.tier = p.tier;
  const info = el("div", "proposal-info");
  const head = el("div", "proposal-head");
  const tier = el("span", `badge tier-${p.tier}`, tierLabel(p.tier));
  head.append(el("strong", "proposal-tool", p.tool), " ", tier, " ");
  const status = el("span", `badge ${p.status} proposal-status`, STATUS[p.status] || p.status);
  status.title = p.status;
  head.append(status);
  info.append(head);
  const origin = originText(p);
  if (origin) info.append(el("p", "proposal-origin", origin));
  const summary = p.impact?.summary;
  if (summary) info.append(sentence("proposal-impact", `${S.impact}: `, summary, p));
  if (p.target_identifier) {
    const target = el("p", "proposal-meta", `${S.target}: `);
    target.append(el("code", "", p.target_identifier));
    info.append(target);
  }
  if (p.runbook && Number.isInteger(p.runbook.id) && Number.isInteger(p.runbook.version)) {
    // The runbook the model said it follows: "title (vN)", linked to that exact version.
    const line = el("p", "proposal-runbook", `${S.runbook}: `);
    const link = el("a", "", `${p.runbook.title} (v${p.runbook.version})`);
    link.href = `/runbooks/${p.runbook.id}/?version=${p.runbook.version}`;
    line.append(link);
    // Archived since the proposal was made: withdrawn by the operators, not to be followed.
    if (p.runbook_archived === true) line.append(" ", el("span", "badge runbook-archived", S.runbook_archived));
    info.append(line);
  }
  if (p.status === "pending" && p.precheck && p.precheck.ok === false) {
    const flag = el("p", "proposal-precheck", `${S.cannot_succeed}: ${p.precheck.message} (${p.precheck.code})`);
    flag.dataset.code = p.precheck.code;
    flag.setAttribute("role", "status");
    info.append(flag);
  }
  if (p.details_visible === false) {
    info.append(el("p", "hint proposal-hidden", S.details_hidden));
  } else {
    info.append(el("h3", "proposal-label", S.arguments), keyValues(p.arguments ?? {}, "proposal-args"));
    if (p.result !== undefined && p.result !== null && p.status !== "pending") {
      info.append(el("h3", "proposal-label", S.result), keyValues(p.result, "proposal-result"));
    }
  }
  if (p.error) {
    // The sentence first, its code after it (a code never prefixes a sentence).
    const err = el("p", "error proposal-failure", p.error.message ? `${p.error.message} (${p.error.code})` : p.error.code);
    err.dataset.code = p.error.code;
    info.append(err);
  }
  if (p.decided_by && p.status !== "pending") {
    info.append(el("p", "proposal-meta", `${S.decided_by}: ${p.decided_by}`));
  }
  const old = card.querySelector(":scope > .proposal-info");
  if (old) old.replaceWith(info);
  else card.prepend(info);
  if (p.review !== undefined) renderReview(card, p.review);
  const actions = card.querySelector(":scope > .proposal-actions");
  if (p.status !== "pending") actions?.remove();
  else if (!actions) card.append(buildActions(card, p, onChange));
  return card;
}

// The streaming answer's text per card, merged from `proposal.review.delta` events by
// offset (as chat replies are): each piece arrives once, never the whole text again.
const reviewTexts = new WeakMap();

// The second opinion of another model (reviews app): advice only, drawn as plain text —
// the model's words never become markup. A review never disappears or goes back to
// streaming, so a late API answer (null, or older text) never undoes a newer event.
export function renderReview(card, review) {
  const old = card.querySelector(":scope > .proposal-review");
  if (!review) return;
  if (old && old.dataset.status !== "streaming" && review.status === "streaming") return;
  if (review.status === "streaming") {
    // A card loaded mid-stream (or the start event after some deltas): keep the longer text.
    const have = reviewTexts.get(card) ?? "";
    if ((review.text || "").length < have.length) review = { ...review, text: have };
    reviewTexts.set(card, review.text || "");
  } else {
    reviewTexts.delete(card);
  }
  const box = el("section", "proposal-review");
  box.dataset.status = review.status;
  box.dataset.verdict = review.verdict || "";
  box.setAttribute("aria-live", "polite");
  const who = review.reviewer ? `@${review.reviewer}` : "";
  box.append(el("h3", "proposal-label", fill(S.review_by, { model: who })));
  if (review.status === "failed") {
    const err = el("p", "error review-failed", fill(S.review_failed, { reason: review.error || "" }));
    box.append(err);
  } else if (review.status === "done" && review.verdict) {
    const verdict = el("p", "review-verdict");
    verdict.append(el("span", `badge verdict-${review.verdict}`, S[`verdict_${review.verdict}`] || review.verdict));
    box.append(verdict);
    for (const [key, items] of [["review_reasons", review.reasons], ["review_check_first", review.check_first]]) {
      if (!items || !items.length) continue;
      box.append(el("p", "review-list-label", S[key]));
      const list = el("ul", `review-${key === "review_reasons" ? "reasons" : "check-first"}`);
      for (const item of items) list.append(el("li", "", item));
      box.append(list);
    }
  } else if (review.status === "unparseable") {
    box.append(el("p", "hint review-unparseable", S.review_unparseable));
    box.append(el("pre", "review-text", review.text || ""));
  } else {
    box.append(el("p", "hint review-streaming", S.review_streaming));
    if (review.text) box.append(el("pre", "review-text", review.text));
  }
  // The server keeps at most a fixed number of characters of the answer: say it was cut.
  if (review.truncated) box.append(el("p", "hint review-truncated", S.review_truncated));
  box.append(el("p", "hint review-advice", S.review_advice));
  if (old) old.replaceWith(box);
  else card.querySelector(":scope > .proposal-info")?.after(box);
}

// One piece of a streaming review: {id, room_id, delta, offset, seq}. Returns false when
// text before it is missing (the caller fetches the review as it is now), true otherwise.
export function applyReviewDelta(card, d) {
  const box = card.querySelector(":scope > .proposal-review");
  if (!box) return false; // the review's start was not seen: fetch it
  if (box.dataset.status !== "streaming") return true; // the final text is already shown
  const piece = d.delta ?? "";
  let text = reviewTexts.get(card) ?? "";
  if (typeof d.offset === "number" && d.offset < text.length) {
    if (d.offset + piece.length <= text.length) return true; // already shown
    text = text.slice(0, d.offset) + piece;
  } else if (typeof d.offset === "number" && d.offset > text.length) {
    return false;
  } else {
    text += piece;
  }
  reviewTexts.set(card, text);
  let pre = box.querySelector(":scope > .review-text");
  if (!pre) {
    pre = el("pre", "review-text");
    box.querySelector(":scope > .review-streaming")?.after(pre);
  }
  pre.textContent = text;
  return true;
}

// The "retype the target" field: a phone keyboard must not capitalise, correct or complete
// an identifier (the comparison is exact and case-sensitive; spaces around it are ignored).
let hintIds = 0;
const RETYPE_ATTRIBUTES = { autocapitalize: "none", autocomplete: "off", autocorrect: "off", spellcheck: "false" };
export function retypeField(cls) {
  const field = el("input", cls);
  field.type = "text";
  for (const [name, value] of Object.entries(RETYPE_ATTRIBUTES)) field.setAttribute(name, value);
  return field;
}

function button(label, cls, onClick) {
  const b = el("button", cls, label);
  b.type = "button";
  b.addEventListener("click", onClick);
  return b;
}

function buildActions(card, p, onChange) {
  const box = el("div", "proposal-actions");
  const err = el("p", "error proposal-error");
  err.setAttribute("role", "alert");
  const fail = (e) => {
    err.textContent = e instanceof ApiError ? `${e.message} (${e.code})` : String(e);
    err.dataset.code = e.code || "";
  };
  const update = (data) => {
    const next = data?.proposal ?? data;
    renderCard(card, next, { onChange });
    onChange(next);
    return next;
  };
  const reject = button(S.reject, "proposal-reject", () => {
    err.textContent = "";
    api("POST", `/api/ai/proposals/${p.id}/reject`, {}).then(update, fail);
  });
  if (p.tier !== "high_risk") {
    const approve = button(S.approve, "primary proposal-approve", () => {
      err.textContent = "";
      approve.disabled = true;
      withReauth(() => api("POST", `/api/ai/proposals/${p.id}/approve`)).then(update, (e) => {
        approve.disabled = false;
        fail(e);
      });
    });
    box.append(el("div", "proposal-buttons"), err);
    box.firstChild.append(approve, reject);
    return box;
  }
  // High risk: the same three numbered steps everywhere.
  const steps = el("ol", "proposal-steps");
  const one = el("li", "proposal-step proposal-step-1");
  const two = el("li", "proposal-step proposal-step-2");
  const three = el("li", "proposal-step proposal-step-3");
  const detail = el("div", "proposal-impact-detail");
  const showImpact = button(S.step_impact, "proposal-impact-btn", async () => {
    err.textContent = "";
    try {
      const data = await withReauth(() =>
        api("POST", `/api/ai/proposals/${p.id}/confirm`, { step: "impact" }),
      );
      const conf = data.confirmation || {};
      detail.replaceChildren();
      const summary = conf.impact?.summary;
      if (summary) detail.append(sentence("", `${S.impact}: `, summary, p));
      if (conf.impact?.details) detail.append(keyValues(conf.impact.details, "proposal-impact-details"));
      const ask = el("p", "proposal-retype-ask", `${S.retype}: `);
      ask.append(el("code", "proposal-target", conf.target_identifier ?? p.target_identifier ?? ""));
      detail.append(ask);
      showImpact.disabled = true;
      field.disabled = false;
      confirm.disabled = false;
      field.focus();
    } catch (e) {
      fail(e);
    }
  });
  one.append(showImpact, detail);
  const label = el("label", "proposal-retype-label", `${S.step_retype} `);
  const field = retypeField("proposal-retype");
  field.disabled = true;
  field.setAttribute("aria-label", S.retype);
  const hint = el("span", "hint retype-hint proposal-retype-hint", S.retype_case);
  hint.id = `retype-hint-${++hintIds}`; // the same card may be drawn twice (panel and page)
  field.setAttribute("aria-describedby", hint.id);
  label.append(field, hint);
  const confirm = button(S.confirm_target, "proposal-target-btn", async () => {
    err.textContent = "";
    try {
      await withReauth(() =>
        api("POST", `/api/ai/proposals/${p.id}/confirm`, { step: "target", target: field.value }),
      );
      confirm.disabled = true;
      field.disabled = true;
      execute.disabled = false;
      execute.focus();
    } catch (e) {
      fail(e);
    }
  });
  confirm.disabled = true;
  field.addEventListener("keydown", (ev) => {
    if (ev.key === "Enter") {
      ev.preventDefault();
      confirm.click();
    }
  });
  two.append(label, " ", confirm);
  const execute = button(S.execute, "danger proposal-execute", () => {
    err.textContent = "";
    execute.disabled = true;
    withReauth(() => api("POST", `/api/ai/proposals/${p.id}/approve`)).then(update, (e) => {
      execute.disabled = false;
      fail(e);
    });
  });
  execute.disabled = true;
  three.append(execute);
  steps.append(one, two, three);
  const buttons = el("div", "proposal-buttons");
  buttons.append(reject);
  box.append(steps, buttons, err);
  return box;
}

// Fetch a proposal as this operator may see it (details, precheck in their language).
export async function fetchProposal(id) {
  const data = await api("GET", `/api/ai/proposals/${id}`);
  return data.proposal;
}
