// The header: navigation (what the signed-in role may see), the time
// control, the live indicator, who is signed in with a "Sign out" button,
// the colour theme's switch (theme.ts), and below it the daemon's
// back-pressure warning (banner.ts). On a narrow window it wraps: the
// pages get a row of their own (styles.css).
import { currentSession, get, isAdmin, loginHref, onSession } from "./api";
import type { Session } from "./api";
import { canSignOut, logout } from "./auth";
import { behindBanner } from "./banner";
import type { StatusBrief } from "./banner";
import { h } from "./dom";
import { lastSweep, onStreamStatus, onSweep } from "./live";
import { redirect } from "./router";
import { themeSwitch } from "./theme";
import { timeControl } from "./timecontrol";
import { readTime, writeTime } from "./time";

interface NavItem {
  key: string;
  label: string;
  /** Fabric pages: administrators only. */
  admin: boolean;
}

const NAV: NavItem[] = [
  { key: "network", label: "Network", admin: true },
  { key: "jobs", label: "Jobs", admin: false },
  { key: "hotspots", label: "Hot spots", admin: true },
  { key: "errors", label: "Errors", admin: true },
  { key: "health", label: "Health", admin: true },
  { key: "events", label: "Events", admin: true },
  { key: "alerts", label: "Alerts", admin: false },
];

/** How often the header's alert badge asks for the firing alerts. */
export const ALERT_POLL_MS = 15_000;

/** Where "/" and the brand lead: the map for administrators, the jobs for
 * everyone else, the login page before signing in. */
export function home(): string {
  const s = currentSession();
  return !s ? "/login" : s.role === "admin" ? "/network" : "/jobs";
}

export function header(): { el: HTMLElement; setNav: (nav: string) => void } {
  const links = NAV.map((n) => h("a", { href: `/${n.key}`, "data-nav": "", "data-key": n.key }, n.label));
  const nav = h("nav", { class: "nav", "aria-label": "Pages" }, ...links);
  // The number of firing alerts the signed-in person may see, on the
  // Alerts link.
  // (Out of the page while none fire: .badge's display beats "hidden".)
  const alertBadge = h("span", { class: "badge bad alert-badge", "data-count": "0", title: "firing alerts" });
  const alertsLink = links.find((a) => a.dataset.key === "alerts")!;
  const badgeGap = document.createTextNode(" ");
  const showBadge = (n: number) => {
    alertBadge.dataset.count = alertBadge.textContent = String(n);
    if (n === 0) {
      alertBadge.remove();
      badgeGap.remove();
    } else if (!alertBadge.isConnected) alertsLink.append(badgeGap, alertBadge);
  };
  let alertTimer: ReturnType<typeof setInterval> | null = null;
  // An API daemon (`netloom serve --role api`) keeps no alerts (the
  // collectors evaluate them): its header has no Alerts link to poll.
  // null until /status has said which the daemon is.
  let noAlerts: boolean | null = null;
  const pollAlerts = () =>
    noAlerts !== false ||
    get<{ firing: number }>("/alerts", { state: "firing", limit: 1 })
      .then((r) => showBadge(r.firing))
      .catch(() => {
        /* the next poll tries again */
      });
  const time = timeControl();
  const status = h("span", { class: "live-status", role: "status", "aria-live": "off" }, "");
  const who = h("span", { class: "who" });
  const signOut = h("button", { type: "button", class: "btn dark", "data-action": "sign-out" }, "Sign out");
  const signOutError = h("span", { class: "sign-out-error", role: "alert" });
  const account = h("div", { class: "account" }, who, signOut, signOutError);
  const brand = h("a", { href: "/", "data-nav": "", class: "brand" }, h("span", { class: "logo", "aria-hidden": "true" }), "Netloom");
  const bar = h("header", { class: "top" }, brand, nav, h("div", { class: "spacer" }), time.el, status, account, themeSwitch());
  const banner = behindBanner();
  const el = h("div", { class: "chrome" }, bar, banner.el);
  // Pages that fill the window (the map) subtract the header's real
  // height: it grows with the banner, or a second row for the time fields.
  new ResizeObserver(() => document.documentElement.style.setProperty("--chrome-h", `${el.offsetHeight}px`)).observe(el);

  // Live indicator: the last sweep and whether the stream is connected.
  // Only administrators get the fabric's stream; for others it is the
  // time mode alone.
  let ok = true;
  const paint = () => {
    const t = readTime();
    const m = isAdmin() ? lastSweep() : null;
    status.classList.toggle("off", (isAdmin() && !ok) || t.mode !== "live");
    if (t.mode !== "live") status.textContent = "history";
    else if (isAdmin() && !ok) status.textContent = "reconnecting…";
    else status.textContent = m ? `live · sweep ${m.sweep} · ${Math.max(0, Math.round(Date.now() / 1000 - m.time))}s ago` : "live";
  };
  onStreamStatus((v) => ((ok = v), paint()));
  setInterval(paint, 1000);

  let stream: AbortController | null = null;
  const showSession = (s: Session | null) => {
    stream?.abort();
    stream = null;
    if (s?.role === "admin") {
      stream = new AbortController();
      onSweep(paint, stream.signal);
    }
    for (const [i, a] of links.entries()) a.hidden = !s || (NAV[i]!.admin && s.role !== "admin");
    for (const part of [nav, time.el, status, account]) part.hidden = !s;
    el.dataset.role = s?.role ?? "";
    who.replaceChildren();
    signOutError.textContent = "";
    if (s) {
      who.append(
        h("span", { class: "who-user", title: s.method === "anonymous" ? "Anonymous access is on: everyone is an administrator" : `Signed in (${s.method})` }, s.user),
        h("span", { class: `role-badge ${s.role}`, "data-role": s.role }, s.role),
      );
    }
    signOut.hidden = !canSignOut(s);
    banner.setActive(!!s);
    if (alertTimer) clearInterval(alertTimer);
    alertTimer = null;
    showBadge(0);
    if (s) {
      void get<StatusBrief>("/status")
        .then((st) => {
          noAlerts = st.role === "api";
          alertsLink.hidden = noAlerts;
        })
        .catch(() => {
          noAlerts = false; // polled as on a collector; the alerts page says what failed
        })
        .finally(() => {
          if (currentSession() !== s) return;
          if (alertTimer) clearInterval(alertTimer);
          pollAlerts();
          alertTimer = setInterval(pollAlerts, ALERT_POLL_MS);
        });
    }
    paint();
  };
  signOut.addEventListener("click", () => {
    signOut.disabled = true;
    signOutError.textContent = "";
    logout()
      .then(() => redirect(loginHref("/")))
      .catch((err: unknown) => (signOutError.textContent = `Sign-out failed: ${err instanceof Error ? err.message : String(err)}`))
      .finally(() => (signOut.disabled = false));
  });
  onSession(showSession);
  showSession(currentSession());

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
      time.sync();
      banner.refresh();
      if (currentSession()) pollAlerts();
      paint();
    },
  };
}
