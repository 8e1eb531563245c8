// Netloom's web UI: who is signed in, the header, and the routes of every
// page with who may see them (fabric pages: administrators only).
import { currentSession, isAdmin, loginHref } from "./api";
import { loadSession } from "./auth";
import { failure, h } from "./dom";
import { header, home } from "./header";
import { adminOnlyPage } from "./pages/adminonly";
import { alertsPage } from "./pages/alerts";
import { errorsPage } from "./pages/errors";
import { eventsPage } from "./pages/events";
import { jobPage } from "./pages/job";
import { jobsPage } from "./pages/jobs";
import { linkPage } from "./pages/link";
import { loginPage } from "./pages/login";
import { networkPage } from "./pages/network";
import { nodePage } from "./pages/node";
import { route, start } from "./router";
import type { Access, Verdict } from "./router";

route("/login", "", loginPage(home), "public");
route("/network", "network", networkPage, "admin");
// A user sees the links their jobs' traffic crosses (the daemon decides which).
route("/links/{id}", "network", linkPage);
route("/nodes/{node}", "network", nodePage, "admin");
route("/jobs", "jobs", jobsPage);
route("/jobs/{job}", "jobs", jobPage);
route("/errors", "errors", errorsPage, "admin");
route("/events", "events", eventsPage, "admin");
// A user sees the alerts naming their jobs (the daemon decides which).
route("/alerts", "alerts", alertsPage);

function guard(access: Access): Verdict {
  if (access === "public") return { ok: true };
  if (!currentSession()) return { ok: false, href: loginHref() };
  if (access === "admin" && !isAdmin()) return { ok: false, page: adminOnlyPage };
  return { ok: true };
}

const app = document.getElementById("app")!;
const main = h("main", { id: "main" });
try {
  await loadSession();
  const top = header();
  app.append(top.el, main);
  start(main, { changed: top.setNav, guard, home });
} catch (err) {
  // The daemon did not answer who this is (down, or not Netloom).
  app.append(main);
  main.append(h("div", { class: "page" }, failure(`Netloom's daemon did not answer: ${err instanceof Error ? err.message : String(err)}. Reload to try again.`)));
}
