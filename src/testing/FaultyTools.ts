/**
 * Tools that misbehave on cue, for users' own tests (R10, R3.7, R3.8): a flaky
 * idempotent tool, a tool with a side-effect ledger whose answer can get lost after the
 * effect happened, and a slow tool. Each comes with an inspection handle, so a test can
 * assert what really happened in the world, e.g. "the payment was applied exactly once":
 *
 * ```ts
 * const payments = FaultyTools.ledgered({
 *   name: "pay",
 *   idempotent: false,
 *   sideEffect: "external",
 *   behaviour: ["apply_then_lose"],
 *   reconcile: true
 * })
 * const result = yield* Run.run({ goal: "pay", tools: [payments.tool] })
 * assert.strictEqual(payments.ledger.total, 1)
 * ```
 *
 * Every handler records its calls with the time by Effect's `Clock`, so on `TestClock`
 * the times are exact.
 *
 * @since 0.1.0
 */
import { Clock, Effect, Predicate, Schema } from "effect"
import * as Abortable from "../cancellation/Abortable.ts"
import * as Failure from "../failure/Failure.ts"
import * as FailureBoundary from "../failure/FailureBoundary.ts"
import * as UserCode from "../failure/UserCode.ts"
import * as RealTime from "../time/RealTime.ts"
import * as Tool from "../tools/Tool.ts"
import {
  type Call,
  type Calls,
  type Entry,
  Input,
  type Ledger,
  makeCalls,
  makeLedger,
  Receipt
} from "./internal/FaultyToolsRecord.ts"

export type { Call, Calls, Entry, Ledger } from "./internal/FaultyToolsRecord.ts"
export { Input, Receipt } from "./internal/FaultyToolsRecord.ts"

/**
 * A flaky tool and what it received.
 *
 * @category models
 * @since 0.1.0
 */
export interface Flaky {
  readonly tool: Tool.Tool<Input, string>
  readonly calls: Calls
}

/**
 * A tool whose first `failures` handler invocations fail with a retryable failure
 * (default: `FailureBoundary.connection`, code `connection_error`), and every later one
 * succeeds with `output` (default `"ok"`). The count is over all its invocations, so a
 * retry of the same call and a new call both move it on.
 *
 * Idempotent by default, with `sideEffect: "read"`: the runtime may retry it (R3.7).
 *
 * @category constructors
 * @since 0.1.0
 */
export const flaky = (options: {
  readonly name: string
  readonly failures: number
  /** The failure of the failing invocations, or a function of the invocation. */
  readonly failure?: Failure.Failure | ((call: Call) => Failure.Failure) | undefined
  readonly idempotent?: boolean | undefined
  readonly maxRetries?: number | undefined
  readonly recoverErrors?: boolean | undefined
  readonly sideEffect?: Tool.SideEffect | undefined
  readonly output?: string | undefined
  readonly description?: string | undefined
}): Flaky => {
  if (typeof options !== "object" || options === null)
    throw new RangeError("FaultyTools.flaky: options must be an object")
  if (!Number.isInteger(options.failures) || options.failures < 0) {
    throw new RangeError(`FaultyTools.flaky: failures must be an integer >= 0, got ${options.failures}`)
  }
  const given = options.failure
  if (given !== undefined && !Predicate.isFunction(given) && !Failure.isFailure(given)) {
    throw new RangeError("FaultyTools.flaky: failure must be a Failure or a function of the call giving one")
  }
  const { calls, record } = makeCalls()
  const failureOf = (call: Call): Failure.Failure => {
    const failure = options.failure
    if (failure === undefined) {
      return FailureBoundary.connection({ source: "tool", detail: `ECONNRESET (flaky call ${call.n})` })
    }
    return Predicate.isFunction(failure) ? failure(call) : failure
  }
  const tool = Tool.make({
    name: options.name,
    description: options.description ?? `fails its first ${options.failures} calls, then succeeds`,
    input: Input,
    output: Schema.String,
    idempotent: options.idempotent ?? true,
    sideEffect: options.sideEffect ?? "read",
    maxRetries: options.maxRetries,
    recoverErrors: options.recoverErrors,
    handler: (input, context) =>
      Effect.flatMap(record(input, context), (call) =>
        call.n <= options.failures ? Effect.fail(failureOf(call)) : Effect.succeed(options.output ?? "ok")
      )
  })
  return { tool, calls }
}

