/**
 * Generated hostile user code for the R12 property: handlers, postconditions, permission
 * checks, policies, stop hooks and models that throw any value, return what is not an
 * Effect, never settle, or block the event loop for a while.
 *
 * Blocking is played on the `TestClock` by a skew: the code adds its blocked time to a
 * clock the run reads, while no timer can fire (as when the event loop is blocked); the
 * driver moves the `TestClock` by that much as soon as the run suspends, and the timers
 * that came due fire then, late, as they would.
 */
import { NodeServices } from "@effect/platform-node"
import { Clock, Duration, Effect, Fiber, Layer, Schema } from "effect"
import { TestClock } from "effect/testing"
import * as Model from "../../src/model/Model.ts"
import * as Run from "../../src/run/Run.ts"
import type * as RunResult from "../../src/run/RunResult.ts"
import * as Termination from "../../src/termination/Termination.ts"
import * as Approval from "../../src/tools/Approval.ts"
import * as Permission from "../../src/tools/Permission.ts"
import * as Tool from "../../src/tools/Tool.ts"
import * as Validation from "../../src/validation/Validation.ts"

const between = (minimum: number, maximum: number) => Schema.Int.check(Schema.isBetween({ minimum, maximum }))

/** A value user code throws (or dies with). */
export const Thrown = Schema.Literals([
  "error_with_secret",
  "string",
  "number",
  "null",
  "undefined",
  "unprintable",
  "proxy",
  "symbol",
  "function"
])
export type Thrown = typeof Thrown.Type

/** What one piece of user code does when it is called. */
export const Behaviour = Schema.Union([
  Schema.TaggedStruct("Behaves", {}),
  Schema.TaggedStruct("Fails", {}),
  Schema.TaggedStruct("Throws", { value: Thrown }),
  Schema.TaggedStruct("Dies", { value: Thrown }),
  Schema.TaggedStruct("Returns", {
    value: Schema.Literals(["promise", "thenable", "undefined", "number", "wrong_shape", "nested_non_effect"])
  }),
  Schema.TaggedStruct("NeverSettles", {}),
  Schema.TaggedStruct("Blocks", { millis: between(0, 3_000) })
])
export type Behaviour = typeof Behaviour.Type

/** One model call: tool calls (with arguments of some kind), an answer, or the model misbehaving. */
export const Turn = Schema.Union([
  Schema.TaggedStruct("Calls", {
    count: between(1, 2),
    args: Schema.Literals(["valid", "deep", "garbage", "cyclic", "reused_id"])
  }),
  Schema.TaggedStruct("Answers", {}),
  Schema.TaggedStruct("Misbehaves", { how: Behaviour })
])
export type Turn = typeof Turn.Type

export const Case = Schema.Struct({
  turns: Schema.Array(Turn).check(Schema.isMinLength(1), Schema.isMaxLength(4)),
  handler: Behaviour,
  postcondition: Schema.NullOr(Behaviour),
  permission: Schema.NullOr(Behaviour),
  policy: Schema.NullOr(Behaviour),
  hook: Schema.NullOr(Behaviour),
  gate: Schema.NullOr(Behaviour),
  settle: Schema.Literals(["none", "valid", "invalid"]),
  runTimeoutMillis: between(100, 5_000),
  toolTimeoutMillis: Schema.NullOr(between(50, 3_000)),
  concurrency: between(1, 2)
})
export type Case = typeof Case.Type

/** The secret an `error_with_secret` carries: it must never reach the result. */
export const secret = "sk-live-HOSTILE-0123456789"

/** A value whose every conversion to text throws. */
export const unprintable = {
  toString() {
    throw new Error("toString")
  },
  valueOf() {
    throw new Error("valueOf")
  }
}

/** A value whose every trap throws: even asking whether it is an Error throws. */
export const hostile = new Proxy(
  {},
  {
    get: () => {
      throw new Error("get")
    },
    has: () => {
      throw new Error("has")
    },
    getPrototypeOf: () => {
      throw new Error("getPrototypeOf")
    },
    ownKeys: () => {
      throw new Error("ownKeys")
    }
  }
)

const thrownValue = (value: Thrown): unknown => {
  switch (value) {
    case "error_with_secret":
      return new Error(`request failed with key ${secret}`)
    case "string":
      return `a string with ${secret}`
    case "number":
      return 42
    case "null":
      return null
    case "undefined":
      return undefined
    case "unprintable":
      return unprintable
    case "proxy":
      return hostile
    case "symbol":
      return Symbol(secret)
    case "function":
      return () => secret
  }
}

