/**
 * Options objects users hand the library's constructors (`Tool.make`, `Permission.layer`,
 * …) are checked for keys none of their options has (R12): a misspelt option
 * (`needApproval` for `needsApproval`, `allowedTools` for `allowTools`) would otherwise be let
 * go, and what it asked for (an approval, a limit to some tools) not done. Private to the
 * runtime.
 *
 * @since 0.3.0
 */

/**
 * The options of an interface, each `true`: a constant of this type lists every option
 * and no other, checked by the compiler against the interface.
 *
 * @since 0.3.0
 */
export type Known<Options> = { readonly [K in keyof Required<Options>]: true }

/**
 * The edit distance between `a` and `b` (insertions, deletions, substitutions), both short.
 * Written here: effect's own (its CLI's suggestions) is internal to `effect/cli`, not exported.
 */
const distance = (a: string, b: string): number => {
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j)
  for (let i = 1; i <= a.length; i++) {
    const row = [i]
    for (let j = 1; j <= b.length; j++) {
      const substitution = (previous[j - 1] ?? 0) + (a[i - 1] === b[j - 1] ? 0 : 1)
      row.push(Math.min((previous[j] ?? 0) + 1, (row[j - 1] ?? 0) + 1, substitution))
    }
    previous = row
  }
  return previous[b.length] ?? 0
}

/** The known option `key` is likely a misspelling of, if one is close enough. */
const closest = (key: string, known: ReadonlyArray<string>): string | undefined => {
  if (key.length > 64) return undefined
  let best: string | undefined
  let bestDistance = Math.max(2, Math.floor(key.length / 3)) + 1
  for (const option of known) {
    const lower = key.toLowerCase()
    const other = option.toLowerCase()
    // The same but for case, or one the start of the other but its last letter (`retry`,
    // `retries`): as close as can be.
    let shared = 0
    while (shared < lower.length && lower[shared] === other[shared]) shared++
    const prefix = shared >= 4 && shared >= Math.min(lower.length, other.length) - 1
    const d = lower === other ? 0 : prefix ? 1 : distance(key, option)
    if (d < bestDistance) {
      best = option
      bestDistance = d
    }
  }
  return best
}

/**
 * Why `options` (as given, unchecked) holds a key none of `known` is: the first such key,
 * and the option it is likely a misspelling of; `undefined` when every key is an option, or
 * `options` is no object (its own check says so).
 *
 * @since 0.3.0
 */
export const unknownOption = <Options>(options: unknown, known: Known<Options>): string | undefined => {
  if (typeof options !== "object" || options === null) return undefined
  let keys: ReadonlyArray<string>
  try {
    keys = Object.keys(options)
  } catch {
    return "its keys cannot be read"
  }
  const names = Object.keys(known)
  const unknown = keys.find((key) => !Object.hasOwn(known, key))
  if (unknown === undefined) return undefined
  const shown = JSON.stringify(unknown.length > 64 ? `${unknown.slice(0, 64)}…` : unknown)
  const likely = closest(unknown, names)
  return likely === undefined
    ? `${shown} is no option (the options: ${names.join(", ")})`
    : `${shown} is no option (did you mean ${JSON.stringify(likely)}?)`
}
