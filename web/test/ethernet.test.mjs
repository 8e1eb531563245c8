// The UI's pages on an Ethernet fabric (docs/ethernet.md) whose links carry
// a real job's bytes: a lab of network namespaces (docs/ethlab.md, preset
// two-leaf: spine1; leaf1 with h1, h2; leaf2 with h3, h4; lldpd and snmpd
// in every switch) read by `netloom serve --fabric eth:FILE` over SNMP and
// LLDP, and an Open MPI ring over h1..h4 under the agent, reporting over
// the lab's management network. The pages work on it unchanged, each
// checked against the API's own answer (and the lab's wiring where it
// says something):
//  - the map draws the 3 switches, 4 hosts and 6 links and finds each node
//    by name;
//  - leaf1's page lists its ports with their LLDP peers, as wired;
//  - the job page's links panel lists the job's 12 link directions with the
//    bytes of /jobs/{job}/links (the ring's payload on its routes);
//  - the leaf1—spine1 link page, opened from it, gives the link's Ethernet
//    speed (10GbE, 1.25 GB/s: a veth's ifHighSpeed) and the job among its
//    jobs with the bytes of /links/{link}/jobs; over a range that holds the
//    switches' counters of the whole job, the measured bytes it shows (the
//    API's) hold the job's.
// Every port is named as the lab's namespaces name its interface (the
// oracle: `ip -n NS -o link`, each veth paired with its peer by their
// ifindexes): the API's a_name/b_name, the node pages' ports and peers,
// the job's link directions and the link page's title ("leaf1 swp3 ↔
// spine1 swp1"), numbers only in the detail. h1's page lists the ring among
// the jobs that ran on it, with its times and a link, as /nodes/h1/jobs and
// /jobs/{job}/nodes have it.
// No page error, CSP violation or failed request. Runs as root; skipped
// otherwise or without the lab's tools or Open MPI. Screenshots go to
// test-results/.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { agentLibDir, ethLabUp, ethlabSkip, fmtBytes, jobFinished, labId, netloomBin, newPage, routeModelText, shot, startBrowser, startDaemon, until } from "./harness.mjs";

const SIZE = 1 << 20; // bytes per message
const ITERS = 50; // messages per rank
const PAYLOAD = SIZE * ITERS; // bytes each rank sends its successor

const skip = ethlabSkip(["snmpget", "snmpwalk"]);

// The pages' formats (web/src/format.ts).
const bytes = fmtBytes;
const pct = (v) => (Number.isFinite(v) ? (v >= 10 ? `${v.toFixed(0)}%` : `${v.toFixed(1)}%`) : "–");
// Explained is shown as measured, over 100% too: a short job's range can
// hold a fraction of a sweep's counts (the check says so), 1,663% once here.
const explainedPct = (v) => (v >= 1000 ? `${Math.round(v).toLocaleString("en-US")}%` : pct(v));
/** A port as the pages name it (web/src/ports.ts): "leaf1 swp1", or "leaf1:2" without a name. */
const portLabel = (node, port, name) => (name ? `${node} ${name}` : `${node}:${port}`);
/** A direction's label; names from its own fields or its link's ends. */
const endName = (l, p) => (l && l.a.guid === p.guid && l.a.port === p.port ? l.a_name : l && l.b.guid === p.guid && l.b.port === p.port ? l.b_name : undefined);
const dirKey = (x, l = x.link) => `${portLabel(x.from_description, x.from.port, x.from_name ?? endName(l, x.from))} → ${portLabel(x.to_description, x.to.port, x.to_name ?? endName(l, x.to))}`;

/** The lab's cables as its namespaces have them: each node's veths from
 * `ip -n NS -o link`, paired with their peers by namespace, ifindex and
 * peer ifindex ("swp1@if7: … link-netns NS2"). Nodes and namespaces from
 * ethlab up's node lines. */
