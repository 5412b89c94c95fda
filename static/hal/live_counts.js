// Live console counters over /ws/ops/ ("counters.updated"): the overview cards, the
// Approvals menu entry and the AI button's badge never show a stale number.
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

function connect() {
  const scheme = location.protocol === "https:" ? "wss" : "ws";
  const ws = new WebSocket(`${scheme}://${location.host}/ws/ops/`);
  ws.addEventListener("message", (ev) => {
    const msg = JSON.parse(ev.data);
    if (msg.type === "counters.updated") applyCounters(msg.data);
  });
  ws.addEventListener("close", (ev) => {
    if (ev.code !== 4401) setTimeout(connect, 3000); // 4401: logged out, stop trying
  });
}

if (document.querySelector("[data-count]")) connect();
