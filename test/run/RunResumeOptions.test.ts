import { assert, describe, it } from "@effect/vitest"
import { Effect, Option, Schema } from "effect"
import * as Counters from "../../src/events/Counters.ts"
import * as RunLog from "../../src/events/RunLog.ts"
import * as Explain from "../../src/explain/Explain.ts"
import * as Journal from "../../src/journal/Journal.ts"
import * as Run from "../../src/run/Run.ts"
import * as Termination from "../../src/termination/Termination.ts"
import * as FaultyJournal from "../../src/testing/FaultyJournal.ts"
import * as ScriptedModel from "../../src/testing/ScriptedModel.ts"
import * as TestClockDriver from "../../src/testing/TestClockDriver.ts"
import * as Tool from "../../src/tools/Tool.ts"
import * as Criterion from "../../src/validation/Criterion.ts"
import * as Validation from "../../src/validation/Validation.ts"
import { diesIn } from "../support/restart.ts"

/** Runs `run` as a process that dies at its journal's commit `commit` (before it is written). */
const diesAtCommit = <A, E, R>(commit: number, run: Effect.Effect<A, E, R>) =>
  Effect.gen(function* () {
    const faulty = FaultyJournal.make(yield* Journal.Journal, { crashAt: { commit, when: "before" } })
    yield* diesIn(faulty, run.pipe(Effect.provideService(Journal.Journal, faulty.journal)))
  })

const K = 25
let calls = 0

const step = Tool.make({
  name: "step",
  description: "Returns its step number.",
  input: Schema.Struct({ n: Schema.Number }),
  output: Schema.Struct({ n: Schema.Number }),
  sideEffect: "read",
  idempotent: true,
  handler: ({ n }) =>
    Effect.sync(() => {
      calls++
      return { n }
    })
})

// K steps of one call each, then the answer: K + 1 iterations, more than the default 20.
const model = ScriptedModel.layerFunction((request) =>
  request.iteration <= K ? ScriptedModel.toolCall("step", { n: request.iteration }) : ScriptedModel.finalAnswer("done")
)

/** A run with raised limits and a step timeout, whose process dies after 22 of its steps. */
const diesAtStep22Of = (runId: string) =>
  Effect.gen(function* () {
    const journal = yield* Journal.Journal
    // The run's start, then two commits per step (the model's response, the end of the iteration): the 46th is lost.
    const faulty = FaultyJournal.make(journal, { crashAt: { commit: 46, when: "before" } })
    yield* diesIn(
      faulty,
      Run.run({
        goal: "count",
        runId,
        tools: [step],
        limits: { maxIterations: K + 5, maxToolCalls: K + 5 },
        time: { step: "30 seconds" },
        concurrency: 2
      }).pipe(Effect.provideService(Journal.Journal, faulty.journal))
    )
  })
const diesAtStep22 = diesAtStep22Of("r1")

