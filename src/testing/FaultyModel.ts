/**
 * A model that misbehaves on cue (R10): each call plays the next step of a script, a
 * response or a provider fault, classified exactly as a real provider adapter would
 * classify it at its boundary (R3.2). It records the time of every call, so a test on
 * `TestClock` can assert the exact backoff delays.
 *
 * @since 0.1.0
 */
import { Clock, Effect, Layer } from "effect"
import * as Failure from "../failure/Failure.ts"
import * as FailureBoundary from "../failure/FailureBoundary.ts"
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

/**
 * @category constructors
 * @since 0.1.0
 */
export const respond = (response: Model.Response): Step => ({ _tag: "Respond", response })

/**
 * HTTP 429, optionally with a `Retry-After` header value (seconds or an HTTP date).
 *
 * @category constructors
 * @since 0.1.0
 */
export const rateLimited = (retryAfter?: string): Step => ({
  _tag: "Fault",
  fault: { kind: "http", status: 429, retryAfter }
})

/**
 * @category constructors
 * @since 0.1.0
 */
export const httpError = (status: number): Step => ({ _tag: "Fault", fault: { kind: "http", status } })

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
export const alreadyRetried = (status: number, attempts: number): Step => ({
  _tag: "Fault",
  fault: { kind: "already_retried", status, attempts }
})

/**
 * A call that never answers: only the run's deadline or a cancel ends it.
 *
 * @category constructors
 * @since 0.1.0
 */
export const hang: Step = { _tag: "Hang" }

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
      return FailureBoundary.timeout({ source: "provider", layer: "attempt", afterMillis: 30_000 })
    case "connection_reset":
      return FailureBoundary.connection({ source: "provider", detail: "ECONNRESET" })
    case "corrupt_json":
      return FailureBoundary.corruptResponse({ source: "provider", detail: "Unexpected end of JSON input" })
    case "already_retried":
      return FailureBoundary.withAttempts(FailureBoundary.http({ status: fault.status, now }), fault.attempts)
  }
}

/**
 * A faulty model and what it saw: the clock time of each call.
 *
 * @category models
 * @since 0.1.0
 */
export interface FaultyModel {
  readonly service: Model.Model["Service"]
  readonly calls: ReadonlyArray<number>
}

/**
 * @category constructors
 * @since 0.1.0
 */
export const make = (script: ReadonlyArray<Step>): FaultyModel => {
  const calls: Array<number> = []
  const number = CallIds.numbering()
  const service: Model.Model["Service"] = {
    generate: () =>
      Effect.flatMap(Clock.currentTimeMillis, (now) => {
        const step = script[calls.length]
        calls.push(now)
        if (step === undefined) {
          return Effect.fail(
            new Failure.Permanent({
              source: "provider",
              category: "script",
              code: "script_exhausted",
              attempts: 1,
              hint: `the faulty model has ${script.length} steps and was called ${calls.length} times`
            })
          )
        }
        switch (step._tag) {
          case "Respond":
            return Effect.succeed(number(step.response))
          case "Fault":
            return Effect.fail(toFailure(step.fault, now))
          case "Hang":
            return Effect.never
        }
      })
  }
  return { service, calls }
}

/**
 * @category layers
 * @since 0.1.0
 */
export const layer = (model: FaultyModel): Layer.Layer<Model.Model> => Layer.succeed(Model.Model, model.service)
