/**
 * What grew in the heap, by kind of object: two heap snapshots (`node:v8`) and the kinds
 * whose total size grew most between them. For `SCALE_SNAPSHOT=1`, to see whether what a
 * case's released runs left is per-run objects or compiled code and fixed structures.
 */
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import * as v8 from "node:v8"
import { Effect } from "effect"
import { gc } from "../heap.ts"

interface Snapshot {
  readonly snapshot: { readonly meta: { readonly node_fields: Array<string>; readonly node_types: [Array<string>] } }
  readonly nodes: Array<number>
  readonly strings: Array<string>
}

/** Count and total self size of each kind (`type:name`) of the snapshot in `file`, which is then removed. */
const census = (file: string): Map<string, { count: number; size: number }> => {
  const snap = JSON.parse(fs.readFileSync(file, "utf8")) as Snapshot
  fs.rmSync(file)
  const fields = snap.snapshot.meta.node_fields
  const types = snap.snapshot.meta.node_types[0]
  const [type, name, size] = ["type", "name", "self_size"].map((f) => fields.indexOf(f))
  const kinds = new Map<string, { count: number; size: number }>()
  for (let i = 0; i < snap.nodes.length; i += fields.length) {
    const t = types[snap.nodes[i + (type ?? 0)] ?? 0] ?? "?"
    // Strings are named by their text: their type alone says enough.
    const n = t.includes("string") ? "" : (snap.strings[snap.nodes[i + (name ?? 0)] ?? 0] ?? "")
    const kind = kinds.get(`${t}:${n}`) ?? { count: 0, size: 0 }
    kind.count++
    kind.size += snap.nodes[i + (size ?? 0)] ?? 0
    kinds.set(`${t}:${n}`, kind)
  }
  return kinds
}

const write = (label: string) => {
  gc()
  return v8.writeHeapSnapshot(path.join(os.tmpdir(), `scale-${process.pid}-${label}.heapsnapshot`))
}

/**
 * Writes a snapshot now (to a file, so that nothing it read stays in the heap); gives the
 * effect that writes a second one and prints the `top` kinds that grew most between them.
 */
export const snapshot = Effect.sync(() => {
  const first = write("a")
  return (top: number) =>
    Effect.sync(() => {
      const second = write("b")
      const before = census(first)
      const grown = [...census(second)].map(([kind, a]) => {
        const b = before.get(kind) ?? { count: 0, size: 0 }
        return { kind, count: a.count - b.count, size: a.size - b.size }
      })
      grown.sort((x, y) => y.size - x.size)
      console.log("heap growth by kind (bytes, objects, kind):")
      for (const g of grown.slice(0, top)) {
        console.log(`${String(g.size).padStart(10)} ${String(g.count).padStart(8)}  ${g.kind.slice(0, 90)}`)
      }
    })
})
