// The render→watch window of a server-rendered page (issue 43): what happened between the
// page's render and its socket joining its group reached no socket of the page. The panel
// closed it by resuming on every open; a page does the same once its socket is in — on
// open for /ws/ops/ (the consumer joins the group before it accepts), on the watch's
// acknowledgement for a room — by reading the page again and taking its live parts from
// it. Events that arrive while that read is out are held and replayed over it, as the
// panel holds a room's events while its history loads.

// The page as the server renders it now, parsed (null when it cannot be read).
export async function fetchPage() {
  try {
    const response = await fetch(location.href, {
      credentials: "same-origin",
      headers: { Accept: "text/html" },
    });
    if (!response.ok) return null;
    return new DOMParser().parseFromString(await response.text(), "text/html");
  } catch {
    return null; // offline for a moment: the next open reads it again
  }
}

// A socket's catch-up: `begin()` once the socket is in; the events `take(msg)` receives
// until the page's read is applied by `sync(doc)` are held, then replayed by `onEvent`.
// `begin(read)` reads something else than the page (read() applies what it read).
export function catchUp(onEvent, sync) {
  let held = null;
  return {
    take(msg) {
      if (held) held.push(msg);
      else onEvent(msg);
    },
    async begin(read) {
      if (held) return; // a read is out already
      held = [];
      if (read) await read();
      else {
        const doc = await fetchPage();
        if (doc) sync(doc);
      }
      const events = held;
      held = null;
      for (const msg of events) onEvent(msg);
    },
  };
}

// A /ws/ops/ socket for one page: every open (the first included) reads the page again
// through `sync(doc)`; reconnects after 3 s unless logged out (4401).
export function opsSocket(onEvent, sync) {
  const scheme = location.protocol === "https:" ? "wss" : "ws";
  const connect = () => {
    const ws = new WebSocket(`${scheme}://${location.host}/ws/ops/`);
    const live = catchUp(onEvent, sync);
    ws.addEventListener("open", () => live.begin());
    ws.addEventListener("message", (ev) => live.take(JSON.parse(ev.data)));
    ws.addEventListener("close", (ev) => {
      if (ev.code !== 4401) setTimeout(connect, 3000);
    });
  };
  connect();
}

// Replace the children of each element `selectors` find here with those of the same
// element of `doc` (a list's rows, a log's lines).
export function swap(doc, ...selectors) {
  for (const selector of selectors) {
    const here = document.querySelector(selector);
    const fresh = doc.querySelector(selector);
    if (here && fresh) here.replaceChildren(...fresh.childNodes);
  }
}

// Copy the text and class of each element `selector` finds in `doc` onto the same
// element of this page (by id, else by its and its row's data-* attributes).
export function copyFrom(doc, selector) {
  for (const fresh of doc.querySelectorAll(selector)) {
    const here = fresh.id
      ? document.getElementById(fresh.id)
      : document.querySelector(sameAs(fresh));
    if (!here) continue;
    here.textContent = fresh.textContent;
    here.className = fresh.className;
  }
}

// A selector for the element of this page that is `el` of another document: its tag,
// data-* attributes and those of the row (tr[data-…]) it lies in.
function sameAs(el) {
  const own = (node) =>
    [...node.attributes]
      .filter((a) => a.name.startsWith("data-"))
      .map((a) => `[${a.name}="${CSS.escape(a.value)}"]`)
      .join("");
  const row = el.closest("tr");
  const inner = `${el.tagName.toLowerCase()}${own(el)}`;
  return row && row !== el ? `tr${own(row)} ${inner}` : inner;
}
