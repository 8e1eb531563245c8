// The header's time control: live, the fabric at a past time (?at=T), or a
// past range (?from=F&to=T); the choice lives in the URL, so every page
// follows it and a link shares it. Beside it the zone every time is
// written in: the browser's or UTC, one click apart (remembered).
import { h } from "./dom";
import { navigate, render } from "./router";
import { describe, fromInput, INPUT_FORMAT, readTime, setZone, toInput, writeTime, zone, zoneName } from "./time";
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
  // Text fields in the pages' one way of writing time (a datetime-local
  // field would show the browser's locale's format instead).
  const field = () => h("input", { type: "text", class: "time-input", placeholder: INPUT_FORMAT, spellcheck: "false", autocomplete: "off", inputmode: "numeric" });
  const at = field();
  const from = field();
  const to = field();
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
  // The fields' zone, stated beside them.
  const zoneOf = () => h("span", { class: "time-zone" }, "");
  const atZone = zoneOf();
  const rangeZone = zoneOf();
  const atBox = h("span", { class: "time-fields" }, at, atZone);
  const rangeBox = h("span", { class: "time-fields" }, from, h("span", { "aria-hidden": "true" }, "–"), to, rangeZone, preset);
  const zoneBtn = h("button", { type: "button", class: "btn zone-toggle" }, "");
  const summary = h("span", { class: "time-summary" }, "");
  let mode: TimeView["mode"] = "live";
  const el = h("div", { class: "time-control", role: "group", "aria-label": "Time" }, h("div", { class: "segmented" }, ...buttons), atBox, rangeBox, apply, summary, zoneBtn);

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
    for (const i of [at, from, to]) i.removeAttribute("aria-invalid");
    at.value = toInput(t.at ?? now - 600);
    from.value = toInput(t.from ?? now - 3600);
    to.value = toInput(t.to ?? now);
    const z = zone();
    const name = zoneName(t.at ?? now);
    atZone.textContent = rangeZone.textContent = name;
    for (const [i, what] of [
      [at, "Show the fabric as it was at"],
      [from, "Range start"],
      [to, "Range end"],
    ] as const)
      i.setAttribute("aria-label", `${what} (${name})`);
    zoneBtn.textContent = name;
    zoneBtn.dataset.zone = z;
    zoneBtn.setAttribute("aria-pressed", String(z === "utc"));
    const local = zoneName(now, "local");
    zoneBtn.title = z === "utc" ? `Times in UTC; click for this browser's zone (${local})` : `Times in this browser's zone (${local}); click for UTC`;
    zoneBtn.setAttribute("aria-label", `Time zone: ${zoneBtn.title}`);
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
  zoneBtn.addEventListener("click", () => {
    setZone(zone() === "utc" ? "local" : "utc");
    syncTime();
    void render(); // the page writes its times again
  });
  preset.addEventListener("change", () => {
    const s = Number(preset.value);
    if (!s) return;
    const now = Math.floor(Date.now() / 1000);
    preset.value = "";
    go({ mode: "range", from: now - s, to: now, at: now });
  });
  // A field that holds no time is marked and named in the summary.
  const read = (i: HTMLInputElement, what: string): number | undefined => {
    const v = fromInput(i.value);
    i.setAttribute("aria-invalid", String(v === undefined));
    if (v === undefined) summary.textContent = `${what}: write the time as ${INPUT_FORMAT}`;
    return v;
  };
  const submit = () => {
    if (mode === "at") {
      const v = read(at, "Time");
      if (v !== undefined) go({ mode: "at", at: v });
    } else if (mode === "range") {
      const f = read(from, "Range start");
      const t = read(to, "Range end");
      if (f !== undefined && t !== undefined) {
        if (f < t) go({ mode: "range", from: f, to: t, at: t });
        else summary.textContent = "Range start: must be before its end";
      }
    }
  };
  apply.addEventListener("click", submit);
  for (const i of [at, from, to]) i.addEventListener("keydown", (e) => e.key === "Enter" && submit());
  syncTime();
  return { el, sync: () => syncTime() };
}
