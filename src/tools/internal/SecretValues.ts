/**
 * Where the secrets are (R3.1, R12): whether a schema holds a `Redacted`, the plain values
 * of the `Redacted`s in a decoded value, and a copy of the value with each masked.
 * Re-exported from `Redaction`, which masks text and values with them. Private to `tools/`.
 */
import { Chunk, HashMap, HashSet, Predicate, Redacted, type Schema } from "effect"

/** What a secret is replaced with: what a `Redacted` prints as. */
export const mask = "<redacted>"

/** The deepest a value is searched: deeper than the arguments the pipeline lets through. */
const maxDepth = 512

const redactedId = "effect/schema/Redacted"

/** The `representation.id` annotation of an AST node, if it has one. */
const representationId = (node: object): unknown => {
  const annotations = Predicate.hasProperty(node, "annotations") ? node.annotations : undefined
  const representation = Predicate.hasProperty(annotations, "representation") ? annotations.representation : undefined
  return Predicate.hasProperty(representation, "id") ? representation.id : undefined
}

/** Whether an AST node, or a node below it, is a `Redacted` declaration (without recursion). */
const holdsRedacted = (root: object): boolean => {
  const seen = new Set<object>()
  const stack: Array<unknown> = [root]
  while (stack.length > 0) {
    const node = stack.pop()
    if (typeof node !== "object" || node === null || seen.has(node)) continue
    seen.add(node)
    if (representationId(node) === redactedId) return true
    for (const value of Object.values(node)) {
      if (typeof value === "object" && value !== null) stack.push(value)
      // A recursive schema (`Schema.suspend`) holds its body behind a thunk.
      else if (typeof value === "function" && value.length === 0 && Predicate.isTagged(node, "Suspend")) {
        try {
          stack.push(value())
        } catch {
          // A thunk that throws holds nothing we can see.
        }
      }
    }
  }
  return false
}

/** Whether a schema holds a `Redacted` anywhere (a tool's are asked once, by `Tool.make`). */
export const isSensitive = (schema: Schema.Top): boolean => holdsRedacted(schema.ast)

/**
 * What a value holds, for the walks that look for secrets: a map's keys and values (a
 * `Map`, effect's `HashMap`), a collection's items (a `Set`, `HashSet`, `Chunk`), an
 * object's or array's own values. Each walk is bounded by depth, visits an object once (a
 * value that shares its parts is walked in the time of its size), and catches a throw.
 */
const partsOf = (value: object): ReadonlyArray<unknown> => {
  if (value instanceof Map || HashMap.isHashMap(value)) {
    return Array.from(value as Iterable<readonly [unknown, unknown]>).flat()
  }
  if (value instanceof Set || HashSet.isHashSet(value) || Chunk.isChunk(value)) {
    return Array.from(value as Iterable<unknown>)
  }
  return Object.values(value)
}

/** Every string and number inside `root` (without recursion): the plain parts of a secret. */
const leavesOf = (root: unknown, into: Array<string>, seen: Set<object> = new Set()): void => {
  const stack: Array<{ readonly value: unknown; readonly depth: number }> = [{ value: root, depth: 0 }]
  for (let item = stack.pop(); item !== undefined; item = stack.pop()) {
    const { value, depth } = item
    if (Predicate.isString(value)) {
      if (value !== "") into.push(value)
    } else if (Predicate.isNumber(value) || Predicate.isBigInt(value)) {
      into.push(String(value))
    } else if (typeof value === "object" && value !== null && depth < maxDepth && !seen.has(value)) {
      seen.add(value)
      const inner = Redacted.isRedacted(value) ? [Redacted.value(value)] : partsOf(value)
      for (const item of inner) stack.push({ value: item, depth: depth + 1 })
    }
  }
}

