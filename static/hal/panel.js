// The AI chat panel: tabs (unified + one per connection), streaming conversation,
// proposal cards with inline re-auth and the three-step confirmation, resizable,
// state saved per operator on the server. This entry point starts it; the parts are
// the panel_*.js modules, each named for what it holds.
import { api } from "./app.js";
import { refreshTimes } from "./chat_meta.js";
import { logEl, panel, state } from "./panel_state.js";
import { applyPanel } from "./panel_dock.js";
import "./panel_composer.js";
import { refreshRooms, selectRoom } from "./panel_rooms.js";
import { connectSocket } from "./panel_socket.js";
import { onEvent } from "./panel_events.js";
import "./panel_rove.js";

async function init() {
  try {
    const saved = await api("GET", "/api/ai/panel");
    Object.assign(state.panel, saved.panel ?? saved);
  } catch {
    /* defaults */
  }
  applyPanel();
  await refreshRooms();
  const wanted = state.rooms.find((r) => r.id === state.panel.active_room_id) || state.rooms[0];
  if (wanted) await selectRoom(wanted.id, { save: false });
  panel.dataset.ready = "true";
  connectSocket(onEvent);
}

window.addEventListener("resize", applyPanel);
setInterval(() => refreshTimes(logEl), 60_000);
init();
