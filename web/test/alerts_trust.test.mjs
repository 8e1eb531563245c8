// What the Alerts page says about issue 28's items 7 and 8, in Chromium,
// each sentence checked against the API:
//  - a healthy start: a simulated fabric whose counters read as a real
//    fabric's (a few bad links with errors counted long ago) shows "No
//    alert is firing." under the default error rules, and the "Rules in
//    force" panel says of each rule what it fires on, as the API's rules
//    say (every default on error counters fires on a rise, none on a
//    reading);
//  - jobs that crossed a link: three short MPI jobs that sent from n2 to
//    n3 across a leaf uplink and finished, then symbol errors on that
//    uplink (ibsim's console): the alert's row says "since TIME: ID
//    finished TIME, …" with the window start, the jobs in the API's order
//    and each one's end as the jobs API has it; a job that ran between two
//    nodes of one leaf in that time is not named.
// No page error or CSP violation on the way. Screenshots go to test-results/.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { freeUdpPort, jobFinished, mpiSkip, netloomBin, newPage, pageTime, shot, startBrowser, startDaemon, startJob, webDir, until } from "./harness.mjs";

const mpiDir = join(webDir, "test", "mpi");
let browser;
let page; // each suite's own, closed before its daemon stops
let errors;
let dir;


/** The page's clock text for an ISO time, as the browser formats it. */
const localTime = (iso) => pageTime(page, iso);

/** A window in seconds as the config writes it (45s, 1m30s, 5m, 24h). */
function dur(s) {
  const [h, m, sec] = [Math.floor(s / 3600), Math.floor((s % 3600) / 60), s % 60];
  return `${h ? `${h}h` : ""}${m ? `${m}m` : ""}${sec ? `${sec}s` : ""}`;
}

before(async () => {
  dir = mkdtempSync(join(tmpdir(), "netloom-web-alerts-trust-"));
  browser = await startBrowser();
});

