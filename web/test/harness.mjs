// Starts a real `netloom serve` on a simulated fabric (synthetic, or ibsim
// + OpenSM) and a headless
// Debian Chromium driven by playwright-core, for the end-to-end tests.
import { execFile, execFileSync, spawn } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, existsSync, writeFileSync } from "node:fs";
import { createSocket } from "node:dgram";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { chromium } from "playwright-core";

const here = dirname(fileURLToPath(import.meta.url));
export const webDir = resolve(here, "..");
export const resultsDir = join(webDir, "test-results");
/** The netloom binary and the agent libraries the tests run. */
export const netloomBin = process.env.NETLOOM_BIN ?? resolve(webDir, "../bin/netloom");
export const agentLibDir = process.env.NETLOOM_LIB_DIR ?? resolve(webDir, "../bin/lib");

/** Whether a command is on the PATH. */
/** until polls fn every 200 ms until it returns a truthy value, which it
 * returns; after timeoutMs it throws, saying what it waited for, the last
 * value or error, and the daemon's log's end when given one. */
export async function until(fn, what, timeoutMs = 30_000, daemon = null) {
  const deadline = Date.now() + timeoutMs;
  let last;
  for (;;) {
    try {
      const v = await fn();
      if (v) return v;
      last = v;
    } catch (err) {
      last = err;
    }
    if (Date.now() > deadline) {
      const tail = daemon ? `\n${daemon.log().slice(-3000)}` : "";
      throw new Error(`timed out after ${timeoutMs / 1000}s waiting for ${what} (last: ${last instanceof Error ? last.message : JSON.stringify(last)})${tail}`);
    }
    await new Promise((r) => setTimeout(r, 200));
  }
}

export function have(cmd) {
  try {
    execFileSync("sh", ["-c", `command -v ${cmd}`], { stdio: "ignore" });
    return true;
  } catch {
    return false;
  }
}

/** Starts an MPI job's launcher command line (`netloom run ... mpirun ...`,
 * or what wraps it) with the agent libraries and Open MPI's root and
 * oversubscription settings; env adds to that. Returns the process and a
 * promise of its output, rejected when it exits non-zero. */
