import { assert, describe, it } from "@effect/vitest"
import { Effect, Schema } from "effect"
import type * as Event from "../../src/events/Event.ts"
import * as Recording from "../../src/observability/Recording.ts"
import * as Recovery from "../../src/recovery/Recovery.ts"
import * as Run from "../../src/run/Run.ts"
import * as Termination from "../../src/termination/Termination.ts"
import * as FaultyModel from "../../src/testing/FaultyModel.ts"
import * as FaultyTools from "../../src/testing/FaultyTools.ts"
import * as Replay from "../../src/testing/Replay.ts"
import * as ScriptedModel from "../../src/testing/ScriptedModel.ts"
import * as TestClockDriver from "../../src/testing/TestClockDriver.ts"
import * as Tool from "../../src/tools/Tool.ts"
import { echo } from "../support/tools.ts"

const deploy = Tool.make({
  name: "deploy",
  description: "Deploys the build",
  input: Schema.Struct({ target: Schema.String }),
  output: Schema.Struct({ url: Schema.String }),
  sideEffect: "external",
  needsApproval: true,
  handler: ({ target }) => Effect.succeed({ url: `https://${target}.example` })
})

/** The tools of the recorded run: `fetch` fails once and is retried, `broken` fails for good. */
const tools = () => [
  FaultyTools.flaky({ name: "fetch", failures: 1 }).tool,
  FaultyTools.flaky({ name: "broken", failures: 100, maxRetries: 1, recoverErrors: true }).tool,
  deploy
]

const options = {
  goal: "Fetch the page, deploy to staging, fetch again",
  limits: { maxIterations: 10 },
  time: { run: "1 minute", step: "5 seconds" },
  recovery: { backoff: Recovery.backoff({ jitter: false }) }
} as const

/**
 * A run with something of everything: a rate-limited model attempt and its retry, a tool
 * that fails once and is retried, one that fails for good, an approval (granted 40 ms later).
 */
const recordRun = () =>
  Effect.gen(function* () {
    const handle = yield* Run.start({ ...options, tools: tools() })
    yield* handle.pendingApprovals.pipe(
      Effect.flatMap((pending) =>
        Effect.forEach(pending, (r) => Effect.ignore(handle.approve(r.callId, { by: "ops" })))
      ),
      Effect.delay("40 millis"),
      Effect.forever,
      Effect.forkScoped
    )
    return yield* handle.result
  }).pipe(
    Effect.scoped,
    TestClockDriver.drive,
    Effect.provide(
      FaultyModel.layer(
        FaultyModel.make([
          FaultyModel.rateLimited(),
          FaultyModel.respond(ScriptedModel.toolCalls(["fetch", { page: 1 }], ["broken", { page: 1 }])),
          FaultyModel.respond(ScriptedModel.toolCall("deploy", { target: "staging" })),
          FaultyModel.respond(ScriptedModel.toolCall("fetch", { page: 2 })),
          FaultyModel.respond(ScriptedModel.finalAnswer("fetched and deployed"))
        ])
      )
    )
  )

const tagsOf = (events: ReadonlyArray<Event.Event>) => new Set(events.map((e) => e._tag))