/** The plain values of the `Redacted`s in a decoded value, every string inside them (never throws). */
export const secretsOf = (root: unknown): ReadonlyArray<string> => {
  const found: Array<string> = []
  const seen = new Set<object>()
  // The walk inside the secrets has its own: a part shared with the plain value is a secret's part all the same.
  const inSecrets = new Set<object>()
  try {
    const stack: Array<{ readonly value: unknown; readonly depth: number }> = [{ value: root, depth: 0 }]
    for (let item = stack.pop(); item !== undefined; item = stack.pop()) {
      const { value, depth } = item
      if (typeof value !== "object" || value === null || depth > maxDepth || seen.has(value)) continue
      seen.add(value)
      if (Redacted.isRedacted(value)) {
        leavesOf(Redacted.value(value), found, inSecrets)
        continue
      }
      for (const item of partsOf(value)) stack.push({ value: item, depth: depth + 1 })
    }
  } catch {
    // A value that cannot be walked holds no secret the runtime can see.
  }
  return found
}

/** Every string and number of a value that did not decode, each of which may be the secret. */
export const allLeaves = (root: unknown): ReadonlyArray<string> => {
  const found: Array<string> = []
  try {
    leavesOf(root, found)
  } catch {
    // As above.
  }
  return found
}

/**
 * A decoded value with every `Redacted` replaced by one holding `<redacted>`, ready to be
 * encoded by its schema: plain objects, arrays and the collections `partsOf` walks are
 * copied; every other value kept as it is.
 */
export const withoutSecrets = (value: unknown, depth = 0): unknown => copyWithoutSecrets(value, depth, new Map())

/** {@link withoutSecrets}, each object copied once (`copies`): a value that shares its parts keeps sharing them. */
const copyWithoutSecrets = (value: unknown, depth: number, copies: Map<object, unknown>): unknown => {
  if (typeof value !== "object" || value === null || depth > maxDepth) return value
  // One of its own for each: two secrets that key a `Map` or a `Set` stay two entries.
  if (Redacted.isRedacted(value)) return Redacted.make(mask)
  if (copies.has(value)) return copies.get(value)
  const copy = copiedWithoutSecrets(value, (item) => copyWithoutSecrets(item, depth + 1, copies))
  copies.set(value, copy)
  return copy
}

/** Masked keys, each its own: the second `<redacted> (2)`, and so on. */
const numbered = (keys: ReadonlyArray<unknown>): ReadonlyArray<unknown> => {
  let n = 0
  return keys.map((key) => (Redacted.isRedacted(key) && n++ > 0 ? Redacted.make(`${mask} (${n})`) : key))
}

const copiedWithoutSecrets = (value: object, inner: (item: unknown) => unknown): unknown => {
  if (Array.isArray(value)) return value.map(inner)
  const pair = ([key, item]: readonly [unknown, unknown]) => [inner(key), inner(item)] as const
  if (value instanceof Map) return new Map(Array.from(value, pair))
  if (value instanceof Set) return new Set(Array.from(value, inner))
  // Effect's collections key by value, and every mask is the same value: the masks of their
  // keys are numbered (`<redacted>`, `<redacted> (2)`), so that no entry is merged away.
  if (HashMap.isHashMap(value)) {
    const keys = numbered(Array.from(value, ([key]) => inner(key)))
    return HashMap.fromIterable(Array.from(value, ([, item], i) => [keys[i], inner(item)] as const))
  }
  if (HashSet.isHashSet(value)) return HashSet.fromIterable(numbered(Array.from(value, inner)))
  if (Chunk.isChunk(value)) return Chunk.fromIterable(Array.from(value, inner))
  const proto = Object.getPrototypeOf(value)
  if (proto !== Object.prototype && proto !== null) return value
  const out: Record<string, unknown> = {}
  for (const [key, item] of Object.entries(value)) {
    // As an own key `__proto__` is data; defineProperty keeps it from touching the prototype.
    Object.defineProperty(out, key, {
      value: inner(item),
      enumerable: true,
      writable: true,
      configurable: true
    })
  }
  return out
}