export function startJob(id, argv, env = {}, opts = {}) {
  const p = spawn(argv[0], argv.slice(1), {
    ...opts,
    env: { ...process.env, NETLOOM_LIB_DIR: agentLibDir, OMPI_ALLOW_RUN_AS_ROOT: "1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM: "1", OMPI_MCA_rmaps_base_oversubscribe: "1", ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let out = "";
  p.stdout.on("data", (d) => (out += d));
  p.stderr.on("data", (d) => (out += d));
  const done = new Promise((ok, fail) => p.once("exit", (code) => (code === 0 ? ok(out) : fail(new Error(`netloom run ${id} exited ${code}:\n${out}`)))));
  return { p, done };
}

/** Waits (tries x 200 ms) until the daemon lists job id as finished, and
 * resolves with its answer; rejects with the end of the daemon's log. */
export async function jobFinished(daemon, id, tries = 150) {
  for (let i = 0; i < tries; i++) {
    const j = await daemon.api(`/jobs/${id}`).catch(() => null);
    if (j?.job.state === "finished") return j;
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error(`job ${id} did not finish:\n${daemon.log().slice(-3000)}`);
}

/** Why tests of real Open MPI jobs under the agent cannot run here, or false. */
export function mpiSkip() {
  if (!have("mpicc") || !have("mpirun")) return "Open MPI (mpicc, mpirun) not installed";
  if (!existsSync(join(agentLibDir, "libnetloom-ompi.so"))) return `no agent library in ${agentLibDir}: run make build`;
  return false;
}

export const CHROMIUM_ARGS = [
  "--no-sandbox",
  "--headless",
  "--disable-gpu",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
  "--no-first-run",
];

export function freePort() {
  return new Promise((ok, fail) => {
    const s = createServer();
    s.once("error", fail);
    s.listen(0, "127.0.0.1", () => {
      const { port } = s.address();
      s.close(() => ok(port));
    });
  });
}

/** A UDP port free right now on host (127.0.0.1 for the agent socket;
 * 0.0.0.0 for a collector on another address of this machine). */
export function freeUdpPort(host = "127.0.0.1") {
  return new Promise((ok, fail) => {
    const s = createSocket("udp4");
    s.once("error", fail);
    s.bind(0, host, () => {
      const { port } = s.address();
      s.close(() => ok(port));
    });
  });
}

/** The Ethernet lab's driver (docs/ethlab.md). */
const repoDir = resolve(webDir, "..");
const ethlabBin = join(repoDir, "scripts", "ethlab");

/** Why the Ethernet lab cannot run here (null when it can): root for its
 * network namespaces, the lab's tools (test/ethlab's Missing()), Go to
 * build it, the extra tools a test names, and Open MPI. */
export function ethlabSkip(extra = []) {
  if (process.getuid?.() !== 0) return "needs root: the Ethernet lab is made of network namespaces (docs/ethlab.md)";
  const missing = ["ip", "tc", "unshare", "lldpd", "lldpcli", "snmpd", "go", ...extra].filter((t) => !have(t));
  if (missing.length) return `missing ${missing.join(", ")} (scripts/install-deps.sh)`;
  return mpiSkip();
}

/** A lab id of prefix and four random characters. */
export function labId(prefix) {
  return prefix + Array.from({ length: 4 }, () => "abcdefghijklmnopqrstuvwxyz0123456789"[Math.floor(Math.random() * 36)]).join("");
}

/** Brings the Ethernet lab id up (`scripts/ethlab up --id ID ...args`) and
 * returns what a test drives it by: up's output, the management network
 * (cidr, and the root namespace's ip on it, where the daemon listens),
 * config(dir) writing the daemon's fabric file there, ring(dir) compiling
 * test/ethlab/testdata/ring.c, mpirun(hosts, env, argv, timeoutMs) running a
 * job over the lab's hosts, and down(), which also runs at the process's
 * exit should the test's after hook not. */
export function ethLabUp(id, args) {
  let up = true;
  const down = () => {
    if (!up) return;
    up = false;
    try {
      execFileSync(ethlabBin, ["down", id], { cwd: repoDir, stdio: "ignore", timeout: 60_000 });
    } catch (err) {
      console.error(`ethlab down ${id}: ${err.message}`);
    }
  };
  process.once("exit", down);
  let out;
  try {
    out = execFileSync(ethlabBin, ["up", "--id", id, ...args], { cwd: repoDir, encoding: "utf8", timeout: 180_000, stdio: ["ignore", "pipe", "pipe"] });
  } catch (err) {
    down();
    throw err;
  }
  const m = /^management (\S+) \(root namespace (\S+) on \S+\)/m.exec(out);
  if (!m) {
    down();
    throw new Error(`no management network in ethlab up's output:\n${out}`);
  }
  const run = (argv, timeout = 60_000) => execFileSync(ethlabBin, argv, { cwd: repoDir, encoding: "utf8", timeout });
  return {
    id,
    out,
    mgmtCidr: m[1],
    mgmtIp: m[2],
    down,
    run,
    config(dir) {
      const cfg = join(dir, "eth.yaml");
      writeFileSync(cfg, run(["config", id]));
      return cfg;
    },
    ring(dir) {
      const bin = join(dir, "ring");
      execFileSync("mpicc", ["-O2", "-o", bin, join(repoDir, "test", "ethlab", "testdata", "ring.c")]);
      return bin;
    },
    mpirun(hosts, env, argv, timeout) {
      return new Promise((ok, fail) =>
        execFile(ethlabBin, ["mpirun", id, "--hosts", hosts, ...env.flatMap((e) => ["--env", e]), ...argv], { cwd: repoDir, encoding: "utf8", timeout }, (err, stdout, stderr) =>
          err ? fail(new Error(`ethlab mpirun over ${hosts}: ${err.message}\n${stdout}${stderr}`)) : ok(stdout),
        ),
      );
    },
  };
}

/** Starts a real simulated InfiniBand fabric (ibsim + OpenSM, through the
 * Go harness test/ibsim) of a generated fat tree with hosts n1..nHOSTS;
 * resolves with the environment a client of the fabric needs, `console`,
 * `id` and a stop function. */
async function startIbsim(bin, dir, hosts, radix) {
  const net = join(dir, "fabric.net");
  execFileSync(bin, ["topo", "gen", "fat-tree", "--hosts", String(hosts), "--radix", String(radix), "-o", net], { stdio: "ignore" });
  const up = join(dir, "ibsim-up");
  execFileSync("go", ["build", "-o", up, "./test/ibsim/cmd/ibsim-up"], { cwd: resolve(webDir, ".."), stdio: "ignore" });
  const proc = spawn(up, [net], { cwd: dir, stdio: ["pipe", "pipe", "pipe"] });
  let out = "";
  // ibsim-up answers each console line with one `console {json}` line, in order.
  const waiting = [];
  let partial = "";
  proc.stdout.on("data", (d) => {
    out += d;
    partial += d;
    let nl;
    while ((nl = partial.indexOf("\n")) >= 0) {
      const line = partial.slice(0, nl);
      partial = partial.slice(nl + 1);
      if (line.startsWith("console ")) waiting.shift()?.(JSON.parse(line.slice("console ".length)));
    }
  });
  proc.stderr.on("data", (d) => (out += d));
  proc.stdin.on("error", () => {}); // ibsim-up gone: console() reports it
  const deadline = Date.now() + 90_000;
  while (!/^export (.*)$/m.test(out)) {
    if (proc.exitCode !== null || Date.now() > deadline) {
      proc.kill();
      throw new Error(`ibsim did not come up:\n${out}`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  const env = Object.fromEntries(/^export (.*)$/m.exec(out)[1].split(" ").map((kv) => kv.split("=", 2)));
  const exited = new Promise((r) => proc.once("exit", r));
  // The net file's node ids by GUID: console commands name nodes by id.
  const ids = new Map();
  let guid = null;
  for (const line of readFileSync(net, "utf8").split("\n")) {
    const g = /^(?:switch|ca)guid=(0x[0-9a-f]+)/i.exec(line);
    const n = /^(?:Switch|Hca|Ca)\s+\d+\s+"([^"]+)"/.exec(line);
    if (g) guid = BigInt(g[1]);
    else if (n && guid !== null) {
      ids.set(guid, n[1]);
      guid = null;
    }
  }
  let queue = Promise.resolve();
  return {
    env,
    /** Sends one line to ibsim's console; resolves with ibsim's reply once
     * it took it (rejects when ibsim refused it). Lines go one at a time. */
    console(cmd) {
      const sent = queue.then(
        () =>
          new Promise((ok, fail) => {
            if (proc.exitCode !== null) return fail(new Error(`ibsim console ${cmd}: ibsim-up exited:\n${out}`));
            const timer = setTimeout(() => fail(new Error(`ibsim console ${cmd}: no answer in 30s:\n${out.slice(-2000)}`)), 30_000);
            waiting.push((a) => {
              clearTimeout(timer);
              if (a.error) fail(new Error(`ibsim console: ${a.error}`));
              else ok(a.reply);
            });
            proc.stdin.write(cmd + "\n");
          }),
      );
      queue = sent.catch(() => {});
      return sent;
    },
    /** The net file's id of the node with this GUID ("0x…"), as the console wants it. */
    id(g) {
      const id = ids.get(BigInt(g));
      if (!id) throw new Error(`no node ${g} in ${net}`);
      return id;
    },
    async stop() {
      proc.kill("SIGTERM"); // ibsim-up stops ibsim and OpenSM
      await Promise.race([exited, new Promise((r) => setTimeout(r, 5000))]);
    },
  };
}

/** Starts the daemon; resolves once it has swept `sweeps` times. `args`
 * are added to the command line (for example the agent socket). `fabric`
 * is a --fabric source, or "ibsim:HOSTS,RADIX" for a real simulated
 * InfiniBand fabric read through the ib source.
 *
 * Access: without `accounts` the daemon runs with `--anonymous admin`
 * (everyone is an administrator, no login: the fast default of the page
 * tests). With `accounts` ([{ name, password, admin }], at least one
 * admin) they are made with `netloom user add NAME [--admin]
 * --password-stdin` in the scratch directory and the daemon reads them
 * (`--users`); the harness itself signs in as the first admin, so api()
 * keeps working, and `login(name, password)` gives a cookie for others. */
export async function startDaemon({ fabric = "sim:fat-tree:hosts=64,radix=16", sweep = "500ms", sweeps = 3, args = [], accounts = null } = {}) {
  // fabric null: no --fabric (an API daemon, `--role api`); sweeps 0: ready once it answers.
  const bin = netloomBin;
  if (!existsSync(bin)) throw new Error(`${bin} not found: run make build (or set NETLOOM_BIN)`);
  const dir = mkdtempSync(join(tmpdir(), "netloom-web-"));
  let ibsim = null;
  let env = process.env;
  if (fabric?.startsWith("ibsim:")) {
    const [hosts, radix] = fabric.slice("ibsim:".length).split(",").map(Number);
    ibsim = await startIbsim(bin, dir, hosts, radix);
    env = { ...process.env, ...ibsim.env };
    fabric = "ib";
  }
  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;
  let authArgs = ["--anonymous", "admin"];
  let admin = null;
  if (accounts) {
    admin = accounts.find((a) => a.admin);
    if (!admin) throw new Error("startDaemon: accounts need an admin (the harness waits for sweeps as one)");
    const users = join(dir, "netloom.htpasswd");
    for (const a of accounts) {
      execFileSync(bin, ["user", "add", a.name, ...(a.admin ? ["--admin"] : []), "--password-stdin", "--users", users], { cwd: dir, input: `${a.password}\n`, stdio: ["pipe", "ignore", "pipe"] });
    }
    authArgs = ["--users", users];
  }
  let cookie = "";
  const login = (name, password) => signIn(base, name, password);
  // No agent socket unless asked: tests never touch the default port or address file.
  if (!args.includes("--agent-listen")) args = [...args, "--agent-listen", "off", "--agent-address-file", "-"];
  // The tests' agents run without munged: their datagrams are accepted
  // unverified unless a test asks otherwise (the default, auto, would
  // refuse them all).
  if (!args.includes("--agent-auth")) args = [...args, "--agent-auth", "none"];
  const proc = spawn(bin, ["serve", ...(fabric ? ["--fabric", fabric] : []), "--db", join(dir, "netloom.db"), "--listen", `127.0.0.1:${port}`, "--sweep-interval", sweep, ...authArgs, ...args], {
    cwd: dir,
    env,
    stdio: ["ignore", "pipe", "pipe"],
  });
  let log = "";
  proc.stdout.on("data", (d) => (log += d));
  proc.stderr.on("data", (d) => (log += d));
  const exited = new Promise((r) => proc.once("exit", r));
  const deadline = Date.now() + 60_000;
  for (;;) {
    if (proc.exitCode !== null) {
      await ibsim?.stop();
      throw new Error(`netloom serve exited ${proc.exitCode}:\n${log}`);
    }
    if (Date.now() > deadline) {
      proc.kill();
      throw new Error(`netloom serve did not sweep ${sweeps} times in 60s:\n${log}`);
    }
    try {
      if (admin && !cookie) cookie = (await login(admin.name, admin.password)).cookie;
      const st = await (await fetch(`${base}/api/v1/status`, { headers: cookie ? { Cookie: cookie } : {} })).json();
      if ((st.sweep?.count ?? 0) >= sweeps || (sweeps === 0 && st)) break;
    } catch {
      /* not listening yet */
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  return {
    base,
    /** GET an API path as the harness's administrator (or anonymously). */
    api: async (path) => {
      const r = await fetch(`${base}/api/v1${path}`, { headers: cookie ? { Cookie: cookie } : {} }).catch((err) => {
        // A daemon that died says why in its log.
        if (proc.exitCode !== null || proc.signalCode !== null) throw new Error(`${path}: netloom serve exited (${proc.exitCode ?? proc.signalCode}):\n${log.slice(-4000)}`);
        throw err;
      });
      if (!r.ok) throw new Error(`${path}: ${r.status} ${await r.text()}`);
      return r.json();
    },
    login,
    log: () => log,
    /** For an ibsim fabric, its console: `console(line)` sends a command
     * (resolves with ibsim's reply, rejects when refused) and `id(guid)`
     * names a node as commands do; `env` is what a client of the fabric
     * (perfquery, ibtracert) needs in its environment; null for other fabrics. */
    ibsim: ibsim && { console: ibsim.console, id: ibsim.id, env: ibsim.env },
    async stop() {
      proc.kill("SIGTERM");
      await Promise.race([exited, new Promise((r) => setTimeout(r, 5000))]);
      if (proc.exitCode === null) proc.kill("SIGKILL");
      await ibsim?.stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** Signs in through the API; resolves with the session cookie
 * ("netloom_session=...") and the /auth/me answer. */
export async function signIn(base, name, password) {
  const r = await fetch(`${base}/api/v1/auth/login`, { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ user: name, password }) });
  if (r.status !== 200) throw new Error(`login ${name}: ${r.status} ${await r.text()}`);
  const cookie = r.headers.getSetCookie().map((c) => c.split(";")[0]).find((c) => c.startsWith("netloom_session="));
  if (!cookie) throw new Error(`login ${name}: no session cookie`);
  return { cookie, me: await r.json() };
}

const VIEWPORT = { width: 1440, height: 900 };

/** A browser context: its own cookies, so its own login. */
export function newContext(browser) {
  return browser.newContext({ viewport: VIEWPORT });
}

export async function startBrowser() {
  const browser = await chromium.launch({ executablePath: process.env.CHROMIUM ?? "/usr/bin/chromium", args: CHROMIUM_ARGS });
  return browser;
}

/** A page that records its errors into `errors`, Content-Security-Policy
 * violations included: the daemon serves a strict CSP (no inline scripts
 * or styles, no eval), and the browser reports each thing it blocked as a
 * `securitypolicyviolation` event, which is logged as an error here, so
 * every test that asserts no page errors also asserts no CSP violation.
 * page.csp lists the violations alone. `context` may be a browser context
 * of newContext() (a cookie jar of its own: one signed-in person). */
export async function newPage(browser, errors, context = null) {
  const page = context ? await context.newPage() : await browser.newPage({ viewport: VIEWPORT });
  page.csp = [];
  await page.addInitScript(() => {
    document.addEventListener("securitypolicyviolation", (e) => {
      console.error(`CSP violation: ${e.violatedDirective} blocked ${e.blockedURI || "inline"} at ${e.sourceFile}:${e.lineNumber} (${(e.sample || "").slice(0, 60)})`);
    });
  });
  page.on("pageerror", (e) => errors.push(e.message));
  page.on("console", (m) => {
    if (m.type() !== "error") return;
    errors.push(m.text());
    if (/CSP violation|Content Security Policy/.test(m.text())) page.csp.push(`${page.url()}: ${m.text()}`);
  });
  return page;
}

export function shot(page, name) {
  mkdirSync(resultsDir, { recursive: true });
  return page.screenshot({ path: join(resultsDir, `${name}.png`), fullPage: name !== "network" });
}

/** Starts a private PostgreSQL server with test/postgres/cmd/pg-up (built
 * here; Debian's postgresql, as the Go tests use) and resolves with
 * { url, stop } once its empty database is ready. */
export async function startPostgres() {
  const dir = mkdtempSync(join(tmpdir(), "netloom-pg-"));
  const up = join(dir, "pg-up");
  execFileSync("go", ["build", "-o", up, "./test/postgres/cmd/pg-up"], { cwd: resolve(webDir, ".."), stdio: "ignore" });
  const proc = spawn(up, [], { stdio: ["pipe", "pipe", "pipe"] });
  let out = "";
  proc.stderr.on("data", (d) => (out += d));
  const exited = new Promise((r) => proc.once("exit", r));
  const url = await new Promise((res, rej) => {
    let line = "";
    proc.stdout.on("data", (d) => {
      line += d;
      if (line.includes("\n")) res(line.trim());
    });
    proc.once("exit", (code) => rej(new Error(`pg-up exited ${code}:\n${out}`)));
  });
  return {
    url,
    async stop() {
      proc.stdin.end(); // pg-up stops the server when its input closes
      await Promise.race([exited, new Promise((r) => setTimeout(r, 15_000))]);
      if (proc.exitCode === null) proc.kill("SIGKILL");
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** Bytes as the pages write them (web/src/format.ts): powers of 1000, three significant digits. */
export function fmtBytes(n) {
  const units = ["B", "KB", "MB", "GB", "TB", "PB"];
  let i = 0;
  let v = Math.abs(n);
  while (v >= 1000 && i < units.length - 1) {
    v /= 1000;
    i++;
  }
  return `${n < 0 ? "-" : ""}${v >= 100 || i === 0 ? v.toFixed(0) : v >= 10 ? v.toFixed(1) : v.toFixed(2)} ${units[i]}`;
}

/** A percentage as the pages write it (web/src/format.ts). */
export function fmtPct(v) {
  return Number.isFinite(v) ? (v >= 10 ? `${v.toFixed(0)}%` : `${v.toFixed(1)}%`) : "–";
}

/** A direction's (or a job's on it) route model as the pages write it
 * (web/src/routemodel.ts), from its fields in the API's answer and the
 * answer's own route_model (docs/sflow.md, "Said per direction"). */
export function routeModelText(d, fallback) {
  const m = d.route_model ?? fallback;
  if (!m) return "forwarding tables";
  return d.split_observed_pct !== undefined && !m.startsWith("sflow-observed") ? `${m} (${fmtPct(d.split_observed_pct)} observed)` : m;
}

/** Moves the pointer over a chart (a figure.chart drawn by chart.ts) at
 * time t (Unix seconds), where the chart's time axis places it: the axis's
 * ends are the figure's data-x-min and data-x-max (the first and last
 * sample, or the minute around samples seconds apart). */
export async function hoverTime(page, chart, t) {
  await chart.locator(".u-over").waitFor();
  const [x0, x1] = (await chart.evaluate((f) => [f.dataset.xMin, f.dataset.xMax])).map(Number);
  if (!(x1 > x0)) throw new Error(`the chart's time axis runs from ${x0} to ${x1}`);
  const box = await chart.locator(".u-over").boundingBox();
  await page.mouse.move(box.x + ((t - x0) / (x1 - x0)) * box.width, box.y + box.height / 2);
}

/** A time (RFC 3339 string or Unix seconds) as the pages write it
 * (web/src/time.ts), worked out independently in the page's browser with
 * Intl: "2026-11-29 04:16:17 UTC+01:00" in the browser's zone, or
 * "2026-11-29 03:16:17 UTC" with utc. */
export function pageTime(page, t, utc = false) {
  return page.evaluate(
    ([t, utc]) => {
      const d = new Date(typeof t === "number" ? t * 1000 : t);
      const parts = Object.fromEntries(
        new Intl.DateTimeFormat("en-US", { timeZone: utc ? "UTC" : undefined, hourCycle: "h23", year: "numeric", month: "2-digit", day: "2-digit", hour: "2-digit", minute: "2-digit", second: "2-digit" })
          .formatToParts(d)
          .map((p) => [p.type, p.value]),
      );
      const o = utc ? null : -d.getTimezoneOffset();
      const zone = o === null ? "UTC" : `UTC${o < 0 ? "-" : "+"}${String(Math.floor(Math.abs(o) / 60)).padStart(2, "0")}:${String(Math.abs(o) % 60).padStart(2, "0")}`;
      return `${parts.year}-${parts.month}-${parts.day} ${parts.hour}:${parts.minute}:${parts.second} ${zone}`;
    },
    [t, utc],
  );
}
