// Every page of the UI with something on it, for the layout and
// accessibility tests: a real daemon on the simulated fat tree with an
// account (so the header shows the user and "Sign out"), one finished MPI
// job (a real Open MPI run of test/mpi/traffic.c under the agent where Open
// MPI is installed, else the agent's datagrams of a two-rank job), and the
// addresses of the jobs, job, network, link, node, health, events, alerts,
// errors and login pages.
import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { sendDatagrams } from "./agentwire.mjs";
import { freeUdpPort, jobFinished, mpiSkip, netloomBin, startDaemon, startJob, webDir } from "./harness.mjs";

export const ADMIN = { name: "ada", password: "layout-and-a11y-pw", admin: true };

/** The datagrams of a finished two-rank job on hosts n1 and n2. */
function datagramJob(id) {
  const now = BigInt(Date.now()) * 1_000_000n;
  return [0, 1].map((rank) => ({
    version: 1, job_id: id, rank, world_size: 2, seq: 0, chunk: 0, chunks: 1, final: true,
    start_unix_ns: now - 10_000_000_000n, time_unix_ns: now, interval_ns: 1_000_000_000,
    process: { node: `n${rank + 1}`, host: `n${rank + 1}`, pid: 4000 + rank, mpi_library: "Open MPI 4.1.6", program: "layout-check", user: "root", wall_seconds: 10, mpi_seconds: 1 },
    functions: [{ name: "MPI_Send", calls: 5, time_ns: 1e6, bytes_sent: 5000 }, { name: "MPI_Recv", calls: 5, time_ns: 2e6, bytes_received: 5000 }],
  }));
}

/** Starts the daemon and the job; resolves with { daemon, job, pages, stop }.
 * pages: [name, path] of every page, "login" last (shown signed out). */
export async function startAllPages() {
  const agentPort = await freeUdpPort();
  const daemon = await startDaemon({ sweeps: 2, accounts: [ADMIN], args: ["--agent-listen", `127.0.0.1:${agentPort}`, "--agent-address-file", "-", "--job-timeout", "10s"] });
  // A job id as a batch system names a job step.
  const job = `slurm-${process.pid}.0`;
  let dir = null;
  try {
    if (mpiSkip()) await sendDatagrams(agentPort, datagramJob(job));
    else {
      dir = mkdtempSync(join(tmpdir(), "netloom-web-layout-"));
      execFileSync("mpicc", ["-O1", "-o", join(dir, "traffic"), join(webDir, "test", "mpi", "traffic.c")]);
      const argv = [netloomBin, "run", "--daemon", `127.0.0.1:${agentPort}`, "--interval", "1s", "--job-id", job, "--", "mpirun", "--oversubscribe", "-np", "4", join(webDir, "test", "mpi", "nodewrap.sh"), join(dir, "traffic"), "10"];
      await startJob(job, argv, { NL_NODE_BASE: "1", NL_PPN: "2" }).done;
    }
    await jobFinished(daemon, job);
    const links = (await daemon.api("/fabric/links")).links;
    const nodes = (await daemon.api("/fabric/nodes")).nodes;
    const sw = nodes.find((n) => n.type === "switch");
    const pages = [
      ["jobs", "/jobs?state=all"],
      ["job", `/jobs/${job}`],
      ["network", "/network"],
      ["link", `/links/${links[0].id}`],
      ["node", `/nodes/${sw.guid}`],
      ["health", "/health"],
      ["events", "/events"],
      ["alerts", "/alerts"],
      ["errors", "/errors"],
      ["hotspots", "/hotspots?min=0"],
      ["login", "/login"],
    ];
    return {
      daemon,
      job,
      pages,
      async stop() {
        await daemon.stop();
        if (dir) rmSync(dir, { recursive: true, force: true });
      },
    };
  } catch (err) {
    await daemon.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
    throw err;
  }
}

/** A browser context of this size and colour scheme, signed in as ADMIN
 * (signedOut: not). */
export async function context(browser, daemon, { width, height = 900, colorScheme = "light", signedOut = false }) {
  const ctx = await browser.newContext({ viewport: { width, height }, colorScheme });
  if (!signedOut) {
    const { cookie } = await daemon.login(ADMIN.name, ADMIN.password);
    const [name, value] = [cookie.slice(0, cookie.indexOf("=")), cookie.slice(cookie.indexOf("=") + 1)];
    await ctx.addCookies([{ name, value, url: daemon.base }]);
  }
  return ctx;
}

/** Opens path and waits until the page has drawn what it loads: no
 * "Loading…" shown, no table waiting for its rows, the map's first frame. */
export async function openPage(page, base, path) {
  await page.goto(base + path);
  await page.waitForFunction(
    (p) => {
      const root = document.querySelector("main .page");
      if (!root || root.childElementCount === 0) return false;
      // Shown ones only: a hidden panel (a chart without data) keeps its own.
      const busy = [...document.querySelectorAll("main .state.loading, main [aria-busy='true'], main tr.placeholder")];
      if (busy.some((el) => el.getClientRects().length > 0)) return false;
      if (p === "/network" && !document.querySelector("#map[data-ready]")) return false;
      if (p === "/login" && !document.querySelector("form")) return false;
      return true;
    },
    path,
    { timeout: 30_000 },
  );
}