/**
 * What a ledgered call does, scripted per invocation:
 *
 * - `apply`: the side effect happens and the call answers with its receipt.
 * - `apply_then_lose`: the side effect happens, then the answer is lost (the connection
 *   broke): the call fails with `Failure.UnknownOutcome`, code `connection_lost`.
 * - `lose_before_apply`: the connection broke before the request arrived: nothing
 *   happened, but the caller cannot know that: `UnknownOutcome`, code `connection_lost`.
 * - `fail_before_apply`: refused before anything happened, and the caller knows it:
 *   `Failure.Retryable`, code `unavailable`.
 * - `hang`: never answers and applies nothing (only a timeout, the deadline or a cancel
 *   ends it).
 *
 * @category models
 * @since 0.1.0
 */
export type Behaviour = "apply" | "apply_then_lose" | "lose_before_apply" | "fail_before_apply" | "hang"

const behaviours: ReadonlySet<unknown> = new Set<Behaviour>([
  "apply",
  "apply_then_lose",
  "lose_before_apply",
  "fail_before_apply",
  "hang"
])

/** A behaviour the ledger knows, or a `RangeError` naming it (a typo would do nothing it could say). */
const knownBehaviour = (behaviour: unknown, where: string): Behaviour => {
  if (!behaviours.has(behaviour)) {
    throw new RangeError(
      `FaultyTools.ledgered: ${where} ${JSON.stringify(behaviour) ?? String(behaviour)} is not a behaviour (${[...behaviours].join(", ")})`
    )
  }
  return behaviour as Behaviour // Checked just above.
}

/**
 * A ledgered tool, what it received, what it applied, and which keys its status
 * query was asked about.
 *
 * @category models
 * @since 0.1.0
 */
export interface Ledgered {
  readonly tool: Tool.Tool<Input, Receipt>
  readonly calls: Calls
  readonly ledger: Ledger
  /** The idempotency keys the runtime asked the `reconcile` status query about. */
  readonly reconciled: ReadonlyArray<string>
}

const lost = (name: string, call: Call, applied: boolean) =>
  new Failure.UnknownOutcome({
    source: "tool",
    category: "connection",
    code: "connection_lost",
    attempts: 1,
    hint: `${name}: the connection broke before an answer arrived; the action may or may not have taken effect`,
    diagnostic: `call ${call.callId} (${call.idempotencyKey}) ${applied ? "was" : "was not"} applied`
  })

/**
 * A tool with a side-effect ledger keyed by the call's `idempotencyKey` (R3.8).
 *
 * `behaviour` scripts each handler invocation: an array is played in order, and once it
 * runs out every further invocation is `apply`; a function decides from the invocation.
 *
 * An `idempotent` tool behaves like an API that deduplicates by idempotency key: a
 * second `apply` under a key already in the ledger answers the recorded receipt and
 * applies nothing. A tool that is not idempotent applies again every time, which is the
 * hazard a test wants to see never happen.
 *
 * `reconcile: true` gives the tool a status query that answers from the ledger:
 * `Applied` with the recorded receipt when the key is there, `NotApplied` otherwise. A
 * function answers as it likes, from the entry under the key, when there is one.
 *
 * @category constructors
 * @since 0.1.0
 */
