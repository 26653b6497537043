// The API reference, from the doc comments: `npm run docs` writes docs/api/index.html.
// Its entry points are package.json's `exports` (their source files), so the list of entry
// points stays in one place.
import { readFileSync } from "node:fs"

const manifest = JSON.parse(readFileSync(new URL("./package.json", import.meta.url), "utf8"))
const entryPoints = Object.values(manifest.exports)
  .map((entry) => entry["@effect-agent-runtime/source"])
  .filter((source) => source !== undefined)

/** @type {Partial<import("typedoc").TypeDocOptions>} */
export default {
  name: `${manifest.name} ${manifest.version}`,
  entryPoints,
  tsconfig: "tsconfig.build.json",
  out: "docs/api",
  readme: "none",
  excludeExternals: true,
  excludePrivate: true,
  // Schema classes inherit effect's doc comments, whose links point into effect itself.
  validation: { invalidLink: false, notExported: false }
}
