// Pages that finish their thought (issue 43 item 6), on the synthetic fat
// tree the harness starts by default, each sentence against the API's
// figure:
//  - every alert rule's "Fires when" is words, never the rule's kind; the
//    link_errors_rising rule's names its bit error rate and window as the
//    API's rule has them, link_flapping's count takes its plural;
//  - counts take their noun's number: a host's "1 port", its ports table's
//    "1 row", against the API's port count;
//  - an InfiniBand host's ports keep their numbers (no names: the fabric
//    gives none);
//  - the health page's "Take out" form sits inside its panel with the
//    panel's inset, not against its edge.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { newPage, shot, startBrowser, startDaemon } from "./harness.mjs";

let daemon;
let browser;
let page;
const errors = [];

before(async () => {
  daemon = await startDaemon();
  browser = await startBrowser();
  page = await newPage(browser, errors);
});

after(async () => {
  await browser?.close();
  await daemon?.stop();
});

/** A window as the alerts page writes it (alerts.ts dur): 6h, 15m, 1m30s. */
function dur(s) {
  const [h, m, r] = [Math.floor(s / 3600), Math.floor((s % 3600) / 60), s % 60];
  return `${h ? `${h}h` : ""}${m ? `${m}m` : ""}${r ? `${r}s` : ""}` || "0s";
}

describe("pages that finish their thought", () => {
  it("says in words when every alert rule fires, with the API's figures", async () => {
    const { rules } = await daemon.api("/alerts");
    await page.goto(`${daemon.base}/alerts`);
    const rows = page.locator(".rule-row");
    await rows.first().waitFor();
    assert.equal(await rows.count(), rules.length);
    const kinds = new Set();
    for (const r of rules) {
      kinds.add(r.kind);
      const when = await page.locator(`.rule-row.rule-${r.name} .rule-when`).innerText();
      assert.notEqual(when, r.kind, `${r.name}'s "Fires when" is its kind`);
      assert.ok(when.split(" ").length >= 5, `${r.name}: "${when}" is a sentence`);
    }
    const trend = rules.find((r) => r.name === "link_errors_rising");
    assert.ok(trend, "the link_errors_rising rule is in force by default");
    assert.equal(trend.kind, "error_trend");
    const w = dur(trend.window_seconds);
    assert.equal(
      await page.locator(".rule-row.rule-link_errors_rising .rule-when").innerText(),
      `a link direction's errors rise and its bit error rate, fitted over the last ${w} of sweeps, reaches ${trend.threshold.toExponential()} within ${w} (or has reached it while rising)`,
    );
    const flap = rules.find((r) => r.kind === "link_flap");
    assert.match(await page.locator(`.rule-row.rule-${flap.name} .rule-when`).innerText(), new RegExp(`down or up ${flap.threshold} time${flap.threshold === 1 ? "" : "s"} or more within ${dur(flap.window_seconds)}$`));
    assert.ok(kinds.has("error_trend") && kinds.size >= 8, `the default rules cover the kinds: ${[...kinds]}`);
    await shot(page, "pages-alert-rules");
    assert.deepEqual(errors, []);
  });

  it("writes a host's one port as 1 port and 1 row, by number on InfiniBand", async () => {
    const r = await daemon.api("/nodes/n1");
    assert.equal(r.node.ports, 1);
    assert.equal(r.ports.length, 1);
    assert.equal(r.ports[0].name, undefined, "an InfiniBand port has no name");
    assert.equal(r.node.port_names, undefined);
    await page.goto(`${daemon.base}/nodes/n1`);
    const rows = page.locator('table[aria-label="Ports"] tbody tr');
    await rows.first().waitFor();
    assert.match(await page.locator(".page-head .sub").innerText(), / · 1 port$/);
    const cells = await rows.first().evaluate((tr) => Array.from(tr.cells, (c) => c.innerText));
    assert.equal(cells[0], "1");
    const p = r.ports[0];
    assert.equal(cells[1], `${p.peer_description} port ${p.peer.port}`);
    assert.equal(await page.locator(".pager").first().innerText(), "1 row", "the ports table's pager");
    // The node's jobs: none on this fabric, said so.
    const nj = await daemon.api("/nodes/n1/jobs");
    assert.equal(nj.total, 0);
    await page.locator(".node-jobs-summary").waitFor();
    assert.equal(await page.locator(".node-jobs-summary").innerText(), "0 jobs ran on n1 in the last 24 hours.");
    assert.deepEqual(errors, []);
  });

  it("sets the health page's Take out form inside its panel's inset", async () => {
    await page.goto(`${daemon.base}/health`);
    const form = page.locator("#impact-form");
    await form.waitFor();
    const box = await form.evaluate((f) => {
      const panel = f.closest(".panel").getBoundingClientRect();
      const label = f.querySelector("label").getBoundingClientRect();
      const cs = getComputedStyle(f);
      return { left: label.left - panel.left, top: label.top - f.closest(".panel").querySelector("header").getBoundingClientRect().bottom, padding: cs.paddingLeft };
    });
    assert.equal(box.padding, "14px");
    assert.ok(box.left >= 14, `"Take out" ${box.left}px from the panel's edge`);
    assert.ok(box.top >= 8, `"Take out" ${box.top}px under the panel's header`);
    await shot(page, "pages-health-form");
    assert.deepEqual(errors, []);
  });
});
