// Live console counters over /ws/ops/ ("counters.updated"): the overview cards, the
// Approvals menu entry and the AI button's badge never show a stale number.
import { catchUp } from "./live_sync.js";

const labels = JSON.parse(document.getElementById("hal-status-labels")?.textContent || "{}");

function setCount(name, value) {
  for (const el of document.querySelectorAll(`[data-count="${name}"]`)) {
    el.textContent = String(value);
    // Badges hide at zero; the overview's big numbers always show.
    if (el.classList.contains("count")) el.hidden = !value;
  }
}

function setFleet(fleet) {
  const list = document.querySelector('[data-count="fleet"]');
  if (!list) return;
  list.replaceChildren();
  for (const [status, n] of Object.entries(fleet || {})) {
    const li = document.createElement("li");
    li.className = `status-${status}`;
    const num = document.createElement("span");
    num.className = "n";
    num.textContent = String(n);
    li.append(num, ` ${labels[status] || status}`);
    list.append(li);
  }
  const empty = !Object.keys(fleet || {}).length;
  list.hidden = empty;
  const none = document.querySelector('[data-count="fleet-empty"]');
  if (none) none.hidden = !empty;
}

export function applyCounters(data) {
  for (const name of ["pending_approvals", "running_jobs", "open_incidents"]) {
    if (name in data) setCount(name, data[name]);
  }
  if ("fleet" in data) setFleet(data.fleet);
  document.documentElement.dataset.countersAt = String(Date.now());
}

// What moved between the page's render and the socket's open: the counters as they are
// once the socket is in (held events replayed over them, live_sync.js).
async function readCounters() {
  try {
    const response = await fetch("/api/counters", { credentials: "same-origin" });
    if (response.ok) applyCounters(await response.json());
  } catch {
    // Offline for a moment: the next event or open brings them.
  }
}

function connect() {
  const scheme = location.protocol === "https:" ? "wss" : "ws";
  const ws = new WebSocket(`${scheme}://${location.host}/ws/ops/`);
  const live = catchUp((msg) => {
    if (msg.type === "counters.updated") applyCounters(msg.data);
  }, () => {});
  ws.addEventListener("open", () => live.begin(readCounters));
  ws.addEventListener("message", (ev) => live.take(JSON.parse(ev.data)));
  ws.addEventListener("close", (ev) => {
    if (ev.code !== 4401) setTimeout(connect, 3000); // 4401: logged out, stop trying
  });
}

if (document.querySelector("[data-count]")) connect();
