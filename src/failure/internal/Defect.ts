/**
 * What can be said of a thrown value without trusting it: its safe description and its
 * diagnostic text. Re-exported from `Failure`.
 */
import { Predicate } from "effect"
import * as Text from "../Text.ts"

/** An error class name as code writes it (`TypeError`, `PaymentDeclined`); anything else is not shown. */
const identifier = /^[A-Za-z_$][\w$]{0,63}$/

/**
 * An error code as system and library errors carry it: an errno (`ENOENT`) or words
 * joined by `_` (`ERR_INVALID_URL`, `UND_ERR_SOCKET`). Not any run of capitals and
 * digits: an access key id looks like one.
 */
const errorCode = /^(E[A-Z]{2,15}|[A-Z][A-Z0-9]*(_[A-Z0-9]+){1,6})$/

/** Reads one property of a value that may be hostile (a getter or a Proxy trap that throws). */
const read = (value: object, key: string): unknown => {
  try {
    return Reflect.get(value, key)
  } catch {
    return undefined
  }
}

/**
 * What can be said about a thrown value without trusting it: its type, an error's class
 * name when it looks like one, an errno-style `code`, and the `safeMessage` the thrower
 * marked safe to show. Never the value's own text: an error message can hold anything
 * (a key, a private path, a customer's data). Nothing here can throw, whatever the value.
 *
 * @category models
 * @since 0.1.0
 */
export interface DefectDescription {
  /** `TypeError`, `Error`, `a string`, `a non-Error object`, `null`, … */
  readonly type: string
  readonly code: string | undefined
  readonly safeMessage: string | undefined
}

const isErrorSafe = (value: unknown): value is Error => {
  try {
    return Predicate.isError(value)
  } catch {
    return false
  }
}

/**
 * Describes an unknown thrown value safely (see {@link DefectDescription}).
 *
 * @category constructors
 * @since 0.1.0
 */
export const describeDefect = (defect: unknown): DefectDescription => {
  if (defect === null || defect === undefined) return { type: String(defect), code: undefined, safeMessage: undefined }
  if (typeof defect !== "object" && typeof defect !== "function") {
    return { type: `a ${typeof defect}`, code: undefined, safeMessage: undefined }
  }
  const name = isErrorSafe(defect) ? read(defect, "name") : undefined
  const code = read(defect, "code")
  const safe = read(defect, "safeMessage")
  return {
    type:
      Predicate.isString(name) && identifier.test(name)
        ? name
        : isErrorSafe(defect)
          ? "Error"
          : `a non-Error ${typeof defect}`,
    code: Predicate.isString(code) && errorCode.test(code) ? code : undefined,
    safeMessage: Predicate.isString(safe) && safe.trim() !== "" ? clip(safe) : undefined
  }
}

const clip = (text: string): string => {
  const line = text.split("\n", 1)[0] ?? ""
  return Text.clip(line, 1000)
}

/**
 * The text a thrown value is shown as to people and models: its type, its `code`, and
 * its `safeMessage` when the thrower set one (`TypeError`, `Error ENOENT`,
 * `PaymentError: the card was declined`).
 *
 * @category constructors
 * @since 0.1.0
 */
export const safeDescription = (defect: unknown): string => {
  const { type, code, safeMessage } = describeDefect(defect)
  return `${type}${code === undefined ? "" : ` ${code}`}${safeMessage === undefined ? "" : `: ${safeMessage}`}`
}

/**
 * The whole text of a thrown value, for `diagnostic` only: its stack or its string form,
 * or, when even that throws, a note that it could not be printed.
 *
 * @category constructors
 * @since 0.1.0
 */
export const diagnosticOf = (defect: unknown): string => {
  try {
    if (isErrorSafe(defect)) {
      const stack = read(defect, "stack")
      if (Predicate.isString(stack)) return stack
      const message = read(defect, "message")
      if (Predicate.isString(message)) return message
    }
    return String(defect)
  } catch {
    return `a ${describeDefect(defect).type} that cannot be printed`
  }
}
