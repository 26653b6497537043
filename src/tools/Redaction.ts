/**
 * Keeping `Redacted` values out of what the runtime derives (R3.1, R12). A tool's schema
 * may decode an argument into a `Redacted` (`Schema.RedactedFromValue`) or return one in
 * its output; the model sent the plain text and `model.responded` keeps what it sent,
 * but nothing the runtime derives from it may copy it: not a call's signature, not the
 * input or output a `tool.succeeded` records, not the arguments an approval shows, not
 * an observation or a failure's message.
 *
 * Only a tool whose input or output schema holds a `Redacted` is *sensitive*; the others
 * pay nothing. For a sensitive tool, what the run shows of a value is its JSON encoding
 * with every `Redacted` replaced by `<redacted>` first (so a schema that renames or
 * transforms a field is masked as it encodes); and the plain values of its secrets, down
 * to every string inside a `Redacted` struct, are masked in any text as a second guard.
 * When the input does not decode, nobody knows which part is secret: every string of it
 * is. Private to the runtime.
 */
import { Exit, Predicate, Redacted } from "effect"
import type * as Failure from "../failure/Failure.ts"
import * as SecretForms from "../failure/SecretForms.ts"
import { mask, withoutSecrets } from "./internal/SecretValues.ts"

export { allLeaves, isSensitive, mask, secretsOf, withoutSecrets } from "./internal/SecretValues.ts"

/** Secrets shorter than this are masked where they are a whole value, not inside other text. */
const minInText = 4

/** The mark of text cut short (a hint, a path shown in a denial): what came before it may be half a secret. */
const cut = "…"

/**
 * A beginning of a secret this short, before a cut, is left as it is: it says little of the
 * secret, and text that shares a few characters with one (`http…`) is no secret.
 */
const minCutShort = 8

/** A secret form, and the lengths of its beginnings by their last character, longest first. */
interface Beginnings {
  readonly form: string
  readonly byLast: ReadonlyMap<number, ReadonlyArray<number>>
}

const beginningsOf = (form: string): Beginnings => {
  const byLast = new Map<number, Array<number>>()
  for (let length = form.length - 1; length >= minCutShort; length--) {
    const last = form.charCodeAt(length - 1)
    const lengths = byLast.get(last)
    if (lengths === undefined) byLast.set(last, [length])
    else lengths.push(length)
  }
  return { form, byLast }
}

/** The most character comparisons the search of one text for the secret forms may take. */
const maxSearchWork = 1_000_000_000

/**
 * The most work one text's cuts take, in secret forms looked at and characters compared:
 * past it (thousands of cuts and of long secrets whose characters the text shares), the
 * text is masked whole instead.
 */
const maxComparisons = 20_000_000

/**
 * The length of the longest beginning of a secret form that `text` holds just before
 * `at`, or 0; `undefined` once `budget` is spent.
 */
const cutLength = (
  text: string,
  at: number,
  forms: ReadonlyArray<Beginnings>,
  budget: { left: number }
): number | undefined => {
  let longest = 0
  const last = text.charCodeAt(at - 1)
  for (const { form, byLast } of forms) {
    if (--budget.left < 0) return undefined
    // Only the beginnings that end with the character before the cut are compared.
    for (const length of byLast.get(last) ?? []) {
      if (length <= longest) break
      // A comparison may read the whole beginning: it is charged as much.
      budget.left -= length
      if (budget.left < 0) return undefined
      if (length <= at && text.startsWith(form.slice(0, length), at - length)) {
        longest = length
        break
      }
    }
  }
  return longest
}

/**
 * `text` with the beginning of any secret form that runs into a {@link cut} masked: one
 * pass over the cuts, the text rebuilt once; `undefined` past {@link maxComparisons}.
 */
const maskCutShort = (text: string, beginnings: ReadonlyArray<Beginnings>): string | undefined => {
  const pieces: Array<string> = []
  const budget = { left: maxComparisons }
  let from = 0
  for (let at = text.indexOf(cut); at !== -1; at = text.indexOf(cut, at + 1)) {
    const length = cutLength(text, at, beginnings, budget)
    if (length === undefined) return undefined
    // A beginning that overlaps what an earlier cut masked is left to it.
    if (length > 0 && at - length >= from) {
      pieces.push(text.slice(from, at - length), mask)
      from = at
    }
  }
  if (from === 0) return text
  pieces.push(text.slice(from))
  return pieces.join("")
}

/**
 * The most secret forms text is searched for. A call with more secrets than that (a
 * sensitive tool given thousands of strings) has every text derived from it of at least
 * four characters masked whole: searching each for each would cost the square of its size.
 */
const maxForms = 1_000

/**
 * The secrets of one call, ready to mask with: built once per call, and used for each of
 * the texts and values derived from it.
 *
 * @category models
 * @since 0.3.0
 */
export interface Secrets {
  /** How many distinct secrets there are. */
  readonly size: number
  /** The secrets as they are: a value equal to one is masked whatever its length. */
  readonly whole: ReadonlySet<string>
  /**
   * The forms in which text may hold them as strings: each as it is and as JSON escapes it (a
   * failure's message may quote a value as JSON; see `SecretForms.formsOf`), longest first, so that a secret that
   * holds another is masked whole, never leaving the rest of it around the shorter one's
   * mask. `undefined` when there are more than {@link maxForms}: text is masked whole.
   */
  readonly forms: ReadonlyArray<string> | undefined
  /** The forms' lengths added up: what searching a text for them may cost per character of it. */
  readonly formsLength: number
  /** Masks the secrets long enough to look for inside text where an encoder wrote them (percent-encoded, base64). */
  readonly encoded: (text: string, mask: string) => string
  /** The beginnings of the longer forms, to find one cut short before a `…` (built at the first such text). */
  readonly beginnings: () => ReadonlyArray<Beginnings>
}

