// What a signed-in user who is not an administrator sees on a fabric page
// (network map, node, errors, events): a plain explanation and the way to
// their own jobs, instead of a page of 403 errors.
import { currentSession } from "../api";
import { h, link } from "../dom";
import type { PageContext } from "../router";
import { timeQuery } from "../time";

export function adminOnlyPage(ctx: PageContext): void {
  const s = currentSession();
  ctx.root.append(
    h(
      "div",
      { class: "notice-box", role: "status", "data-state": "admin-only" },
      h("h1", {}, "Only administrators can see the fabric"),
      h(
        "p",
        {},
        `You are signed in as ${s?.user ?? "a user"}. The network map, nodes, errors and events of the whole fabric are for the center's administrators; you see your own jobs and the links their traffic crosses.`,
      ),
      h("p", {}, link(`/jobs${timeQuery()}`, "Go to your jobs")),
    ),
  );
}
