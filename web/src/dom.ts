// Tiny DOM helpers: explicit element creation, no framework.

/** Inline styles go through CSSOM (el.style.setProperty), never a style=""
 * attribute: the daemon's Content-Security-Policy (style-src 'self')
 * blocks style attributes. Keys are CSS property names ("height",
 * "--chart-h"). */
export type Style = Record<string, string>;
type Attrs = { style?: Style } & Record<string, string | number | boolean | undefined | Style | ((e: Event) => void)>;
type Child = Node | string | number | null | undefined | false;

export function h<K extends keyof HTMLElementTagNameMap>(tag: K, attrs: Attrs = {}, ...children: Child[]): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === false) continue;
    if (k === "style") {
      if (typeof v !== "object") throw new Error("h: style must be an object (CSP forbids style attributes)");
      for (const [prop, val] of Object.entries(v)) el.style.setProperty(prop, val);
    } else if (typeof v === "object") throw new Error(`h: attribute ${k} is an object`);
    else if (typeof v === "function") el.addEventListener(k.replace(/^on/, ""), v);
    else if (k === "class") el.className = String(v);
    else if (v === true) el.setAttribute(k, "");
    else el.setAttribute(k, String(v));
  }
  append(el, ...children);
  return el;
}

export function append(el: Node, ...children: Child[]): void {
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    el.appendChild(typeof c === "object" ? c : document.createTextNode(String(c)));
  }
}

export function clear(el: Element): void {
  while (el.firstChild) el.removeChild(el.firstChild);
}

/** An in-app link: navigation goes through the router. */
export function link(href: string, ...children: Child[]): HTMLAnchorElement {
  return h("a", { href, "data-nav": "" }, ...children);
}

export function loading(what = "Loading…"): HTMLElement {
  return h("div", { class: "state loading", role: "status" }, h("span", { class: "spinner", "aria-hidden": "true" }), what);
}

export function empty(what: string): HTMLElement {
  return h("div", { class: "state empty" }, what);
}

export function failure(err: unknown): HTMLElement {
  const msg = err instanceof Error ? err.message : String(err);
  return h("div", { class: "state error", role: "alert" }, msg);
}

/** A titled panel whose body keeps its height while loading. */
export function panel(title: string, body: Node, extra?: Node): HTMLElement {
  return h("section", { class: "panel" }, h("header", {}, h("h2", {}, title), extra ?? null), body);
}

/** One figure of a card: its label above its value (cls: "bad", …). */
export function metric(label: string, value: string, cls = ""): HTMLElement {
  return h("div", { class: `metric ${cls}` }, h("div", { class: "metric-label" }, label), h("div", { class: "metric-value" }, value));
}
