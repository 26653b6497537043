/**
 * A case made runnable: the `Tools` and `Scenario` of a case, `toScenario` that builds
 * them, and `drive` and `runScenario` that run one on `TestClock`.
 * Private to the testing kit; `Properties` is the public face.
 */
import { Effect, Fiber, type FileSystem, Layer, type Path, Random, Schema } from "effect"
import { TestClock } from "effect/testing"
import * as Failure from "../../Failure.ts"
import * as Permission from "../../Permission.ts"
import * as Recovery from "../../Recovery.ts"
import * as Run from "../../Run.ts"
import type * as RunResult from "../../RunResult.ts"
import * as Tool from "../../Tool.ts"
import * as FaultyModel from "../FaultyModel.ts"
import * as FaultyTools from "../FaultyTools.ts"
import * as ScriptedModel from "../ScriptedModel.ts"
import type { Case, ModelFault, ToolOutcome } from "./PropertyCase.ts"
import type { Budget } from "./PropertyChecks.ts"

/**
 * The tools of a scenario and what they saw.
 *
 * @category models
 * @since 0.1.0
 */
export interface Tools {
  /** Idempotent read: succeeds, fails retryably or permanently, or is slow, as its call's plan says. */
  readonly lookup: FaultyTools.Calls
  /** Not idempotent: fails retryably as its call's plan says. */
  readonly submit: FaultyTools.Ledgered
  /** Payments of unknown outcome: no status query, one from the ledger, one that cannot decide. */
  readonly pay: FaultyTools.Ledgered
  readonly payChecked: FaultyTools.Ledgered
  readonly payUndecidable: FaultyTools.Ledgered
  /** Refused by the permission policy: its handler must never run. */
  readonly forbidden: FaultyTools.Flaky
}

/**
 * A case made runnable.
 *
 * @category models
 * @since 0.1.0
 */
export interface Scenario {
  readonly case: Case
  readonly model: FaultyModel.FaultyModel
  readonly tools: Tools
  readonly options: Run.Options<Tool.Any<never>>
  readonly permission: Permission.Options
  readonly budget: Budget
  /** What each tool call id was scripted to do. */
  readonly plan: ReadonlyMap<string, ToolOutcome>
}

const rejected = (name: string) =>
  new Failure.Permanent({
    source: "tool",
    category: "rejected",
    code: "rejected",
    attempts: 1,
    hint: `${name}: the request was rejected`
  })

const busy = (name: string, n: number) =>
  new Failure.Retryable({
    source: "tool",
    category: "unavailable",
    code: "unavailable",
    attempts: 1,
    hint: `${name}: the service is busy (failure ${n})`
  })

const toolFor = (outcome: ToolOutcome): string => {
  switch (outcome._tag) {
    case "Succeeds":
    case "Permanent":
    case "InvalidArgument":
    case "Slow":
      return "lookup"
    case "Retryable":
      return outcome.idempotent ? "lookup" : "submit"
    case "UnknownOutcome":
      switch (outcome.reconcile) {
        case "none":
          return "pay"
        case "applied":
        case "not_applied":
          return "pay_checked"
        case "undecidable":
          return "pay_undecidable"
      }
      return "pay"
    case "PermissionDenied":
      return "forbidden"
  }
}

const faultStep = (fault: ModelFault): FaultyModel.Step => {
  switch (fault._tag) {
    case "RateLimited":
      return FaultyModel.rateLimited(fault.retryAfterSeconds === null ? undefined : String(fault.retryAfterSeconds))
    case "ServerError":
      return FaultyModel.httpError(500)
    case "Timeout":
      return FaultyModel.timeout
    case "ConnectionReset":
      return FaultyModel.connectionReset
    case "CorruptJson":
      return FaultyModel.corruptJson
    case "BadRequest":
      return FaultyModel.httpError(400)
    case "Unauthorized":
      return FaultyModel.httpError(401)
    case "Hang":
      return FaultyModel.hang
  }
}

