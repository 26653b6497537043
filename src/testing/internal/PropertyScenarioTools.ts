/**
 * The tools of a scenario: `Tools` and `Gated`, the tools and what their handlers saw,
 * `toolFor`, the tool a planned outcome calls, and `makeTools`, which builds them for a
 * case.
 * Private to the testing kit; `Properties` is the public face.
 */
import { Effect, Schema } from "effect"
import * as Failure from "../../failure/Failure.ts"
import * as Tool from "../../tools/Tool.ts"
import * as FaultyTools from "../FaultyTools.ts"
import type { Case, ToolOutcome } from "./PropertyCase.ts"

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

/** The tool a call with this planned outcome calls. */
export const toolFor = (outcome: ToolOutcome): string => {
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

/**
 * Builds the tools of a case, each call behaving as `plan` says: `handles`, the tools
 * with their inspection handles, and `tools`, the ones the run is offered. The tools
 * that need approval (`transfer`, `wire`) are offered only when the case calls them;
 * their handlers note whether the gate had approved their call (`approved`). The case's
 * tool timeout becomes the own `timeout` of `lookup`, `transfer` and `wire`.
 */
export const makeTools = (
  c: Case,
  plan: ReadonlyMap<string, ToolOutcome>,
  approved: ReadonlySet<string>
): { readonly handles: Tools; readonly tools: ReadonlyArray<Tool.Any<never>> } => {
  const failuresSeen = new Map<string, number>()
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
          if (!approved.has(context.callId)) unapproved.push(call)
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
  return {
    handles: {
      lookup: lookupHandle,
      submit,
      pay,
      payChecked,
      payUndecidable,
      forbidden,
      transfer,
      wire
    },
    tools
  }
}