export const ledgered = (options: {
  readonly name: string
  readonly idempotent: boolean
  readonly sideEffect: Tool.SideEffect
  readonly behaviour: ReadonlyArray<Behaviour> | ((call: Call) => Behaviour)
  readonly reconcile?:
    | boolean
    | ((entry: Entry | undefined, idempotencyKey: string) => Tool.Reconciliation<Receipt>)
    | undefined
  readonly maxRetries?: number | undefined
  readonly recoverErrors?: boolean | undefined
  readonly timeout?: Tool.Metadata["timeout"]
  readonly description?: string | undefined
  /** The call waits for a person's approval before it runs (R7). */
  readonly needsApproval?: boolean | undefined
}): Ledgered => {
  if (typeof options !== "object" || options === null) {
    throw new RangeError("FaultyTools.ledgered: options must be an object")
  }
  const reconcileGiven: unknown = options.reconcile
  if (reconcileGiven !== undefined && typeof reconcileGiven !== "boolean" && !Predicate.isFunction(reconcileGiven)) {
    throw new RangeError(
      `FaultyTools.ledgered: reconcile must be a boolean or a function of the ledger's entry, got ${JSON.stringify(reconcileGiven) ?? String(reconcileGiven)}`
    )
  }
  const script = options.behaviour
  if (!Predicate.isFunction(script)) {
    if (!Array.isArray(script)) throw new RangeError("FaultyTools.ledgered: behaviour must be an array or a function")
    for (const [i, b] of script.entries()) knownBehaviour(b, `behaviour[${i}]`)
  }
  const { calls, record } = makeCalls()
  const { entries, ledger } = makeLedger()
  const reconciled: Array<string> = []
  const behaviourOf = (call: Call): Behaviour => {
    // A function's answer is checked when it is given: the call's handler dies naming it.
    return Predicate.isFunction(script)
      ? knownBehaviour(script(call), `behaviour(call ${call.n}) gave`)
      : (script[call.n - 1] ?? "apply")
  }
  const apply = (call: Call): Receipt => {
    const existing = options.idempotent ? ledger.lookup(call.idempotencyKey) : undefined
    if (existing !== undefined) return existing.output
    const output: Receipt = {
      receipt: `${options.name}-${entries.length + 1}`,
      idempotencyKey: call.idempotencyKey
    }
    entries.push({ idempotencyKey: call.idempotencyKey, callId: call.callId, input: call.input, output, at: call.at })
    return output
  }
  const reconcileOption = options.reconcile
  const reconcile =
    reconcileOption === undefined || reconcileOption === false
      ? undefined
      : (_: Input, context: Tool.CallContext) =>
          Effect.sync((): Tool.Reconciliation<Receipt> => {
            reconciled.push(context.idempotencyKey)
            const entry = ledger.lookup(context.idempotencyKey)
            if (reconcileOption !== true) return reconcileOption(entry, context.idempotencyKey)
            return entry === undefined ? { _tag: "NotApplied" } : { _tag: "Applied", output: entry.output }
          })
  const tool = Tool.make({
    name: options.name,
    description: options.description ?? "an action with a side effect, recorded in a ledger",
    input: Input,
    output: Receipt,
    idempotent: options.idempotent,
    sideEffect: options.sideEffect,
    maxRetries: options.maxRetries,
    recoverErrors: options.recoverErrors,
    timeout: options.timeout,
    needsApproval: options.needsApproval,
    ...(reconcile === undefined ? {} : { reconcile }),
    handler: (input, context) =>
      Effect.flatMap(record(input, context), (call): Effect.Effect<Receipt, Failure.Failure> => {
        switch (behaviourOf(call)) {
          case "apply":
            return Effect.sync(() => apply(call))
          case "apply_then_lose":
            return Effect.suspend(() => {
              apply(call)
              return Effect.fail(lost(options.name, call, true))
            })
          case "lose_before_apply":
            return Effect.fail(lost(options.name, call, false))
          case "fail_before_apply":
            return Effect.fail(
              new Failure.Retryable({
                source: "tool",
                category: "unavailable",
                code: "unavailable",
                attempts: 1,
                hint: `${options.name}: the service refused the request before doing anything; try again`
              })
            )
          case "hang":
            return Effect.never
        }
      })
  })
  return { tool, calls, ledger, reconciled }
}

/**
 * A sleep whose interruption is ignored as a promise ignores its `AbortSignal` under
 * `Abortable.handler`: the interruption completes only after `Abortable`'s grace, in real
 * time (told to a test-clock driver), and the call is settled `outcome_unknown`, as
 * `Abortable` settles such a promise.
 */
