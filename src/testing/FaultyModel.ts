/**
 * A model that misbehaves on cue (R10): each call plays the next step of a script, a
 * response or a provider fault, classified exactly as a real provider adapter would
 * classify it at its boundary (R3.2). It records the time of every call, so a test on
 * `TestClock` can assert the exact backoff delays.
 *
 * @since 0.1.0
 */
import { Clock, Effect, Layer, Predicate, Schema } from "effect"
import * as Failure from "../failure/Failure.ts"
import * as FailureBoundary from "../failure/FailureBoundary.ts"
import * as UserCode from "../failure/UserCode.ts"
import * as Model from "../model/Model.ts"
import * as CallIds from "./internal/CallIds.ts"

/**
 * One scripted call: a response, or a fault.
 *
 * @category models
 * @since 0.1.0
 */
export type Step =
  | { readonly _tag: "Respond"; readonly response: Model.Response }
  | { readonly _tag: "Fault"; readonly fault: Fault }
  | { readonly _tag: "Hang" }

/**
 * @category models
 * @since 0.1.0
 */
export type Fault =
  | { readonly kind: "http"; readonly status: number; readonly retryAfter?: string | undefined }
  | { readonly kind: "timeout" }
  | { readonly kind: "connection_reset" }
  | { readonly kind: "corrupt_json" }
  | { readonly kind: "already_retried"; readonly status: number; readonly attempts: number }
  | { readonly kind: "unfinished"; readonly usage: Model.Usage }

/**
 * @category constructors
 * @since 0.1.0
 */
export const respond = (response: Model.Response): Step => ({ _tag: "Respond", response })

/**
 * HTTP 429, optionally with a `Retry-After` header value (seconds or an HTTP date).
 * A value the provider boundary cannot read (a number, `"soon"`, `""`) is a `RangeError`
 * naming it: it would be a fault with no `Retry-After` at all.
 *
 * @category constructors
 * @since 0.1.0
 */
export const rateLimited = (retryAfter?: string): Step => {
  if (!isRetryAfter(retryAfter)) {
    throw new RangeError(`FaultyModel.rateLimited: ${retryAfterRule}, got ${UserCode.shown(retryAfter)}`)
  }
  return { _tag: "Fault", fault: { kind: "http", status: 429, retryAfter } }
}

const retryAfterRule = 'retryAfter must be a Retry-After header value: delay-seconds ("2") or an HTTP-date'

/** Absent, or a header value the provider boundary reads (as `FailureBoundary.http` reads it). */
const isRetryAfter = (value: unknown): boolean =>
  value === undefined || (typeof value === "string" && FailureBoundary.retryAfterMillis(value, 0) !== undefined)

/**
 * @category constructors
 * @since 0.1.0
 */
export const httpError = (status: number): Step => ({
  _tag: "Fault",
  fault: { kind: "http", status: httpStatus("httpError", status) }
})

const failingStatusRule = "status must be an HTTP status a client fails on (300 to 599)"

/** What a client fails on: a redirect (never followed), a client or a server error. */
const isFailingStatus = (status: unknown): boolean =>
  typeof status === "number" && Number.isSafeInteger(status) && status >= 300 && status <= 599

/** `status`, or a `RangeError` naming the constructor `made` when it is no HTTP status. */
const httpStatus = (made: string, status: number): number => {
  if (!isFailingStatus(status)) throw new RangeError(`FaultyModel.${made}: ${failingStatusRule}, got ${status}`)
  return status
}

/**
 * @category constructors
 * @since 0.1.0
 */
export const timeout: Step = { _tag: "Fault", fault: { kind: "timeout" } }

/**
 * @category constructors
 * @since 0.1.0
 */
export const connectionReset: Step = { _tag: "Fault", fault: { kind: "connection_reset" } }

/**
 * @category constructors
 * @since 0.1.0
 */
export const corruptJson: Step = { _tag: "Fault", fault: { kind: "corrupt_json" } }

/**
 * A failure the provider's own client already retried `attempts` times (R3.4).
 *
 * @category constructors
 * @since 0.1.0
 */
