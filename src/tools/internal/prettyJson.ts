/**
 * The size of a JSON value pretty-printed as `write_json_file` writes it, found without
 * building the text (R3.6): indentation grows with depth, so 122 KB of compact JSON can
 * become 122 MB, and the limit must hold before that string exists.
 *
 * @internal
 */
import type { Schema } from "effect"

const utf8Bytes = (text: string): number => Buffer.byteLength(text, "utf8")

// `Array.isArray` does not narrow a union holding a readonly array.
const isJsonArray = (value: Schema.Json): value is Schema.JsonArray => Array.isArray(value)

// One container of `count` children at `depth`, as `JSON.stringify(value, null, 2)` lays it
// out: the opening bracket and a newline, each child on its own line indented one level
// deeper, ",\n" between children, then a newline, the container's own indentation and the
// closing bracket. An empty container is just its two brackets.
const containerBytes = (count: number, depth: number): number =>
  count === 0 ? 2 : 2 + count * 2 * (depth + 1) + (count - 1) * 2 + 1 + 2 * depth + 1

/**
 * The UTF-8 size of `JSON.stringify(value, null, 2)`, or `undefined` as soon as it is
 * known to pass `limit`: the walk stops there, so its cost is bounded by the limit, not
 * by the value. Iterative, so a deep value cannot overflow the stack.
 *
 * @internal
 */
export const prettyJsonBytes = (value: Schema.Json, limit: number): number | undefined => {
  let total = 0
  const pending: Array<{ readonly value: Schema.Json; readonly depth: number }> = [{ value, depth: 0 }]
  for (let next = pending.pop(); next !== undefined; next = pending.pop()) {
    const { value: current, depth } = next
    if (isJsonArray(current)) {
      total += containerBytes(current.length, depth)
      for (const item of current) pending.push({ value: item, depth: depth + 1 })
    } else if (current !== null && typeof current === "object") {
      const keys = Object.keys(current)
      total += containerBytes(keys.length, depth)
      for (const key of keys) {
        // `"key": ` before the value.
        total += utf8Bytes(JSON.stringify(key)) + 2
        const item = current[key]
        if (item !== undefined) pending.push({ value: item, depth: depth + 1 })
      }
    } else {
      total += utf8Bytes(JSON.stringify(current))
    }
    if (total > limit) return undefined
  }
  return total
}