const ignoringItsSignal = (millis: number, context: Tool.CallContext): Effect.Effect<void> =>
  Effect.onInterrupt(Effect.sleep(millis), () =>
    Effect.andThen(
      RealTime.sleep(Abortable.defaultGraceMillis),
      Effect.sync(() =>
        context.settle(
          "outcome_unknown",
          `the tool ignored its abort signal for the ${Abortable.defaultGraceMillis} ms grace period: it may still be ` +
            "running in this process, and its effect must be reclaimed or reconciled"
        )
      )
    )
  )

/**
 * A slow tool and what it received. `finished` holds the clock time at which each
 * invocation that was not cut off answered.
 *
 * @category models
 * @since 0.1.0
 */
export interface Slow {
  readonly tool: Tool.Tool<Input, string>
  readonly calls: Calls
  readonly finished: ReadonlyArray<number>
}

/**
 * A tool that sleeps `millis` on Effect's `Clock` (so `TestClock` in tests) and then
 * answers `output` (default `"done"`). Idempotent and read-only unless told otherwise.
 *
 * With `ignoresCancellation` (R10), it is a tool that ignores its `AbortSignal`, as an
 * `Abortable` handler whose promise never settles on the abort: whatever cuts it off (its
 * timeout, the step or run deadline, a cancel) waits `Abortable`'s grace for it (100 ms,
 * real time, during which `TestClockDriver` holds the clock still), and the call is
 * recorded `outcome_unknown`, "it may still be running" (in `pendingActions`). Its timeout
 * and the step deadline cut it off at their time, as they cut off such a promise. A stop
 * grace (`time.stopGrace`) shorter than that grace leaves it behind instead: the run's
 * result says so. (Code that cannot be interrupted at all, an `Effect.uninterruptible`
 * region, is another thing: it holds its step until it ends; write such a tool yourself.)
 *
 * @category constructors
 * @since 0.1.0
 */
export const slow = (options: {
  readonly name: string
  readonly millis: number
  readonly idempotent?: boolean | undefined
  readonly sideEffect?: Tool.SideEffect | undefined
  readonly timeout?: Tool.Metadata["timeout"]
  readonly maxRetries?: number | undefined
  readonly recoverErrors?: boolean | undefined
  readonly output?: string | undefined
  readonly description?: string | undefined
  readonly ignoresCancellation?: boolean | undefined
}): Slow => {
  if (typeof options !== "object" || options === null)
    throw new RangeError("FaultyTools.slow: options must be an object")
  if (!(options.millis >= 0) || !Number.isFinite(options.millis)) {
    throw new RangeError(`FaultyTools.slow: millis must be a finite number >= 0, got ${JSON.stringify(options.millis)}`)
  }
  // Its own options; the tool's (name, idempotent, timeout, …) are checked by `Tool.make`.
  const { ignoresCancellation, output } = options
  if (ignoresCancellation !== undefined && typeof ignoresCancellation !== "boolean") {
    throw new RangeError(
      `FaultyTools.slow: ignoresCancellation must be a boolean, got ${UserCode.shown(ignoresCancellation)}`
    )
  }
  if (output !== undefined && typeof output !== "string") {
    throw new RangeError(`FaultyTools.slow: output must be a string, got ${UserCode.shown(output)}`)
  }
  const { calls, record } = makeCalls()
  const finished: Array<number> = []
  const tool = Tool.make({
    name: options.name,
    description: options.description ?? `answers after ${options.millis} ms`,
    input: Input,
    output: Schema.String,
    idempotent: options.idempotent ?? true,
    sideEffect: options.sideEffect ?? "read",
    timeout: options.timeout,
    maxRetries: options.maxRetries,
    recoverErrors: options.recoverErrors,
    handler: (input, context) =>
      record(input, context).pipe(
        Effect.andThen(
          options.ignoresCancellation === true
            ? ignoringItsSignal(options.millis, context)
            : Effect.sleep(options.millis)
        ),
        Effect.andThen(Clock.currentTimeMillis),
        Effect.map((at) => {
          finished.push(at)
          return options.output ?? "done"
        })
      )
  })
  return { tool, calls, finished }
}
