/**
 * The tool pipeline on its own: one call through `ToolExecutor.execute`, with no loop, no
 * lifecycle and no model. Each case prepares the call as the loop does, runs it, and reads
 * the result and the call's events.
 */
import { assert, describe, it } from "@effect/vitest"
import { Clock, Effect, Fiber, Result, Schema } from "effect"
import { TestClock } from "effect/testing"
import type * as Event from "../../../src/events/Event.ts"
import * as Failure from "../../../src/failure/Failure.ts"
import type * as Model from "../../../src/model/Model.ts"
import * as RunContext from "../../../src/run/internal/RunContext.ts"
import { resolve } from "../../../src/run/internal/resolve/Resolve.ts"
import * as ToolExecutor from "../../../src/run/pipeline/ToolExecutor.ts"
import type * as RunOptions from "../../../src/run/RunOptions.ts"
import * as Deadline from "../../../src/time/Deadline.ts"
import * as Permission from "../../../src/tools/Permission.ts"
import * as Tool from "../../../src/tools/Tool.ts"

const upper = (calls: { n: number }) =>
  Tool.make({
    name: "upper",
    description: "Upper-cases its text.",
    input: Schema.Struct({ text: Schema.String }),
    output: Schema.Struct({ text: Schema.String }),
    sideEffect: "none",
    idempotent: true,
    handler: ({ text }) =>
      Effect.suspend(() => {
        calls.n++
        return Effect.succeed({ text: text.toUpperCase() })
      })
  })

/** Fails retryably on its first attempt, then succeeds: an idempotent read. */
const flaky = (calls: { n: number }) =>
  Tool.make({
    name: "flaky",
    description: "Fails once.",
    input: Schema.Struct({}),
    output: Schema.Struct({ ok: Schema.Boolean }),
    sideEffect: "read",
    idempotent: true,
    maxRetries: 2,
    handler: () =>
      Effect.suspend(() => {
        calls.n++
        return calls.n === 1
          ? Effect.fail(
              new Failure.Retryable({
                source: "tool",
                category: "connection",
                code: "reset",
                attempts: 1,
                hint: "connection reset"
              })
            )
          : Effect.succeed({ ok: true })
      })
  })

/**
 * One call of `name` with `args` through the pipeline, under a run context of its own in
 * the `tool_executing` phase: its result and the events the call added.
 */
const execute = (
  tools: ReadonlyArray<Tool.Any<never>>,
  call: Model.ToolCall,
  permission: Permission.PermissionService = Permission.allowAll
) =>
  Effect.gen(function* () {
    const options: RunOptions.Options<Tool.Any<never>> = { goal: "one call", tools }
    const checked = resolve(options)
    if (Result.isFailure(checked)) return yield* Effect.die(checked.failure)
    const { registry } = checked.success.loop
    const clock = yield* Clock.Clock
    const ctx = RunContext.make({
      runId: "pipeline",
      clock,
      deadlineAt: clock.currentTimeMillisUnsafe() + 60_000,
      stopGraceMillis: 5_000
    })
    for (const to of ["initializing", "planning", "model_thinking", "tool_executing"] as const) {
      yield* RunContext.transition(ctx, to)
    }
    const from = ctx.events.length
    const prepared = ToolExecutor.prepare(registry, ctx.callIds, call)
    const result = yield* ToolExecutor.execute(ctx, registry, prepared, permission).pipe(Deadline.run(ctx.deadlineAt))
    return { result, events: ctx.events.slice(from) as ReadonlyArray<Event.Event> }
  })

const tags = (events: ReadonlyArray<Event.Event>) => events.map((e) => e._tag)

/** One call of `upper` with the argument text `args`: its result, events and how often its handler ran. */
const callUpper = (args: string, permission?: Permission.PermissionService) => {
  const calls = { n: 0 }
  return Effect.map(execute([upper(calls)], { id: "m1", name: "upper", arguments: args }, permission), (ran) => ({
    ...ran,
    calls
  }))
}

