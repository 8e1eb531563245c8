// How a direction's bytes were split over equal-cost paths (docs/sflow.md,
// "Said per direction"): the route model the daemon names on each
// direction and job of an Ethernet fabric, shown by the hot-spots page,
// the job's links table and the link page's jobs.
import * as fmt from "./format";
import type { SplitModel } from "./jobs/api";

/** How a direction's bytes were split over equal-cost paths: the route
 * model, with the samples and the sampling error where it was observed;
 * fallback is the answer's own route_model (the fabric's). */
export function splitText(s: SplitModel, fallback = ""): string {
  const m = s.route_model ?? fallback;
  if (!m) return "forwarding tables";
  return s.split_observed_pct !== undefined && !m.startsWith("sflow-observed") ? `${m} (${fmt.pct(s.split_observed_pct)} observed)` : m;
}