function ipWiring(out) {
  const nodes = [...out.matchAll(/^\s+\S+\s+(\S+)\s+ns (\S+)\s+mgmt/gm)].map((m) => ({ name: m[1], ns: m[2] }));
  const ifs = [];
  for (const n of nodes) {
    const links = execFileSync("ip", ["-n", n.ns, "-o", "link", "show"], { encoding: "utf8" });
    for (const m of links.matchAll(/^(\d+): ([^@:\s]+)@if(\d+):.* link-netns (\S+)/gm)) ifs.push({ node: n.name, ns: n.ns, idx: Number(m[1]), name: m[2], peer: Number(m[3]), peerNs: m[4] });
  }
  const out2 = [];
  for (const x of ifs) {
    for (const y of ifs) {
      if (x.node < y.node && x.peer === y.idx && y.peer === x.idx && x.peerNs === y.ns && y.peerNs === x.ns) out2.push({ a: x.node, aif: x.name, b: y.node, bif: y.name });
    }
  }
  return { nodes, wires: out2 };
}

/** The lab's wiring as `up` printed it: "link h1 eth0 <-> leaf1 swp1". */
function parseWiring(out) {
  return [...out.matchAll(/^\s*link (\S+) (\S+) <-> (\S+) (\S+)$/gm)].map((m) => ({ a: m[1], aif: m[2], b: m[3], bif: m[4] }));
}

/** The nodes a frame from src to dst crosses in the lab (its links form a
 * tree: one path). */
function path(wiring, src, dst) {
  const prev = new Map([[src, null]]);
  const queue = [src];
  while (queue.length) {
    const n = queue.shift();
    for (const w of wiring) {
      for (const [x, y] of [
        [w.a, w.b],
        [w.b, w.a],
      ]) {
        if (x === n && !prev.has(y)) {
          prev.set(y, n);
          queue.push(y);
        }
      }
    }
  }
  assert.ok(prev.has(dst), `no path from ${src} to ${dst} in the lab`);
  const out = [dst];
  while (out[0] !== src) out.unshift(prev.get(out[0]));
  return out;
}