describe("ToolExecutor.execute (the pipeline alone)", () => {
  it.effect(
    "R8 a call that validates runs once: started with its attempt and deadline, succeeded with its observation",
    () =>
      Effect.gen(function* () {
        const { result, events, calls } = yield* callUpper('{"text":"hi"}')
        assert.strictEqual(calls.n, 1)
        assert.deepStrictEqual(
          [result.status, result.output, result.observation],
          ["succeeded", { text: "HI" }, '{"text":"HI"}']
        )
        assert.deepStrictEqual(tags(events), ["tool.started", "tool.succeeded"])
        const attempted = events[0]
        assert.strictEqual(attempted?._tag, "tool.started")
        if (attempted?._tag === "tool.started") {
          // No tool, step or attempt limit: the run's deadline bounds the attempt (R4.2).
          assert.deepStrictEqual([attempted.callId, attempted.attempt, attempted.layer], ["m1", 1, "run"])
        }
      })
  )

  it.effect(
    "R3.5 arguments that do not match the schema are a correctable failure naming the field; the handler never runs",
    () =>
      Effect.gen(function* () {
        const { result, events, calls } = yield* callUpper('{"txt":"hi"}')
        assert.strictEqual(calls.n, 0)
        assert.strictEqual(result.status, "failed")
        assert.strictEqual(result.error?.code, "input_validation_failed")
        assert.isTrue(result.error?.correctable)
        assert.include(result.error?.message ?? "", "arguments.text")
        // Refused before its handler: no attempt started.
        assert.deepStrictEqual(tags(events), ["tool.failed"])
      })
  )

  it.effect("R3.5 an unknown tool is refused before any handler, naming the tools there are", () =>
    Effect.gen(function* () {
      const calls = { n: 0 }
      const { result } = yield* execute([upper(calls)], { id: "m1", name: "lower", arguments: "{}" })
      assert.strictEqual(calls.n, 0)
      assert.strictEqual(result.error?.code, "unknown_tool")
      assert.include(result.error?.message ?? "", "upper")
    })
  )

  it.effect("R3.6 a call the permission policy denies is blocked, never retried, and its handler never runs", () =>
    Effect.gen(function* () {
      const denyAll: Permission.PermissionService = {
        check: () => Effect.succeed(Permission.deny("tool_not_allowed", "not on the list"))
      }
      const { result, events, calls } = yield* callUpper('{"text":"hi"}', denyAll)
      assert.strictEqual(calls.n, 0)
      assert.deepStrictEqual([result.status, result.error?.code], ["blocked", "permission_denied"])
      assert.deepStrictEqual(tags(events), ["tool.blocked"])
    })
  )

  it.effect("R3.6 R12 a denial's reason reaches the model cut as an observation is, however long (review 77)", () =>
    Effect.gen(function* () {
      const verbose: Permission.PermissionService = {
        check: () => Effect.succeed(Permission.deny("tool_not_allowed", "x".repeat(20_000_000)))
      }
      const { result, events } = yield* callUpper('{"text":"hi"}', verbose)
      assert.strictEqual(result.error?.code, "permission_denied")
      // The default observation limit, and the note of what was left out.
      assert.isBelow(result.observation.length, 100_000)
      assert.include(result.error?.message ?? "", "observation cut")
      const blocked = events.find((e) => e._tag === "tool.blocked")
      assert.isBelow(JSON.stringify(blocked).length, 100_000)
    })
  )

  it.effect(
    "R4.2 R3.6 a permission policy that does not answer within the tool's timeout refuses the call; it never runs",
    () =>
      Effect.gen(function* () {
        const calls = { n: 0 }
        const slow = Tool.make({
          name: "slow",
          description: "Has a timeout of its own.",
          input: Schema.Struct({}),
          output: Schema.Struct({}),
          sideEffect: "write",
          timeout: "50 millis",
          handler: () =>
            Effect.sync(() => {
              calls.n++
              return {}
            })
        })
        const silent: Permission.PermissionService = { check: () => Effect.never }
        const fiber = yield* Effect.forkChild(execute([slow], { id: "m1", name: "slow", arguments: "{}" }, silent))
        yield* TestClock.adjust("50 millis")
        const { result, events } = yield* Fiber.join(fiber)
        assert.strictEqual(calls.n, 0)
        assert.deepStrictEqual([result.status, result.error?.code], ["blocked", "permission_denied"])
        assert.include(result.error?.message ?? "", "did not answer within the tool timeout of 50 ms")
        // Feedback for the model, not a failure that ends the run.
        assert.isUndefined(result.error?.failure)
        assert.deepStrictEqual(tags(events), ["tool.blocked"])
      })
  )

  it.effect("R3.3 R3.7 a retryable failure of an idempotent tool is retried after its backoff, on the clock", () =>
    Effect.gen(function* () {
      const calls = { n: 0 }
      const fiber = yield* Effect.forkChild(execute([flaky(calls)], { id: "m1", name: "flaky", arguments: "{}" }))
      yield* TestClock.adjust("1 second")
      const { result, events } = yield* Fiber.join(fiber)
      assert.strictEqual(calls.n, 2)
      assert.strictEqual(result.status, "succeeded")
      assert.deepStrictEqual(tags(events), [
        "tool.started",
        "state.changed",
        "recovery.started",
        "state.changed",
        "tool.started",
        "recovery.completed",
        "tool.succeeded"
      ])
      const attempts = events.flatMap((e) => (e._tag === "tool.started" ? [e.attempt] : []))
      assert.deepStrictEqual(attempts, [1, 2])
    })
  )
})
