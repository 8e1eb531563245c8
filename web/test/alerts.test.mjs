// The Alerts page and the header's alert badge in Chromium, against a real
// daemon on a real simulated InfiniBand fabric (ibsim + OpenSM): symbol
// errors set on a switch port through ibsim's console fire the
// port_errors rule, which the page lists with the link it is about, the
// header counts, and ?alert=ID marks; when the rule's window passes it
// moves to "Resolved recently" and the badge goes. No page error or CSP
// violation on the way. Screenshots go to test-results/.
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { newPage, shot, startBrowser, startDaemon, until } from "./harness.mjs";

let daemon;
let browser;
let page;
let dir;
const errors = [];


before(async () => {
  dir = mkdtempSync(join(tmpdir(), "netloom-web-alerts-"));
  const cfg = join(dir, "netloom.yaml");
  writeFileSync(
    cfg,
    `alerting:
  rules:
    - {name: port_errors, threshold: 5, window: 12s}
    - {name: port_congestion, disabled: true}
    - {name: link_utilization, disabled: true}
    - {name: fabric_changed, disabled: true}
`,
  );
  daemon = await startDaemon({ fabric: "ibsim:4,4", sweep: "300ms", args: ["--config", cfg] });
  browser = await startBrowser();
  page = await newPage(browser, errors);
});

after(async () => {
  await browser?.close();
  await daemon?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe("alerts", () => {
  let link;
  let alertId;
  it("shows no alert and no badge on a healthy fabric", async () => {
    await page.goto(`${daemon.base}/alerts`);
    await page.getByText("No alert is firing.").waitFor();
    assert.equal(await page.locator(".alert-badge").count(), 0);
  });

  it("lists the port_errors alert of a port with symbol errors, and counts it in the header", async () => {
    const nodes = (await daemon.api("/fabric/nodes")).nodes;
    const isSwitch = (g) => nodes.find((n) => n.guid === g)?.type === "switch";
    link = (await daemon.api("/fabric/links")).links.find((l) => isSwitch(l.a.guid));
    await daemon.ibsim.console(`PerformanceSet "${daemon.ibsim.id(link.a.guid)}"[${link.a.port}] PortCounters.SymbolErrorCounter=9`);
    const a = await until(async () => (await daemon.api("/alerts?state=firing")).alerts.find((x) => x.rule === "port_errors"), "port_errors firing", 30_000, daemon);
    alertId = a.id;
    assert.equal(a.value, 9);
    const row = page.locator(".alert-row.state-firing", { hasText: "port_errors" });
    await row.waitFor({ timeout: 15_000 });
    assert.match(await row.innerText(), /symbol_errors/);
    assert.match(await row.innerText(), /warning/);
    // The alert's link leads to the link page.
    assert.equal(await row.locator(`a[href="/links/${encodeURIComponent(link.a.guid + ":" + link.a.port + "-" + link.b.guid + ":" + link.b.port)}"]`).count(), 1);
    // The badge polls every 15 s and on navigation.
    await page.locator('a[data-key="jobs"]').click();
    await page.locator('a[data-key="alerts"]').click();
    await page.locator(".alert-badge").waitFor({ state: "visible", timeout: 20_000 });
    assert.equal(await page.locator(".alert-badge").innerText(), "1");
    await shot(page, "alerts-firing");
  });

  it("marks the alert an Alertmanager link names", async () => {
    await page.goto(`${daemon.base}/alerts?alert=${alertId}`);
    await page.locator(".alert-row.selected", { hasText: "port_errors" }).waitFor();
  });

  it("moves the alert to resolved when its window passes, and the badge goes", async () => {
    await until(async () => (await daemon.api("/alerts?state=resolved")).alerts.some((x) => x.id === alertId), "port_errors resolved", 40_000, daemon);
    await page.goto(`${daemon.base}/alerts`);
    await page.locator(".alert-row.state-resolved", { hasText: "port_errors" }).waitFor();
    await page.getByText("No alert is firing.").waitFor();
    assert.equal(await page.locator(".alert-badge").count(), 0);
    await shot(page, "alerts-resolved");
    assert.deepEqual(errors, []);
  });
});
