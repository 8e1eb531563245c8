// Every page of the UI, in one place: its address, the header's nav entry
// it lights, and who may see it (fabric pages: administrators only), with
// the guard that enforces it. The router matches addresses against these;
// main.ts registers them and starts it.
import { currentSession, isAdmin, loginHref } from "./api";
import { home } from "./header";
import { adminOnlyPage } from "./pages/adminonly";
import { alertsPage } from "./pages/alerts";
import { errorsPage } from "./pages/errors";
import { eventsPage } from "./pages/events";
import { healthPage } from "./pages/health";
import { hotspotsPage } from "./pages/hotspots";
import { jobPage } from "./pages/job";
import { jobsPage } from "./pages/jobs";
import { linkPage } from "./pages/link";
import { loginPage } from "./pages/login";
import { networkPage } from "./pages/network/page";
import { nodePage } from "./pages/node";
import { route } from "./router";
import type { Access, Verdict } from "./router";

/** Registers every page with the router. */
export function registerRoutes(): void {
  route("/login", "", loginPage(home), "public");
  route("/network", "network", networkPage, "admin");
  // A user sees the links their jobs' traffic crosses (the daemon decides which).
  route("/links/{id}", "network", linkPage);
  route("/nodes/{node}", "network", nodePage, "admin");
  route("/health", "health", healthPage, "admin");
  route("/hotspots", "hotspots", hotspotsPage, "admin");
  route("/jobs", "jobs", jobsPage);
  route("/jobs/{job}", "jobs", jobPage);
  route("/errors", "errors", errorsPage, "admin");
  route("/events", "events", eventsPage, "admin");
  // A user sees the alerts naming their jobs (the daemon decides which).
  route("/alerts", "alerts", alertsPage);
}

/** Whether the visitor may see a page of this access, or what to show instead. */
export function guard(access: Access): Verdict {
  if (access === "public") return { ok: true };
  if (!currentSession()) return { ok: false, href: loginHref() };
  if (access === "admin" && !isAdmin()) return { ok: false, page: adminOnlyPage };
  return { ok: true };
}
