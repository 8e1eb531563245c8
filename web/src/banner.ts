// The back-pressure warning under the header: while GET /api/v1/status
// carries "behind" (the daemon cannot keep up: its store write queue or
// ingest is full and it is shedding work), every page shows since when and
// why, without blocking anything. Status is polled every STATUS_POLL_MS
// while someone is signed in, and again on navigation.
import { get } from "./api";
import { h } from "./dom";
import * as fmt from "./format";

export const STATUS_POLL_MS = 15_000;
/** Navigation polls again only if the last poll is older than this. */
const NAV_POLL_MIN_MS = 2_000;

export interface Behind {
  since: string;
  reasons: string[];
}

export interface StatusBrief {
  time: string;
  behind?: Behind;
  /** "collector" or "api" (`netloom serve --role api`: no alerts there). */
  role?: string;
}

export function behindBanner(): { el: HTMLElement; setActive: (on: boolean) => void; refresh: () => void } {
  const text = h("span", { class: "behind-text" });
  const el = h("div", { class: "behind-banner", role: "status", hidden: true }, h("span", { class: "behind-icon", "aria-hidden": "true" }, "!"), text);
  let timer: ReturnType<typeof setInterval> | null = null;
  let last = 0;
  let seq = 0;

  const show = (b: Behind | undefined) => {
    el.hidden = !b;
    if (!b) {
      delete el.dataset.since;
      text.textContent = "";
      return;
    }
    el.dataset.since = b.since;
    const reasons = b.reasons?.length ? b.reasons.join("; ") : "no reason given";
    text.textContent = `Netloom is falling behind since ${fmt.time(b.since)}: ${reasons}. Recent data may be incomplete or late.`;
  };

  const poll = () => {
    last = Date.now();
    const my = ++seq;
    get<StatusBrief>("/status")
      .then((st) => my === seq && show(st.behind))
      .catch(() => {
        /* a 401 sends the browser to the login page (api.ts); other
           failures leave the last answer up until the next poll */
      });
  };

  return {
    el,
    setActive: (on) => {
      if (timer) clearInterval(timer);
      timer = null;
      seq++;
      if (!on) {
        show(undefined);
        return;
      }
      poll();
      timer = setInterval(poll, STATUS_POLL_MS);
    },
    refresh: () => {
      if (timer && Date.now() - last >= NAV_POLL_MIN_MS) poll();
    },
  };
}
