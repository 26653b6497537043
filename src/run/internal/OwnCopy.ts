/**
 * The run's own copies of values that user code handed it or is handed back (R9.1): as
 * JSON reads them back (`-0` is `0`), frozen all the way down, so that neither the code
 * that made a value nor the code shown it later changes what the log recorded. Private
 * to the runtime.
 */
import * as Failure from "../../failure/Failure.ts"

/**
 * Freezes a value and every plain object and array inside it (iteratively: a wide or deep
 * value is no stack hazard). An instance of a class is left as it is, with what it holds:
 * many fill caches of their own once made (effect's `DateTime`, `BigDecimal` and `Chunk`, a
 * class of the user's), and freezing a typed array with elements throws. Only a typed
 * final output holds one: what the run builds is JSON.
 */
export const deepFreeze = <A>(root: A): A => {
  if (!isPlain(root)) return root
  const stack: Array<object> = [root]
  while (stack.length > 0) {
    // Boundary: a plain object or array (`isPlain` let it in), its keys read as a record's.
    const value = stack.pop() as Record<string, unknown>
    Object.freeze(value)
    for (const key in value) {
      const item = value[key]
      if (isPlain(item) && !Object.isFrozen(item)) stack.push(item)
    }
  }
  return root
}

/** A number as JSON reads it back: `-0` is `0`. */
const asJsonReads = <A>(value: A): A => (Object.is(value, -0) ? (0 as A) : value)

/**
 * A value's own frozen copy: every plain object and array in it copied and frozen, every
 * other value (an instance of a class) kept as it is, unfrozen, as {@link deepFreeze}
 * leaves it. In its plain parts `-0` is `0`, as JSON reads it back (review 118). A value
 * the user's code shares (a module's defaults a schema's transform put in) is never frozen
 * itself (review 90). Iterative; a value met twice is copied once.
 */
export const frozenPlainCopy = <A>(root: A): A => {
  if (!isPlain(root)) return asJsonReads(root)
  const copies = new Map<object, Record<string, unknown>>()
  const pending: Array<readonly [Record<string, unknown>, Record<string, unknown>]> = []
  const copyOf = (value: object): Record<string, unknown> => {
    const known = copies.get(value)
    if (known !== undefined) return known
    // Boundary: a plain object or array (`isPlain`), its keys read as a record's; its copy has its prototype.
    const copy: Record<string, unknown> = Array.isArray(value) ? [] : Object.create(Object.getPrototypeOf(value))
    copies.set(value, copy)
    pending.push([value as Record<string, unknown>, copy])
    return copy
  }
  const top = copyOf(root)
  for (let next = pending.pop(); next !== undefined; next = pending.pop()) {
    const [value, copy] = next
    for (const key of Object.keys(value)) {
      const item = value[key]
      copy[key] = isPlain(item) ? copyOf(item) : asJsonReads(item)
    }
    // An array's holes at its end are kept: its length is its own.
    if (Array.isArray(value)) Reflect.set(copy, "length", value.length)
  }
  for (const copy of copies.values()) Object.freeze(copy)
  // Boundary: the copy has the value's shape, plain part by plain part.
  return top as A
}

/** An object literal, an array or a record without a prototype: what JSON reads and the run builds. */
const isPlain = (value: unknown): value is object => {
  if (typeof value !== "object" || value === null) return false
  const prototype = Object.getPrototypeOf(value)
  return prototype === Object.prototype || prototype === Array.prototype || prototype === null
}

/**
 * A JSON value the run built itself (its objects and arrays are its own): `-0` made `0`, as
 * JSON reads it back, and frozen all the way down, in place.
 */
export const ownFrozen = (root: unknown): unknown => {
  if (typeof root !== "object" || root === null) return asJsonReads(root)
  // Every object is walked, frozen already or not: only what the run built is trusted to be its own.
  const seen = new Set<object>()
  // Boundary: a JSON value's objects and arrays, their keys read as a record's.
  const stack: Array<Record<string, unknown>> = [root as Record<string, unknown>]
  while (stack.length > 0) {
    const value = stack.pop() as Record<string, unknown>
    if (seen.has(value)) continue
    seen.add(value)
    for (const key in value) {
      const item = value[key]
      if (typeof item === "object" && item !== null) stack.push(item as Record<string, unknown>)
      else if (Object.is(item, -0) && !Object.isFrozen(value)) value[key] = 0
    }
    Object.freeze(value)
  }
  return root
}

/** A JSON value's frozen copy, or why it cannot be read (a getter that answered before and throws now). */
export const frozenCopy = (
  value: unknown
): { readonly _tag: "Copied"; readonly value: unknown } | { readonly _tag: "Unreadable"; readonly why: string } => {
  try {
    return { _tag: "Copied", value: deepFreeze(JSON.parse(JSON.stringify(value) ?? "null")) }
  } catch (defect) {
    return { _tag: "Unreadable", why: Failure.safeDescription(defect) }
  }
}

/** A JSON value to hand user code to read: itself when frozen already, else its frozen copy (itself if it cannot be read). */
export const readOnly = <A>(value: A): A => {
  if (Object.isFrozen(value)) return value
  const copy = frozenCopy(value)
  // Erased boundary: the copy is the same JSON value, frozen.
  return copy._tag === "Copied" ? (copy.value as A) : value
}
