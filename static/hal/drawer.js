// Narrow screens (≤ 1100 px): the AI panel is an overlay drawer over the page, opened by
// the AI button or Alt+A, closed by Esc or ×, with focus kept inside while it is open
// (the page behind is made inert). Wide screens keep the docked, resizable panel.
const narrow = window.matchMedia("(max-width: 1100px)");
const FOCUSABLE = "button, [href], input, select, textarea, [tabindex]:not([tabindex='-1'])";

export class Drawer {
  constructor({ layout, panel, toggle, behind }) {
    this.layout = layout;
    this.panel = panel;
    this.toggle = toggle;
    this.behind = behind; // elements made inert while the drawer is open
    this.isOpen = false;
    this.listeners = [];
    narrow.addEventListener("change", () => this.apply());
    panel.addEventListener("keydown", (ev) => this.keydown(ev));
  }

  get active() {
    return narrow.matches;
  }

  onChange(fn) {
    this.listeners.push(fn);
  }

  set(open) {
    if (this.isOpen === open) return;
    this.isOpen = open;
    this.apply();
    if (open) {
      (this.panel.querySelector("#ai-input") || this.panel.querySelector(FOCUSABLE))?.focus();
    } else if (this.active) {
      this.toggle?.focus();
    }
    for (const fn of this.listeners) fn(open);
  }

  apply() {
    const open = this.active && this.isOpen;
    this.layout.classList.toggle("drawer-open", open);
    if (this.active) {
      this.panel.setAttribute("role", "dialog");
      this.panel.setAttribute("aria-modal", String(open));
      this.toggle?.setAttribute("aria-expanded", String(open));
    } else {
      this.panel.removeAttribute("role");
      this.panel.removeAttribute("aria-modal");
    }
    for (const el of this.behind) el.inert = open;
  }

  keydown(ev) {
    if (!this.active || !this.isOpen) return;
    if (ev.key === "Escape" && !ev.defaultPrevented && !ev.target.closest("dialog")) {
      ev.preventDefault();
      this.set(false);
      return;
    }
    if (ev.key !== "Tab") return;
    const items = [...this.panel.querySelectorAll(FOCUSABLE)].filter(
      (el) => !el.disabled && el.offsetParent !== null,
    );
    if (!items.length) return;
    const first = items[0];
    const last = items[items.length - 1];
    if (ev.shiftKey && document.activeElement === first) {
      ev.preventDefault();
      last.focus();
    } else if (!ev.shiftKey && document.activeElement === last) {
      ev.preventDefault();
      first.focus();
    }
  }
}
