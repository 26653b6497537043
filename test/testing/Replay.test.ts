import { assert, describe, it } from "@effect/vitest"
import { Cause, type Duration, Effect, Exit, Fiber, Option, Redacted, Schema, Stream } from "effect"
import { CircuitBreaker } from "effect/persistence"
import { TestClock } from "effect/testing"
import * as Abortable from "../../src/cancellation/Abortable.ts"
import * as Event from "../../src/events/Event.ts"
import * as Failure from "../../src/failure/Failure.ts"
import * as Journal from "../../src/journal/Journal.ts"
import * as JournalApprovals from "../../src/journal/JournalApprovals.ts"
import * as Model from "../../src/model/Model.ts"
import * as Recording from "../../src/observability/Recording.ts"
import * as Breakers from "../../src/recovery/Breakers.ts"
import * as Recovery from "../../src/recovery/Recovery.ts"
import * as Run from "../../src/run/Run.ts"
import * as Termination from "../../src/termination/Termination.ts"
import * as FaultyModel from "../../src/testing/FaultyModel.ts"
import * as FaultyTools from "../../src/testing/FaultyTools.ts"
import * as Replay from "../../src/testing/Replay.ts"
import * as ScriptedModel from "../../src/testing/ScriptedModel.ts"
import * as TestClockDriver from "../../src/testing/TestClockDriver.ts"
import * as Approval from "../../src/tools/Approval.ts"
import * as Tool from "../../src/tools/Tool.ts"
import { dies, layers, pay, payThenAnswer } from "../support/restart.ts"
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