/**
 * Builds the model script, the tools and the run options of a case. Every call makes
 * fresh tools and a fresh model, so build the scenario inside each property evaluation.
 *
 * Tool calls are numbered `c1`, `c2`, … in script order; each call's arguments name its
 * id, so no two calls share a signature. The run id is `"prop"`.
 *
 * @category constructors
 * @since 0.1.0
 */
export const toScenario = (c: Case): Scenario => {
  const plan = new Map<string, ToolOutcome>()
  const failuresSeen = new Map<string, number>()
  const script: Array<FaultyModel.Step> = []
  let next = 0
  for (const step of c.steps) {
    if (step._tag !== "CallTools") {
      script.push(faultStep(step))
      continue
    }
    const calls = step.calls.map((outcome): readonly [string, unknown, string] => {
      const id = `c${++next}`
      plan.set(id, outcome)
      const args = outcome._tag === "InvalidArgument" ? { q: 42 } : { q: id }
      return [toolFor(outcome), args, id]
    })
    script.push(FaultyModel.respond(ScriptedModel.toolCalls(...calls)))
  }
  if (c.ending === "final_answer") script.push(FaultyModel.respond(ScriptedModel.finalAnswer("done")))

  const common = { maxRetries: c.toolMaxRetries, recoverErrors: c.recoverErrors }
  // Fails the first `failures` invocations of a call, counted per call id.
  const failing = (callId: string): number | undefined => {
    const outcome = plan.get(callId)
    if (outcome?._tag !== "Retryable") return undefined
    const seen = (failuresSeen.get(callId) ?? 0) + 1
    failuresSeen.set(callId, seen)
    return seen <= outcome.failures ? seen : undefined
  }

  const lookupCalls: Array<FaultyTools.Call> = []
  const lookup = Tool.make({
    name: "lookup",
    description: "an idempotent read",
    input: Schema.Struct({ q: Schema.String }),
    output: Schema.String,
    idempotent: true,
    sideEffect: "read",
    ...common,
    handler: (input, context) =>
      Effect.gen(function* () {
        const at = yield* Effect.clockWith((clock) => clock.currentTimeMillis)
        lookupCalls.push({
          n: lookupCalls.length + 1,
          callId: context.callId,
          idempotencyKey: context.idempotencyKey,
          attempt: lookupCalls.filter((x) => x.idempotencyKey === context.idempotencyKey).length + 1,
          input,
          at
        })
        const outcome = plan.get(context.callId)
        if (outcome?._tag === "Permanent") return yield* rejected("lookup")
        if (outcome?._tag === "Slow") yield* Effect.sleep(outcome.millis)
        const failure = failing(context.callId)
        if (failure !== undefined) return yield* busy("lookup", failure)
        return `found ${input.q}`
      })
  })
  const lookupHandle: FaultyTools.Calls = {
    all: lookupCalls,
    get count() {
      return lookupCalls.length
    },
    forKey: (key) => lookupCalls.filter((x) => x.idempotencyKey === key),
    forCall: (callId) => lookupCalls.filter((x) => x.callId === callId),
    get keys() {
      return [...new Set(lookupCalls.map((x) => x.idempotencyKey))]
    }
  }

  const submit = FaultyTools.ledgered({
    name: "submit",
    idempotent: false,
    sideEffect: "external",
    ...common,
    behaviour: (call) => (failing(call.callId) !== undefined ? "fail_before_apply" : "apply")
  })
  const pay = FaultyTools.ledgered({
    name: "pay",
    idempotent: false,
    sideEffect: "external",
    ...common,
    behaviour: ["apply_then_lose"],
    reconcile: false
  })
  // A call planned "not applied" is lost before it applies; the runtime's resend under
  // the same key (after the status query said so) then applies it.
  const loses = (call: FaultyTools.Call): FaultyTools.Behaviour => {
    const outcome = plan.get(call.callId)
    if (outcome?._tag === "UnknownOutcome" && outcome.reconcile === "not_applied") {
      return call.attempt === 1 ? "lose_before_apply" : "apply"
    }
    return "apply_then_lose"
  }
  const payChecked = FaultyTools.ledgered({
    name: "pay_checked",
    idempotent: false,
    sideEffect: "external",
    ...common,
    behaviour: loses,
    reconcile: true
  })
  const payUndecidable = FaultyTools.ledgered({
    name: "pay_undecidable",
    idempotent: false,
    sideEffect: "external",
    ...common,
    behaviour: loses,
    reconcile: () => ({ _tag: "Undecidable", detail: "the payment service has no record yet" })
  })
  const forbidden = FaultyTools.flaky({ name: "forbidden", failures: 0, ...common })

  const tools: ReadonlyArray<Tool.Any<never>> = [
    lookup,
    submit.tool,
    pay.tool,
    payChecked.tool,
    payUndecidable.tool,
    forbidden.tool
  ]
  const runTimeoutMillis = c.runTimeoutSeconds * 1000
  return {
    case: c,
    model: FaultyModel.make(script),
    tools: { lookup: lookupHandle, submit, pay, payChecked, payUndecidable, forbidden },
    options: {
      goal: "a generated case",
      runId: "prop",
      tools,
      recovery: Recovery.backoff({ retries: c.scheduleRetries, jitter: c.jitter }),
      limits: {
        runTimeout: runTimeoutMillis,
        maxRecoveries: c.maxRecoveries,
        correctionBudget: c.correctionBudget,
        maxIterations: c.maxIterations,
        maxToolCalls: c.maxToolCalls
      }
    },
    permission: { allowTools: tools.filter((t) => t.name !== "forbidden").map((t) => t.name) },
    budget: {
      runTimeoutMillis,
      maxRecoveries: c.maxRecoveries,
      scheduleRetries: c.scheduleRetries,
      correctionBudget: c.correctionBudget,
      maxIterations: c.maxIterations,
      maxToolCalls: c.maxToolCalls,
      toolMaxRetries: Object.fromEntries(tools.map((t) => [t.name, t.metadata.maxRetries]))
    },
    plan
  }
}

