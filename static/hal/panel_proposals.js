// Proposal cards in the AI panel's log, each placed next to the message that made it.
import { api } from "./app.js";
import { fetchProposal, renderCard } from "./proposal_card.js";
import { list, logEl, state } from "./panel_state.js";
import { stickToEnd } from "./panel_scroll.js";
import { settleChips } from "./panel_messages.js";

export async function loadProposals(roomId) {
  try {
    const data = await api("GET", `/api/ai/proposals?room_id=${roomId}&limit=100`);
    if (state.roomId !== roomId) return;
    // Decided cards stay next to their message; a cleared conversation takes its cards along.
    const rows = [...list(data, "proposals")]
      .filter((p) => p.status === "pending" || state.messages.has(p.message_id))
      .sort((a, b) => a.id - b.id);
    for (const p of rows) renderProposal(p);
  } catch {
    /* proposals are optional for rendering the room */
  }
}

// The card itself is the shared component (proposal_card.js), the same as on the
// Approvals page. A room event carries the full proposal but not its precheck (rendered in
// each reader's language by the API): a pending card fetches it once.
export function renderProposal(p) {
  if (!p || p.id === undefined) return;
  if (p.room_id !== undefined && p.room_id !== null && p.room_id !== state.roomId) return;
  let card = state.proposals.get(p.id);
  if (!card) {
    card = document.createElement("li");
    card.className = "ai-proposal";
    state.proposals.set(p.id, card);
    const anchor = p.message_id && state.messages.get(p.message_id);
    if (anchor) anchor.after(card);
    else logEl.append(card);
  }
  renderCard(card, p, { onChange: renderProposal });
  settleChips({ ...p, status: card.dataset.status });
  if (p.status === "pending" && p.precheck === undefined) {
    fetchProposal(p.id).then((fresh) => fresh && renderProposal(fresh), () => {});
  }
  stickToEnd();
}

