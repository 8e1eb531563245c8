// Bundles src/main.ts and src/styles.css into dist/assets with content
// hashes and writes dist/index.html pointing at them. `node build.mjs`.
import * as esbuild from "esbuild";
import { mkdirSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";

const dist = new URL("./dist/", import.meta.url).pathname;
mkdirSync(dist, { recursive: true });
for (const f of readdirSync(dist)) {
  if (f !== ".gitkeep") rmSync(join(dist, f), { recursive: true, force: true });
}
const result = await esbuild.build({
  entryPoints: { app: "src/main.ts", style: "src/styles.css" },
  bundle: true,
  minify: true,
  sourcemap: true,
  format: "esm",
  target: "es2022",
  outdir: join(dist, "assets"),
  entryNames: "[name]-[hash]",
  metafile: true,
  logLevel: "warning",
});
const outs = Object.keys(result.metafile.outputs).map((p) => p.slice(p.indexOf("assets/")));
const js = outs.find((p) => p.endsWith(".js"));
const css = outs.filter((p) => p.endsWith(".css"));
const html = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Netloom</title>
<link rel="icon" href="data:image/svg+xml,%3Csvg xmlns='http://www.w3.org/2000/svg' viewBox='0 0 16 16'%3E%3Ccircle cx='8' cy='8' r='6' fill='%232563eb'/%3E%3C/svg%3E">
${css.map((c) => `<link rel="stylesheet" href="/${c}">`).join("\n")}
<link rel="modulepreload" href="/${js}">
</head>
<body>
<div id="app"></div>
<script type="module" src="/${js}"></script>
</body>
</html>
`;
writeFileSync(join(dist, "index.html"), html);
const size = Object.values(result.metafile.outputs).reduce((a, o) => a + o.bytes, 0);
console.log(`web: built ${outs.filter((o) => !o.endsWith(".map")).join(", ")} (${(size / 1024).toFixed(0)} KiB with maps)`);