/**
 * Runs `run` in the background on `TestClock` (which `it.effect` provides), moving the
 * clock in steps of `step` until it ends, at most `maxSteps` times; fails with a defect
 * if it has not ended by then. Every sleep wakes at its own time, so the timeline's
 * times are exact whatever the step.
 *
 * @category combinators
 * @since 0.1.0
 */
export const drive = <A, E, R>(
  run: Effect.Effect<A, E, R>,
  options: { readonly step: number; readonly maxSteps?: number | undefined }
): Effect.Effect<A, E, R> =>
  Effect.gen(function* () {
    const fiber = yield* Effect.forkChild(run, { startImmediately: true })
    const maxSteps = options.maxSteps ?? 3
    for (let i = 0; i < maxSteps && fiber.pollUnsafe() === undefined; i++) yield* TestClock.adjust(options.step)
    if (fiber.pollUnsafe() === undefined) {
      yield* Fiber.interrupt(fiber)
      return yield* Effect.die(new Error(`the run did not end within ${maxSteps} clock steps of ${options.step} ms`))
    }
    return yield* Fiber.join(fiber)
  })

/**
 * Runs a scenario on `TestClock` with its model, its permission policy and `Random`
 * seeded from the case. The clock moves by the run timeout plus a second at a time, so
 * a run that keeps going past its deadline fails the check with a defect.
 *
 * @category combinators
 * @since 0.1.0
 */
export const runScenario = (
  scenario: Scenario
): Effect.Effect<RunResult.RunResult, never, FileSystem.FileSystem | Path.Path> =>
  drive(Run.run(scenario.options), { step: scenario.budget.runTimeoutMillis + 1000, maxSteps: 3 }).pipe(
    Random.withSeed(scenario.case.seed),
    Effect.provide(Layer.merge(FaultyModel.layer(scenario.model), Permission.layer(scenario.permission)))
  )
