// The host page on a real simulated InfiniBand fabric (ibsim + OpenSM, read
// by the ib source) with the daemon's default sweep, which reads switch
// ports only: a host whose link carries traffic says why its own counters
// are empty and how to fill them, and shows its link's traffic as the
// switch end measured it, labelled so; the figures are the API's, and the
// API's are what perfquery counted on that switch port.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { newPage, shot, startBrowser, startDaemon, until } from "./harness.mjs";

let daemon;
let browser;
let page;
let scratch;
const errors = [];



/** "125 GB/s" → 125e9 (the pages' powers of 1000). */
function parseRate(s) {
  const m = /([\d.]+) (B|KB|MB|GB|TB|PB)\/s/.exec(s);
  assert.ok(m, `a rate in ${JSON.stringify(s)}`);
  return Number(m[1]) * 1000 ** ["B", "KB", "MB", "GB", "TB", "PB"].indexOf(m[2]);
}

/** A 64-bit data counter of a port as perfquery -x reads it, in 4-byte words. */
function perfWords(lid, port, field) {
  const out = execFileSync("perfquery", ["-x", String(lid), String(port)], { cwd: scratch, env: { ...process.env, ...daemon.ibsim.env }, encoding: "utf8" });
  const m = new RegExp(`^${field}:\\.*(\\d+)`, "m").exec(out);
  assert.ok(m, `${field} in perfquery output:\n${out}`);
  return BigInt(m[1]);
}

before(async () => {
  scratch = mkdtempSync(join(tmpdir(), "netloom-hostpage-")); // umad2sim's ./sys-PID trees
  // 16 hosts under 8-port switches; the daemon's own defaults for what it sweeps.
  daemon = await startDaemon({ fabric: "ibsim:16,8", sweep: "400ms" });
  browser = await startBrowser();
  page = await newPage(browser, errors);
});

after(async () => {
  await browser?.close();
  await daemon?.stop();
  if (scratch) rmSync(scratch, { recursive: true, force: true });
});

describe("host page without adapter sweeps", () => {
  let host; // the host adapter with the highest LID (OpenSM and the tools sit at n1)
  let name;
  let leaf; // { guid, port } of the switch port its link ends on
  let sw;

  before(async () => {
    const nodes = (await daemon.api("/fabric/nodes")).nodes;
    host = nodes.filter((n) => n.type === "ca").sort((a, b) => b.lid - a.lid)[0];
    name = host.description.split(" ")[0];
    const n = await daemon.api(`/nodes/${name}`);
    leaf = n.ports[0].peer;
    sw = nodes.find((x) => x.guid === leaf.guid);
    assert.ok(leaf && sw, `${name}'s link ends on a switch`);
  });

  it("says live why the host's counters are empty and how to fill them", async () => {
    const n = await daemon.api(`/nodes/${name}`);
    assert.equal(n.ports[0].rates, undefined, "the daemon does not sweep adapter ports by default");
    assert.equal(n.ports[0].no_rates, "not_swept");
    await page.goto(`${daemon.base}/nodes/${name}`);
    const note = page.locator('.no-rates[data-reason="not_swept"]');
    await note.waitFor();
    const text = await note.innerText();
    assert.match(text, /own counters are not read/);
    assert.match(text, /--sweep-ca-ports/);
    assert.match(text, /sweep_ca_ports: true/);
    assert.ok(text.includes(`${sw.description} port ${leaf.port}`), `the note names the switch end: ${text}`);
    // No "Transmit 0 B/s" that reads as an idle host.
    const label = await page.locator(".card .metric-label").nth(1).innerText();
    assert.match(label, /^Transmit \(at the switch end\)$/);
  });

  it("shows the host's transmit as the switch end counted it, as the API and perfquery have it", async () => {
    // The host sends 1 GB: the leaf switch port receives it.
    const words = 250_000_000n;
    const beforeWords = perfWords(sw.lid, leaf.port, "PortRcvData");
    await daemon.ibsim.console(`PerformanceSet "${daemon.ibsim.id(sw.guid)}"[${leaf.port}] PortCountersExtended.PortRcvData=${beforeWords + words}`);
    const counted = 4n * (perfWords(sw.lid, leaf.port, "PortRcvData") - beforeWords);
    // The sweep that saw the jump, in the switch port's stored series.
    const { s, i } = await until(async () => {
      const s = (await daemon.api(`/ports/${leaf.guid}:${leaf.port}/counters?from=-2m&counters=rcv_data_bytes,xmit_data_bytes`)).series;
      const i = s.delta.rcv_data_bytes.findIndex((d) => BigInt(d) >= 4n * words);
      return i >= 0 ? { s, i } : false;
    }, "the jump in the switch port's stored series");
    const delta = BigInt(s.delta.rcv_data_bytes[i]);
    assert.ok(delta >= counted && delta <= counted + 100_000n, `stored ${delta} bytes, perfquery counted ${counted} (+ management traffic)`);
    const at = (s.time[i] + 0.05).toFixed(3);

    // The API's host page at that sweep: no rates of its own, why, and the
    // switch end's receive rate, the host's transmit.
    const n = await daemon.api(`/nodes/${name}?at=${at}`);
    const p = n.ports[0];
    assert.equal(p.rates, undefined);
    assert.equal(p.no_rates, "not_swept");
    const out = p.peer_rates.rcv_data_bytes;
    const inn = p.peer_rates.xmit_data_bytes;
    assert.equal(out, s.rate.rcv_data_bytes[i]);
    assert.ok(Math.abs(out * s.span_seconds[i] - Number(delta)) <= 1, "rate x span = the stored delta");
    assert.ok(out > 1e8, `a host transmitting: ${out} B/s`);

    // The page at that sweep shows the same figures, labelled as the switch end's.
    await page.goto(`${daemon.base}/nodes/${name}?at=${at}`);
    await page.locator('.no-rates[data-reason="not_swept"]').waitFor();
    const metrics = page.locator(".card .metric");
    const card = async (k) => ({ label: await metrics.nth(k).locator(".metric-label").innerText(), value: await metrics.nth(k).locator(".metric-value").innerText() });
    const tx = await card(1);
    const rx = await card(2);
    assert.equal(tx.label, "Transmit (at the switch end)");
    assert.equal(rx.label, "Receive (at the switch end)");
    const close = (shown, want) => Math.abs(parseRate(shown) - want) <= 0.01 * want + 1;
    assert.ok(close(tx.value, out), `page Transmit ${tx.value}, API ${out}`);
    assert.ok(close(rx.value, inn), `page Receive ${rx.value}, API ${inn}`);
    assert.equal((await card(3)).value, "–", "the adapter's own errors are not known");
    // The ports table: the same figure, marked as the switch end's.
    const row = page.locator('table[aria-label="Ports"] tbody tr').first();
    const cells = row.locator("td");
    const outCell = await cells.nth(3).innerText();
    assert.match(outCell, /switch end/);
    assert.ok(close(outCell, out), `table Out ${outCell}, API ${out}`);
    // The transmit chart draws the switch end's series for the port, labelled so.
    await page.waitForFunction(() => document.querySelectorAll("figure.chart")[0]?.dataset.points !== undefined, null, { timeout: 10_000 });
    const points = Number(await page.locator("figure.chart").first().getAttribute("data-points"));
    assert.ok(points >= 1, `transmit chart has ${points} points`);
    assert.match(await page.locator("figure.chart").first().innerText(), /port 1 \(switch end\)/);
    await shot(page, "host-not-swept");
    assert.deepEqual(errors, []);
  });
});
