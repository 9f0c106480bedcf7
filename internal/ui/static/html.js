// html`...` builds markup from a template whose every interpolated value
// is escaped, unless it is itself html`...` (or a list of those): the one
// place text becomes markup, so that a job's name or a task's message can
// never inject any.

export class Markup {
  constructor(s) { this.s = s; }
  toString() { return this.s; }
}

const entities = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" };
export const esc = (s) => String(s ?? "").replace(/[&<>"']/g, (c) => entities[c]);

function part(v) {
  if (v instanceof Markup) return v.s;
  if (Array.isArray(v)) return v.map(part).join("");
  if (v === null || v === undefined || v === false) return "";
  return esc(v);
}

export function html(strings, ...values) {
  let out = strings[0];
  values.forEach((v, i) => { out += part(v) + strings[i + 1]; });
  return new Markup(out);
}
