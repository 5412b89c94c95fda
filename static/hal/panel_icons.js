// Small inline SVG icons for the message actions (no icon font: every glyph renders,
// whatever fonts the operator's device has). The button's name stays in aria-label.
const PATHS = {
  copy: "M9 9h10v11H9z M5 15V4h10",
  regenerate: "M20 11a8 8 0 1 0-2.3 5.7 M20 4v7h-7",
  edit: "M4 20h4L19 9l-4-4L4 16z M13 7l4 4",
  attach: "M20 11l-8.5 8.5a5 5 0 0 1-7-7L13 4a3.5 3.5 0 0 1 5 5l-8.5 8.5a2 2 0 0 1-3-3L14 7",
};

export function icon(name) {
  const svg = document.createElementNS("http://www.w3.org/2000/svg", "svg");
  svg.setAttribute("viewBox", "0 0 24 24");
  svg.setAttribute("width", "14");
  svg.setAttribute("height", "14");
  svg.setAttribute("aria-hidden", "true");
  svg.setAttribute("focusable", "false");
  svg.classList.add("icon");
  const path = document.createElementNS("http://www.w3.org/2000/svg", "path");
  path.setAttribute("d", PATHS[name]);
  svg.append(path);
  return svg;
}