/**
 * The secrets of a call, from their plain values (see {@link secretsOf}, {@link allLeaves}).
 *
 * @category constructors
 * @since 0.3.0
 */
export const secrets = (values: Iterable<string>): Secrets => {
  const whole = new Set(values)
  if (whole.size > maxForms) {
    return { size: whole.size, whole, forms: undefined, formsLength: 0, encoded: (text) => text, beginnings: () => [] }
  }
  const inText = [...whole].filter((secret) => secret.length >= minInText)
  const found = new Set(inText.flatMap(SecretForms.formsOf))
  const forms = [...found].sort((a, b) => b.length - a.length)
  let beginnings: ReadonlyArray<Beginnings> | undefined
  return {
    size: whole.size,
    whole,
    forms,
    formsLength: forms.reduce((sum, form) => sum + form.length, 0),
    encoded: SecretForms.masker(inText),
    beginnings: () => {
      beginnings ??= forms.filter((form) => form.length > minCutShort).map(beginningsOf)
      return beginnings
    }
  }
}

/**
 * A call without secrets.
 *
 * @category constructors
 * @since 0.3.0
 */
export const none: Secrets = secrets([])

/**
 * `known` and the plain values `more`, as one set of secrets (an output's own secrets, to a call's).
 *
 * @category combinators
 * @since 0.3.0
 */
export const adding = (known: Secrets, more: ReadonlyArray<string>): Secrets =>
  more.length === 0 ? known : secrets([...known.whole, ...more])

/**
 * `text` with every secret of at least four characters replaced by {@link mask}, in each of
 * its forms (see {@link Secrets}), longest first, also where the text was cut short in the
 * middle of one (its first eight characters or more, before a `…`); a run of base64 whose
 * bytes hold one is masked whole. With too many secrets to search for, every text of four
 * characters or more is masked whole.
 */
export const maskText = (text: string, secrets: Secrets): string => {
  if (secrets.size === 0) return text
  if (secrets.whole.has(text)) return mask
  // Too many secrets to search for, or a search that may compare each form at each place
  // of the text past a bound (long secrets built to nearly match a long text): masked whole.
  if (secrets.forms === undefined || secrets.formsLength * text.length > maxSearchWork) {
    return text.length < minInText ? text : mask
  }
  let out = text
  for (const form of secrets.forms) {
    if (out.includes(form)) out = out.replaceAll(form, mask)
  }
  out = secrets.encoded(out, mask)
  return out.includes(cut) ? (maskCutShort(out, secrets.beginnings()) ?? mask) : out
}

/**
 * The names an object's keys are shown under: a key may hold a secret too (an output keyed
 * by the token it checked), and is masked. Keys masked alike stay apart, numbered
 * (`<redacted>`, `<redacted> (2)`) past every name a key the masking left alone has: no
 * entry is dropped, and none takes the name of another.
 */
const keysShown = (keys: ReadonlyArray<string>, secrets: Secrets): ReadonlyArray<readonly [string, string]> => {
  const masked = keys.map((key) => maskText(key, secrets))
  const taken = new Set(keys.filter((key, i) => masked[i] === key))
  return keys.map((key, i) => {
    const base = masked[i] ?? key
    if (base === key) return [key, key] as const
    let shown = base
    for (let n = 2; taken.has(shown); n++) shown = `${base} (${n})`
    taken.add(shown)
    return [key, shown] as const
  })
}

/**
 * A JSON value with every secret masked: a string or number equal to one, and text that
 * contains one. The value itself when there is no secret; a copy otherwise. The value
 * has passed the pipeline's JSON checks (bounded depth, no cycle).
 */
export const maskValue = (value: unknown, secrets: Secrets): unknown => {
  if (secrets.size === 0) return value
  const walk = (v: unknown): unknown => {
    if (Predicate.isString(v)) return maskText(v, secrets)
    if (Predicate.isNumber(v)) return secrets.whole.has(String(v)) ? mask : v
    if (Array.isArray(v)) return v.map(walk)
    if (Predicate.isObject(v) && !Redacted.isRedacted(v)) {
      const out: Record<string, unknown> = {}
      const names = keysShown(Object.keys(v), secrets)
      for (const [key, shown] of names) {
        Object.defineProperty(out, shown, {
          value: walk(v[key]),
          enumerable: true,
          writable: true,
          configurable: true
        })
      }
      return out
    }
    return v
  }
  return walk(value)
}

/**
 * What a sensitive value shows: its JSON encoding with the secrets replaced before it
 * is encoded (see the module doc), then masked by value; `undefined` when it does not
 * encode so.
 */
export const shownBy = (
  encode: (value: unknown) => Exit.Exit<unknown, unknown>,
  decoded: unknown,
  secrets: Secrets
): unknown => {
  try {
    const encoded = encode(withoutSecrets(decoded))
    return Exit.isSuccess(encoded) ? maskValue(encoded.value, secrets) : undefined
  } catch {
    return undefined
  }
}

/**
 * A failure's summary with the secrets masked in its hint. Its `code` is the failure's
 * name, which policies and the run branch on, kept as given: put no secret in it.
 */
export const maskSummary = (summary: Failure.Summary, secrets: Secrets): Failure.Summary =>
  secrets.size === 0 ? summary : { ...summary, hint: maskText(summary.hint, secrets) }
