// Live job updates over /ws/ops/: status badges and the log of the job being viewed; what
// changed between the page's render and the socket's open is read again (live_sync.js).
import { copyFrom, opsSocket, swap } from "./live_sync.js";

// Status words in the operator's language (hal/i18n/labels.py, rendered by the base page).
const LABELS = JSON.parse(document.getElementById("hal-status-labels")?.textContent || "{}");
const log = document.getElementById("job-log");
const jobId = log ? Number(log.dataset.jobId) : null;

function onEvent(msg) {
  if (msg.type === "job.log" && log && msg.data.job_id === jobId) {
    if (log.querySelector(`li[data-seq="${msg.data.seq}"]`)) return;
    const li = document.createElement("li");
    li.className = msg.data.level;
    li.dataset.seq = msg.data.seq;
    const t = document.createElement("time");
    t.textContent = new Date(msg.data.ts).toLocaleTimeString();
    li.append(t, " " + msg.data.text);
    log.append(li);
    log.scrollTop = log.scrollHeight;
  } else if (msg.type === "job.updated") {
    for (const badge of document.querySelectorAll(
      `#job-status[data-job-id="${msg.data.id}"], tr[data-job-id="${msg.data.id}"] [data-field="status"]`)) {
      badge.textContent = LABELS[msg.data.status] ?? msg.data.status;
      badge.className = `badge ${msg.data.status}`;
    }
  }
}

opsSocket(onEvent, (doc) => {
  swap(doc, "#jobs-table > tbody", "#job-log");
  copyFrom(doc, "#job-status");
  if (log) log.scrollTop = log.scrollHeight;
});