/** A clock the run reads that blocking code can move without any timer firing (see the module doc). */
export interface SkewClock {
  readonly clock: Clock.Clock
  block: (millis: number) => void
  /** Blocked time not yet given to the `TestClock`. */
  pending: () => number
  settle: () => void
}

export const makeSkewClock = (test: Clock.Clock): SkewClock => {
  let skew = 0
  const now = () => test.currentTimeMillisUnsafe() + skew
  return {
    clock: {
      currentTimeMillisUnsafe: now,
      currentTimeMillis: Effect.sync(now),
      currentTimeNanosUnsafe: () => BigInt(now()) * 1_000_000n,
      currentTimeNanos: Effect.sync(() => BigInt(now()) * 1_000_000n),
      monotonicTimeNanosUnsafe: () => BigInt(now()) * 1_000_000n,
      monotonicTimeNanos: Effect.sync(() => BigInt(now()) * 1_000_000n),
      sleep: (duration: Duration.Duration) => test.sleep(duration)
    },
    block: (millis) => {
      skew += millis
    },
    pending: () => skew,
    settle: () => {
      skew = 0
    }
  }
}

/**
 * What a piece of user code returns when it behaves as `behaviour` says: `ok` when it
 * behaves. Blocking moves `skew`. A value that is not an Effect is returned as is.
 */
const perform = (behaviour: Behaviour, skew: SkewClock, ok: () => unknown, failure: unknown): unknown => {
  switch (behaviour._tag) {
    case "Behaves":
      return Effect.sync(ok)
    case "Fails":
      return Effect.fail(failure)
    case "Throws":
      throw thrownValue(behaviour.value)
    case "Dies":
      return Effect.die(thrownValue(behaviour.value))
    case "Returns":
      switch (behaviour.value) {
        case "promise":
          return Promise.resolve(ok())
        case "thenable":
          // biome-ignore lint/suspicious/noThenProperty: a thenable is what this case is about
          return { then: (resolve: (value: unknown) => void) => resolve(ok()) }
        case "undefined":
          return undefined
        case "number":
          return 42
        case "wrong_shape":
          return Effect.succeed({ wrong: "shape" })
        case "nested_non_effect":
          return Effect.flatMap(Effect.void, () => 42 as never)
      }
      return undefined
    case "NeverSettles":
      return Effect.never
    case "Blocks":
      return Effect.sync(() => {
        skew.block(behaviour.millis)
        return ok()
      })
  }
}

/** The same, for synchronous code (a termination policy): blocking and throwing, no Effects. */
const performSync = (behaviour: Behaviour, skew: SkewClock, ok: () => unknown): unknown => {
  switch (behaviour._tag) {
    case "Behaves":
      return ok()
    case "Fails":
      return { _tag: "Stop", reason: "not_a_reason", detail: 7 }
    case "Throws":
    case "Dies":
      throw thrownValue(behaviour.value)
    case "Returns":
      return behaviour.value === "undefined" ? undefined : Effect.succeed(ok())
    case "NeverSettles":
    case "Blocks":
      skew.block(behaviour._tag === "Blocks" ? behaviour.millis : 10_000)
      return ok()
  }
}

const toolFailure = new Error("a typed failure that is not in the algebra")

const deep = `${"[".repeat(3000)}${"]".repeat(3000)}`

const argumentsOf = (kind: Turn & { readonly _tag: "Calls" }): unknown => {
  switch (kind.args) {
    case "valid":
    case "reused_id":
      return "{}"
    case "deep":
      return `{"a":${deep}}`
    case "garbage":
      return "{not json"
    case "cyclic": {
      const cyclic: Record<string, unknown> = {}
      cyclic.self = cyclic
      return cyclic
    }
  }
}

/** The model of a case: its turns in order, then final answers. */
const modelOf = (c: Case, skew: SkewClock): Model.Model["Service"] => {
  let next = 0
  return {
    generate: () => {
      const turn = c.turns[next++]
      const answer = Model.response({ text: "done" })
      if (turn === undefined || turn._tag === "Answers") return Effect.succeed(answer)
      if (turn._tag === "Misbehaves") {
        return perform(turn.how, skew, () => answer, toolFailure) as Effect.Effect<Model.Response>
      }
      return Effect.succeed(
        Model.response({
          toolCalls: Array.from({ length: turn.count }, (_, i) => ({
            id: turn.args === "reused_id" ? "call_0" : `call_${next}_${i}`,
            name: "hostile",
            arguments: argumentsOf(turn)
          }))
        })
      )
    }
  }
}

