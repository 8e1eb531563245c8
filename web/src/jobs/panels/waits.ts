// Where the ranks wait: drawn from the job's profile (with netloom run
// --waits), which the time-per-function panel fetches.
import { h, loading, panel } from "../../dom";
import type { Profile } from "../api";
import { waitsView } from "../waits";

export interface WaitsPanel {
  el: HTMLElement;
  /** Draws the profile's waits, each rank on its node. */
  draw(profile: Profile, nodeOf: (rank: number) => string, includeSetup: boolean): void;
  fail(msg: string): void;
}

export function waitsPanel(): WaitsPanel {
  const box = h("div", { class: "waits-box" }, loading("Loading waits…"));
  return {
    el: panel("Where the ranks wait", box),
    draw: (profile, nodeOf, includeSetup) => box.replaceChildren(waitsView(profile, nodeOf, includeSetup)),
    fail: (msg) => box.replaceChildren(h("div", { class: "state error" }, msg)),
  };
}
