/**
 * A case made runnable: the `Tools`, the approval gate (`Approvals`) and the `Scenario`
 * of a case, `toScenario` that builds them, and `drive` and `runScenario` that run one
 * on `TestClock`.
 * Private to the testing kit; `Properties` is the public face.
 */
import { Effect, Fiber, type FileSystem, Layer, type Path, Random, Schema } from "effect"
import { TestClock } from "effect/testing"
import * as Approval from "../../Approval.ts"
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
  /** Needs approval, idempotent: after approval, slow and failing retryably as its call's plan says. */
  readonly transfer: Gated
  /** Needs approval, not idempotent: likewise, but never retried. */
  readonly wire: Gated
}

/**
 * A tool that needs approval, and what its handler saw.
 *
 * @category models
 * @since 0.1.0
 */
export interface Gated {
  readonly tool: Tool.Tool<FaultyTools.Input, string>
  readonly calls: FaultyTools.Calls
  /** Handler invocations made before the gate had delivered an approval of their call. */
  readonly unapproved: ReadonlyArray<FaultyTools.Call>
}

/**
 * What the scenario's approval gate saw and did. It decides each call as the call's
 * plan says, from the fiber that waits: `afterMillis` after the request it delivers the
 * decision (on `TestClock`, so exactly then), or never.
 *
 * @category models
 * @since 0.1.0
 */
export interface Approvals {
  /** The gate the run is given (`Layer.succeed(Approval.ApprovalGate, gate)`). */
  readonly gate: Approval.Gate
  /** Every request the run put on the gate, in order. */
  readonly requests: ReadonlyArray<Approval.Request>
  /** Every decision the gate delivered, when it delivered it. */
  readonly delivered: ReadonlyArray<{
    readonly callId: string
    readonly decision: "approved" | "rejected"
    readonly at: number
  }>
  /** Requests whose wait was interrupted before a decision (expiry, a deadline, a sibling's stop). */
  readonly withdrawn: ReadonlyArray<{ readonly callId: string; readonly at: number }>
  /** The requests waiting now: none once the run has ended. */
  readonly pending: ReadonlyArray<Approval.Request>
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
  readonly approvals: Approvals
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
    case "NeedsApproval":
      return outcome.idempotent ? "transfer" : "wire"
  }
}

/** A call record over `all`, as `FaultyTools` keeps one. */
const callsOf = (all: ReadonlyArray<FaultyTools.Call>): FaultyTools.Calls => ({
  all,
  get count() {
    return all.length
  },
  forKey: (key) => all.filter((x) => x.idempotencyKey === key),
  forCall: (callId) => all.filter((x) => x.callId === callId),
  get keys() {
    return [...new Set(all.map((x) => x.idempotencyKey))]
  }
})

/** Appends one handler invocation to `all`, at the clock's time. */
const recordCall = (
  all: Array<FaultyTools.Call>,
  input: FaultyTools.Input,
  context: Tool.CallContext
): Effect.Effect<FaultyTools.Call> =>
  Effect.clockWith((clock) =>
    Effect.sync(() => {
      const call: FaultyTools.Call = {
        n: all.length + 1,
        callId: context.callId,
        idempotencyKey: context.idempotencyKey,
        attempt: all.filter((x) => x.idempotencyKey === context.idempotencyKey).length + 1,
        input,
        at: clock.currentTimeMillisUnsafe()
      }
      all.push(call)
      return call
    })
  )