/** The run options and services of a case. */
export const toRun = (c: Case, skew: SkewClock) => {
  const tool = Tool.make({
    name: "hostile",
    description: "user code of the case",
    input: Schema.Struct({}),
    output: Schema.Unknown,
    sideEffect: "write",
    needsApproval: c.gate !== null,
    ...(c.toolTimeoutMillis === null ? {} : { timeout: Duration.millis(c.toolTimeoutMillis) }),
    handler: (_: unknown, context: Tool.CallContext) => {
      if (c.settle === "valid") context.settle("cancelled", "stopped")
      if (c.settle === "invalid") context.settle(thrownValue("unprintable") as Tool.Settlement, hostile as string)
      return perform(c.handler, skew, () => "ok", toolFailure) as Effect.Effect<unknown>
    },
    ...(c.postcondition === null
      ? {}
      : {
          postcondition: () =>
            perform(c.postcondition as Behaviour, skew, () => true, toolFailure) as Effect.Effect<boolean>
        })
  })
  const policy = c.policy
  const hook = c.hook
  const options: Run.Options<Tool.Any<never>> = {
    goal: "survive",
    tools: [tool],
    concurrency: c.concurrency,
    time: { run: Duration.millis(c.runTimeoutMillis) },
    ...(policy === null
      ? {}
      : {
          policies: (defaults) => [
            Termination.make("hostile", () => performSync(policy, skew, () => Termination.continue_) as never),
            ...defaults
          ]
        }),
    ...(hook === null
      ? {}
      : {
          validation: {
            stopHooks: [
              Validation.stopHook(
                "hostile",
                () => perform(hook, skew, () => ({ passed: true, detail: "fine" }), toolFailure) as never
              )
            ]
          }
        })
  }
  const permission = c.permission
  const gate = c.gate
  const services = Layer.mergeAll(
    Layer.succeed(Model.Model, modelOf(c, skew)),
    NodeServices.layer,
    Layer.succeed(
      Permission.Permission,
      permission === null
        ? Permission.allowAll
        : { check: () => perform(permission, skew, () => Permission.allow, toolFailure) as never }
    ),
    Layer.succeed(
      Approval.ApprovalGate,
      gate === null
        ? Approval.makeMemory()
        : {
            request: () => perform(gate, skew, () => Approval.approved("alice"), toolFailure) as never,
            decide: () => Effect.void,
            pending: Effect.succeed([])
          }
    )
  )
  return { options, services }
}

/** The longest any one piece of the case's code blocks: how late the deadline may be seen. */
export const longestBlock = (c: Case): number => {
  const of = (b: Behaviour | null) =>
    b === null ? 0 : b._tag === "Blocks" ? b.millis : b._tag === "NeverSettles" && b === c.policy ? 10_000 : 0
  const turns = c.turns.map((t) => (t._tag === "Misbehaves" ? of(t.how) : 0))
  return Math.max(of(c.handler), of(c.postcondition), of(c.permission), of(c.policy), of(c.hook), of(c.gate), ...turns)
}

/**
 * Runs a case on the `TestClock`: 10 ms at a time, and at once by whatever the code
 * blocked, until the run ends or `maxMillis` of virtual time have passed (then `undefined`:
 * the run did not end).
 */
export const runCase = (c: Case, maxMillis: number) =>
  Effect.gen(function* () {
    const test = yield* Clock.Clock
    const skew = makeSkewClock(test)
    const { options, services } = toRun(c, skew)
    const fiber = yield* Run.run(options).pipe(
      Effect.provide(services),
      Effect.provideService(Clock.Clock, skew.clock),
      Effect.forkChild
    )
    let elapsed = 0
    while (fiber.pollUnsafe() === undefined && elapsed <= maxMillis) {
      const blocked = skew.pending()
      skew.settle()
      const step = blocked > 0 ? blocked : 10
      yield* TestClock.adjust(step)
      elapsed += step
    }
    if (fiber.pollUnsafe() === undefined) {
      yield* Fiber.interrupt(fiber)
      return undefined
    }
    return (yield* Fiber.join(fiber)) as RunResult.RunResult
  })