describe("Run.resume: the options a run started with (R9)", () => {
  it.effect("R9 a run resumed with only its tools goes on under the limits it started with, not the defaults", () =>
    Effect.gen(function* () {
      yield* diesAtStep22
      const resumed = yield* Run.resume("r1", { tools: [step] })
      assert.strictEqual(resumed.status, "completed", resumed.detail)
      assert.strictEqual(resumed.counters.iterations, K + 1)
      assert.strictEqual(resumed.counters.toolCalls, K)
      const [started] = resumed.timeline.filter((event) => event._tag === "run.started")
      assert.include(started?._tag === "run.started" ? started.limits : {}, {
        maxIterations: K + 5,
        maxToolCalls: K + 5,
        stepTimeoutMillis: 30_000,
        concurrency: 2
      })
    }).pipe(Effect.provide([Journal.layerMemory, model]))
  )

  it.effect(
    "R9 a list of policies given to Run.resume carries its own limits: the recorded ones are not pressed on it",
    () =>
      Effect.gen(function* () {
        yield* diesAtStep22
        const policies = Termination.defaults({ maxIterations: 24, maxToolCalls: 100 })
        const resumed = yield* Run.resume("r1", { tools: [step], policies })
        assert.strictEqual(resumed.stopReason, "max_iterations", resumed.detail)
        assert.strictEqual(resumed.counters.iterations, 24)
      }).pipe(Effect.provide([Journal.layerMemory, model]))
  )

  it.effect(
    "R9 a policies function given to Run.resume may remove or replace the policies of the recorded limits",
    () =>
      Effect.gen(function* () {
        yield* diesAtStep22
        const removed = yield* Run.resume("r1", {
          tools: [step],
          policies: (defaults) => Termination.remove(defaults, "loop_detected")
        })
        assert.strictEqual(removed.status, "completed", removed.detail)
      }).pipe(Effect.provide([Journal.layerMemory, model]))
  )

  it.effect("R9 limits given to Run.resume win over the recorded ones", () =>
    Effect.gen(function* () {
      yield* diesAtStep22
      const resumed = yield* Run.resume("r1", { tools: [step], limits: { maxIterations: 24 } })
      assert.strictEqual(resumed.stopReason, "max_iterations", resumed.detail)
      assert.strictEqual(resumed.counters.iterations, 24)
    }).pipe(Effect.provide([Journal.layerMemory, model]))
  )

  it.effect(
    "R9 limits in run.started that do not resolve are a ResumeError (corrupt), nothing written, nothing run",
    () =>
      Effect.gen(function* () {
        yield* diesAtStep22
        const journal = yield* Journal.Journal
        const stored = Option.getOrThrow(yield* journal.read("r1"))
        // The same log under another id, its run.started's maxIterations damaged.
        const events = stored.events.map((event) =>
          event._tag === "run.started"
            ? { ...event, runId: "r2", limits: { ...event.limits, maxIterations: -1 } }
            : { ...event, runId: "r2" }
        )
        yield* journal.create({ runId: "r2", header: stored.header, state: "created" })
        yield* journal.append("r2", { expectedSeq: 0, events, state: stored.state })
        calls = 0
        const error = yield* Effect.flip(Run.resume("r2", { tools: [step] }))
        assert.strictEqual(error._tag, "ResumeError")
        assert.strictEqual(error.reason, "corrupt")
        assert.include(error.message, "maxIterations")
        assert.strictEqual(calls, 0)
        assert.strictEqual(Option.getOrThrow(yield* journal.read("r2")).nextSeq, events.length)
      }).pipe(Effect.provide([Journal.layerMemory, model]))
  )

  it.effect(
    "R9 R3.11 a time.run given to resume brings the run's deadline closer, recorded in run.resumed; never further",
    () =>
      Effect.gen(function* () {
        yield* diesAtStep22
        // Each step of the resumed run takes 100 ms: 200 ms leave room for two.
        const slowModel = ScriptedModel.layerFunction((request) =>
          Effect.as(
            Effect.sleep("100 millis"),
            request.iteration <= K
              ? ScriptedModel.toolCall("step", { n: request.iteration })
              : ScriptedModel.finalAnswer("done")
          )
        )
        const resumed = yield* TestClockDriver.drive(
          Run.resume("r1", { tools: [step], time: { run: "200 millis" } }).pipe(Effect.provide(slowModel))
        )
        assert.strictEqual(resumed.stopReason, "run_timeout", resumed.detail)
        const back = resumed.timeline.find((e) => e._tag === "run.resumed")
        assert.isTrue(back?._tag === "run.resumed" && back.deadlineAt === back.at + 200)
        assert.strictEqual(
          RunLog.deadlineOf(resumed.timeline),
          back?._tag === "run.resumed" ? back.deadlineAt : undefined
        )
        assert.strictEqual(Explain.explain(resumed.timeline).deadline?.deadlineAt, RunLog.deadlineOf(resumed.timeline))
        // A wider one changes nothing: the run keeps the deadline it started with.
        yield* diesAtStep22Of("r3")
        const wider = yield* Run.resume("r3", { tools: [step], time: { run: "1 hour" } })
        const again = wider.timeline.find((e) => e._tag === "run.resumed")
        const first = wider.timeline[0]
        assert.isTrue(again?._tag === "run.resumed" && again.deadlineAt === undefined)
        assert.strictEqual(RunLog.deadlineOf(wider.timeline), first?._tag === "run.started" ? first.deadlineAt : 0)
      }).pipe(Effect.provide([Journal.layerMemory, model]))
  )
})