after(async () => {
  await browser?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe("a healthy start", () => {
  let daemon;
  before(async () => {
    // Utilization is the simulation's load, not what this is about.
    const cfg = join(dir, "healthy.yaml");
    writeFileSync(cfg, "alerting:\n  rules:\n    - {name: link_utilization, disabled: true}\n");
    daemon = await startDaemon({ fabric: "sim:fat-tree:hosts=648,radix=36", sweep: "500ms", sweeps: 4, args: ["--config", cfg] });
    errors = [];
    page = await newPage(browser, errors);
  });
  after(async () => {
    await page?.close();
    await daemon?.stop();
  });

  it("fires no error alert on counters read long after they were cleared", async () => {
    const r = await daemon.api("/alerts");
    const onCounters = r.alerts.filter((a) => a.kind === "counter_increase" || a.kind === "counter_total");
    assert.deepEqual(
      onCounters.map((a) => `${a.rule} ${a.state}: ${a.summary}`),
      [],
    );
    // The fabric does have bad links: errors on a few ports, never past
    // their PortCounters field (4-bit link integrity errors stop at 15).
    const metrics = await (await fetch(`${daemon.base}/metrics/ports?counters=symbol_errors,link_integrity_errors,rcv_errors`)).text();
    const values = metrics
      .split("\n")
      .filter((l) => /^netloom_port_(symbol_error|local_link_integrity_errors|receive_errors)_total\{/.test(l))
      .map((l) => ({ port: /guid="([^"]+)".*?port="(\d+)"/.exec(l).slice(1).join(":"), name: l.slice(0, l.indexOf("{")), v: Number(l.split(" ").at(-1)) }));
    const ports = new Set(values.map((x) => x.port));
    const bad = new Set(values.filter((x) => x.v > 0).map((x) => x.port));
    assert.ok(ports.size > 1900, `${ports.size} ports swept`);
    assert.ok(bad.size > 0 && bad.size <= ports.size / 200, `${bad.size} of ${ports.size} ports read errors`);
    for (const x of values) if (x.name.includes("link_integrity")) assert.ok(x.v <= 15, `${x.port} link integrity ${x.v}`);

    await page.goto(`${daemon.base}/alerts`);
    await page.getByText("No alert is firing.").waitFor();
    const now = await daemon.api("/alerts");
    assert.equal(now.firing + now.pending, 0, "the API agrees: nothing active");
    assert.equal(await page.locator(".page-head .sub").innerText(), `${now.firing} firing, ${now.pending} pending, ${now.resolved} resolved recently.`);
    assert.equal(await page.locator(".alert-badge").count(), 0);
  });

  it("says of each rule in force what it fires on, as the API's rules say", async () => {
    const { rules } = await daemon.api("/alerts");
    assert.ok(rules.some((r) => r.name === "port_errors") && !rules.some((r) => r.name === "port_errors_total"), "port_errors_total is off by default");
    const rows = page.locator(".rule-row");
    await rows.first().waitFor();
    assert.equal(await rows.count(), rules.length);
    for (const r of rules) {
      const text = await page.locator(`.rule-row.rule-${r.name}`).innerText();
      assert.match(text, new RegExp(`^${r.name}\\s+${r.severity}\\s`));
      const when = await page.locator(`.rule-row.rule-${r.name} .rule-when`).innerText();
      for (const c of r.counters ?? []) assert.ok(when.includes(c), `${r.name}: "${when}" names ${c}`);
      if (r.kind === "counter_increase") {
        assert.equal(when, `${r.counters.join(", ")} rise by ${r.threshold.toLocaleString("en-US")} or more within ${dur(r.window_seconds)} (a change while Netloom watches)`);
      }
      assert.ok(r.kind !== "counter_total" && !when.includes("total"), `${r.name} fires on a reading: "${when}"`);
    }
    await shot(page, "alerts-rules");
    assert.deepEqual(errors, []);
  });
});

const skip = mpiSkip();

describe("jobs that crossed a link", { skip }, () => {
  let daemon;
  let agentPort;
  const runs = [];

  /** Runs traffic.c on two ranks, rank r on n<base + r>, under netloom run; resolves once the daemon lists it finished. */
  async function runJob(id, base) {
    const args = [netloomBin, "run", "--daemon", `127.0.0.1:${agentPort}`, "--interval", "200ms", "--job-id", id, "--", "mpirun", "--oversubscribe", "-np", "2", join(mpiDir, "nodewrap.sh"), join(dir, "traffic"), "3"];
    const run = startJob(id, args, { NL_NODE_BASE: String(base), NL_PPN: "1" });
    runs.push(run);
    await run.done;
    return (await jobFinished(daemon, id)).job;
  }

  before(async () => {
    execFileSync("mpicc", ["-O1", "-o", join(dir, "traffic"), join(mpiDir, "traffic.c")]);
    agentPort = await freeUdpPort();
    const cfg = join(dir, "jobs.yaml");
    writeFileSync(
      cfg,
      `alerting:
  rules:
    - {name: port_errors, window: 90s}
    - {name: port_congestion, disabled: true}
    - {name: link_utilization, disabled: true}
    - {name: fabric_changed, disabled: true}
`,
    );
    daemon = await startDaemon({
      fabric: "ibsim:4,4",
      sweep: "300ms",
      args: ["--config", cfg, "--agent-listen", `127.0.0.1:${agentPort}`, "--agent-address-file", "-", "--job-timeout", "10s"],
    });
    errors = [];
    page = await newPage(browser, errors);
  });

  after(async () => {
    for (const r of runs) if (r.p.exitCode === null) r.p.kill();
    await page?.close();
    await daemon?.stop();
  });

  it("names the finished jobs that crossed the uplink in the rule's window, marked finished, as the APIs have them", async () => {
    // n2 and n3 hang off different leaves: their route leaves n2's leaf by an uplink.
    const route = await daemon.api("/routes?src=n2&dst=n3");
    const up = route.hops.find((x, i) => x.type === "switch" && route.hops[i + 1]?.type === "switch");
    assert.ok(up, `no uplink in ${JSON.stringify(route)}`);
    const { links } = await daemon.api("/fabric/links");
    const link = links.find((l) => (l.a.guid === up.guid && l.a.port === up.port) || (l.b.guid === up.guid && l.b.port === up.port));

    const crossed = [];
    for (const id of ["web-cross-1", "web-cross-2", "web-cross-3"]) crossed.push(await runJob(id, 2));
    await runJob("web-leaf-only", 1); // n1, n2: one leaf
    // Every job's traffic on the uplink attributed (the last interval at the sweep after its end).
    const onUplink = async () => (await daemon.api(`/links/${encodeURIComponent(link.id)}/jobs?from=-5m`)).jobs.map((j) => j.job);
    await until(async () => (await onUplink()).includes("web-cross-3"), "web-cross-3 attributed to the uplink", 30_000, daemon);

    await daemon.ibsim.console(`PerformanceSet "${daemon.ibsim.id(up.guid)}"[${up.port}] PortCounters.SymbolErrorCounter=20`);
    const a = await until(
      async () => (await daemon.api("/alerts?state=firing")).alerts.find((x) => x.rule === "port_errors" && x.subject.port.guid === up.guid && x.subject.port.port === up.port),
      "port_errors on the uplink",
      30_000,
      daemon,
    );
    // The API: the three, finished, latest first; not the one-leaf job.
    assert.deepEqual(
      a.jobs.map((j) => [j.id, j.state]),
      [
        ["web-cross-3", "finished"],
        ["web-cross-2", "finished"],
        ["web-cross-1", "finished"],
      ],
    );
    const since = Date.parse(a.jobs_since);
    assert.equal(since, Date.parse(a.starts_at) - 90_000, "the window before the alert");
    const onLink = await daemon.api(`/links/${encodeURIComponent(link.id)}/jobs?from=${encodeURIComponent(a.jobs_since)}&to=${encodeURIComponent(new Date().toISOString())}`);
    for (const j of a.jobs) {
      const api = crossed.find((x) => x.id === j.id);
      assert.equal(Date.parse(j.end), Date.parse(api.end), `${j.id}: end as the jobs API has it`);
      assert.equal(Date.parse(j.start), Date.parse(api.start), `${j.id}: start as the jobs API has it`);
      assert.ok(Date.parse(api.end) >= since, `${j.id} ended ${api.end}, in the window from ${a.jobs_since}`);
      assert.equal(j.bytes, onLink.jobs.find((x) => x.job === j.id)?.bytes, `${j.id}: bytes as the link's attribution has them`);
      assert.ok(j.bytes > 0);
    }

    // The page.
    await page.goto(`${daemon.base}/alerts?alert=${a.id}`);
    const row = page.locator(".alert-row.selected", { hasText: "port_errors" });
    await row.waitFor({ timeout: 15_000 });
    const cell = row.locator(".alert-jobs");
    assert.equal(await cell.locator(".alert-jobs-since time").getAttribute("datetime"), a.jobs_since);
    const sinceText = await localTime(a.jobs_since);
    assert.equal(await cell.locator(".alert-jobs-since").innerText(), `since ${sinceText}`);
    const shown = cell.locator(".alert-job");
    assert.deepEqual(await shown.evaluateAll((els) => els.map((e) => e.dataset.job)), a.jobs.map((j) => j.id));
    const sentences = [];
    for (let i = 0; i < a.jobs.length; i++) {
      const j = a.jobs[i];
      const el = shown.nth(i);
      assert.match((await el.getAttribute("class")) ?? "", /\bstate-finished\b/);
      assert.equal(await el.locator(".job-finished time").getAttribute("datetime"), j.end);
      const text = `${j.id}${j.user ? ` (${j.user})` : ""} finished ${await localTime(j.end)}`;
      assert.equal(await el.innerText(), text);
      sentences.push(text);
    }
    assert.equal(await cell.innerText(), `since ${sinceText}: ${sentences.join(", ")}`);
    assert.ok(!(await cell.innerText()).includes("web-leaf-only"));
    assert.equal(await row.locator(`a[href="/jobs/web-cross-1"]`).count(), 1);
    // The rule's window, which the jobs were looked up in, as the rules panel says it.
    assert.match(await page.locator(".rule-row.rule-port_errors .rule-when").innerText(), /rise by 10 or more within 1m30s \(/);
    await shot(page, "alerts-finished-jobs");
    assert.deepEqual(errors, []);
  });
});
