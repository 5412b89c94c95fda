// The approvals page: approve / reject proposals; high-risk ones go through impact →
// retype the target → execute. A 403 reauth_required sends the operator to re-auth.
import { api, ApiError } from "./app.js";

// "retype" in the operator's language, from the pending list (templates/hal/proposals.html).
const RETYPE = document.getElementById("proposals-pending")?.dataset.retype || "retype";

function fail(card, err) {
  const box = card.querySelector(".proposal-error");
  if (err instanceof ApiError && err.code === "reauth_required") {
    location.href = `/reauth/?next=${encodeURIComponent(location.pathname)}`;
    return;
  }
  box.textContent = err instanceof ApiError ? `${err.code}: ${err.message}` : String(err);
  box.dataset.code = err.code || "";
}

function done(card, data) {
  const p = data.proposal || data;
  card.dataset.status = p.status;
  card.querySelector(".proposal-status").textContent = p.status;
  card.querySelector(".proposal-actions").remove();
  if (p.error) fail(card, new ApiError(409, p.error.code, p.error.message));
}

for (const card of document.querySelectorAll("li.proposal")) {
  const id = card.dataset.proposalId;
  const approve = card.querySelector(".proposal-approve");
  card.querySelector(".proposal-reject").addEventListener("click", () => {
    api("POST", `/api/ai/proposals/${id}/reject`, {}).then((d) => done(card, d), (e) => fail(card, e));
  });
  approve.addEventListener("click", () => {
    approve.disabled = true;
    api("POST", `/api/ai/proposals/${id}/approve`).then(
      (d) => done(card, d),
      (e) => {
        approve.disabled = false;
        fail(card, e);
      },
    );
  });
  const impactBtn = card.querySelector(".proposal-impact-btn");
  if (!impactBtn) continue;
  const step2 = card.querySelector(".proposal-step2");
  impactBtn.addEventListener("click", async () => {
    try {
      const data = await api("POST", `/api/ai/proposals/${id}/confirm`, { step: "impact" });
      const conf = data.confirmation;
      card.querySelector(".proposal-impact").textContent =
        `${conf.impact.summary} — ${RETYPE}: ${conf.target_identifier}`;
      impactBtn.disabled = true;
      step2.hidden = false;
    } catch (e) {
      fail(card, e);
    }
  });
  card.querySelector(".proposal-target-btn").addEventListener("click", async () => {
    const typed = card.querySelector(".proposal-retype").value;
    try {
      await api("POST", `/api/ai/proposals/${id}/confirm`, { step: "target", target: typed });
      step2.hidden = true;
      approve.disabled = false;
    } catch (e) {
      fail(card, e);
    }
  });
}
