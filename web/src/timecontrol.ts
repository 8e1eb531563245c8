// The header's time control: live, the fabric at a past time (?at=T), or a
// past range (?from=F&to=T); the choice lives in the URL, so every page
// follows it and a link shares it.
import { h } from "./dom";
import { navigate } from "./router";
import { describe, fromLocalInput, readTime, toLocalInput, writeTime } from "./time";
import type { TimeView } from "./time";

/** Live / at a past time / past range, written to the URL. sync() reads the
 * URL again (after navigation). */
export function timeControl(): { el: HTMLElement; sync: () => void } {
  let syncTime: () => void = () => {};
  const modes: [TimeView["mode"], string][] = [
    ["live", "Live"],
    ["at", "At time"],
    ["range", "Range"],
  ];
  const buttons = modes.map(([m, label]) => h("button", { type: "button", class: "seg", "data-mode": m, "aria-pressed": "false" }, label));
  const at = h("input", { type: "datetime-local", step: "1", "aria-label": "Show the fabric as it was at", class: "time-input" });
  const from = h("input", { type: "datetime-local", step: "1", "aria-label": "Range start", class: "time-input" });
  const to = h("input", { type: "datetime-local", step: "1", "aria-label": "Range end", class: "time-input" });
  const preset = h(
    "select",
    { "aria-label": "Quick range", class: "time-preset" },
    h("option", { value: "" }, "Last…"),
    ...[
      ["900", "15 minutes"],
      ["3600", "1 hour"],
      ["21600", "6 hours"],
      ["86400", "24 hours"],
    ].map(([v, l]) => h("option", { value: v }, l!)),
  );
  const apply = h("button", { type: "button", class: "btn primary" }, "Apply");
  const atBox = h("span", { class: "time-fields" }, at);
  const rangeBox = h("span", { class: "time-fields" }, from, h("span", { "aria-hidden": "true" }, "–"), to, preset);
  const summary = h("span", { class: "time-summary" }, "");
  let mode: TimeView["mode"] = "live";
  const el = h("div", { class: "time-control", role: "group", "aria-label": "Time" }, h("div", { class: "segmented" }, ...buttons), atBox, rangeBox, apply, summary);

  const go = (t: TimeView) => {
    const q = new URLSearchParams(location.search);
    writeTime(q, t);
    for (const k of ["page"]) q.delete(k);
    const qs = q.toString();
    navigate(location.pathname + (qs ? "?" + qs : ""));
  };
  const show = () => {
    for (const b of buttons) b.setAttribute("aria-pressed", String(b.dataset.mode === mode));
    atBox.hidden = mode !== "at";
    rangeBox.hidden = mode !== "range";
    apply.hidden = mode === "live";
    el.dataset.mode = mode; // the header makes room for the fields
  };
  syncTime = () => {
    const t = readTime();
    mode = t.mode;
    const now = Date.now() / 1000;
    at.value = toLocalInput(t.at ?? now - 600);
    from.value = toLocalInput(t.from ?? now - 3600);
    to.value = toLocalInput(t.to ?? now);
    summary.textContent = t.mode === "live" ? "" : describe(t);
    show();
  };
  for (const b of buttons) {
    b.addEventListener("click", () => {
      mode = b.dataset.mode as TimeView["mode"];
      if (mode === "live") go({ mode: "live" });
      show();
    });
  }
  preset.addEventListener("change", () => {
    const s = Number(preset.value);
    if (!s) return;
    const now = Math.floor(Date.now() / 1000);
    preset.value = "";
    go({ mode: "range", from: now - s, to: now, at: now });
  });
  const submit = () => {
    if (mode === "at") {
      const v = fromLocalInput(at.value);
      if (v !== undefined) go({ mode: "at", at: v });
    } else if (mode === "range") {
      const f = fromLocalInput(from.value);
      const t = fromLocalInput(to.value);
      if (f !== undefined && t !== undefined && f < t) go({ mode: "range", from: f, to: t, at: t });
    }
  };
  apply.addEventListener("click", submit);
  for (const i of [at, from, to]) i.addEventListener("keydown", (e) => e.key === "Enter" && submit());
  syncTime();
  return { el, sync: () => syncTime() };
}