describe("the pages on an Ethernet fabric carrying a real job", { skip }, () => {
  const id = labId("w");
  const JOB = `web-eth-${id}`;
  let lab;
  let labOut = "";
  let wiring = [];
  let dir;
  let daemon;
  let browser;
  let page;
  let jobOut = "";
  let portNames = {}; // "GUID:PORT" -> interface name, as `netloom fabric discover` reads them
  let ipw = { nodes: [], wires: [] }; // the oracle: the namespaces' own veths
  /** The interface of node's end of its cable to peer, as `ip link` names it. */
  const ipName = (node, peer) => {
    const w = ipw.wires.filter((x) => (x.a === node && x.b === peer) || (x.b === node && x.a === peer));
    assert.equal(w.length, 1, `one cable ${node}—${peer} in the namespaces: ${JSON.stringify(ipw.wires)}`);
    return w[0].a === node ? w[0].aif : w[0].bif;
  };
  const errors = [];

  /** The next answer of the page to API path (a pathname), read. */
  const capture = (p) => {
    const got = page.waitForResponse((r) => decodeURIComponent(new URL(r.url()).pathname) === p, { timeout: 20_000 }).then((r) => r.json());
    got.catch(() => {}); // reported where it is awaited
    return got;
  };

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), "netloom-web-eth-"));
    lab = ethLabUp(id, ["--preset", "two-leaf"]); // after() removes it, whatever failed
    labOut = lab.out;
    const { mgmtCidr, mgmtIp } = lab;
    wiring = parseWiring(labOut);
    assert.equal(wiring.length, 6, `the two-leaf lab's links:\n${labOut}`);
    ipw = ipWiring(labOut);
    assert.equal(ipw.nodes.length, 7, `the lab's nodes and namespaces:\n${labOut}`);
    assert.equal(ipw.wires.length, 6, `the namespaces' cables: ${JSON.stringify(ipw.wires)}`);
    const cfg = lab.config(dir);
    portNames = JSON.parse(execFileSync(netloomBin, ["fabric", "discover", "--fabric", `eth:${cfg}`, "--json"], { encoding: "utf8", timeout: 60_000 })).port_names;
    // The agents run in the hosts' namespaces and report over the
    // management network to the daemon in the root namespace, unverified
    // (no munged in the lab; the harness adds --agent-auth none), from
    // that network only. Two sweeps before the job: the counters see it all.
    const addrFile = join(dir, "agent-address");
    daemon = await startDaemon({
      fabric: `eth:${cfg}`,
      sweep: "1s",
      sweeps: 2,
      args: ["--agent-listen", `${mgmtIp}:0`, "--agent-address-file", addrFile, "--agent-networks", mgmtCidr],
    });
    const agent = readFileSync(addrFile, "utf8").trim();
    assert.match(agent, new RegExp(`^${mgmtIp.replaceAll(".", "\\.")}:\\d+$`));

    // One Open MPI ring over h1..h4 under the agent.
    const env = [`LD_PRELOAD=${join(agentLibDir, "libnetloom-ompi.so")}`, `NETLOOM_DAEMON=${agent}`, "NETLOOM_INTERVAL=1", `NETLOOM_JOB_ID=${JOB}`];
    jobOut = await lab.mpirun("h1,h2,h3,h4", env, [lab.ring(dir), String(SIZE), String(ITERS)], 120_000);
    // The daemon lists it finished, every inter-node byte attributed to links.
    await jobFinished(daemon, JOB, 300);
    await until(
      async () => {
        const j = (await daemon.api(`/jobs/${JOB}`)).job;
        const l = await daemon.api(`/jobs/${JOB}/links?limit=100`);
        return j.inter_node.bytes === 4 * PAYLOAD && l.attribution?.bytes === j.inter_node.bytes && l.links.length === 12;
      },
      `job ${JOB}'s links attributed`,
      60_000,
      daemon,
    );
    browser = await startBrowser();
    page = await newPage(browser, errors);
    page.on("requestfailed", (r) => {
      // A page's fetches are aborted when it is left: not a failure.
      if (!/ERR_ABORTED/.test(r.failure()?.errorText ?? "")) errors.push(`request failed: ${r.method()} ${r.url()}: ${r.failure()?.errorText}`);
    });
    page.on("response", (r) => {
      if (r.status() >= 400) errors.push(`${r.status()} ${r.request().method()} ${r.url()}`);
    });
  });

  after(async () => {
    await browser?.close();
    await daemon?.stop();
    lab?.down();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  /** The API's node of a name. */
  const nodeNamed = async (name) => {
    const { nodes } = await daemon.api("/fabric/nodes");
    const n = nodes.find((x) => x.description === name);
    assert.ok(n, `node ${name} in ${nodes.map((x) => x.description)}`);
    return n;
  };

  it("draws the lab's 3 switches, 4 hosts and 6 links on the map and finds each node by name", async () => {
    const { nodes } = await daemon.api("/fabric/nodes");
    const { links } = await daemon.api("/fabric/links");
    // The API's fabric is the lab's: its nodes by name and type, its links by their ends.
    const switches = ["spine1", "leaf1", "leaf2"];
    const hosts = ["h1", "h2", "h3", "h4"];
    assert.deepEqual(nodes.filter((n) => n.type === "switch").map((n) => n.description).sort(), [...switches].sort());
    assert.deepEqual(nodes.filter((n) => n.type === "ca").map((n) => n.description).sort(), hosts);
    const name = (g) => nodes.find((n) => n.guid === g).description;
    const pair = (a, b) => [a, b].sort().join("—");
    assert.deepEqual(links.map((l) => pair(name(l.a.guid), name(l.b.guid))).sort(), wiring.map((w) => pair(w.a, w.b)).sort());
    // The map's layout names each link's ends as the namespaces do (the
    // details shown when a link is hovered read them).
    const layout = await daemon.api("/fabric/layout");
    assert.equal(layout.port_names?.length, layout.edges.length);
    for (let j = 0; j < layout.edges.length / 2; j++) {
      const [a, b] = [layout.name[layout.edges[2 * j]], layout.name[layout.edges[2 * j + 1]]];
      assert.deepEqual([layout.port_names[2 * j], layout.port_names[2 * j + 1]], [ipName(a, b), ipName(b, a)], `the ends of ${a}—${b} on the map`);
    }

    await page.goto(`${daemon.base}/network`);
    await page.waitForFunction(() => performance.getEntriesByName("netloom:map:first-frame").length > 0, null, { timeout: 20_000 });
    const m = await page.evaluate(() => ({ nodes: window.__netloomMap.nodes, links: window.__netloomMap.links, ids: Array.from({ length: window.__netloomMap.links }, (_, j) => window.__netloomMap.linkId(j)) }));
    assert.equal(m.nodes, 7);
    assert.equal(m.links, 6);
    assert.deepEqual(m.ids.sort(), links.map((l) => l.id).sort());

    for (const n of [...switches, ...hosts]) {
      const want = await nodeNamed(n);
      await page.fill("input.map-search", n);
      const hit = page.locator(".search-results button").first();
      await hit.waitFor();
      assert.equal(await page.locator(".search-results button").count(), 1, `one node matches ${n}`);
      assert.equal(await hit.locator("strong").innerText(), n);
      assert.equal(await hit.innerText(), `${n} ${want.type === "switch" ? "switch" : "host"} · LID ${want.lid} · ${want.guid}`);
      await page.press("input.map-search", "Enter");
      await page.waitForFunction((g) => new URLSearchParams(location.search).get("node") === g, want.guid);
      assert.equal(await page.locator(".map-info").innerText(), `${n} · GUID ${want.guid} · LID ${want.lid} · open node page`);
    }
    // Both leaves for "leaf".
    await page.fill("input.map-search", "leaf");
    await page.locator(".search-results button").nth(1).waitFor();
    assert.deepEqual((await page.locator(".search-results button strong").allInnerTexts()).sort(), ["leaf1", "leaf2"]);
    await page.press("input.map-search", "Escape");
    await page.click('button[title="Show the whole fabric"]');
    await page.waitForTimeout(500); // the camera's animation, for the screenshot alone
    await shot(page, "ethernet-map");
    assert.deepEqual(errors, []);
  });

  it("lists leaf1's ports with their LLDP peers, as the lab wired them", async () => {
    const leaf1 = await nodeNamed("leaf1");
    const api = capture(`/api/v1/nodes/${leaf1.guid}`);
    await page.goto(`${daemon.base}/nodes/${leaf1.guid}`);
    const r = await api;
    const rows = page.locator('table[aria-label="Ports"] tbody tr');
    await rows.first().waitFor();
    assert.equal(await page.locator("h1").innerText(), "leaf1");
    assert.equal(await rows.count(), r.ports.length);
    const cells = await rows.evaluateAll((trs) => trs.map((tr) => Array.from(tr.cells, (c) => c.innerText)));
    const linked = r.ports.filter((p) => p.link);
    assert.equal(linked.length, 3, "leaf1 has three cables: h1, h2, spine1");
    const nsIfs = execFileSync("ip", ["-n", ipw.nodes.find((n) => n.name === "leaf1").ns, "-o", "link", "show"], { encoding: "utf8" });
    for (const p of r.ports) {
      // Each port by its interface's name, its number beside.
      assert.ok(p.name && new RegExp(`^\\d+: ${p.name}[@:]`, "m").test(nsIfs), `leaf1 port ${p.port} named ${p.name}, an interface of leaf1's namespace`);
      const row = cells.find((c) => c[0] === `${p.name} · ${p.port}`);
      assert.ok(row, `a row for port ${p.port} (${p.name}): ${cells.map((c) => c[0])}`);
      if (!p.link) {
        assert.deepEqual(row.slice(1, 3), ["—", "not connected"]);
        continue;
      }
      // The oracle: the namespaces' veth pair of this cable.
      assert.equal(p.name, ipName("leaf1", p.peer_description), `leaf1's end of its cable to ${p.peer_description}`);
      assert.equal(p.peer_name, ipName(p.peer_description, "leaf1"), `${p.peer_description}'s end of its cable to leaf1`);
      assert.equal(row[1], `${p.peer_description} ${p.peer_name}`);
      assert.equal(row[2], p.link.speed);
      assert.equal(row[8], p.link.state);
      // The lab's wiring: the interface this port is (as the switch names
      // it) leads to the node LLDP names here.
      const ifname = portNames[`${leaf1.guid}:${p.port}`];
      const w = wiring.find((x) => (x.a === "leaf1" && x.aif === ifname) || (x.b === "leaf1" && x.bif === ifname));
      assert.ok(w, `leaf1 port ${p.port} (${ifname}) is wired`);
      assert.equal(p.peer_description, w.a === "leaf1" ? w.b : w.a, `leaf1 ${ifname}'s peer`);
    }
    assert.deepEqual(linked.map((p) => p.peer_description).sort(), ["h1", "h2", "spine1"]);
    await shot(page, "ethernet-node");
    assert.deepEqual(errors, []);
  });

  it("shows h1's page: its one port to leaf1, measured at the switch end", async () => {
    const h1 = await nodeNamed("h1");
    const api = capture(`/api/v1/nodes/${h1.guid}`);
    await page.goto(`${daemon.base}/nodes/${h1.guid}`);
    const r = await api;
    const rows = page.locator('table[aria-label="Ports"] tbody tr');
    await rows.first().waitFor();
    assert.equal(await page.locator("h1").innerText(), "h1");
    assert.equal(r.ports.length, 1);
    const [p] = r.ports;
    const w = wiring.find((x) => x.a === "h1" || x.b === "h1");
    assert.equal(p.peer_description, w.a === "h1" ? w.b : w.a, "h1's LLDP peer is the switch it is wired to");
    const cells = await rows.first().evaluate((tr) => Array.from(tr.cells, (c) => c.innerText));
    assert.equal(p.name, ipName("h1", p.peer_description), "h1's interface, as its namespace names it");
    assert.equal(p.peer_name, ipName(p.peer_description, "h1"));
    assert.equal(cells[0], `${p.name} · ${p.port}`);
    assert.equal(cells[1], `${p.peer_description} ${p.peer_name}`);
    assert.equal(cells[2], p.link.speed);
    assert.equal(cells[8], p.link.state);
    assert.equal(await page.locator(".page-head .sub").innerText(), `Host · GUID ${h1.guid} · LID ${r.node.lid} · 1 port`);
    // A host's own counters cannot be read on Ethernet (an LLDP neighbour,
    // no SNMP agent): the page says so and gives no InfiniBand advice.
    assert.equal(p.no_rates, "not_swept");
    const note = page.locator('.no-rates[data-reason="not_swept"]');
    assert.match(await note.innerText(), new RegExp(`measured at the switch end \\(${p.peer_description} ${p.peer_name}\\)`));
    assert.doesNotMatch(await note.innerText(), /sweep-ca-ports|sweep_ca_ports|adapter/);
    // The jobs that ran on h1: the ring, with its times and a link to its
    // page, as /nodes/h1/jobs and the jobs API's record of its nodes say.
    const nodes = await daemon.api(`/jobs/${JOB}/nodes`);
    const onH1 = nodes.nodes.find((n) => n.node === "h1");
    assert.ok(onH1, `the ring had ranks on h1: ${JSON.stringify(nodes.nodes)}`);
    const nj = await daemon.api("/nodes/h1/jobs");
    const mine = nj.jobs.find((j) => j.id === JOB);
    assert.ok(mine, `/nodes/h1/jobs lists ${JOB}: ${nj.jobs.map((j) => j.id)}`);
    assert.equal(mine.ranks_on_node, onH1.ranks.length);
    const job = (await daemon.api(`/jobs/${JOB}`)).job;
    assert.equal(mine.start, job.start);
    assert.equal(mine.end, job.end);
    const jobRows = page.locator('table[aria-label="Jobs on this node"] tbody tr');
    await jobRows.first().waitFor();
    const jcells = await jobRows.evaluateAll((trs) => trs.map((tr) => Array.from(tr.cells, (c) => c.innerText)));
    assert.equal(jcells.length, nj.jobs.length, "one row per job the API lists");
    const row = jcells.find((c) => c[0] === JOB);
    assert.ok(row, `a row for ${JOB}: ${jcells.map((c) => c[0])}`);
    const shownTime = (iso) => page.evaluate((t) => document.querySelector(`table[aria-label="Jobs on this node"] time[datetime="${t}"]`)?.textContent, iso);
    assert.equal(row[3], `${mine.ranks_on_node} of ${job.ranks}`);
    assert.equal(row[4], await shownTime(job.start));
    assert.equal(row[5], await shownTime(job.end));
    assert.match(await page.locator(".node-jobs-summary").innerText(), new RegExp(`^${nj.total} jobs? ran on h1 in the last 24 hours\\.$`));
    assert.equal(await jobRows.locator(`a[href^="/jobs/${JOB}"]`).count(), 1, "the job links to its page");
    await shot(page, "ethernet-host");
    assert.deepEqual(errors, []);
  });

  it("shows the job's links on its page with the figures of /jobs/{job}/links", async () => {
    const links = await daemon.api(`/jobs/${JOB}/links?limit=100`);
    // The lab's truth: each rank sent its successor PAYLOAD bytes, along
    // the one path the tree has.
    const ranks = [...jobOut.matchAll(/^rank (\d+) of (\d+) on (\S+) sent (\d+)/gm)].map((x) => ({ rank: Number(x[1]), n: Number(x[2]), host: x[3], sent: Number(x[4]) }));
    assert.equal(ranks.length, 4, jobOut);
    const host = (r) => ranks.find((x) => x.rank === r).host;
    const want = new Map();
    for (const r of ranks) {
      assert.equal(r.sent, PAYLOAD);
      const hops = path(wiring, r.host, host((r.rank + 1) % r.n));
      for (let i = 1; i < hops.length; i++) want.set(`${hops[i - 1]}→${hops[i]}`, (want.get(`${hops[i - 1]}→${hops[i]}`) ?? 0) + r.sent);
    }
    assert.deepEqual(
      new Map(links.links.map((l) => [`${l.from_description}→${l.to_description}`, l.bytes])),
      want,
      "the API's link directions of the job and their bytes are the ring's payload on the lab's routes",
    );

    // The links table's /why (the collisions panel asks /why?limit=1 too).
    const whyP = page
      .waitForResponse((r) => {
        const u = new URL(r.url());
        return decodeURIComponent(u.pathname) === `/api/v1/jobs/${JOB}/why` && u.searchParams.get("limit") !== "1";
      }, { timeout: 20_000 })
      .then((r) => r.json());
    await page.goto(`${daemon.base}/jobs/${JOB}`);
    await page.waitForSelector(".page[data-ready]", { timeout: 20_000 });
    const why = await whyP;
    const rows = page.locator('table[aria-label="Links crossed by the job"] tbody tr');
    await rows.first().waitFor();
    // The table may first show a row that says it is loading; wait for
    // the job's directions (or fail on the count below).
    await page
      .waitForFunction((n) => document.querySelectorAll('table[aria-label="Links crossed by the job"] tbody tr').length >= n, links.links.length, { timeout: 10_000 })
      .catch(() => {});
    const cells = await rows.evaluateAll((trs) => trs.map((tr) => Array.from(tr.cells, (c) => c.innerText)));
    assert.equal(cells.length, links.links.length, JSON.stringify(cells));
    assert.equal(why.links.length, links.links.length);
    for (const l of links.links) {
      // Both ends named as the namespaces name them.
      assert.equal(endName(l.link, l.from), ipName(l.from_description, l.to_description), `the sending end of ${dirKey(l)}`);
      assert.equal(endName(l.link, l.to), ipName(l.to_description, l.from_description), `the receiving end of ${dirKey(l)}`);
      const row = cells.find((c) => c[0] === dirKey(l));
      assert.ok(row, `no row for ${dirKey(l)}: ${cells.map((c) => c[0]).join("; ")}`);
      assert.equal(row[1], bytes(l.bytes), `job bytes of ${dirKey(l)}`);
      // The page read the why answer: the same direction, the same bytes,
      // and its other figures.
      const x = why.links.find((w) => w.link.id === l.link.id && w.from.guid === l.from.guid);
      assert.equal(x.job_bytes, l.bytes);
      assert.equal(row[2], pct(x.job_share_pct));
      assert.equal(row[3], x.measured.measured ? pct(x.measured_utilization_pct) : "–");
      assert.equal(row[4], pct(x.monitored_utilization_pct));
      const bad = x.check?.status === "inconsistent" || x.check?.status === "not_measured";
      assert.equal(row[5], (x.explained_pct == null ? "–" : explainedPct(x.explained_pct)) + (bad ? " ⚠" : ""));
      assert.equal(row[6], "none");
      // How its bytes were split: the lab's tree has one path per pair.
      assert.equal(row[8], routeModelText(x, why.route_model), `route model of ${dirKey(l)}`);
    }
    assert.equal(why.route_model, "lldp-shortest-path");
    assert.match(await page.locator(".links-note").innerText(), new RegExp(`^${bytes(4 * PAYLOAD).replace(".", "\\.")} of inter-node traffic routed over links in \\d+ intervals?`));
    await shot(page, "ethernet-job");
    assert.deepEqual(errors, []);
  });

  it("shows the leaf1—spine1 link's Ethernet speed and the job among its jobs with the API's bytes", async () => {
    const [leaf1, spine1] = [await nodeNamed("leaf1"), await nodeNamed("spine1")];
    const { links } = await daemon.api("/fabric/links");
    const l = links.find((x) => [x.a.guid, x.b.guid].sort().join() === [leaf1.guid, spine1.guid].sort().join());
    assert.ok(l, "a leaf1—spine1 link");
    // A veth says 10000 Mb/s (ifHighSpeed): 10GbE, 1.25 GB/s each way.
    assert.equal(l.speed, "10GbE");
    assert.equal(l.capacity_bytes_per_second, 1.25e9);
    const why = await daemon.api(`/jobs/${JOB}/why`);
    const jl = await daemon.api(`/jobs/${JOB}/links?limit=100`);

    // Opened from the job page's row leaf1 → spine1: over the job's range.
    await page.goto(`${daemon.base}/jobs/${JOB}`);
    await page.waitForSelector(".page[data-ready]", { timeout: 20_000 });
    const up = jl.links.find((x) => x.link.id === l.id && x.from.guid === leaf1.guid);
    assert.ok(up, "the job crossed leaf1 → spine1");
    const linkP = capture(`/api/v1/links/${l.id}`);
    const jobsP = capture(`/api/v1/links/${l.id}/jobs`);
    await page.locator('table[aria-label="Links crossed by the job"] tbody tr a', { hasText: dirKey(up) }).click();
    await page.waitForFunction(() => location.pathname.startsWith("/links/"));
    const q = new URL(page.url()).searchParams;
    assert.equal(q.get("job"), JOB);
    assert.equal(Number(q.get("from")) * 1000, Date.parse(why.from));
    assert.equal(Number(q.get("to")) * 1000, Date.parse(why.to));
    const [lr, onLink] = [await linkP, await jobsP];
    assert.equal(lr.link.id, l.id);
    assert.equal(lr.link.speed, "10GbE");
    await page.waitForFunction(() => document.querySelector(".page-head .sub code"));
    // The title by the interfaces' names (the oracle's), the numbers in the id below it.
    const [an, bn] = [lr.directions[0].from_description, lr.directions[0].to_description];
    assert.equal(lr.link.a_name, ipName(an, bn));
    assert.equal(lr.link.b_name, ipName(bn, an));
    assert.equal(await page.locator("h1").innerText(), `${an} ${ipName(an, bn)} ↔ ${bn} ${ipName(bn, an)}`);
    assert.equal(await page.locator(".page-head .sub").innerText(), `${lr.link.speed} · ${lr.link.state} · capacity 1.25 GB/s each way · ${l.id}`);
    assert.doesNotMatch(await page.locator(".page-head").innerText(), /\b\dX\b|EDR|HDR|FDR/, "no InfiniBand width or rate on an Ethernet link");

    // Traffic by job: each direction's figures and the jobs table are the API's,
    // the job's bytes those of /jobs/{job}/links.
    const table = page.locator('table[aria-label="Jobs on this link"] tbody tr');
    await table.first().waitFor();
    assert.deepEqual(
      await table.evaluateAll((trs) => trs.map((tr) => Array.from(tr.cells, (c) => c.innerText)).map((c) => [...c.slice(0, 5), c[6]])),
      [...onLink.jobs]
        .sort((a, b) => b.bytes - a.bytes)
        .map((x) => [x.job, x.user ?? "", `${x.from_description} → ${x.to_description}`, bytes(x.bytes), pct(x.utilization_pct), routeModelText(x, onLink.route_model)]),
    );
    assert.equal(onLink.route_model, "lldp-shortest-path");
    for (const d of onLink.directions) {
      const mine = d.jobs.find((x) => x.job === JOB);
      const theirs = jl.links.find((x) => x.link.id === l.id && x.from.guid === d.from.guid);
      assert.ok(mine && theirs, `${JOB} on ${d.from_description} → ${d.to_description}`);
      assert.equal(mine.bytes, theirs.bytes, `the job's bytes on ${d.from_description} → ${d.to_description}: /links/{link}/jobs and /jobs/{job}/links`);
      assert.equal(mine.bytes, PAYLOAD, "one ring pair crosses each direction of the uplink");
      const card = page.locator(`.link-jobs .card[data-from="${d.from.guid}:${d.from.port}"]`);
      const metric = (label) => card.locator(`[data-metric="${label}"] .metric-value`).innerText();
      assert.equal(await card.locator(".card-title").innerText(), dirKey(d, onLink.link));
      assert.match(dirKey(d, onLink.link), new RegExp(`^${d.from_description} ${ipName(d.from_description, d.to_description)} → ${d.to_description} ${ipName(d.to_description, d.from_description)}$`));
      assert.equal(await metric("Measured"), d.measured.measured ? bytes(d.measured.bytes) : "not swept");
      assert.equal(await metric("By monitored jobs"), bytes(d.monitored_bytes));
      assert.equal(await metric("Other traffic"), bytes(d.unmonitored_bytes));
    }
    // The counters' charts over the job's few seconds (a sample or two: the
    // switches' agents refresh seconds apart) span those seconds, or a
    // minute around a single sample, never years.
    const span = (Date.parse(why.to) - Date.parse(why.from)) / 1000;
    const charts = page.locator("figure.chart[data-x-max]");
    await charts.first().waitFor();
    for (const x of await charts.evaluateAll((fs) => fs.map((f) => f.dataset.xMax - f.dataset.xMin))) {
      assert.ok(x > 0 && x <= Math.max(60, span), `a chart's time axis spans ${x} s over a ${span} s range`);
    }
    // The job chosen (?job=): its row pressed, its pairs listed.
    assert.equal(await page.locator(`button[data-job="${JOB}"][aria-pressed="true"]`).count(), 2);
    await page.locator(".link-pairs .sub-head").waitFor();
    await shot(page, "ethernet-link");
    assert.deepEqual(errors, []);
  });

  it("the switches' counters on the uplink hold the job's bytes, on the link page as in the API", async () => {
    const [leaf1, spine1] = [await nodeNamed("leaf1"), await nodeNamed("spine1")];
    const { links } = await daemon.api("/fabric/links");
    const l = links.find((x) => [x.a.guid, x.b.guid].sort().join() === [leaf1.guid, spine1.guid].sort().join());
    const job = (await daemon.api(`/jobs/${JOB}`)).job;
    // net-snmp serves IF-MIB from a cache a few seconds old: over a range
    // from before the job to a sweep some seconds after it, both
    // directions' counters measured at least the job's payload.
    const from = Math.floor(Date.parse(job.start) / 1000) - 2;
    let to;
    const r = await until(
      async () => {
        to = Math.floor(Date.now() / 1000);
        const x = await daemon.api(`/links/${l.id}/jobs?from=${from}&to=${to}`);
        return x.directions.every((d) => d.measured.measured && d.measured.bytes >= d.monitored_bytes && d.monitored_bytes === PAYLOAD) ? x : false;
      },
      "the uplink's counters to hold the job's bytes",
      40_000,
      daemon,
    );
    const jobsP = capture(`/api/v1/links/${l.id}/jobs`);
    await page.goto(`${daemon.base}/links/${l.id}?from=${from}&to=${to}`);
    const seen = await jobsP;
    assert.deepEqual(seen.directions.map((d) => [d.measured.bytes, d.monitored_bytes]), r.directions.map((d) => [d.measured.bytes, d.monitored_bytes]), "the page read what the API answered");
    for (const d of r.directions) {
      const card = page.locator(`.link-jobs .card[data-from="${d.from.guid}:${d.from.port}"]`);
      await card.waitFor();
      const metric = (label) => card.locator(`[data-metric="${label}"] .metric-value`).innerText();
      assert.equal(await metric("Measured"), bytes(d.measured.bytes));
      assert.equal(await metric("By monitored jobs"), bytes(PAYLOAD));
      assert.equal(await metric("Explained"), explainedPct(d.explained_pct) + (d.check?.status === "inconsistent" || d.check?.status === "not_measured" ? " ⚠" : ""));
    }
    await shot(page, "ethernet-link-counters");
    assert.deepEqual(errors, []);
  });
});
