// The "show what reaches at least N" filter a list page puts above its
// list (errors, hot spots): one number, kept in the URL as ?min=N, the
// page asking the daemon with it.
import { h } from "./dom";
import { navigate } from "./router";

export interface MinFilter {
  /** The input's id. */
  id: string;
  /** What comes before the number and after it. */
  label: string;
  unit: string;
  value: number;
  /** The smallest value (also what an empty or bad entry becomes). */
  min: number;
  max?: number;
  step?: string;
}

/** The form: submitting it puts the number in ?min= (others kept). */
export function minFilter(f: MinFilter): HTMLFormElement {
  const attrs: Record<string, string> = { type: "number", min: String(f.min), value: String(f.value), class: "num-input", id: f.id };
  if (f.max !== undefined) attrs.max = String(f.max);
  if (f.step) attrs.step = f.step;
  const input = h("input", attrs);
  return h(
    "form",
    {
      class: "filters",
      onsubmit: (e: Event) => {
        e.preventDefault();
        const q = new URLSearchParams(location.search);
        q.set("min", String(Math.max(f.min, Number(input.value) || f.min)));
        navigate(location.pathname + "?" + q.toString());
      },
    },
    h("label", { for: f.id }, f.label),
    input,
    h("span", {}, f.unit),
    h("button", { type: "submit", class: "btn" }, "Filter"),
  );
}