/** A write that reads its record back with `postcondition`, within a tool timeout of 1 s. */
const checkedWrite = (postcondition: (input: { readonly n: number }) => Effect.Effect<boolean, Failure.Failure>) =>
  Tool.make({
    name: "write",
    description: "Writes a record, then reads it back",
    input: Schema.Struct({ n: Schema.Number }),
    output: Schema.Struct({ written: Schema.Number }),
    sideEffect: "external",
    idempotent: true,
    timeout: "1 second",
    handler: ({ n }) => Effect.succeed({ written: n }),
    postcondition
  })

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

  it.effect("a run a policy of the user's stopped, recorded before its decision said own: true, replays the same", () =>
    Effect.gen(function* () {
      const once = Termination.make("one_turn", ({ counters }) =>
        counters.iterations >= 1 ? Termination.stop("max_iterations", "one turn") : Termination.continue_
      )
      const stopped = { goal: "g", policies: (d: ReadonlyArray<Termination.Policy>) => [once, ...d] }
      const model = ScriptedModel.layerFunction(() => ScriptedModel.toolCall("fetch", { page: 1 }))
      const recorded = yield* Run.run({ ...stopped, tools: tools() }).pipe(Effect.provide(model))
      const decided = recorded.timeline.find((e) => e._tag === "termination.decided")
      assert.isTrue(decided?._tag === "termination.decided" && decided.own)
      // As an older version recorded it.
      const older = recorded.timeline.map((e) => {
        if (e._tag !== "termination.decided") return e
        const { own: _, ...rest } = e
        return rest
      })
      const report = yield* Replay.replay(older, { ...stopped, tools: tools() }).pipe(Effect.provide(model))
      assert.strictEqual(report._tag, "Matched", report._tag === "Diverged" ? report.detail : "")
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

  it.effect("a recording whose model attached metadata to its reasoning and calls replays the same (review 186)", () =>
    Effect.gen(function* () {
      const signature = { anthropic: { signature: "SIG-1" } }
      const withMetadata = Model.response({
        text: "",
        toolCalls: [
          { id: "c1", name: "echo", arguments: '{"text":"hi"}', metadata: { google: { thoughtSignature: "T" } } }
        ],
        reasoning: "thinking",
        reasoningParts: [{ text: "thinking", metadata: signature }]
      })
      const options = { goal: "echo it", tools: [echo] }
      const recorded = yield* Run.run(options).pipe(
        Effect.provide(ScriptedModel.layer([withMetadata, ScriptedModel.finalAnswer("done")]))
      )
      assert.strictEqual(recorded.status, "completed", recorded.detail)
      const jsonl = recorded.timeline.map((e) => `${JSON.stringify(e)}\n`).join("")
      const recording = yield* Effect.fromResult(Recording.decode(jsonl))
      const report = yield* Replay.replay(recording.events, options)
      assert.strictEqual(report._tag, "Matched", report._tag === "Diverged" ? report.detail : "")
    })
  )

  it.effect(
    "R12 a divergence's detail writes out the control and bidirectional characters of what it quotes (review 187)",
    () =>
      Effect.gen(function* () {
        const hostile = "done \x9b2J\u202eevil"
        const recorded = yield* Run.run({ goal: hostile, tools: [echo] }).pipe(
          Effect.provide(ScriptedModel.layer([ScriptedModel.finalAnswer("done")]))
        )
        // Replayed with another goal: the detail quotes both.
        const report = yield* Replay.replay(recorded.timeline, { goal: "answer", tools: [echo] })
        assert.strictEqual(report._tag, "Diverged")
        const detail = report._tag === "Diverged" ? report.detail : ""
        assert.include(detail, "\\x9b2J\\u202eevil")
        assert.notMatch(detail, /[\x9b\u202e]/)
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

  it.effect("a recording with a fallback model replays Matched; the fallback is played back, never called", () =>
    Effect.gen(function* () {
      // The primary refuses for good (400), the run falls back to `backup`, which calls a tool and answers.
      const backup = ScriptedModel.make([
        ScriptedModel.toolCall("echo", { text: "hi" }),
        ScriptedModel.finalAnswer("hi")
      ])
      const recovery = {
        backoff: Recovery.backoff({ jitter: false }),
        fallbackModels: [{ name: "backup", model: backup }]
      }
      const recorded = yield* Run.run({ goal: "say hi", tools: [echo], recovery }).pipe(
        TestClockDriver.drive,
        Effect.provide(FaultyModel.layer(FaultyModel.make([FaultyModel.httpError(400)])))
      )
      assert.strictEqual(recorded.status, "completed")
      assert.isTrue(tagsOf(recorded.timeline).has("model.fallback"))
      let called = 0
      const never: Model.Model["Service"] = {
        generate: () =>
          Effect.sync(() => {
            called++
          }).pipe(Effect.andThen(Effect.die("the replay called a real model")))
      }
      const report = yield* Replay.replay(recorded.timeline, {
        tools: [echo],
        recovery: { ...recovery, fallbackModels: [{ name: "backup", model: never }] }
      })
      assert.strictEqual(report._tag, "Matched", report._tag === "Diverged" ? report.detail : "")
      assert.strictEqual(called, 0)
      assert.deepStrictEqual(report.result.fallbacks, recorded.fallbacks)
    })
  )

  it.effect("R3.8 a recording with status queries replays Matched: not applied then resent, applied, undecidable", () =>
    Effect.gen(function* () {
      const payment = () =>
        FaultyTools.ledgered({
          name: "pay",
          idempotent: false,
          sideEffect: "external",
          // Call 1 is lost before it applies (found not applied, sent again); call 2 applies, then its answer is lost.
          behaviour: ["lose_before_apply", "apply", "apply_then_lose"],
          reconcile: true
        }).tool
      const model = () =>
        ScriptedModel.layer([
          ScriptedModel.toolCall("pay", { invoice: 1 }),
          ScriptedModel.toolCall("pay", { invoice: 2 }),
          ScriptedModel.finalAnswer("paid")
        ])
      const recorded = yield* Run.run({ goal: "pay both", tools: [payment()] }).pipe(
        TestClockDriver.drive,
        Effect.provide(model())
      )
      assert.strictEqual(recorded.status, "completed", recorded.detail)
      const verdicts = recorded.timeline.flatMap((e) => (e._tag === "tool.reconciled" ? [e.verdict] : []))
      assert.deepStrictEqual(verdicts, ["not_applied", "applied"])
      const replayed = payment()
      const report = yield* Replay.replay(recorded.timeline, { tools: [replayed] })
      assert.strictEqual(report._tag, "Matched", report._tag === "Diverged" ? report.detail : "")
      assert.deepStrictEqual(report.result.sideEffects, recorded.sideEffects)

      // Undecidable: the run ends unknown_outcome with the call pending, and so does its replay.
      const undecided = () =>
        FaultyTools.ledgered({
          name: "pay",
          idempotent: false,
          sideEffect: "external",
          behaviour: ["apply_then_lose"],
          reconcile: () => ({ _tag: "Undecidable", detail: "the bank does not say yet" })
        }).tool
      const stuck = yield* Run.run({ goal: "pay", tools: [undecided()] }).pipe(
        TestClockDriver.drive,
        Effect.provide(model())
      )
      assert.strictEqual(stuck.status, "unknown_outcome")
      const again = yield* Replay.replay(stuck.timeline, { tools: [undecided()] })
      assert.strictEqual(again._tag, "Matched", again._tag === "Diverged" ? again.detail : "")
      assert.deepStrictEqual(again.result.pendingActions, stuck.pendingActions)
    })
  )

  it.effect("a recording whose postcondition contradicted a success replays Matched, and one where it held", () =>
    Effect.gen(function* () {
      const checked = (holds: (n: number) => Effect.Effect<boolean>) => checkedWrite(({ n }) => holds(n))
      const recorded = yield* Run.run({ goal: "write", tools: [checked((n) => Effect.succeed(n === 1))] }).pipe(
        TestClockDriver.drive,
        Effect.provide(
          ScriptedModel.layer([
            ScriptedModel.toolCall("write", { n: 1 }),
            ScriptedModel.toolCall("write", { n: 2 }),
            ScriptedModel.finalAnswer("written")
          ])
        )
      )
      assert.strictEqual(recorded.stopReason, "inconsistent_result")
      // The replay's postcondition is never asked: the recording says what it found.
      const report = yield* Replay.replay(recorded.timeline, {
        tools: [checked(() => Effect.die("the replay asked the postcondition"))]
      })
      assert.strictEqual(report._tag, "Matched", report._tag === "Diverged" ? report.detail : "")
      assert.strictEqual(report.result.stopReason, "inconsistent_result")
    })
  )

  it.effect(
    "R6.4 a postcondition that failed or ran out of time replays as it went, read from the result's failure",
    () =>
      Effect.gen(function* () {
        const checked = checkedWrite
        const unreachable = new Failure.Retryable({
          source: "tool",
          category: "connection",
          code: "read_back_failed",
          attempts: 1,
          hint: "the read-back failed"
        })
        for (const postcondition of [() => Effect.fail(unreachable), () => Effect.never]) {
          const recorded = yield* Run.run({ goal: "write", tools: [checked(postcondition)] }).pipe(
            TestClockDriver.drive,
            Effect.provide(
              ScriptedModel.layer([ScriptedModel.toolCall("write", { n: 1 }), ScriptedModel.finalAnswer("written")])
            )
          )
          assert.strictEqual(recorded.stopReason, "inconsistent_result")
          const failed = recorded.timeline.find((e) => e._tag === "tool.failed")
          const failure = failed?._tag === "tool.failed" ? failed.error.failure : undefined
          // The failure is kept typed: its code, or the timeout and its layer.
          assert.isTrue(
            failure?.code === "read_back_failed" || failure?.timeout?.layer === "tool",
            JSON.stringify(failure)
          )
          const report = yield* Replay.replay(recorded.timeline, {
            tools: [checked(() => Effect.die("the replay asked the postcondition"))]
          })
          assert.strictEqual(report._tag, "Matched", report._tag === "Diverged" ? report.detail : "")
        }
      })
  )

  it.effect("a recording made without its content cannot be replayed: a typed error says why", () =>
    Effect.gen(function* () {
      const recorded = yield* recordRun()
      const left = recorded.timeline.map((e) => (e._tag === "run.started" ? { ...e, goal: Event.notRecorded } : e))
      const error = yield* Effect.flip(Replay.replay(left, { ...options, tools: tools() }))
      assert.strictEqual(error._tag, "NotARecording")
      assert.include(error.message, "content: false")
    })
  )

  it.effect(
    "R12 what is not a list of run events is not a recording: a typed error naming the first event that is none",
    () =>
      Effect.gen(function* () {
        const recorded = yield* recordRun()
        const [started] = recorded.timeline
        for (const [bad, where] of [
          [null, "recording"],
          [[...recorded.timeline.slice(0, 2), { _tag: "nonsense" }, null, 42], "recording[2]"],
          [[{ _tag: "run.started" }], "recording[0]"],
          [[{ ...started, at: Number.NaN }], "recording[0]"]
        ] as const) {
          // A recording read from a file or made by hand: of any shape.
          const error = yield* Effect.flip(
            Replay.replay(bad as unknown as ReadonlyArray<Event.Event>, { tools: tools() })
          )
          assert.strictEqual(error._tag, "NotARecording")
          assert.include(error.message, "it is not a list of run events")
          assert.include(error.message, where)
        }
      })
  )

  it.effect(
    "R10 R13 a recording whose clock went back past its start (a wall clock stepped back, a hand edit) replays: a report, never a defect (review 130)",
    () =>
      Effect.gen(function* () {
        const recorded = yield* recordRun()
        // Every event after run.started twenty minutes before it: more than the ten minutes the replay adds.
        const back = recorded.timeline.map((e, i) => (i === 0 ? e : { ...e, at: e.at - 1_200_000 }))
        const exit = yield* Effect.exit(Replay.replay(back, { ...options, tools: tools() }))
        assert.isTrue(Exit.isSuccess(exit), Exit.isFailure(exit) ? Cause.pretty(exit.cause) : "")
      })
  )

  it.effect(
    "R9 a replay journals nothing and decides its approvals on a gate of its own, whatever the caller provides",
    () =>
      Effect.gen(function* () {
        const recorded = yield* recordRun().pipe(Effect.provide(JournalApprovals.layer()))
        const journal = yield* Journal.Journal
        // The caller's store holds the recorded run already, and its gate is the journal's.
        const inStore = yield* journal.read(recorded.runId)
        assert.isTrue(Option.isSome(inStore))
        const report = yield* Replay.replay(recorded.timeline, { ...options, tools: tools() }).pipe(
          Effect.provide(JournalApprovals.layer())
        )
        assert.strictEqual(report._tag, "Matched", report._tag === "Diverged" ? report.detail : "")
        assert.deepStrictEqual(yield* journal.read(recorded.runId), inStore)
      }).pipe(Effect.provide(Journal.layerMemory))
  )

  it.effect(
    "R13 R7 a recording whose approval says a blank by (made before a blank by was refused) replays and matches",
    () =>
      Effect.gen(function* () {
        const recorded = yield* recordRun()
        assert.isTrue(recorded.timeline.some((e) => e._tag === "approval.decided" && e.by === "ops"))
        // As an older version recorded an approval given with `by: ""` (or spaces), which a handle now refuses.
        for (const blank of ["", "  "]) {
          const older = recorded.timeline.map((e) => (e._tag === "approval.decided" ? { ...e, by: blank } : e))
          const report = yield* Replay.replay(older, { ...options, tools: tools() })
          // Before, the replay's approve was refused, nothing was decided, and it parted at the decision.
          assert.strictEqual(report._tag, "Matched", report._tag === "Diverged" ? report.detail : "")
          const decided = report.result.timeline.find((e) => e._tag === "approval.decided")
          assert.isTrue(
            decided?._tag === "approval.decided" && decided.decision === "approved" && decided.by === undefined
          )
        }
      })
  )

  it.effect(
    "R9 R13 a resumed run's recording is refused up front: a typed error says why, not a false divergence",
    () =>
      Effect.gen(function* () {
        const payment = pay(true)
        yield* dies({ crashAt: { commit: 2, when: "after" } }, { goal: "pay 10", tools: [payment.tool] }, payThenAnswer)
        const resumed = yield* TestClockDriver.drive(Run.resume("r1", { tools: [payment.tool] }, "restart")).pipe(
          Effect.provide(payThenAnswer)
        )
        const at = resumed.timeline.find((e) => e._tag === "run.resumed")?.seq
        assert.isDefined(at)
        const error = yield* Effect.flip(Replay.replay(resumed.timeline, { tools: [pay(true).tool] }))
        assert.strictEqual(error._tag, "NotARecording")
        assert.include(error.message, `it is a resumed run's (run.resumed at seq ${at})`)
      }).pipe(Effect.provide(layers))
  )

  it.effect("R5 R13 a run cancelled from outside replays its cancel at the recorded time, and matches", () =>
    Effect.gen(function* () {
      const slow = FaultyTools.slow({ name: "slow", millis: 60_000 })
      const model = ScriptedModel.layer([ScriptedModel.toolCall("slow", {}), ScriptedModel.finalAnswer("x")])
      const recorded = yield* TestClockDriver.drive(
        Effect.gen(function* () {
          const handle = yield* Run.start({ goal: "wait", tools: [slow.tool] })
          yield* Stream.runHead(Stream.filter(handle.events, (e) => e._tag === "tool.started"))
          yield* TestClock.adjust("2 seconds")
          return yield* handle.cancel
        }).pipe(Effect.provide(model)),
        { upTo: "2 minutes" }
      )
      assert.strictEqual(recorded.stopReason, "cancelled")
      const report = yield* Replay.replay(recorded.timeline, { tools: [slow.tool] })
      assert.strictEqual(report._tag, "Matched", report._tag === "Diverged" ? report.detail : "")
      assert.strictEqual(report.result.stopReason, "cancelled")
      assert.strictEqual(report.result.elapsedMillis, recorded.elapsedMillis)
    })
  )

  it.live(
    "R13 a long recording (1,500 iterations, 9,000 events) replays and matches",
    () =>
      Effect.gen(function* () {
        const limits = { maxIterations: 1500, maxToolCalls: 1505, repeatedToolCall: 1_000_000 }
        const recorded = yield* Run.run({ goal: "echo", tools: [echo], limits }).pipe(
          Effect.provide(
            ScriptedModel.layerFunction((request) => ScriptedModel.toolCall("echo", { text: `v${request.iteration}` }))
          )
        )
        assert.strictEqual(recorded.stopReason, "max_iterations")
        // The log is folded once over the recording: before, folding it again for each request took
        // about 20 s here (timings are for the closing notes, not asserted on a shared machine).
        const report = yield* Replay.replay(recorded.timeline, { tools: [echo], limits })
        assert.strictEqual(report._tag, "Matched", report._tag === "Diverged" ? report.detail : "")
      }),
    60_000
  )

  it.effect(
    "R4 R5.2 R13 attempts cut off by a tool timeout, a step deadline or a cancel replay Matched, settled as recorded",
    () =>
      Effect.gen(function* () {
        const recordAndReplay = (
          tool: Tool.Any<never>,
          options: Omit<Run.Options<Tool.Any<never>>, "goal" | "tools">,
          cancelAfter?: Duration.Input
        ) =>
          Effect.gen(function* () {
            const model = ScriptedModel.layer([ScriptedModel.toolCall(tool.name, {}), ScriptedModel.finalAnswer("x")])
            const recorded = yield* TestClockDriver.drive(
              Effect.gen(function* () {
                const handle = yield* Run.start({ goal: "g", tools: [tool], ...options })
                if (cancelAfter === undefined) return yield* handle.result
                yield* Stream.runHead(Stream.filter(handle.events, (e) => e._tag === "tool.started"))
                yield* TestClock.adjust(cancelAfter)
                return yield* handle.cancel
              }).pipe(Effect.scoped, Effect.provide(model)),
              { upTo: "2 minutes" }
            )
            const report = yield* Replay.replay(recorded.timeline, { tools: [tool], ...options })
            assert.strictEqual(report._tag, "Matched", report._tag === "Diverged" ? report.detail : "")
            return recorded
          })
        // Hangs once, cut off by its own timeout, then retried (a jittered backoff).
        let calls = 0
        const flaky = Tool.make({
          name: "flaky",
          description: "Hangs the first time",
          input: Schema.Struct({}),
          output: Schema.String,
          sideEffect: "read",
          idempotent: true,
          timeout: "1 second",
          handler: () => Effect.suspend(() => (++calls === 1 ? Effect.never : Effect.succeed("ok")))
        })
        const retried = yield* recordAndReplay(flaky, {})
        assert.strictEqual(retried.stopReason, "goal_reached")
        assert.isTrue(retried.timeline.some((e) => e._tag === "tool.interrupted" && e.attempt === 1))
        // A write cut off by its timeout is not retried: its outcome is unknown.
        const hangs = (sideEffect: Tool.SideEffect, timeout?: Duration.Input) =>
          Tool.make({
            name: "hangs",
            description: "Never returns",
            input: Schema.Struct({}),
            output: Schema.String,
            sideEffect,
            ...(timeout === undefined ? {} : { timeout }),
            handler: () => Effect.never
          })
        yield* recordAndReplay(hangs("write", "1 second"), {})
        // A step deadline cuts a read off; its retry would not fit (a jittered wait named in the cause).
        const stepped = yield* recordAndReplay(hangs("read"), { time: { step: "1 second" } })
        assert.strictEqual(stepped.stopReason, "step_timeout")
        // A cancel, with what the handler said of its action (an Abortable promise that stopped on the signal).
        const fetchPage = Tool.make({
          name: "fetch_page",
          description: "Fetches a page",
          input: Schema.Struct({}),
          output: Schema.String,
          sideEffect: "read",
          handler: Abortable.handler(
            (_input, signal) =>
              new Promise<string>((_resolve, reject) => signal.addEventListener("abort", () => reject(signal.reason)))
          )
        })
        const cancelled = yield* recordAndReplay(fetchPage, {}, "2 seconds")
        const settled = cancelled.timeline.find((e) => e._tag === "tool.interrupted")
        assert.include(settled?._tag === "tool.interrupted" ? settled.detail : "", "abort")
      })
  )

  it.effect(
    "R10 R5.2 R4.2 R13 attempts left behind after the stop grace, or that held their step, replay Matched: nothing interrupts their playback",
    () =>
      Effect.gen(function* () {
        // Code that cannot be interrupted: it holds its step until it ends, and only the run deadline or a cancel leaves it behind.
        const stubborn = (millis: number, timeout?: Duration.Input) =>
          Tool.make({
            name: "stubborn",
            description: "Cannot be interrupted",
            input: Schema.Struct({}),
            output: Schema.String,
            sideEffect: "read",
            maxRetries: 0,
            ...(timeout === undefined ? {} : { timeout }),
            handler: () => Effect.as(Effect.uninterruptible(Effect.sleep(millis)), "late")
          })
        const recordAndReplay = (
          tool: Tool.Any<never>,
          time: NonNullable<Run.Options<Tool.Any<never>>["time"]>,
          cancelAfter?: Duration.Input
        ) =>
          Effect.gen(function* () {
            const model = ScriptedModel.layer([ScriptedModel.toolCall(tool.name, {}), ScriptedModel.finalAnswer("x")])
            const recorded = yield* TestClockDriver.drive(
              Effect.gen(function* () {
                const handle = yield* Run.start({ goal: "g", tools: [tool], time })
                if (cancelAfter === undefined) return yield* handle.result
                yield* Stream.runHead(Stream.filter(handle.events, (e) => e._tag === "tool.started"))
                yield* Effect.sleep(cancelAfter)
                return yield* handle.cancel
              }).pipe(Effect.scoped, Effect.provide(model)),
              { upTo: "2 minutes" }
            )
            const report = yield* Replay.replay(recorded.timeline, { tools: [tool], time })
            assert.strictEqual(report._tag, "Matched", report._tag === "Diverged" ? report.detail : "")
            return recorded
          })
        const grace = { stopGrace: "20 millis" } as const
        // Left behind by the run deadline; by it after holding its step, or its own timeout; by a cancel.
        for (const [tool, time, cancelAfter] of [
          [stubborn(60_000), { run: "5 seconds", ...grace }, undefined],
          [stubborn(60_000), { run: "5 seconds", step: "2 seconds", ...grace }, undefined],
          [stubborn(60_000, "1 second"), { run: "5 seconds", ...grace }, undefined],
          [stubborn(60_000), { run: "1 minute", ...grace }, "2 seconds"],
          // A tool that ignores its signal for longer than the stop grace: left behind too.
          [
            FaultyTools.slow({ name: "deaf", millis: 60_000, ignoresCancellation: true }).tool,
            { run: "1 minute", ...grace },
            "2 seconds"
          ]
        ] as const) {
          const recorded = yield* recordAndReplay(tool, time, cancelAfter)
          assert.include(recorded.detail, "it was left behind")
        }
        // Held its step past the deadline, then ended: the timeout says how long the wait really took.
        const held = yield* recordAndReplay(stubborn(3_000), { run: "1 minute", step: "1 second" })
        const failed = held.timeline.find((e) => e._tag === "tool.failed")
        assert.deepStrictEqual(failed?._tag === "tool.failed" ? failed.error.failure?.timeout : undefined, {
          layer: "step",
          elapsedMillis: 3_000,
          mayHaveSideEffects: false
        })
      })
  )

  it.effect(
    "R13 a call whose observation could not be rendered replays Matched; one whose output broke its schema is named as not kept",
    () =>
      Effect.gen(function* () {
        const tool = (name: string, output: unknown, observe?: (output: { readonly n: number }) => string) =>
          Tool.make({
            name,
            description: "Counts",
            input: Schema.Struct({}),
            output: Schema.Struct({ n: Schema.Number }),
            sideEffect: "read",
            recoverErrors: true,
            // Erased on purpose: a handler that breaks its own output schema.
            handler: () => Effect.succeed(output as { readonly n: number }),
            ...(observe === undefined ? {} : { observe })
          })
        const recordAndReplay = (t: Tool.Any<never>) =>
          Effect.gen(function* () {
            const recorded = yield* Run.run({ goal: "g", tools: [t] }).pipe(
              TestClockDriver.drive,
              Effect.provide(ScriptedModel.layer([ScriptedModel.toolCall(t.name, {}), ScriptedModel.finalAnswer("x")]))
            )
            return { recorded, report: yield* Replay.replay(recorded.timeline, { tools: [t] }) }
          })
        const throwing = yield* recordAndReplay(
          tool("count", { n: 1 }, () => {
            throw new Error("cannot render")
          })
        )
        const failed = throwing.recorded.timeline.find((e) => e._tag === "tool.failed")
        assert.deepStrictEqual(failed?._tag === "tool.failed" ? failed.output : undefined, { n: 1 })
        assert.strictEqual(
          throwing.report._tag,
          "Matched",
          throwing.report._tag === "Diverged" ? throwing.report.detail : ""
        )
        const notString = yield* recordAndReplay(tool("count", { n: 1 }, () => 42 as unknown as string))
        assert.strictEqual(
          notString.report._tag,
          "Matched",
          notString.report._tag === "Diverged" ? notString.report.detail : ""
        )
        const broken = yield* recordAndReplay(tool("count", { n: "one" }))
        assert.strictEqual(broken.report._tag, "Diverged")
        assert.include(
          broken.report._tag === "Diverged" ? broken.report.detail : "",
          "returned output its checks refused (output_validation_failed), which the recording does not keep"
        )
      })
  )

  it.effect(
    "R3.9 R13 a replay never uses the caller's circuit breakers: an open circuit refuses nothing, and replayed failures trip none",
    () =>
      Effect.gen(function* () {
        const options = { goal: "g", tools: [], recovery: { backoff: Recovery.backoff({ jitter: false }) } } as const
        const two503 = FaultyModel.make([
          FaultyModel.httpError(503),
          FaultyModel.httpError(503),
          FaultyModel.respond(ScriptedModel.finalAnswer("x"))
        ])
        // Recorded without breakers: two 503s, then the answer.
        const recorded = yield* Run.run(options).pipe(
          Effect.provide(FaultyModel.layer(two503)),
          TestClockDriver.drive,
          Effect.provideService(Breakers.Breakers, undefined)
        )
        assert.strictEqual(recorded.stopReason, "goal_reached")
        const found = yield* Breakers.Breakers
        if (found === undefined) return assert.fail("the application's breakers are not in context")
        const app = found
        // The replay in the application's context: its breakers are not tripped by it...
        const first = yield* Replay.replay(recorded.timeline, options)
        assert.strictEqual(first._tag, "Matched", first._tag === "Diverged" ? first.detail : "")
        assert.strictEqual(yield* app.state("provider", "model"), "closed")
        // ... and their open circuit does not refuse the replay's model.
        const down = FaultyModel.make(Array.from({ length: 10 }, () => FaultyModel.httpError(503)))
        yield* Run.run(options).pipe(Effect.provide(FaultyModel.layer(down)), TestClockDriver.drive)
        assert.strictEqual(yield* app.state("provider", "model"), "open")
        const second = yield* Replay.replay(recorded.timeline, options)
        assert.strictEqual(second._tag, "Matched", second._tag === "Diverged" ? second.detail : "")
        // Given policies, the replay has breakers of its own: the second 503 opens its circuit.
        const own = yield* Replay.replay(recorded.timeline, {
          ...options,
          breakers: { provider: { tripPolicy: CircuitBreaker.consecutive(2), openDuration: "1 second" } }
        })
        assert.strictEqual(own._tag, "Diverged")
        assert.isTrue(own.result.timeline.some((e) => e._tag === "circuit.changed" && e.to === "open"))
      }).pipe(
        Effect.provide(
          Breakers.layerMemory({ provider: { tripPolicy: CircuitBreaker.consecutive(2), openDuration: "1 hour" } })
        )
      )
  )

  it.effect("a timeline that does not start with run.started is not a recording", () =>
    Effect.gen(function* () {
      const recorded = yield* recordRun()
      const error = yield* Effect.flip(Replay.replay(recorded.timeline.slice(1), { tools: tools() }))
      assert.strictEqual(error._tag, "NotARecording")
    })
  )
})

describe("Replay of answers cut off as they came (R13, R2.1)", () => {
  const paying: Model.Model["Service"] = {
    generate: () =>
      Effect.never.pipe(Effect.onInterrupt(() => Model.reportCutOff({ inputTokens: 1_000, outputTokens: 4_000 })))
  }
  const cases = [
    { time: { attempt: "400 millis" }, limits: { maxTokens: 6_000 } },
    { time: { step: "400 millis" }, limits: {} },
    { time: { run: "400 millis" }, limits: {} }
  ] as const
  for (const { time, limits } of cases)
    it.effect(
      `R13 R2.1 a paid answer cut off by the ${Object.keys(time)[0]} layer replays Matched, its usage counted`,
      () =>
        Effect.gen(function* () {
          const options = {
            goal: "x",
            tools: [],
            time,
            limits,
            recovery: { backoff: Recovery.backoff({ jitter: false }) }
          }
          const recorded = yield* TestClockDriver.drive(Run.run(options)).pipe(
            Effect.provideService(Model.Model, paying)
          )
          assert.isAbove(recorded.counters.outputTokens, 0)
          const report = yield* Replay.replay(recorded.timeline, options)
          assert.strictEqual(report._tag, "Matched", report._tag === "Diverged" ? report.detail : "")
          assert.strictEqual(report.result.counters.outputTokens, recorded.counters.outputTokens)
        })
    )
})

describe("Replay of an answer a cancel cut off (R13, R2.1, R5.1)", () => {
  it.effect("R13 R2.1 a paid answer a cancel cut off replays Matched, its cost counted once (review 159)", () =>
    Effect.gen(function* () {
      const paying: Model.Model["Service"] = {
        generate: () =>
          Effect.never.pipe(Effect.onInterrupt(() => Model.reportCutOff({ inputTokens: 1_000, outputTokens: 4_000 })))
      }
      const recorded = yield* TestClockDriver.drive(
        Effect.gen(function* () {
          const handle = yield* Run.start({ goal: "x", tools: [] })
          yield* Stream.runHead(Stream.filter(handle.events, (e) => e._tag === "model.requested"))
          yield* TestClock.adjust("2 seconds")
          return yield* handle.cancel
        }).pipe(Effect.provideService(Model.Model, paying)),
        { upTo: "2 minutes" }
      )
      assert.strictEqual(recorded.stopReason, "cancelled")
      assert.strictEqual(recorded.counters.outputTokens, 4_000)
      const report = yield* Replay.replay(recorded.timeline, { goal: "x", tools: [] })
      // Before: Diverged, the recorded cut-off played back as the model's failure before the cancel.
      assert.strictEqual(report._tag, "Matched", report._tag === "Diverged" ? report.detail : "")
      assert.strictEqual(report.result.counters.outputTokens, 4_000)
    })
  )

  it.effect("R13 a model's own failure of the category cancelled, retried, replays as it came (reviews 161, 162)", () =>
    Effect.gen(function* () {
      let asked = 0
      const aborting: Model.Model["Service"] = {
        generate: () =>
          Effect.suspend(() =>
            asked++ === 0
              ? Effect.fail(
                  new Failure.Retryable({
                    source: "provider",
                    category: "cancelled",
                    code: "upstream_abort",
                    attempts: 1,
                    hint: "the proxy aborted the request"
                  })
                )
              : Effect.succeed(ScriptedModel.finalAnswer("done"))
          )
      }
      const options = { goal: "x", tools: [], recovery: { backoff: Recovery.backoff({ jitter: false }) } }
      const recorded = yield* TestClockDriver.drive(Run.run(options)).pipe(Effect.provideService(Model.Model, aborting))
      assert.strictEqual(recorded.stopReason, "goal_reached")
      const report = yield* Replay.replay(recorded.timeline, options)
      // Before: played as a cancel's cut-off, waiting for a cancel that never came, and Diverged.
      assert.strictEqual(report._tag, "Matched", report._tag === "Diverged" ? report.detail : "")
    })
  )
})

describe("Replay of a recording made in real time (R13)", () => {
  it.effect("R13 R4.3 a timeout the host overshot by a few ms replays Matched: its measured time is the clock's", () =>
    Effect.gen(function* () {
      const options = { goal: "x", tools: [], time: { attempt: "100 millis" } } as const
      const recorded = yield* TestClockDriver.drive(Run.run(options)).pipe(
        Effect.provide(
          FaultyModel.layer(
            FaultyModel.make([FaultyModel.hang, FaultyModel.respond(ScriptedModel.finalAnswer("done"))])
          )
        )
      )
      // As a live clock records it: the timer fired 3 ms late.
      const overshot = recorded.timeline.map((e) =>
        e._tag === "model.failed" && e.failure.timeout !== undefined
          ? {
              ...e,
              at: e.at + 3,
              failure: {
                ...e.failure,
                hint: e.failure.hint.replace("100 ms", "103 ms"),
                timeout: { ...e.failure.timeout, elapsedMillis: 103 }
              }
            }
          : e
      )
      assert.notDeepEqual(overshot, recorded.timeline)
      const report = yield* Replay.replay(overshot, options)
      assert.strictEqual(report._tag, "Matched", report._tag === "Diverged" ? report.detail : "")
    })
  )
})

describe("Replay of a timeout's words (R13, R4.3)", () => {
  /**
   * A recording whose timeout hint reads `written` where this version writes `now` (the stop's
   * detail quoting it too), made in real time: the timer fired 3 ms late.
   */
  const replayedWith = (time: Run.Time, now: string, written: string) =>
    Effect.gen(function* () {
      const options = { goal: "x", tools: [], time }
      const recorded = yield* TestClockDriver.drive(Run.run(options)).pipe(
        Effect.provide(
          FaultyModel.layer(
            FaultyModel.make([FaultyModel.hang, FaultyModel.respond(ScriptedModel.finalAnswer("done"))])
          )
        )
      )
      assert.include(JSON.stringify(recorded.timeline), now)
      const rewritten: ReadonlyArray<Event.Event> = JSON.parse(
        JSON.stringify(recorded.timeline).replaceAll(now, written)
      )
      const live = rewritten.map((e) => (e._tag === "model.failed" ? { ...e, at: e.at + 3 } : e))
      return yield* Replay.replay(live, options)
    })

  it.effect(
    "R13 R4.3 a hint that says a wait was held past its limit, or a deadline's as 0.2 wrote it, replays Matched",
    () =>
      Effect.gen(function* () {
        // As a live clock writes it now: the limit, and how long the call took.
        const attempt = "no answer within the attempt timeout of 100 ms"
        const held = yield* replayedWith({ attempt: "100 millis" }, attempt, `${attempt} (cut off after 103 ms)`)
        assert.strictEqual(held._tag, "Matched", held._tag === "Diverged" ? held.detail : "")
        // As recordings before 0.3.0 wrote a deadline's: the time the wait took as its size. The
        // stop's detail quotes it, with the jittered wait its retry would have taken.
        const old = yield* replayedWith(
          { run: "10 seconds", step: "100 millis" },
          "no answer within the step deadline (cut off after 100 ms)",
          "no answer within the step deadline of 103 ms"
        )
        assert.strictEqual(old._tag, "Matched", old._tag === "Diverged" ? old.detail : "")
      })
  )
})

describe("Replay of an idempotent call asked about after its retries (R13, R3.8)", () => {
  const busy = new Failure.Retryable({
    source: "tool",
    category: "unavailable",
    code: "gateway_busy",
    attempts: 1,
    hint: "the gateway is busy"
  })
  /** An idempotent payment whose first send hangs past its timeout (it may have paid) and whose retry finds the gateway busy. */
  const payment = (answer: "applied" | "not_applied" | "undecidable") => {
    let sends = 0
    return Tool.make({
      name: "pay",
      description: "Pays",
      input: Schema.Struct({ amount: Schema.Number }),
      output: Schema.Struct({ receipt: Schema.String }),
      sideEffect: "external",
      idempotent: true,
      maxRetries: 1,
      recoverErrors: true,
      timeout: "1 second",
      handler: () => Effect.suspend(() => (sends++ % 2 === 0 ? Effect.never : Effect.fail(busy))),
      reconcile: () =>
        Effect.succeed<Tool.Reconciliation<{ readonly receipt: string }>>(
          answer === "applied"
            ? { _tag: "Applied", output: { receipt: "r-1" } }
            : answer === "not_applied"
              ? { _tag: "NotApplied" }
              : { _tag: "Undecidable", detail: "no record yet" }
        )
    })
  }
  for (const answer of ["applied", "not_applied", "undecidable"] as const)
    it.effect(`R13 R3.8 a status query found ${answer} after a retry's own failure replays Matched`, () =>
      Effect.gen(function* () {
        const options = { goal: "pay", runId: "run-1" }
        const model = ScriptedModel.layer([
          ScriptedModel.toolCall("pay", { amount: 10 }, "call-1"),
          ScriptedModel.finalAnswer("done")
        ])
        const recorded = yield* TestClockDriver.drive(Run.run({ ...options, tools: [payment(answer)] })).pipe(
          Effect.provide(model)
        )
        assert.deepStrictEqual(
          recorded.timeline.flatMap((e) => (e._tag === "tool.reconciled" ? [e.verdict] : [])),
          [answer]
        )
        const report = yield* TestClockDriver.drive(Replay.replay(recorded.timeline, { tools: [payment(answer)] }))
        assert.strictEqual(report._tag, "Matched", report._tag === "Diverged" ? report.detail : "")
      })
    )
})

describe("Replay of a status query's answer recorded in real time (R13, R3.8)", () => {
  it.effect("R13 R3.8 a retry's timeout the host overshot, quoted by the query's record, replays Matched", () =>
    Effect.gen(function* () {
      // An idempotent payment whose sends all hang past their 1 s timeout; its status query cannot decide.
      const pay = () =>
        Tool.make({
          name: "pay",
          description: "Pays",
          input: Schema.Struct({ amount: Schema.Number }),
          output: Schema.Struct({ receipt: Schema.String }),
          sideEffect: "external",
          idempotent: true,
          maxRetries: 1,
          recoverErrors: true,
          timeout: "1 second",
          handler: () => Effect.never,
          reconcile: () =>
            Effect.succeed<Tool.Reconciliation<{ readonly receipt: string }>>({
              _tag: "Undecidable",
              detail: "no record"
            })
        })
      const model = ScriptedModel.layer([
        ScriptedModel.toolCall("pay", { amount: 1 }, "c1"),
        ScriptedModel.finalAnswer("done")
      ])
      const recorded = yield* TestClockDriver.drive(Run.run({ goal: "pay", runId: "r1", tools: [pay()] })).pipe(
        Effect.provide(model)
      )
      // As a live clock records it: the second timer fired 3 ms late, which the query's record quotes.
      const overshot: ReadonlyArray<Event.Event> = recorded.timeline.map((e) =>
        e._tag === "tool.reconciled" && e.after?.timeout !== undefined
          ? {
              ...e,
              after: {
                ...e.after,
                hint: e.after.hint.replace("after 1000 ms", "after 1003 ms"),
                timeout: { ...e.after.timeout, elapsedMillis: 1003 }
              }
            }
          : e
      )
      assert.isTrue(overshot.some((e) => e._tag === "tool.reconciled" && e.after?.timeout?.elapsedMillis === 1003))
      const report = yield* TestClockDriver.drive(Replay.replay(overshot, { tools: [pay()] }))
      assert.strictEqual(report._tag, "Matched", report._tag === "Diverged" ? report.detail : "")
    })
  )
})

describe("Replay of outputs stored in their JSON form (R13, R10)", () => {
  it.effect("R13 R10 a tool whose output holds a Date, a bigint, an Option and a Redacted replays Matched", () =>
    Effect.gen(function* () {
      const token = Tool.make({
        name: "token",
        description: "Issues a token",
        input: Schema.Struct({}),
        output: Schema.Struct({
          at: Schema.Date,
          serial: Schema.BigInt,
          scope: Schema.Option(Schema.String),
          token: Schema.Redacted(Schema.String)
        }),
        sideEffect: "read",
        handler: () =>
          Effect.succeed({ at: new Date(0), serial: 5n, scope: Option.some("read"), token: Redacted.make("s3cret") })
      })
      const model = ScriptedModel.layer([ScriptedModel.toolCall("token", {}, "c1"), ScriptedModel.finalAnswer("ok")])
      const recorded = yield* TestClockDriver.drive(Run.run({ goal: "get a token", tools: [token] })).pipe(
        Effect.provide(model)
      )
      assert.strictEqual(recorded.status, "completed")
      // Before, the recorded JSON was read by the schema itself: the replay's tool failed where the recorded one succeeded.
      const report = yield* TestClockDriver.drive(Replay.replay(recorded.timeline, { tools: [token] }))
      assert.strictEqual(report._tag, "Matched", report._tag === "Diverged" ? report.detail : "")
    })
  )
})

describe("Replay of waits and texts an identical run repeats (R10, R13), review 119", () => {
  const noJitter = { backoff: Recovery.backoff({ jitter: false }) }

  it.effect("R10 R13 Replay plays a 429's Retry-After back: an identical run matches", () =>
    Effect.gen(function* () {
      // The retry waits the 2 s the provider asked, not the 50 ms backoff; its answer comes within the 1 s attempt timeout.
      const options = {
        goal: "g",
        tools: [],
        time: { run: "1 minute", attempt: "1 second" },
        recovery: noJitter
      } as const
      const model = FaultyModel.make([
        FaultyModel.rateLimited("2"),
        FaultyModel.respond(ScriptedModel.finalAnswer("done"))
      ])
      const recorded = yield* TestClockDriver.drive(Run.run(options).pipe(Effect.provide(FaultyModel.layer(model))))
      assert.strictEqual(recorded.status, "completed")
      const failed = recorded.timeline.find((e) => e._tag === "model.failed")
      assert.strictEqual(failed?._tag === "model.failed" ? failed.failure.retryAfterMillis : undefined, 2000)
      const report = yield* Replay.replay(recorded.timeline, options)
      assert.strictEqual(report._tag, "Matched", report._tag === "Diverged" ? report.detail : "")
    })
  )

  it.effect("R10 R13 Replay plays a tool's Retry-After back: its retry waits as recorded, and matches", () =>
    Effect.gen(function* () {
      const busy = () => {
        let sends = 0
        return Tool.make({
          name: "fetch",
          description: "Fetches, after a Retry-After of 2 s the first time",
          input: Schema.Struct({}),
          output: Schema.String,
          idempotent: true,
          timeout: "1 second",
          handler: () =>
            Effect.suspend(() =>
              sends++ === 0
                ? Effect.fail(
                    new Failure.Retryable({
                      source: "tool",
                      category: "rate_limited",
                      code: "busy",
                      attempts: 1,
                      hint: "busy",
                      retryAfterMillis: 2000
                    })
                  )
                : Effect.as(Effect.sleep("500 millis"), "ok")
            )
        })
      }
      const options = { goal: "g", time: { run: "1 minute" }, recovery: noJitter } as const
      const model = ScriptedModel.layer([ScriptedModel.toolCall("fetch", {}), ScriptedModel.finalAnswer("done")])
      const recorded = yield* TestClockDriver.drive(Run.run({ ...options, tools: [busy()] })).pipe(
        Effect.provide(model)
      )
      assert.strictEqual(recorded.status, "completed")
      const report = yield* Replay.replay(recorded.timeline, { ...options, tools: [busy()] })
      assert.strictEqual(report._tag, "Matched", report._tag === "Diverged" ? report.detail : "")
    })
  )

  it.effect(
    "R10 R13 R7 Replay decides each approval at its time: one decided before a call asked earlier matches",
    () =>
      Effect.gen(function* () {
        const gated = (name: string) =>
          Tool.make({
            name,
            description: name,
            input: Schema.Struct({}),
            output: Schema.String,
            needsApproval: true,
            idempotent: true,
            handler: () => Effect.succeed("ok")
          })
        const tools = () => [gated("a"), gated("b")]
        const options = { goal: "g", concurrency: 2, time: { run: "1 minute" }, recovery: noJitter } as const
        // call_2 is decided at 10 ms, call_1 (asked first) at 50 ms.
        const recorded = yield* Effect.gen(function* () {
          const handle = yield* Run.start({ ...options, tools: tools() })
          yield* Stream.runHead(Stream.filter(handle.events, (e) => e._tag === "approval.requested"))
          yield* Effect.forkScoped(Effect.andThen(Effect.sleep("10 millis"), handle.approve("call_2")))
          yield* Effect.forkScoped(Effect.andThen(Effect.sleep("50 millis"), handle.approve("call_1")))
          return yield* handle.result
        }).pipe(
          Effect.scoped,
          TestClockDriver.drive,
          Effect.provide(
            ScriptedModel.layer([ScriptedModel.toolCalls(["a", {}], ["b", {}]), ScriptedModel.finalAnswer("done")])
          ),
          Effect.provide(Approval.layerMemory)
        )
        assert.strictEqual(recorded.status, "completed")
        assert.deepStrictEqual(
          recorded.timeline.flatMap((e) => (e._tag === "approval.decided" ? [e.callId] : [])),
          ["call_2", "call_1"]
        )
        const report = yield* Replay.replay(recorded.timeline, { ...options, tools: tools() })
        assert.strictEqual(report._tag, "Matched", report._tag === "Diverged" ? report.detail : "")
        // A call asked at the run's start, decided 1 ms later, 1 ms before its approval expires: decided in time.
        const tight = { goal: "g", time: { run: "1 minute", approval: "2 millis" } } as const
        const quick = yield* Effect.gen(function* () {
          const handle = yield* Run.start({ ...tight, tools: [gated("a")] })
          yield* Stream.runHead(Stream.filter(handle.events, (e) => e._tag === "approval.requested"))
          yield* Effect.forkScoped(Effect.andThen(Effect.sleep("1 millis"), handle.approve("call_1")))
          return yield* handle.result
        }).pipe(
          Effect.scoped,
          TestClockDriver.drive,
          Effect.provide(ScriptedModel.layer([ScriptedModel.toolCall("a", {}), ScriptedModel.finalAnswer("done")])),
          Effect.provide(Approval.layerMemory)
        )
        assert.strictEqual(quick.status, "completed")
        const again = yield* Replay.replay(quick.timeline, { ...tight, tools: [gated("a")] })
        assert.strictEqual(again._tag, "Matched", again._tag === "Diverged" ? again.detail : "")
      })
  )

  it.effect(
    "R10 R13 R3.8 Replay keeps a lost call's failure text when its status query found it not applied with no retry left",
    () =>
      Effect.gen(function* () {
        const payment = () =>
          FaultyTools.ledgered({
            name: "pay",
            idempotent: false,
            sideEffect: "external",
            behaviour: ["lose_before_apply"],
            reconcile: true
          }).tool
        const options = {
          goal: "g",
          time: { run: "1 minute" },
          recovery: { backoff: Recovery.backoff({ retries: 0 }) }
        } as const
        const recorded = yield* TestClockDriver.drive(Run.run({ ...options, tools: [payment()] })).pipe(
          Effect.provide(
            ScriptedModel.layer([ScriptedModel.toolCall("pay", { amount: 1 }), ScriptedModel.finalAnswer("done")])
          )
        )
        const failed = recorded.timeline.find((e) => e._tag === "tool.failed")
        // The lost attempt's own words, quoted by the failure the query's verdict made.
        assert.match(
          failed?._tag === "tool.failed" ? failed.error.message : "",
          /^pay did not take effect \(pay: the connection broke/
        )
        const report = yield* Replay.replay(recorded.timeline, { ...options, tools: [payment()] })
        assert.strictEqual(report._tag, "Matched", report._tag === "Diverged" ? report.detail : "")
      })
  )
})

describe("Replay of a tool call its circuit refused (R13, R3.9), review 121", () => {
  it.effect(
    "R13 R3.9 waits for another run's trial call are replayed as such: no retry spent, the identical run matches",
    () =>
      Effect.gen(function* () {
        let down = true
        const failing = new Failure.Retryable({
          source: "tool",
          category: "transient_http",
          code: "http_503",
          attempts: 1,
          hint: "down"
        })
        const save = (millis: number) =>
          Tool.make({
            name: "save",
            description: "Saves",
            input: Schema.Struct({ n: Schema.Number }),
            output: Schema.String,
            sideEffect: "write",
            idempotent: true,
            handler: () => (down ? Effect.fail(failing) : Effect.as(Effect.sleep(millis), "saved"))
          })
        const script = () =>
          ScriptedModel.layer([ScriptedModel.toolCall("save", { n: 1 }, "c1"), ScriptedModel.finalAnswer("done")])
        const recovery = { backoff: Recovery.backoff({ jitter: false, retries: 0 }), maxRecoveries: 0 }
        const waiting = yield* Effect.gen(function* () {
          // One failure opens the tool's circuit for 1 s; then one run's call is its trial (5 s), the other's waits.
          yield* Run.run({ goal: "save", tools: [save(0)], recovery }).pipe(Effect.provide(script()))
          yield* TestClock.adjust("2 seconds")
          down = false
          const trial = yield* Effect.forkChild(
            Run.run({ goal: "save", tools: [save(5_000)] }).pipe(Effect.provide(script()))
          )
          yield* Effect.yieldNow
          const other = yield* Effect.forkChild(
            Run.run({ goal: "save", tools: [save(0)], recovery }).pipe(Effect.provide(script()))
          )
          for (let i = 0; i < 3000 && (trial.pollUnsafe() === undefined || other.pollUnsafe() === undefined); i++) {
            yield* TestClock.adjust("10 millis")
          }
          return yield* Fiber.join(other)
        }).pipe(
          Effect.provide(
            Breakers.layerMemory({ tool: { tripPolicy: CircuitBreaker.consecutive(1), openDuration: "1 second" } })
          )
        )
        assert.strictEqual(waiting.status, "completed", waiting.detail)
        const waits = waiting.timeline.flatMap((e) => (e._tag === "recovery.started" ? [e.circuit] : []))
        assert.isAbove(waits.length, 1)
        assert.isTrue(waits.every((circuit) => circuit === "half_open"))
        const report = yield* Replay.replay(waiting.timeline, { goal: "save", tools: [save(0)], recovery })
        assert.strictEqual(report._tag, "Matched", report._tag === "Diverged" ? report.detail : "")
      })
  )
})

describe("Replay of a run that never slept (R13, R10)", () => {
  it.effect("R13 R10 300 instant iterations under a 20 ms deadline replay as they ran: Matched (review 147)", () =>
    Effect.gen(function* () {
      const options = {
        goal: "echo",
        tools: [echo],
        limits: { maxIterations: 305, maxToolCalls: 305 },
        time: { run: "20 millis" }
      } as const
      const script = [
        ...Array.from({ length: 300 }, (_, i) => ScriptedModel.toolCall("echo", { text: `${i}` })),
        ScriptedModel.finalAnswer("done")
      ]
      const recorded = yield* Run.run(options).pipe(Effect.provide(ScriptedModel.layer(script)))
      assert.deepStrictEqual([recorded.stopReason, recorded.elapsedMillis], ["goal_reached", 0])
      // Before, the replay's clock moved while the run computed, and it ran out of time at 20 ms.
      const report = yield* Replay.replay(recorded.timeline, options)
      assert.strictEqual(report._tag, "Matched", report._tag === "Diverged" ? report.detail : "")
    })
  )
})