/** The approval gate of a scenario: decides each call as `plan` says, after its delay. */
const makeApprovals = (plan: ReadonlyMap<string, ToolOutcome>): Approvals & { readonly approved: Set<string> } => {
  const requests: Array<Approval.Request> = []
  const delivered: Array<Approvals["delivered"][number]> = []
  const withdrawn: Array<Approvals["withdrawn"][number]> = []
  const waiting = new Map<string, Approval.Request>()
  const approved = new Set<string>()
  const at = Effect.clockWith((clock) => clock.currentTimeMillis)
  const gate: Approval.Gate = {
    request: (request) =>
      Effect.suspend(() => {
        const callId = request.callId
        requests.push(request)
        waiting.set(callId, request)
        const outcome = plan.get(callId)
        const script = outcome?._tag === "NeedsApproval" ? outcome : undefined
        const wait: Effect.Effect<Approval.Decision> =
          script === undefined || script.decision === "never"
            ? Effect.never
            : Effect.as(
                Effect.sleep(script.afterMillis),
                script.decision === "approve"
                  ? Approval.approved("property")
                  : Approval.rejected("the scripted decision", "property")
              )
        return wait.pipe(
          Effect.tap((decision) =>
            Effect.map(at, (now) => {
              waiting.delete(callId)
              if (decision._tag === "Approved") approved.add(callId)
              delivered.push({ callId, decision: decision._tag === "Approved" ? "approved" : "rejected", at: now })
            })
          ),
          Effect.onInterrupt(() =>
            Effect.map(at, (now) => {
              waiting.delete(callId)
              withdrawn.push({ callId, at: now })
            })
          )
        )
      }),
    decide: (runId, callId) => Effect.fail(new Approval.NotPending({ runId, callId })),
    pending: Effect.sync(() => [...waiting.values()])
  }
  return {
    gate,
    requests,
    delivered,
    withdrawn,
    get pending() {
      return [...waiting.values()]
    },
    approved
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
 * id, so no two calls share a signature. The run id is `"prop"`. The tools that need
 * approval (`transfer`, `wire`) are offered only when the case calls them; the scenario's
 * approval gate (`approvals`) decides each of their calls as its plan says. The case's
 * time layers become `limits.stepTimeout`, `attemptTimeout` and `approvalTimeout`, its
 * tool timeout the own `timeout` of `lookup`, `transfer` and `wire`, and its concurrency
 * the run's `concurrency`.
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
  // The tools whose handlers take time get the case's own tool timeout (R4.1), if any.
  const timed = c.toolTimeoutMillis === undefined ? {} : { timeout: c.toolTimeoutMillis }
  // Fails the first `failures` invocations of a call, counted per call id.
  const failing = (callId: string): number | undefined => {
    const outcome = plan.get(callId)
    if (outcome?._tag !== "Retryable" && outcome?._tag !== "NeedsApproval") return undefined
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
    ...timed,
    handler: (input, context) =>
      Effect.gen(function* () {
        yield* recordCall(lookupCalls, input, context)
        const outcome = plan.get(context.callId)
        if (outcome?._tag === "Permanent") return yield* rejected("lookup")
        if (outcome?._tag === "Slow") yield* Effect.sleep(outcome.millis)
        const failure = failing(context.callId)
        if (failure !== undefined) return yield* busy("lookup", failure)
        return `found ${input.q}`
      })
  })
  const lookupHandle = callsOf(lookupCalls)

  const approvals = makeApprovals(plan)
  // A tool that needs approval: its handler notes whether the gate had approved its call.
  const gated = (name: string, idempotent: boolean): Gated => {
    const all: Array<FaultyTools.Call> = []
    const unapproved: Array<FaultyTools.Call> = []
    const tool = Tool.make({
      name,
      description: `needs approval; ${idempotent ? "idempotent" : "not idempotent"}`,
      input: FaultyTools.Input,
      output: Schema.String,
      idempotent,
      sideEffect: idempotent ? "write" : "external",
      needsApproval: true,
      ...common,
      ...timed,
      handler: (input, context) =>
        Effect.gen(function* () {
          const call = yield* recordCall(all, input, context)
          if (!approvals.approved.has(context.callId)) unapproved.push(call)
          const outcome = plan.get(context.callId)
          if (outcome?._tag === "NeedsApproval" && outcome.millis > 0) yield* Effect.sleep(outcome.millis)
          const failure = failing(context.callId)
          if (failure !== undefined) return yield* busy(name, failure)
          return `${name} done`
        })
    })
    return { tool, calls: callsOf(all), unapproved }
  }
  const transfer = gated("transfer", true)
  const wire = gated("wire", false)

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

  // The tools that need approval are offered only when the case calls them, so a run
  // without them takes the loop's path without approvals.
  const needsApproval = [...plan.values()].some((o) => o._tag === "NeedsApproval")
  const tools: ReadonlyArray<Tool.Any<never>> = [
    lookup,
    submit.tool,
    pay.tool,
    payChecked.tool,
    payUndecidable.tool,
    forbidden.tool,
    ...(needsApproval ? [transfer.tool, wire.tool] : [])
  ]
  const runTimeoutMillis = c.runTimeoutSeconds * 1000
  const { approved: _approved, ...approvalsHandle } = approvals
  return {
    case: c,
    model: FaultyModel.make(script),
    tools: {
      lookup: lookupHandle,
      submit,
      pay,
      payChecked,
      payUndecidable,
      forbidden,
      transfer,
      wire
    },
    approvals: approvalsHandle,
    options: {
      goal: "a generated case",
      runId: "prop",
      tools,
      recovery: Recovery.backoff({ retries: c.scheduleRetries, jitter: c.jitter }),
      ...(c.concurrency !== undefined ? { concurrency: c.concurrency } : {}),
      limits: {
        runTimeout: runTimeoutMillis,
        maxRecoveries: c.maxRecoveries,
        correctionBudget: c.correctionBudget,
        maxIterations: c.maxIterations,
        maxToolCalls: c.maxToolCalls,
        ...(c.stepTimeoutMillis !== undefined ? { stepTimeout: c.stepTimeoutMillis } : {}),
        ...(c.attemptTimeoutMillis !== undefined ? { attemptTimeout: c.attemptTimeoutMillis } : {}),
        ...(c.approvalTimeoutMillis !== undefined ? { approvalTimeout: c.approvalTimeoutMillis } : {})
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
      toolMaxRetries: Object.fromEntries(tools.map((t) => [t.name, t.metadata.maxRetries])),
      stepTimeoutMillis: c.stepTimeoutMillis,
      attemptTimeoutMillis: c.attemptTimeoutMillis,
      approvalTimeoutMillis: c.approvalTimeoutMillis,
      toolTimeoutMillis: Object.fromEntries(
        tools.flatMap((t) => (typeof t.metadata.timeout === "number" ? [[t.name, t.metadata.timeout]] : []))
      )
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
 * Runs a scenario on `TestClock` with its model, its permission policy, its approval
 * gate and `Random` seeded from the case. The clock moves by the run timeout plus a second at a time, so
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
    Effect.provide(
      Layer.mergeAll(
        FaultyModel.layer(scenario.model),
        Permission.layer(scenario.permission),
        Layer.succeed(Approval.ApprovalGate, scenario.approvals.gate)
      )
    )
  )
