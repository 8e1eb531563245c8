// Netloom's web UI: the colour theme (before anything is drawn), who is
// signed in, the header, and the router started on the pages of routes.ts.
import { loadSession } from "./auth";
import { failure, h } from "./dom";
import { header, home } from "./header";
import { start } from "./router";
import { guard, registerRoutes } from "./routes";
import { startTheme } from "./theme";

startTheme();
registerRoutes();

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