describe("Replay", () => {
  it.effect("replay of a recorded run with a model retry, a tool retry, a tool failure and an approval matches", () =>
    Effect.gen(function* () {
      const recorded = yield* recordRun()
      assert.strictEqual(recorded.status, "completed")
      const tags = tagsOf(recorded.timeline)
      for (const tag of ["model.failed", "recovery.started", "tool.failed", "approval.decided"] as const)
        assert.isTrue(tags.has(tag), tag)
      const report = yield* Replay.replay(recorded.timeline, { ...options, tools: tools() })
      assert.strictEqual(report._tag, "Matched", report._tag === "Diverged" ? report.detail : "")
      assert.strictEqual(report.result.finalAnswer, "fetched and deployed")
      assert.deepStrictEqual(report.result.counters, recorded.counters)
    })
  )

  it.effect("a recording read back as JSONL replays the same: Recording.decode, then replay", () =>
    Effect.gen(function* () {
      const recorded = yield* recordRun()
      const jsonl = recorded.timeline.map((e) => `${JSON.stringify(e)}\n`).join("")
      const recording = yield* Effect.fromResult(Recording.decode(jsonl))
      const report = yield* Replay.expectMatch(recording.events, { ...options, tools: tools() })
      assert.strictEqual(report.result.status, "completed")
    })
  )

  it.effect("the same recording with a lower limits.maxIterations diverges where the recorded run went on", () =>
    Effect.gen(function* () {
      const recorded = yield* recordRun()
      const report = yield* Replay.replay(recorded.timeline, {
        ...options,
        limits: { maxIterations: 2 },
        tools: tools()
      })
      assert.strictEqual(report._tag, "Diverged")
      if (report._tag !== "Diverged") return
      // The replay stops where its budget says: after the second iteration's batch, where the
      // recording goes on to its third iteration.
      assert.strictEqual(report.actual?._tag, "termination.decided")
      assert.strictEqual(report.actual?._tag === "termination.decided" ? report.actual.reason : "", "max_iterations")
      const before = recorded.timeline.slice(0, report.seq)
      assert.isTrue(before.some((e) => e._tag === "model.responded" && e.iteration === 2))
      assert.isFalse(before.some((e) => e._tag === "model.requested" && e.iteration === 3))
      assert.isTrue(recorded.timeline.slice(report.seq).some((e) => e._tag === "model.requested" && e.iteration === 3))
      assert.strictEqual(report.expected, recorded.timeline[report.seq])
      assert.strictEqual(report.result.stopReason, "max_iterations")
      assert.include(report.detail, `seq ${report.seq}`)
    })
  )

  it.effect(
    "the same recording without the policy that stopped it diverges at the recorded stop, and never hangs",
    () =>
      Effect.gen(function* () {
        const same = ScriptedModel.toolCall("echo", { text: "again" })
        const recorded = yield* Run.run({ goal: "repeat", tools: [echo], limits: { maxIterations: 20 } }).pipe(
          TestClockDriver.drive,
          Effect.provide(ScriptedModel.layer(Array.from({ length: 20 }, () => same)))
        )
        assert.strictEqual(recorded.stopReason, "repeated_tool_call")
        const policy = recorded.policy ?? ""
        const stop = recorded.timeline.findIndex((e) => e._tag === "termination.decided")
        const report = yield* Replay.replay(recorded.timeline, {
          tools: [echo],
          limits: { maxIterations: 20 },
          policies: (defaults) => Termination.remove(defaults, policy)
        })
        assert.strictEqual(report._tag, "Diverged")
        if (report._tag !== "Diverged") return
        assert.strictEqual(report.seq, stop)
        assert.strictEqual(report.expected?._tag, "termination.decided")
        assert.notStrictEqual(report.actual?._tag, "termination.decided")
        // The recorded run never ran the call its last answer asked for: the replay refuses it and ends.
        assert.include(report.detail, "the recording does not have")
        assert.notStrictEqual(report.result.stopReason, "repeated_tool_call")
      })
  )

  it.effect("a replay asked with another conversation diverges at run.started and says the model was refused", () =>
    Effect.gen(function* () {
      const recorded = yield* recordRun()
      const report = yield* Replay.replay(recorded.timeline, { ...options, goal: "something else", tools: tools() })
      assert.strictEqual(report._tag, "Diverged")
      if (report._tag !== "Diverged") return
      assert.strictEqual(report.seq, 0)
      assert.include(report.detail, "goal")
      assert.include(report.detail, "another conversation")
    })
  )

  it.effect("a timeline that does not start with run.started is not a recording", () =>
    Effect.gen(function* () {
      const recorded = yield* recordRun()
      const error = yield* Effect.flip(Replay.replay(recorded.timeline.slice(1), { tools: tools() }))
      assert.strictEqual(error._tag, "NotARecording")
    })
  )
})
