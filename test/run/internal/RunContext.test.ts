import { assert, describe, it } from "@effect/vitest"
import { Clock, Effect, Exit } from "effect"
import * as PhaseWaits from "../../../src/run/internal/PhaseWaits.ts"
import * as RunContext from "../../../src/run/internal/RunContext.ts"

const context = Effect.gen(function* () {
  const clock = yield* Clock.Clock
  const ctx = RunContext.make({ runId: "phases", clock, deadlineAt: 60_000, stopGraceMillis: 5_000 })
  yield* RunContext.transition(ctx, "initializing")
  yield* RunContext.transition(ctx, "planning")
  yield* RunContext.transition(ctx, "model_thinking")
  yield* RunContext.transition(ctx, "tool_executing")
  return ctx
})

const requested =
  (callId: string): RunContext.Build =>
  ({ runId, seq, at }) => ({
    _tag: "approval.requested",
    callId,
    name: "pay",
    arguments: {},
    expiresAt: 1,
    runId,
    seq,
    at
  })
const decided =
  (callId: string): RunContext.Build =>
  ({ runId, seq, at }) => ({ _tag: "approval.decided", callId, name: "pay", decision: "approved", runId, seq, at })
const retrying =
  (callId: string): RunContext.Build =>
  ({ runId, seq, at }) => ({
    _tag: "recovery.started",
    kind: "tool_retry",
    callId,
    attempt: 1,
    delayMillis: 10,
    cause: "x",
    runId,
    seq,
    at
  })

describe("RunContext phase bookkeeping", () => {
  it.effect("R1.3 the phase is what the waits of a concurrent batch add up to, each recorded in the log", () =>
    Effect.gen(function* () {
      const ctx = yield* context
      yield* PhaseWaits.hold(ctx, "awaiting_approval", "tool_executing", requested("a"))
      assert.strictEqual(RunContext.state(ctx), "awaiting_approval")
      // The phase moves before the wait's record, so the record is made in its phase.
      assert.deepStrictEqual(
        ctx.events.slice(-2).map((e) => e._tag),
        ["state.changed", "approval.requested"]
      )
      // A retry sleeping beside a call waiting for a person: the person's wait shows.
      yield* PhaseWaits.hold(ctx, "recovering", "tool_executing", retrying("b"))
      assert.strictEqual(RunContext.state(ctx), "awaiting_approval")
      yield* PhaseWaits.release(ctx, "tool_executing", decided("a"))
      assert.strictEqual(RunContext.state(ctx), "recovering")
      // The retry's sleep ends when its next attempt is recorded; the phase moves first.
      yield* PhaseWaits.release(ctx, "tool_executing", { owner: "b" })
      assert.strictEqual(RunContext.state(ctx), "tool_executing")
      assert.deepStrictEqual([ctx.log.approvals, ctx.log.retries], [[], ["b"]])
    })
  )

  it.effect("R1.2 a move off the transition table fails with IllegalTransition and records nothing", () =>
    Effect.gen(function* () {
      const ctx = yield* context
      const before = ctx.events.length
      const exit = yield* Effect.exit(RunContext.transition(ctx, "planning"))
      assert.isTrue(Exit.isFailure(exit))
      assert.strictEqual(ctx.events.length, before)
    })
  )

  it.effect(
    "R5.1 R3.11 a stop from outside is recorded once, with the state it found, and the log closes at run.finished",
    () =>
      Effect.gen(function* () {
        const ctx = yield* context
        let armed = 0
        ctx.onStop = () => {
          armed++
        }
        RunContext.stopping(ctx, "deadline")
        RunContext.stopping(ctx, "cancel")
        assert.strictEqual(armed, 1)
        assert.deepStrictEqual(
          ctx.events.filter((e) => e._tag === "run.stopping").map((e) => e._tag === "run.stopping" && [e.by, e.state]),
          [["deadline", "tool_executing"]]
        )
        yield* RunContext.transition(ctx, "validating")
        yield* RunContext.finish(ctx, "failed", "run_timeout")
        const length = ctx.events.length
        RunContext.emit(ctx, ({ runId, seq, at }) => ({
          _tag: "reminder.injected",
          kind: "late",
          text: "too late",
          runId,
          seq,
          at
        }))
        assert.strictEqual(ctx.events.length, length)
        assert.isTrue(ctx.log.finished)
      })
  )
})
