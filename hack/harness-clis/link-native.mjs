// Point each pinned CLI's node_modules/.bin entry at the native binary its platform package
// ships (what the CLI's own postinstall script would do; installs run with --ignore-scripts,
// so nothing the registry serves runs at install time). Run in the install directory:
//   node link-native.mjs
// Used by `make harness-clis` (hack/swarmkit_devcluster/harness_clis.py) and the runtime image.
import fs from "node:fs";
import path from "node:path";

const arch = { x64: "x64", arm64: "arm64" }[process.arch];
const manifest = JSON.parse(fs.readFileSync("package.json", "utf8"));
for (const pkg of Object.keys(manifest.dependencies)) {
  const native = path.join("node_modules", `${pkg}-${process.platform}-${arch}`);
  const own = path.join("node_modules", pkg, "package.json");
  if (!fs.existsSync(native) || !fs.existsSync(own)) continue;
  for (const name of Object.keys(JSON.parse(fs.readFileSync(own, "utf8")).bin || {})) {
    const binary = [name, `${name}.exe`].map((n) => path.join(native, n)).find(fs.existsSync);
    if (!binary) continue;
    fs.chmodSync(binary, 0o755);
    const link = path.join("node_modules", ".bin", name);
    fs.mkdirSync(path.dirname(link), { recursive: true });
    fs.rmSync(link, { force: true });
    fs.symlinkSync(path.relative(path.dirname(link), binary), link);
    console.log(`${link} -> ${binary}`);
  }
}
