// Live job updates over /ws/ops/: status badges and the log of the job being viewed.
// Status words in the operator's language (hal/i18n/labels.py, rendered by the base page).
const LABELS = JSON.parse(document.getElementById("hal-status-labels")?.textContent || "{}");
const scheme = location.protocol === "https:" ? "wss" : "ws";
const log = document.getElementById("job-log");
const jobId = log ? Number(log.dataset.jobId) : null;

function connect() {
  const ws = new WebSocket(`${scheme}://${location.host}/ws/ops/`);
  ws.addEventListener("message", (ev) => {
    const msg = JSON.parse(ev.data);
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
  });
  ws.addEventListener("close", () => setTimeout(connect, 3000));
}
connect();
