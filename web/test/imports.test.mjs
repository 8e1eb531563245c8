// No import circle in web/src (issue 40): every module's imports, type-only
// ones included, form a graph without a cycle, so that each room of the UI
// (the router, the pages, the job page's panels, the map) can be read from
// its imports down; and only routes.ts and the pages import a page. The test parses the sources itself: each `import ...
// from "x"`, `import "x"`, `export ... from "x"` and `import("x")` with a
// relative specifier, resolved as esbuild and TypeScript's "Bundler"
// resolution do (x.ts, x/index.ts).
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync, existsSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, relative, resolve } from "node:path";
import { describe, it } from "node:test";
import { fileURLToPath } from "node:url";

const src = resolve(dirname(fileURLToPath(import.meta.url)), "../src");

/** Every .ts file under dir. */
function sources(dir) {
  const out = [];
  for (const name of readdirSync(dir)) {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) out.push(...sources(p));
    else if (p.endsWith(".ts")) out.push(p);
  }
  return out.sort();
}

/** The specifiers a module imports, comments left out. */
export function specifiers(text) {
  const code = text.replace(/\/\*[\s\S]*?\*\//g, "").replace(/(^|[^:"'`])\/\/.*$/gm, "$1");
  const out = [];
  const re = /(?:^|[\s;{}])(?:import|export)\s+(?:type\s+)?(?:[\w*\s{},$]*?\s+from\s+)?["']([^"']+)["']|\bimport\s*\(\s*["']([^"']+)["']\s*\)/g;
  for (let m; (m = re.exec(code)); ) out.push(m[1] ?? m[2]);
  return out;
}

/** The file a relative specifier names from file, or null for a package. */
function resolveImport(file, spec) {
  if (!spec.startsWith(".")) return null;
  const base = resolve(dirname(file), spec);
  for (const p of [base, base + ".ts", join(base, "index.ts")]) {
    if (existsSync(p) && statSync(p).isFile()) return p;
  }
  throw new Error(`${file}: cannot resolve ${JSON.stringify(spec)}`);
}

/** The import graph of dir's modules: file -> the files it imports. */
export function importGraph(dir) {
  const graph = new Map();
  for (const f of sources(dir)) {
    const deps = [];
    for (const s of specifiers(readFileSync(f, "utf8"))) {
      const to = resolveImport(f, s);
      if (to && to.endsWith(".ts")) deps.push(to);
    }
    graph.set(f, [...new Set(deps)]);
  }
  return graph;
}

/** Every import circle of the graph, each once, as the files around it
 * (relative to root), found by a depth-first search. */
export function cycles(graph, root) {
  const state = new Map(); // 1: on the stack, 2: done
  const stack = [];
  const found = [];
  const seen = new Set();
  const visit = (f) => {
    state.set(f, 1);
    stack.push(f);
    for (const d of graph.get(f) ?? []) {
      if (state.get(d) === 1) {
        const loop = stack.slice(stack.indexOf(d)).map((p) => relative(root, p));
        const key = [...loop].sort().join(" ");
        if (!seen.has(key)) {
          seen.add(key);
          found.push([...loop, relative(root, d)]);
        }
      } else if (!state.has(d)) visit(d);
    }
    stack.pop();
    state.set(f, 2);
  };
  for (const f of [...graph.keys()].sort()) if (!state.has(f)) visit(f);
  return found;
}

describe("web/src imports", () => {
  it("finds a circle where there is one", () => {
    // The detector itself, on a tree made for it: a → b → c → a (one
    // through a type import and a directory's index); d and e lead into it.
    const dir = mkdtempSync(join(tmpdir(), "netloom-imports-"));
    try {
      mkdirSync(join(dir, "c"));
      writeFileSync(join(dir, "a.ts"), 'import { b } from "./b";\n// import { e } from "./e";\nexport const a = b;\n');
      writeFileSync(join(dir, "b.ts"), 'import type { C } from "./c";\nexport const b: C = 1;\n');
      writeFileSync(join(dir, "c", "index.ts"), 'export { a } from "../a";\nexport type C = number;\n');
      writeFileSync(join(dir, "d.ts"), 'import "./a";\n');
      writeFileSync(join(dir, "e.ts"), 'import "./d";\n');
      const found = cycles(importGraph(dir), dir);
      assert.deepEqual(found, [["a.ts", "b.ts", "c/index.ts", "a.ts"]]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("reads every kind of import", () => {
    const text = [
      'import { a, b } from "./x";',
      'import type { T } from "../y";',
      "import {",
      "  c,",
      '} from "./multi";',
      'import * as fmt from "./format";',
      'import Graph from "graphology";',
      'import "./side";',
      'export { z } from "./z";',
      'const m = await import("./lazy");',
      '// import { no } from "./comment";',
      'const s = "import x from \'./not\'";',
    ].join("\n");
    assert.deepEqual(specifiers(text), ["./x", "../y", "./multi", "./format", "graphology", "./side", "./z", "./lazy"]);
  });

  it("has no import circle", () => {
    const graph = importGraph(src);
    // The graph is the real one: main.ts reaches the routes, the routes
    // every page.
    const edges = [...graph.values()].reduce((n, d) => n + d.length, 0);
    assert.ok(graph.size >= 30 && edges >= 100, `only ${graph.size} modules and ${edges} imports read from ${src}`);
    const found = cycles(graph, src);
    assert.deepEqual(found, [], `import circles in web/src:\n${found.map((c) => "  " + c.join(" → ")).join("\n")}`);
  });

  it("imports a page only from routes.ts and the pages", () => {
    // Pages sit on top: the rooms below them (the job page's panels, the
    // job views, the map, the shared modules) never reach up into one.
    const pages = join(src, "pages") + "/";
    const up = [];
    for (const [f, deps] of importGraph(src)) {
      if (f === join(src, "routes.ts") || f.startsWith(pages)) continue;
      for (const d of deps) if (d.startsWith(pages)) up.push(`${relative(src, f)} → ${relative(src, d)}`);
    }
    assert.deepEqual(up, [], `modules below the pages import a page:\n  ${up.join("\n  ")}`);
  });
});