describe("Run.resume: the plan a run started with (R6, R9)", () => {
  const tools = ["a", "b", "c"].map((name) =>
    Tool.make({
      name,
      description: name,
      input: Schema.Struct({}),
      output: Schema.String,
      sideEffect: "read",
      handler: () => Effect.succeed(name)
    })
  )
  const plan = [
    Validation.step("a", "do a", [Criterion.toolSucceeded("a")]),
    Validation.step("b", "do b", [Criterion.toolSucceeded("b")])
  ]
  const script = ScriptedModel.layer([ScriptedModel.toolCall("a", {}), ScriptedModel.finalAnswer("done")])
  /** The run does a, not b, and answers; its process dies at its `commit`th commit (its plan.set is in the first). */
  const diesAt = (runId: string, commit: number, when: "before" | "after", validation: Validation.Spec) =>
    Effect.gen(function* () {
      const faulty = FaultyJournal.make(yield* Journal.Journal, { crashAt: { commit, when } })
      yield* diesIn(
        faulty,
        Run.run({ goal: "g", runId, tools, validation }).pipe(
          Effect.provideService(Journal.Journal, faulty.journal),
          Effect.provide(script)
        )
      )
    })

  it.effect(
    "R6.2 R9 a run resumed or recovered without its plan, or with another, is refused; with its own, judged",
    () =>
      Effect.gen(function* () {
        yield* diesAt("r1", 2, "after", { plan })
        const bigger = [...plan, Validation.step("c", "do c", [Criterion.toolSucceeded("c")])]
        const optional = [
          Validation.step("a", "do a", [Criterion.toolSucceeded("a")]),
          Validation.step("b", "do b", [Criterion.toolSucceeded("b")], { required: false })
        ]
        for (const validation of [undefined, { plan: bigger }, { plan: optional }]) {
          const error = yield* Effect.flip(
            Run.resume("r1", { tools, ...(validation === undefined ? {} : { validation }) })
          )
          assert.strictEqual(error.reason, "invalid")
          assert.include(
            error.detail,
            'is not the plan the run started with (steps "a", "b", as its plan.set records them)'
          )
        }
        const [recovered] = yield* Run.recover({ tools })
        assert.strictEqual(recovered?._tag, "Failure")
        const judged = yield* Run.resume("r1", { tools, validation: { plan } })
        assert.strictEqual(judged.status, "partial", judged.detail)
        assert.deepStrictEqual(
          judged.unfinished.map((u) => u.id),
          ["b"]
        )
      }).pipe(Effect.provide([Journal.layerMemory, script]))
  )

  it.effect("R6.2 R9 a run that died before its first commit is judged by the plan it is given on resume", () =>
    Effect.gen(function* () {
      // It dies before its first commit: its journal holds its header, no event.
      yield* diesAt("r2", 1, "before", {})
      const journal = yield* Journal.Journal
      const stored = Option.getOrThrow(yield* journal.read("r2"))
      assert.lengthOf(stored.events, 0)
      const resumed = yield* Run.resume("r2", { tools, validation: { plan } })
      assert.strictEqual(resumed.status, "partial", resumed.detail)
      const explained = Explain.explain(resumed.timeline)
      assert.deepStrictEqual(
        explained.validation?.unfinished.map((u) => u.id),
        ["b"]
      )
    }).pipe(Effect.provide([Journal.layerMemory, script]))
  )

  it.effect("R2.2 R9 a resume given no policies is refused when the run started with policies of its own", () =>
    Effect.gen(function* () {
      // A policy of the user's: one call of `step` at most (its own limit, which the log records).
      const once = Termination.make(
        "one_step",
        ({ counters }) =>
          Counters.callsOf(counters, "step") > 1
            ? Termination.stop("max_tool_calls", "one step only")
            : Termination.continue_,
        { maxSteps: 1 }
      )
      const journal = yield* Journal.Journal
      const faulty = FaultyJournal.make(journal, { crashAt: { commit: 3, when: "before" } })
      yield* diesIn(
        faulty,
        Run.run({ goal: "g", runId: "r3", tools: [step], policies: (d) => [...d, once] }).pipe(
          Effect.provideService(Journal.Journal, faulty.journal)
        )
      )
      const before = calls
      // Before, it went on under the defaults alone: every further step ran, and the run completed.
      const error = yield* Effect.flip(Run.resume("r3", { tools: [step] }))
      assert.strictEqual(error.reason, "invalid")
      assert.include(error.detail, '("one_step", as its run.started records them)')
      assert.strictEqual(calls, before, "nothing ran")
      const [recovered] = yield* Run.recover({ tools: [step] })
      assert.strictEqual(recovered?._tag, "Failure")
      // Given again, it stops the run as it would have.
      const resumed = yield* Run.resume("r3", { tools: [step], policies: (d) => [...d, once] })
      assert.deepStrictEqual([resumed.stopReason, resumed.policy], ["max_tool_calls", "one_step"])
    }).pipe(Effect.provide([Journal.layerMemory, model]))
  )

  it.effect("R13 R9 a run resumed under other limits records them: Explain reads the limit that stopped it", () =>
    Effect.gen(function* () {
      const journal = yield* Journal.Journal
      const faulty = FaultyJournal.make(journal, { crashAt: { commit: 4, when: "before" } })
      yield* diesIn(
        faulty,
        Run.run({ goal: "g", runId: "r4", tools: [step], limits: { maxIterations: 10 } }).pipe(
          Effect.provideService(Journal.Journal, faulty.journal)
        )
      )
      const resumed = yield* Run.resume("r4", { tools: [step], limits: { maxIterations: 3 } })
      assert.strictEqual(resumed.stopReason, "max_iterations", resumed.detail)
      const [again] = resumed.timeline.filter((e) => e._tag === "run.resumed")
      assert.strictEqual(again?._tag === "run.resumed" ? again.limits?.maxIterations : undefined, 3)
      // Before, Explain read run.started's 10: "iterations 3 / 10" for a stop at 3 of 3.
      assert.strictEqual(RunLog.limitsOf(resumed.timeline)?.maxIterations, 3)
      const gauge = Explain.explain(resumed.timeline).gauges.find((g) => g.limit === "maxIterations")
      assert.strictEqual(gauge?.max, 3)
    }).pipe(Effect.provide([Journal.layerMemory, model]))
  )

  it.effect("R2.2 R9 a resume given no policies is refused for a replaced or removed built-in as for a new one", () =>
    Effect.gen(function* () {
      // The user's own max_iterations (stop at 3), under the built-in's name; and a list without loop_detected.
      const mine = Termination.make("max_iterations", ({ counters }) =>
        counters.iterations >= 3 ? Termination.stop("max_iterations", "three is enough") : Termination.continue_
      )
      const lists = {
        r5: (d: ReadonlyArray<Termination.Policy>) => Termination.replace(d, "max_iterations", mine),
        r6: (d: ReadonlyArray<Termination.Policy>) => Termination.remove(d, "loop_detected")
      }
      for (const [runId, policies] of Object.entries(lists)) {
        const journal = yield* Journal.Journal
        const faulty = FaultyJournal.make(journal, { crashAt: { commit: 3, when: "before" } })
        yield* diesIn(
          faulty,
          Run.run({ goal: "g", runId, tools: [step], policies }).pipe(
            Effect.provideService(Journal.Journal, faulty.journal)
          )
        )
        // Before, the names matched the defaults' (or were a subset): it went on under the defaults.
        const error = yield* Effect.flip(Run.resume(runId, { tools: [step] }))
        assert.strictEqual(error.reason, "invalid", runId)
        assert.include(
          error.detail,
          runId === "r5" ? 'policies of its own ("max_iterations"' : "other termination policies"
        )
        const resumed = yield* Run.resume(runId, { tools: [step], policies })
        if (runId === "r5")
          assert.deepStrictEqual([resumed.stopReason, resumed.detail], ["max_iterations", "three is enough"])
      }
    }).pipe(Effect.provide([Journal.layerMemory, model]))
  )

  it.effect("R9 R2.3 limits a resume went on under stay in force for the next resume given only tools", () =>
    Effect.gen(function* () {
      yield* diesAtCommit(6, Run.run({ goal: "g", runId: "r7", tools: [step], limits: { maxIterations: 30 } }))
      // A person resumes it under tighter limits; its process dies again.
      yield* diesAtCommit(4, Run.resume("r7", { tools: [step], limits: { maxIterations: 12, maxToolCalls: 12 } }))
      const resumed = yield* Run.resume("r7", { tools: [step] }, "restart")
      // Before, it went on under run.started's 30 and completed at 26 iterations.
      assert.deepStrictEqual([resumed.stopReason, resumed.counters.iterations], ["max_iterations", 12])
    }).pipe(Effect.provide([Journal.layerMemory, model]))
  )

  it.effect("R9 R2.2 a limit a resume went without is the run's own again at the next resume given only tools", () =>
    Effect.gen(function* () {
      yield* diesAtCommit(3, Run.run({ goal: "g", runId: "r8", tools: [step], limits: { maxIterations: 5 } }))
      // A resume that goes on without max_iterations (its limit is then not recorded), and dies.
      yield* diesAtCommit(
        2,
        Run.resume("r8", { tools: [step], policies: (d) => Termination.remove(d, "max_iterations") })
      )
      const resumed = yield* Run.resume("r8", { tools: [step] }, "restart")
      // Before, the resume's record replaced the run's limits whole: the default 20 came back.
      assert.deepStrictEqual([resumed.stopReason, resumed.counters.iterations], ["max_iterations", 5])
    }).pipe(Effect.provide([Journal.layerMemory, model]))
  )

  it.effect("R2.2 R9 a run whose first commit was lost (its header only) is refused without its policies too", () =>
    Effect.gen(function* () {
      const mine = Termination.make("my_stop", () => Termination.continue_)
      const journal = yield* Journal.Journal
      const faulty = FaultyJournal.make(journal, { crashAt: { commit: 1, when: "before" } })
      yield* diesIn(
        faulty,
        Run.run({ goal: "g", runId: "r9", tools: [step], policies: (d) => [...d, mine] }).pipe(
          Effect.provideService(Journal.Journal, faulty.journal)
        )
      )
      assert.lengthOf(Option.getOrThrow(yield* journal.read("r9")).events, 0)
      // Before, the header's record was not read: it went on under the defaults.
      const error = yield* Effect.flip(Run.resume("r9", { tools: [step] }))
      assert.strictEqual(error.reason, "invalid")
      assert.include(error.detail, '"my_stop"')
    }).pipe(Effect.provide([Journal.layerMemory, model]))
  )
})
