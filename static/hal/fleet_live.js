// Live server status and metrics over /ws/ops/ ("server.heartbeat", "server.updated"); what
// changed between the page's render and the socket's open is read again (live_sync.js).
import { copyFrom, opsSocket, swap } from "./live_sync.js";

// "just now" in the operator's language, from the servers table (templates/hal/fleet/servers.html).
const JUST_NOW = document.getElementById("servers-table")?.dataset.justNow || "just now";
// Status words in the operator's language (hal/i18n/labels.py, rendered by the base page).
const LABELS = JSON.parse(document.getElementById("hal-status-labels")?.textContent || "{}");
const label = (status) => LABELS[status] ?? status;
const pct = (v) => (v === undefined || v === null ? "—" : `${Math.round(v)}%`);

function update(data) {
  const row = document.querySelector(`tr[data-server-id="${data.id}"]`);
  const set = (root, field, text, cls) => {
    const cell = root?.querySelector(`[data-field="${field}"]`);
    if (!cell) return;
    cell.textContent = text;
    if (cls) cell.className = cls;
  };
  if (row) {
    set(row, "status", label(data.status), `badge ${data.status}`);
    set(row, "heartbeat", JUST_NOW);
    if (data.metrics) {
      set(row, "cpu", pct(data.metrics.cpu_percent));
      set(row, "memory", pct(data.metrics.memory_percent));
      set(row, "disk", pct(data.metrics.disk_percent));
      set(row, "load", data.metrics.load[0].toFixed(2));
    }
  }
  const badge = document.querySelector(`[data-server-status="${data.id}"]`);
  if (badge) { badge.textContent = label(data.status); badge.className = `badge ${data.status}`; }
}

opsSocket(
  (msg) => {
    if (msg.type === "server.heartbeat" || msg.type === "server.updated") update(msg.data);
  },
  (doc) => {
    swap(doc, "#servers-table > tbody");
    copyFrom(doc, "[data-server-status]");
  },
);
