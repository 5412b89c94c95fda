// The Approvals page: every proposal drawn by the panel's own card component
// (proposal_card.js), kept live over /ws/ops/. The socket carries only the summary; the
// details this operator may see (and the precheck in their language) come from the API.
import { opsSocket } from "./live_sync.js";
import { fetchProposal, renderCard } from "./proposal_card.js";

const pendingEl = document.getElementById("proposals-pending");
const recentEl = document.getElementById("proposals-recent");
const cards = new Map();
const read = (id) => JSON.parse(document.getElementById(id)?.textContent || "[]");

function showEmpty() {
  for (const list of [pendingEl, recentEl]) {
    const empty = list.querySelector(":scope > li.empty");
    const hasCards = list.querySelector(":scope > li.proposal-card");
    if (hasCards) empty?.remove();
    else if (!empty) {
      const li = document.createElement("li");
      li.className = "empty";
      li.textContent = list.dataset.empty;
      list.append(li);
    }
  }
}

function place(p) {
  let card = cards.get(p.id);
  if (!card) {
    card = document.createElement("li");
    card.className = "card proposal";
    card.id = `proposal-${p.id}`;
    cards.set(p.id, card);
  }
  renderCard(card, p, { onChange: place });
  const list = card.dataset.status === "pending" ? pendingEl : recentEl;
  if (card.parentElement !== list) {
    if (list === recentEl) list.prepend(card);
    else list.append(card);
  }
  showEmpty();
}

for (const p of read("proposals-pending-data")) place(p);
for (const p of read("proposals-recent-data")) place(p);
showEmpty();

// A link to one proposal (/proposals/#proposal-12, from a notification, the incident room
// or the login redirect): the cards are drawn after the browser looked for the fragment,
// so it is brought into view here — fetched first when it is older than the lists.
async function showLinked() {
  const id = Number((/^#proposal-(\d+)$/.exec(location.hash) || [])[1]);
  if (!id) return;
  if (!cards.has(id)) await fetchProposal(id).then(place, () => {});
  const card = cards.get(id);
  if (!card) return;
  card.classList.add("linked");
  card.scrollIntoView({ block: "start" });
}
await showLinked();
window.addEventListener("hashchange", showLinked);
document.body.dataset.proposalsReady = "true";

// Live over /ws/ops/; what changed between the page's render and the socket's open is
// read again from the page's proposal lists (live_sync.js).
opsSocket(
  (msg) => {
    // proposal.review: the second opinion moved on (the socket has only its summary).
    if (!["proposal.created", "proposal.updated", "proposal.review"].includes(msg.type)) return;
    // What this operator may see (details, precheck in their language); the summary if not.
    fetchProposal(msg.data.id).then(place, () => place(msg.data));
  },
  (doc) => {
    for (const id of ["proposals-pending-data", "proposals-recent-data"]) {
      for (const p of JSON.parse(doc.getElementById(id)?.textContent || "[]")) place(p);
    }
  },
);
