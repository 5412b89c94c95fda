// Message metadata in the panel: relative timestamps (exact on hover), day separators,
// and the line under a model reply (model, tokens, duration, time to first token).
const T = JSON.parse(document.getElementById("ai-panel-strings")?.textContent || "{}");
const LANG = document.documentElement.lang || "en";
const relative = new Intl.RelativeTimeFormat(LANG, { numeric: "auto" });
const exact = new Intl.DateTimeFormat(LANG, { dateStyle: "medium", timeStyle: "medium" });
const dayFormat = new Intl.DateTimeFormat(LANG, { weekday: "long", year: "numeric", month: "long", day: "numeric" });

const STEPS = [
  ["year", 365 * 86400],
  ["month", 30 * 86400],
  ["day", 86400],
  ["hour", 3600],
  ["minute", 60],
];

/** "just now", "3 minutes ago", "yesterday"… for an ISO timestamp. */
export function relativeTime(iso, now = Date.now()) {
  const seconds = Math.round((new Date(iso).getTime() - now) / 1000);
  for (const [unit, size] of STEPS) {
    if (Math.abs(seconds) >= size) return relative.format(Math.round(seconds / size), unit);
  }
  return T.just_now || relative.format(0, "second");
}

/** A <time> element showing the relative time, the exact time in its title. */
export function timeElement(iso) {
  const el = document.createElement("time");
  el.className = "ai-time";
  el.dateTime = iso;
  el.title = exact.format(new Date(iso));
  el.textContent = relativeTime(iso);
  return el;
}

/** Re-render every relative time below `root` (called once a minute). */
export function refreshTimes(root) {
  const now = Date.now();
  for (const el of root.querySelectorAll("time.ai-time")) el.textContent = relativeTime(el.dateTime, now);
}

function dayKey(iso) {
  const d = new Date(iso);
  return `${d.getFullYear()}-${d.getMonth()}-${d.getDate()}`;
}

/** Put a day separator before the first message of each day in the log (idempotent). */
export function refreshDaySeparators(log) {
  for (const sep of log.querySelectorAll(":scope > li.ai-day")) sep.remove();
  let last = null;
  for (const li of log.querySelectorAll(":scope > li.ai-msg[data-created-at]")) {
    const key = dayKey(li.dataset.createdAt);
    if (key !== last) {
      const sep = document.createElement("li");
      sep.className = "ai-day";
      sep.textContent = dayFormat.format(new Date(li.dataset.createdAt));
      li.before(sep);
      last = key;
    }
  }
}

function seconds(ms) {
  return ms >= 10_000 ? `${Math.round(ms / 1000)} s` : `${(ms / 1000).toFixed(1)} s`;
}

/** "claude-x · 120 → 340 tokens · 4.2 s · first token 0.6 s" for a model reply. */
export function replyFacts(m) {
  const facts = [];
  if (m.model) facts.push(m.model);
  const usage = m.usage || {};
  if (usage.input_tokens != null || usage.output_tokens != null) {
    // "≈": HAL's estimate (a reply stopped before the provider reported its usage).
    const about = usage.estimated ? "≈ " : "";
    facts.push(`${about}${usage.input_tokens ?? 0} → ${usage.output_tokens ?? 0} ${T.tokens || "tokens"}`);
  }
  if (m.duration_ms != null) facts.push(seconds(m.duration_ms));
  if (m.ttft_ms != null) facts.push(`${T.first_token || "first token"} ${seconds(m.ttft_ms)}`);
  // Secrets HAL replaced with placeholders before the model read them: kinds, never values.
  const held = m.redacted && typeof m.redacted === "object" ? m.redacted : null;
  if (held) {
    const kinds = Object.keys(held).sort();
    const n = kinds.reduce((sum, k) => sum + (Number(held[k]) || 0), 0);
    if (n > 0) {
      const said = (T.secrets_held_back || "{n} secrets held back").replace("{n}", String(n));
      facts.push(`${said} (${kinds.join(", ")})`);
    }
  }
  return facts.join(" · ");
}