export const alreadyRetried = (status: number, attempts: number): Step => {
  if (!Number.isSafeInteger(attempts) || attempts < 1) {
    throw new RangeError(`FaultyModel.alreadyRetried: attempts must be an integer >= 1, got ${attempts}`)
  }
  return { _tag: "Fault", fault: { kind: "already_retried", status: httpStatus("alreadyRetried", status), attempts } }
}

/**
 * An answer the provider stopped unfinished after it had cost `usage` (a finish reason of
 * `error` or `pause`, DeepSeek's `insufficient_system_resource`): retryable, and charged to
 * the run's token and cost budgets (R2.1), as the built-in providers report it.
 *
 * @category constructors
 * @since 0.3.0
 */
export const unfinished = (usage: Model.Usage): Step => {
  if (!isUsage(usage)) {
    throw new RangeError(
      "FaultyModel.unfinished: usage must be a Model.Usage (whole, non-negative token counts; a cost of 0 or more)"
    )
  }
  return { _tag: "Fault", fault: { kind: "unfinished", usage } }
}

const isUsage = Schema.is(Model.Usage)

/**
 * A call that never answers: only the run's deadline or a cancel ends it.
 *
 * @category constructors
 * @since 0.1.0
 */
export const hang: Step = { _tag: "Hang" }

const faultKinds: ReadonlyArray<string> = [
  "http",
  "timeout",
  "connection_reset",
  "corrupt_json",
  "already_retried",
  "unfinished"
]

/** Why `step` (of a script made by hand: a value of whatever type) is no step, or `undefined`. */
const stepProblem = (step: unknown): string | undefined => {
  const tag = Predicate.hasProperty(step, "_tag") ? step._tag : undefined
  if (tag === "Hang") return undefined
  if (tag === "Respond") {
    return Predicate.hasProperty(step, "response") && Predicate.isObject(step.response)
      ? undefined
      : "is a Respond without a response"
  }
  if (tag !== "Fault") return "is not a step (make it with respond, httpError, timeout, …)"
  const fault = Predicate.hasProperty(step, "fault") ? step.fault : undefined
  const kind = Predicate.hasProperty(fault, "kind") ? fault.kind : undefined
  if (typeof kind !== "string" || !faultKinds.includes(kind)) {
    return `is a fault of no kind there is (${faultKinds.join(", ")}), got ${UserCode.shown(kind)}`
  }
  const status = Predicate.hasProperty(fault, "status") ? fault.status : undefined
  if ((kind === "http" || kind === "already_retried") && !(Number.isInteger(status) && Number(status) >= 100)) {
    return `is an ${kind} fault without an HTTP status, got ${UserCode.shown(status)}`
  }
  // Refused as `httpError` refuses it: a 200 (or a 102) is no fault, and would be classified as one.
  if ((kind === "http" || kind === "already_retried") && !isFailingStatus(status)) {
    return `is an ${kind} fault whose ${failingStatusRule}, got ${UserCode.shown(status)}`
  }
  // Refused as `rateLimited` refuses it: a value read as nothing is a fault without its wait.
  const retryAfter = Predicate.hasProperty(fault, "retryAfter") ? fault.retryAfter : undefined
  if (kind === "http" && !isRetryAfter(retryAfter)) {
    return `is an http fault whose ${retryAfterRule}, got ${UserCode.shown(retryAfter)}`
  }
  if (kind === "unfinished" && !isUsage(Predicate.hasProperty(fault, "usage") ? fault.usage : undefined)) {
    return "is an unfinished fault without a Model.Usage"
  }
  return undefined
}

/**
 * The failure a provider adapter produces for a fault, at time `now`.
 *
 * @category constructors
 * @since 0.1.0
 */
export const toFailure = (fault: Fault, now: number): Failure.Failure => {
  switch (fault.kind) {
    case "http":
      return FailureBoundary.http({ status: fault.status, retryAfter: fault.retryAfter, now })
    case "timeout":
      return FailureBoundary.timeout({ source: "provider", layer: "attempt", limitMillis: 30_000, afterMillis: 30_000 })
    case "connection_reset":
      return FailureBoundary.connection({ source: "provider", detail: "ECONNRESET" })
    case "corrupt_json":
      return FailureBoundary.corruptResponse({ source: "provider", detail: "Unexpected end of JSON input" })
    case "already_retried":
      return FailureBoundary.withAttempts(FailureBoundary.http({ status: fault.status, now }), fault.attempts)
    case "unfinished":
      return new Failure.Retryable({
        source: "provider",
        category: "provider_interrupted",
        code: "answer_unfinished",
        attempts: 1,
        hint: "the provider stopped the answer unfinished (finish reason: pause)",
        usage: fault.usage
      })
  }
}

