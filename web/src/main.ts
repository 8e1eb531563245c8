// Netloom's web UI: the header (navigation, time control, live status)
// and the routes of every page.
import { h } from "./dom";
import { lastSweep, onStreamStatus, onSweep } from "./live";
import { errorsPage } from "./pages/errors";
import { eventsPage } from "./pages/events";
import { jobPage } from "./pages/job";
import { jobsPage } from "./pages/jobs";
import { linkPage } from "./pages/link";
import { networkPage } from "./pages/network";
import { nodePage } from "./pages/node";
import { navigate, route, start } from "./router";
import { describe, fromLocalInput, readTime, toLocalInput, writeTime } from "./time";
import type { TimeView } from "./time";

route("/network", "network", networkPage);
route("/links/{id}", "network", linkPage);
route("/nodes/{node}", "network", nodePage);
route("/jobs", "jobs", jobsPage);
route("/jobs/{job}", "jobs", jobPage);
route("/errors", "errors", errorsPage);
route("/events", "events", eventsPage);

const NAV: [string, string][] = [
  ["network", "Network"],
  ["jobs", "Jobs"],
  ["errors", "Errors"],
  ["events", "Events"],
];

function header(): { el: HTMLElement; setNav: (nav: string) => void } {
  const links = NAV.map(([key, label]) => h("a", { href: `/${key}`, "data-nav": "", "data-key": key }, label));
  const nav = h("nav", { class: "nav", "aria-label": "Pages" }, ...links);
  const time = timeControl();
  const status = h("span", { class: "live-status", role: "status", "aria-live": "off" }, "");
  const el = h(
    "header",
    { class: "top" },
    h("a", { href: "/network", "data-nav": "", class: "brand" }, h("span", { class: "logo", "aria-hidden": "true" }), "Netloom"),
    nav,
    h("div", { class: "spacer" }),
    time,
    status,
  );
  // Live indicator: the last sweep and whether the stream is connected.
  let ok = true;
  const paint = () => {
    const t = readTime();
    const m = lastSweep();
    status.classList.toggle("off", !ok || t.mode !== "live");
    if (t.mode !== "live") status.textContent = "history";
    else if (!ok) status.textContent = "reconnecting…";
    else status.textContent = m ? `live · sweep ${m.sweep} · ${Math.max(0, Math.round(Date.now() / 1000 - m.time))}s ago` : "live";
  };
  onStreamStatus((v) => ((ok = v), paint()));
  onSweep(paint, new AbortController().signal);
  setInterval(paint, 1000);
  return {
    el,
    setNav: (key) => {
      for (const a of links) {
        if (a.dataset.key === key) a.setAttribute("aria-current", "page");
        else a.removeAttribute("aria-current");
      }
      // Keep the time view when moving between pages.
      const q = new URLSearchParams();
      writeTime(q, readTime());
      const qs = q.toString();
      for (const a of links) a.setAttribute("href", `/${a.dataset.key}${qs ? "?" + qs : ""}`);
      syncTime();
      paint();
    },
  };
}

let syncTime: () => void = () => {};

/** Live / at a past time / past range, written to the URL. */
function timeControl(): HTMLElement {
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
  return h("div", { class: "time-control", role: "group", "aria-label": "Time" }, h("div", { class: "segmented" }, ...buttons), atBox, rangeBox, apply, summary);
}

const app = document.getElementById("app")!;
const top = header();
const main = h("main", { id: "main" });
app.append(top.el, main);
start(main, top.setNav);