/**
 * A faulty model and what it saw: the clock time of each call, and the usage of each
 * answer it gave (`paid`: a response's, or an unfinished answer's, in the order given),
 * what a provider would bill; a run's token and cost budgets must count all of it (R2.1).
 *
 * @category models
 * @since 0.1.0
 */
export interface FaultyModel {
  readonly service: Model.Model["Service"]
  readonly calls: ReadonlyArray<number>
  /** @since 0.3.0 */
  readonly paid: ReadonlyArray<Model.Usage>
}

/**
 * How a faulty model finds the step of a call:
 *
 * - `"call"` (the default): the n-th call plays the n-th step, whatever it asks.
 * - `"iteration"`: keyed by the request, as a provider answers what it is asked: the
 *   steps of iteration n are those after the script's (n-1)-th response, and the a-th
 *   request of iteration n plays the a-th of them. A run played once gets the same
 *   steps either way (an iteration ends at its response); a model made anew for a run
 *   resumed after a crash (R9) answers a request asked again, whose response the crash
 *   lost, as the first process's model did, where a call counter would have started over.
 *
 * @category models
 * @since 0.3.0
 */
export type Keying = "call" | "iteration"

/**
 * @category constructors
 * @since 0.1.0
 */
export const make = (script: ReadonlyArray<Step>, options?: { readonly keyedBy?: Keying | undefined }): FaultyModel => {
  // The script is user code's (R12): what is not a script is said so here, not later as a defect of the run.
  const given: unknown = script
  if (!Array.isArray(given))
    throw new TypeError(`FaultyModel.make: script must be an array of steps, got ${typeof given}`)
  for (let i = 0; i < given.length; i++) {
    const problem = stepProblem(given[i])
    if (problem !== undefined) throw new TypeError(`FaultyModel.make: step ${i} ${problem}`)
  }
  const keyedBy = options?.keyedBy
  if (keyedBy !== undefined && keyedBy !== "call" && keyedBy !== "iteration") {
    throw new RangeError(`FaultyModel.make: keyedBy must be "call" or "iteration", got ${JSON.stringify(keyedBy)}`)
  }
  const calls: Array<number> = []
  const paid: Array<Model.Usage> = []
  const number = CallIds.numbering()
  const byIteration = options?.keyedBy === "iteration"
  // Where each iteration's steps begin: just after the response that ended the one before.
  const starts = [0]
  script.forEach((step, i) => {
    if (step._tag === "Respond") starts.push(i + 1)
  })
  const asked = new Map<number, number>()
  const indexOf = (request: Model.Request): number => {
    if (!byIteration) return calls.length
    const attempt = (asked.get(request.iteration) ?? 0) + 1
    asked.set(request.iteration, attempt)
    return (starts[request.iteration - 1] ?? script.length) + attempt - 1
  }
  const service: Model.Model["Service"] = {
    generate: (request) =>
      Effect.flatMap(Clock.currentTimeMillis, (now) => {
        const index = indexOf(request)
        const step = script[index]
        calls.push(now)
        if (step === undefined) {
          return Effect.fail(
            new Failure.Permanent({
              source: "provider",
              category: "script",
              code: "script_exhausted",
              attempts: 1,
              hint: `the faulty model has ${script.length} steps and was asked for step ${index + 1}`
            })
          )
        }
        switch (step._tag) {
          case "Respond":
            paid.push(step.response.usage)
            return Effect.succeed(number(step.response))
          case "Fault":
            if (step.fault.kind === "unfinished") paid.push(step.fault.usage)
            return Effect.fail(toFailure(step.fault, now))
          case "Hang":
            return Effect.never
        }
      })
  }
  return { service, calls, paid }
}

/**
 * @category layers
 * @since 0.1.0
 */
export const layer = (model: FaultyModel): Layer.Layer<Model.Model> => Layer.succeed(Model.Model, model.service)
