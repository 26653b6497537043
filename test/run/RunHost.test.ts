import { assert, describe, it } from "@effect/vitest"
import { Cause, Clock, Deferred, Duration, Effect, Exit, Fiber, Layer, Option, Schema } from "effect"
import { TestClock } from "effect/testing"
import type * as Event from "../../src/events/Event.ts"
import * as Failure from "../../src/failure/Failure.ts"
import * as Journal from "../../src/journal/Journal.ts"
import * as JournalApprovals from "../../src/journal/JournalApprovals.ts"
import * as JournalError from "../../src/journal/JournalError.ts"
import * as Model from "../../src/model/Model.ts"
import * as Run from "../../src/run/Run.ts"
import * as RunHost from "../../src/run/RunHost.ts"
import * as RunOptions from "../../src/run/RunOptions.ts"
import * as Termination from "../../src/termination/Termination.ts"
import * as FaultyJournal from "../../src/testing/FaultyJournal.ts"
import * as Properties from "../../src/testing/Properties.ts"
import * as ScriptedModel from "../../src/testing/ScriptedModel.ts"
import * as TestClockDriver from "../../src/testing/TestClockDriver.ts"
import * as Approval from "../../src/tools/Approval.ts"
import * as Permission from "../../src/tools/Permission.ts"
import * as Tool from "../../src/tools/Tool.ts"
import * as Criterion from "../../src/validation/Criterion.ts"
import * as Validation from "../../src/validation/Validation.ts"
import { look, takeoverModel } from "../support/takeover.ts"

/** A payment that needs approval, counting how often its handler ran. */
const ledger = () => {
  const paid: Array<number> = []
  const pay = Tool.make({
    name: "pay",
    description: "Pays an amount.",
    input: Schema.Struct({ amount: Schema.Number }),
    output: Schema.Struct({ receipt: Schema.String }),
    sideEffect: "external",
    needsApproval: true,
    handler: ({ amount }) =>
      Effect.sync(() => {
        paid.push(amount)
        return { receipt: `r-${amount}` }
      })
  })
  return { paid, pay }
}

const oneCall = (name: string, args: unknown) =>
  ScriptedModel.layerFunction((request) =>
    request.iteration === 1 ? ScriptedModel.toolCall(name, args, "c1") : ScriptedModel.finalAnswer("done")
  )

/** A read that fails for good after a while, beside the payment: the error stops the run (R3.11). */
const broken = Tool.make({
  name: "look",
  description: "Looks, and breaks.",
  input: Schema.Struct({}),
  output: Schema.String,
  sideEffect: "read",
  handler: () =>
    Effect.andThen(
      Effect.sleep("100 millis"),
      Effect.fail(
        new Failure.Permanent({ source: "tool", category: "io", code: "broken", attempts: 1, hint: "it broke" })
      )
    )
})

/** The payment and the read that breaks, side by side. */
const payAndLook = (pay: Tool.Tool<{ readonly amount: number }, { readonly receipt: string }, never>) =>
  ({ goal: "pay and look", tools: [pay, broken], concurrency: 2, time: { approval: "1 hour" } }) as const

/** Two payments in one batch, `call_1` and `call_2`. */
const twoPays = ScriptedModel.layerFunction((request) =>
  request.iteration === 1
    ? ScriptedModel.toolCalls(["pay", { amount: 1 }, "call_1"], ["pay", { amount: 2 }, "call_2"])
    : ScriptedModel.finalAnswer("done")
)

/** A permission policy that takes its time: a run is stopped during its check. */
const slow: Permission.PermissionService = { check: () => Effect.as(Effect.sleep("10 seconds"), Permission.allow) }

const payAndBreak = ScriptedModel.layerFunction((request) =>
  request.iteration === 1
    ? ScriptedModel.toolCalls(["pay", { amount: 5 }, "c1"], ["look", {}, "c2"])
    : ScriptedModel.finalAnswer("done")
)

const logOf = (runId: string) =>
  Effect.flatMap(Journal.Journal, (journal) =>
    Effect.map(journal.read(runId), (stored) => Option.getOrThrow(stored).events)
  )

const tags = (events: ReadonlyArray<Event.Event>) => events.map((e) => e._tag)

/** The memory journal whose approvals table answers a request after a delay, as a database over a socket does. */
const slowApprovals = Layer.effect(
  Journal.Journal,
  Effect.map(Journal.Journal, (journal) => ({
    ...journal,
    requestApproval: (request: Journal.ApprovalRequest) =>
      Effect.andThen(Effect.sleep(5), journal.requestApproval(request))
  }))
).pipe(Layer.provide(Journal.layerMemory))

const decide = (runId: string, callId: string, decision: Approval.Decision) =>
  Effect.flatMap(Journal.Journal, (journal) => JournalApprovals.make(journal).decide(runId, callId, decision))

describe("RunHost.drive: a run hosted by an engine that can take it away (R9, R7)", () => {
  it.effect("R12 settings that cannot work are a typed InvalidRunOptions naming the field; nothing is started", () =>
    Effect.gen(function* () {
      const { paid, pay } = ledger()
      for (const [settings, field] of [
        [{ parkAfter: "soon" }, "parkAfter"],
        [{ pollInterval: 0 }, "pollInterval"],
        [{ pollInterval: Number.NaN }, "pollInterval"],
        // A poll that never comes: refused here rather than by the gate the drive makes.
        [{ pollInterval: Duration.infinity }, "pollInterval"],
        // An instant that is none: never coerced, never taken for "now".
        [{ startedAt: Number.NaN }, "startedAt"],
        [{ startedAt: "1000" }, "startedAt"],
        [{ startedAt: Number.NEGATIVE_INFINITY }, "startedAt"],
        // A cancel check that is no Effect would die when the drive is interrupted.
        [{ cancelling: () => true }, "cancelling"]
      ] as const) {
        const refused = yield* Effect.flip(
          RunHost.drive("s1", { goal: "pay 5", tools: [pay] }, settings as RunHost.Settings).pipe(
            Effect.provide(oneCall("pay", { amount: 5 }))
          )
        )
        assert.strictEqual(refused._tag, "InvalidRunOptions")
        if (refused._tag === "InvalidRunOptions") assert.deepStrictEqual(refused.path, [field])
      }
      assert.isTrue(Option.isNone(yield* (yield* Journal.Journal).read("s1")))
      assert.deepStrictEqual(paid, [])
    }).pipe(Effect.provide(Journal.layerMemory))
  )

  it.effect("R12 a poll interval that is positive but less than a nanosecond is refused as what it is", () =>
    Effect.gen(function* () {
      const { pay } = ledger()
      const refused = yield* Effect.flip(
        RunHost.drive("s1", { goal: "pay 5", tools: [pay] }, { pollInterval: 1e-9 }).pipe(
          Effect.provide(oneCall("pay", { amount: 5 }))
        )
      )
      assert.deepInclude(refused, {
        _tag: "InvalidRunOptions",
        reason: "Expected a duration of at least 1 nanosecond (effect counts time in whole nanoseconds), got 1e-9"
      })
    }).pipe(Effect.provide(Journal.layerMemory))
  )

  it.effect(
    "R12 a run id, options or settings that cannot start a run are a typed InvalidRunOptions; nothing is written",
    () =>
      Effect.gen(function* () {
        const { paid, pay } = ledger()
        const cases: ReadonlyArray<readonly [unknown, unknown, unknown, ReadonlyArray<string | number>]> = [
          ["job-1", { goal: "pay 5", tools: [pay], limits: { maxIterations: 0 } }, {}, ["limits", "maxIterations"]],
          ["job-1", null, {}, []],
          ["job-1", { goal: "pay 5", tools: 5 }, {}, ["tools"]],
          ["job-1", { goal: "pay 5", tools: [pay] }, null, []],
          [5, { goal: "pay 5", tools: [pay] }, {}, ["runId"]],
          ["", { goal: "pay 5", tools: [pay] }, {}, ["runId"]],
          ["line\nbreak", { goal: "pay 5", tools: [pay] }, {}, ["runId"]]
        ]
        for (const [runId, options, settings, path] of cases) {
          // A caller without types: whatever it passes.
          const refused = yield* Effect.flip(
            RunHost.drive(
              runId as string,
              options as RunOptions.Options<typeof pay>,
              settings as RunHost.Settings
            ).pipe(Effect.provide(oneCall("pay", { amount: 5 })))
          )
          assert.strictEqual(refused._tag, "InvalidRunOptions", JSON.stringify(runId))
          if (refused._tag === "InvalidRunOptions") assert.deepStrictEqual(refused.path, path, JSON.stringify(runId))
        }
        assert.isTrue(Option.isNone(yield* (yield* Journal.Journal).read("job-1")))
        assert.deepStrictEqual(paid, [])
      }).pipe(Effect.provide(Journal.layerMemory))
  )

  it.effect("R4.1 a run its host was asked to start earlier counts its deadline from then: past it, nothing runs", () =>
    Effect.gen(function* () {
      const { paid, pay } = ledger()
      yield* TestClock.setTime(60_000)
      // Started 5 s ago with 3 s to run (no process took it up meanwhile): it is out of time already.
      const late = yield* RunHost.drive(
        "late",
        { goal: "pay 5", tools: [pay], time: { run: "3 seconds" } },
        {
          startedAt: 55_000
        }
      ).pipe(Effect.provide(oneCall("pay", { amount: 5 })))
      assert.isTrue(late._tag === "Finished" && late.result.stopReason === "run_timeout")
      assert.deepStrictEqual(paid, [])
      // Started 1 s ago with 3 s to run: its deadline is 2 s from now, as its run.started says.
      const log = yield* RunHost.drive(
        "soon",
        { goal: "say hi", tools: [], time: { run: "3 seconds" } },
        {
          startedAt: 59_000
        }
      ).pipe(Effect.provide(ScriptedModel.layer([ScriptedModel.finalAnswer("hi")])), Effect.andThen(logOf("soon")))
      const started = log.find((e) => e._tag === "run.started")
      assert.strictEqual(started?._tag === "run.started" ? started.deadlineAt : undefined, 62_000)
    }).pipe(Effect.provide(Journal.layerMemory))
  )

  it.effect("R12 a start its host refuses (a tool it has not) ends at once internal_error naming the field", () =>
    Effect.gen(function* () {
      const { paid, pay } = ledger()
      const refused = new RunOptions.InvalidRunOptions({
        path: ["tools", 1],
        reason: 'no tool named "refund" is registered on this runner'
      })
      const outcome = yield* RunHost.drive("r1", { goal: "pay 5", tools: [pay] }, { refused }).pipe(
        Effect.provide(oneCall("pay", { amount: 5 }))
      )
      assert.isTrue(outcome._tag === "Finished")
      if (outcome._tag === "Finished") {
        assert.deepStrictEqual([outcome.result.status, outcome.result.stopReason], ["failed", "internal_error"])
        assert.include(outcome.result.detail, 'tools[1]: no tool named "refund"')
      }
      assert.deepStrictEqual(paid, [])
      assert.strictEqual((yield* logOf("r1")).at(-1)?._tag, "run.finished")
    }).pipe(Effect.provide(Journal.layerMemory))
  )

  // On TestClock: the final commit of a run that ended by itself waits out a store outage for 30 s.
  it.effect(
    "R9 a run whose ending the journal could not record is not finished for its engine: driven again, it ends recorded",
    () =>
      Effect.gen(function* () {
        let down = false
        let asked = 0
        // The store goes out of reach as the model answers, for longer than a commit waits.
        const model = ScriptedModel.layerFunction(() => {
          asked++
          down = asked === 1
          return ScriptedModel.finalAnswer(`answer ${asked}`)
        })
        const faulty = FaultyJournal.make(yield* Journal.Journal, { unavailableOn: () => down })
        const journal = Layer.succeed(Journal.Journal, faulty.journal)
        const options = { goal: "answer", tools: [] }
        const unrecorded = yield* Effect.flip(
          TestClockDriver.drive(RunHost.drive("u1", options).pipe(Effect.provide(Layer.merge(model, journal))))
        )
        assert.strictEqual(unrecorded._tag, "ResumeError")
        if (unrecorded._tag !== "ResumeError") return
        assert.strictEqual(unrecorded.reason, "unavailable")
        assert.include(unrecorded.detail, "did not record the run's ending")
        down = false
        const again = yield* RunHost.drive("u1", options).pipe(Effect.provide(Layer.merge(model, journal)))
        assert.strictEqual(again._tag, "Finished")
        if (again._tag === "Finished") assert.strictEqual(again.result.finalAnswer, "answer 2")
        const stored = Option.getOrThrow(yield* (yield* Journal.Journal).read("u1"))
        assert.isTrue(Option.isSome(stored.result))
      }).pipe(Effect.provide(Journal.layerMemory))
  )

  // On TestClock: the final commit of a run that ended by itself waits out a store outage for 30 s.
  it.effect(
    "R9 a run whose ending the journal could neither record nor read back is not finished for its engine: driven again, it ends recorded",
    () =>
      Effect.gen(function* () {
        const store = yield* Journal.Journal
        let down = false
        let asked = 0
        const model = ScriptedModel.layerFunction(() => {
          asked++
          down = asked === 1
          return ScriptedModel.finalAnswer(`answer ${asked}`)
        })
        const out = (operation: string) =>
          Effect.fail(JournalError.make(new JournalError.Unavailable({ operation, detail: "out of reach (the test)" })))
        // The whole store goes out of reach as the model answers: commits and reads.
        const flaky: Journal.Service = {
          ...store,
          append: (runId, batch) => Effect.suspend(() => (down ? out("append") : store.append(runId, batch))),
          read: (runId) => Effect.suspend(() => (down ? out("read") : store.read(runId)))
        }
        const journal = Layer.succeed(Journal.Journal, flaky)
        const options = { goal: "answer", tools: [] }
        const unknown = yield* Effect.flip(
          TestClockDriver.drive(RunHost.drive("u2", options).pipe(Effect.provide(Layer.merge(model, journal))))
        )
        assert.strictEqual(unknown._tag, "ResumeError")
        assert.include(unknown.message, "could not be read back after the run ended")
        down = false
        const again = yield* RunHost.drive("u2", options).pipe(Effect.provide(Layer.merge(model, journal)))
        assert.strictEqual(again._tag, "Finished")
        if (again._tag === "Finished") assert.strictEqual(again.result.finalAnswer, "answer 2")
        assert.isTrue(Option.isSome(Option.getOrThrow(yield* store.read("u2")).result))
      }).pipe(Effect.provide(Journal.layerMemory))
  )

  it.live(
    "R9 a store that refuses a run's commits fails the drive `failed`, not `unavailable`: the engine does not ask the model again and again",
    () =>
      Effect.gen(function* () {
        const store = yield* Journal.Journal
        let asked = 0
        const model = ScriptedModel.layerFunction(() => {
          asked++
          return ScriptedModel.finalAnswer("done")
        })
        const refuse = (operation: string) =>
          Effect.fail(
            JournalError.make(new JournalError.StoreFailed({ operation, detail: "permission denied (the test)" }))
          )
        const refusing: Journal.Service = {
          ...store,
          create: () => refuse("create"),
          append: () => refuse("append")
        }
        const refused = yield* Effect.flip(
          RunHost.drive("f1", { goal: "answer", tools: [] }).pipe(
            Effect.provide(Layer.merge(model, Layer.succeed(Journal.Journal, refusing)))
          )
        )
        assert.strictEqual(refused._tag === "ResumeError" ? refused.reason : refused._tag, "failed")
        assert.include(refused.message, "permission denied (the test)")
        assert.strictEqual(asked, 1)
      }).pipe(Effect.provide(Journal.layerMemory))
  )

  it.live(
    "R9 R7 a host another one took the run from is told the run is another's (taken) and leaves the new owner's approval alone",
    () =>
      Effect.gen(function* () {
        const { paid, pay } = ledger()
        // The first host's second model call is slow; meanwhile a second host takes the run
        // over, and its model asks for a payment that waits for approval.
        const { layer: model, secondAsked } = takeoverModel()
        const options = { goal: "pay", tools: [look, pay] }
        const settings: RunHost.Settings = { parkAfter: "1 hour" }
        const first = yield* Effect.forkChild(RunHost.drive("h1", options, settings).pipe(Effect.provide(model)))
        while (secondAsked() === 0) yield* Effect.sleep(5)
        // The second host is another process on the same store: the runs this one drives are not its own.
        const journal = yield* Journal.Journal
        const otherProcess = FaultyJournal.make(journal, {}).journal
        const owner = yield* Effect.forkChild(
          RunHost.drive("h1", options, settings).pipe(
            Effect.provide(model),
            Effect.provideService(Journal.Journal, otherProcess)
          )
        )
        while ((yield* journal.pendingApprovals({ runId: "h1" })).length === 0) yield* Effect.sleep(5)
        // Not `Finished` with its own view, which the journal never holds (review 133), nor `running`,
        // on which the engine drives the run again, taking it back from its owner (review 134).
        const overtaken = yield* Effect.flip(Fiber.join(first))
        assert.strictEqual(overtaken._tag === "ResumeError" ? overtaken.reason : overtaken._tag, "taken")
        // The new owner's call is still waiting: approving it lets the owner pay, once.
        assert.deepStrictEqual(
          (yield* journal.pendingApprovals({ runId: "h1" })).map((r) => r.callId),
          ["c2"]
        )
        yield* decide("h1", "c2", Approval.approved("ops"))
        const owned = yield* Fiber.join(owner)
        assert.strictEqual(owned._tag === "Finished" ? owned.result.stopReason : owned._tag, "goal_reached")
        assert.deepStrictEqual(paid, [5])
      }).pipe(Effect.provide(Journal.layerMemory))
  )

  it.effect("R7 a run whose only open call waits for approval parks: no terminal event, the call pending", () =>
    Effect.gen(function* () {
      const { paid, pay } = ledger()
      const parked = yield* RunHost.drive("r1", { goal: "pay 5", tools: [pay] })
      assert.strictEqual(parked._tag, "Parked")
      assert.deepStrictEqual(parked._tag === "Parked" ? parked.approvals.map((a) => a.callId) : [], ["c1"])
      const log = yield* logOf("r1")
      assert.include(tags(log), "approval.requested")
      assert.notInclude(tags(log), "approval.decided")
      assert.notInclude(tags(log), "run.finished")
      const journal = yield* Journal.Journal
      assert.deepStrictEqual(
        (yield* journal.pendingApprovals({ runId: "r1" })).map((r) => r.callId),
        ["c1"]
      )
      assert.deepStrictEqual(paid, [])

      // Approved from anywhere, the run driven again finds the decision and finishes.
      yield* decide("r1", "c1", Approval.approved("ops"))
      const finished = yield* RunHost.drive("r1", { goal: "ignored", tools: [pay] })
      assert.strictEqual(finished._tag, "Finished")
      const result = finished._tag === "Finished" ? finished.result : undefined
      assert.strictEqual(result?.status, "completed", result?.detail)
      assert.deepStrictEqual(paid, [5])
      const after = tags(yield* logOf("r1"))
      assert.include(after, "run.resumed")
      assert.strictEqual(after.filter((t) => t === "run.started").length, 1)
      assert.deepStrictEqual(yield* journal.pendingApprovals({ runId: "r1" }), [])
      // Driven once more, a finished run gives its stored result and runs nothing.
      const again = yield* RunHost.drive("r1", { goal: "ignored", tools: [pay] })
      assert.strictEqual(again._tag === "Finished" ? again.result.status : "", "completed")
      assert.deepStrictEqual(paid, [5])
    }).pipe(Effect.provide([Journal.layerMemory, oneCall("pay", { amount: 5 })]))
  )

  it.effect(
    "R7 R9.3 a parked run driven again with nothing decided parks as it is: its log unchanged, no resume (review 159)",
    () =>
      Effect.gen(function* () {
        const { paid, pay } = ledger()
        const parked = yield* RunHost.drive("r1b", { goal: "pay 5", tools: [pay] })
        assert.strictEqual(parked._tag, "Parked")
        const before = yield* logOf("r1b")
        for (let i = 0; i < 3; i++) {
          const again = yield* RunHost.drive("r1b", { goal: "pay 5", tools: [pay] })
          assert.deepStrictEqual(again, parked)
        }
        // Before: a `run.resumed` (a restart that never happened) and a wait in the process per drive.
        assert.deepStrictEqual(yield* logOf("r1b"), before)
        // A decision is taken up by the next drive.
        yield* decide("r1b", "c1", Approval.approved("ops"))
        const finished = yield* RunHost.drive("r1b", { goal: "pay 5", tools: [pay] })
        assert.strictEqual(finished._tag === "Finished" ? finished.result.status : finished._tag, "completed")
        assert.deepStrictEqual(paid, [5])
      }).pipe(Effect.provide([Journal.layerMemory, oneCall("pay", { amount: 5 })]))
  )

  it.effect(
    "R7 R9.3 two calls waiting at the default concurrency, one for a place: a drive again parks as it is (review 161)",
    () =>
      Effect.gen(function* () {
        const { pay } = ledger()
        const options = { goal: "pay twice", tools: [pay], time: { approval: "1 hour" } } as const
        const parked = yield* RunHost.drive("r1d", options)
        assert.strictEqual(parked._tag, "Parked")
        const before = yield* logOf("r1d")
        const again = yield* RunHost.drive("r1d", options)
        assert.deepStrictEqual(again, parked)
        // Before: the second call, waiting for a place, had the run resumed at every drive.
        assert.deepStrictEqual(yield* logOf("r1d"), before)
        // Under a higher concurrency it would take up the second call: the run goes on.
        const wider = yield* RunHost.drive("r1d", { ...options, concurrency: 2 })
        assert.include(tags(yield* logOf("r1d")), "run.resumed")
        assert.strictEqual(wider._tag, "Parked")
      }).pipe(Effect.provide([Journal.layerMemory, twoPays]))
  )

  it.effect(
    "R7 R9.3 a parked run whose sibling's failure goes back to the model parks as it is when driven again (review 161)",
    () =>
      Effect.gen(function* () {
        const { paid, pay } = ledger()
        /** A read whose errors go back to the model. */
        const flaky = Tool.make({
          name: "flaky",
          description: "Fails, for the model to see.",
          input: Schema.Struct({}),
          output: Schema.String,
          sideEffect: "read",
          recoverErrors: true,
          handler: () =>
            Effect.fail(
              new Failure.Permanent({ source: "tool", category: "io", code: "gone", attempts: 1, hint: "gone" })
            )
        })
        const options = {
          goal: "pay and look",
          tools: [pay, flaky],
          concurrency: 3,
          time: { approval: "1 hour" }
        } as const
        const parked = yield* RunHost.drive("r1g", options)
        assert.strictEqual(parked._tag, "Parked")
        const before = yield* logOf("r1g")
        // One sibling refused at its arguments, one failed: both for the model to correct.
        assert.strictEqual(tags(before).filter((t) => t === "tool.failed").length, 2)
        const again = yield* RunHost.drive("r1g", options)
        assert.deepStrictEqual(again, parked)
        // Before: a `run.resumed` per drive (every recheck of a run parked for a day).
        assert.deepStrictEqual(yield* logOf("r1g"), before)
        yield* decide("r1g", "c1", Approval.approved("ops"))
        const finished = yield* RunHost.drive("r1g", options)
        assert.strictEqual(finished._tag === "Finished" ? finished.result.status : finished._tag, "completed")
        assert.deepStrictEqual(paid, [5])
      }).pipe(
        Effect.provide([
          Journal.layerMemory,
          ScriptedModel.layerFunction((request) =>
            request.iteration === 1
              ? ScriptedModel.toolCalls(
                  ["pay", { amount: 5 }, "c1"],
                  ["pay", { amount: "five" }, "c2"],
                  ["flaky", {}, "c3"]
                )
              : ScriptedModel.finalAnswer("done")
          )
        ])
      )
  )

  it.effect(
    "R3.6 R7 a parked run driven under a policy that now denies its call goes on, the call refused (review 161)",
    () =>
      Effect.gen(function* () {
        const { paid, pay } = ledger()
        const parked = yield* RunHost.drive("r1e", { goal: "pay 5", tools: [pay] })
        assert.strictEqual(parked._tag, "Parked")
        const denying: Permission.PermissionService = {
          check: () => Effect.succeed(Permission.deny("tool_not_allowed", "payments are off"))
        }
        const driven = yield* RunHost.drive("r1e", { goal: "pay 5", tools: [pay] }).pipe(
          Effect.provideService(Permission.Permission, denying)
        )
        // Before: parked as it was, the call listed for a person though the policy refuses it.
        assert.strictEqual(driven._tag, "Finished")
        assert.deepStrictEqual(paid, [])
      }).pipe(Effect.provide([Journal.layerMemory, oneCall("pay", { amount: 5 })]))
  )

  it.live(
    "R5.1 R12 a cancel check that dies or never answers as the drive is interrupted: the run is taken away all the same (review 161)",
    () =>
      Effect.gen(function* () {
        for (const cancelling of [Effect.die(new Error("store down")), Effect.never]) {
          const asked = yield* Deferred.make<void>()
          const marks: Array<string> = []
          const mark = Tool.make({
            name: "mark",
            description: "Marks.",
            input: Schema.Struct({}),
            output: Schema.String,
            sideEffect: "external",
            handler: () => Effect.sync(() => (marks.push("marked"), "ok"))
          })
          // The model answers with a call to `mark` 1.5 s after it is asked.
          const slow = ScriptedModel.layerFunction((request) =>
            request.iteration === 1 ? ScriptedModel.toolCall("mark", {}, "m1") : ScriptedModel.finalAnswer("done")
          )
          const delayed = Layer.effect(
            Model.Model,
            Effect.map(Model.Model, (model) => ({
              generate: (request: Model.Request) =>
                Deferred.succeed(asked, undefined).pipe(
                  Effect.andThen(Effect.sleep("1500 millis")),
                  Effect.andThen(model.generate(request))
                )
            }))
          ).pipe(Layer.provide(slow))
          const runId = cancelling === Effect.never ? "c-never" : "c-dies"
          const driving = yield* RunHost.drive(runId, { goal: "mark", tools: [mark] }, { cancelling }).pipe(
            Effect.provide(delayed),
            Effect.forkChild
          )
          yield* Deferred.await(asked)
          // Before: one that died left the run going on; one that never answered held the interruption for ever.
          const interrupted = yield* Effect.timeoutOption(Fiber.interrupt(driving), "5 seconds")
          assert.isTrue(Option.isSome(interrupted))
          yield* Effect.sleep("2 seconds")
          // Taken away: no ending recorded; one whose check died stopped before the model answered.
          const stored = Option.getOrThrow(yield* (yield* Journal.Journal).read(runId))
          assert.isTrue(Option.isNone(stored.result))
          if (cancelling !== Effect.never) assert.deepStrictEqual(marks, [])
        }
      }).pipe(Effect.provide(Journal.layerMemory)),
    30_000
  )

  it.effect(
    "R3.5 R4.1 a parked run driven under other limits or a closer deadline is taken up: they refuse its call, or end it (review 163)",
    () =>
      Effect.gen(function* () {
        const { paid, pay } = ledger()
        const options = { goal: "pay 12345", tools: [pay], time: { approval: "1 hour" } } as const
        assert.strictEqual((yield* RunHost.drive("r1f", options))._tag, "Parked")
        // An argument limit its call's arguments are over: the call is refused, the run goes on to its end.
        const refused = yield* RunHost.drive("r1f", { ...options, limits: { maxArgumentChars: 5 } })
        assert.strictEqual(refused._tag, "Finished")
        assert.include(tags(yield* logOf("r1f")), "tool.failed")

        assert.strictEqual((yield* RunHost.drive("r1g", options))._tag, "Parked")
        // 50 ms more at most: its call waits in the process (too short to park on), then the deadline ends it.
        const tighter = { ...options, time: { approval: "1 hour", run: 50 } } as const
        const driving = yield* Effect.forkChild(RunHost.drive("r1g", tighter))
        yield* TestClock.adjust("1 second")
        const ended = yield* Fiber.join(driving)
        assert.strictEqual(ended._tag === "Finished" ? ended.result.stopReason : ended._tag, "run_timeout")
        assert.deepStrictEqual(paid, [])
      }).pipe(Effect.provide([Journal.layerMemory, oneCall("pay", { amount: 12345 })]))
  )

  it.effect(
    "R4.1 R7 R9.3 parked again under a closer deadline, its call expires by that deadline: the host wakes it then, the table refuses later decisions (review 165)",
    () =>
      Effect.gen(function* () {
        const { paid, pay } = ledger()
        const options = { goal: "pay 5", tools: [pay], time: { approval: "1 hour", run: "1 day" } } as const
        assert.strictEqual((yield* RunHost.drive("r1h", options))._tag, "Parked")
        const closer = { ...options, time: { approval: "1 hour", run: 60_000 } } as const
        const again = yield* RunHost.drive("r1h", closer)
        // Before: parked on the approval's expiry, an hour away: nothing woke the run at its deadline.
        assert.deepStrictEqual(again._tag === "Parked" ? again.approvals.map((a) => a.expiresAt) : again._tag, [60_000])
        const journal = yield* Journal.Journal
        assert.deepStrictEqual(
          (yield* journal.pendingApprovals({ runId: "r1h" })).map((row) => row.expiresAt),
          [60_000]
        )
        // Driven again as it is, it parks as it is.
        const before = yield* logOf("r1h")
        assert.deepStrictEqual(yield* RunHost.drive("r1h", closer), again)
        assert.deepStrictEqual(yield* logOf("r1h"), before)
        // Past its deadline, a decision is refused (before: recorded, an hour before the old expiry).
        yield* TestClock.adjust("2 minutes")
        const late = yield* Effect.exit(decide("r1h", "c1", Approval.approved("ops")))
        assert.isTrue(Exit.isFailure(late))
        const ended = yield* RunHost.drive("r1h", closer)
        assert.strictEqual(ended._tag === "Finished" ? ended.result.stopReason : ended._tag, "run_timeout")
        assert.deepStrictEqual(paid, [])
      }).pipe(Effect.provide([Journal.layerMemory, oneCall("pay", { amount: 5 })]))
  )

  it.effect(
    "R4.2 R7 R9.3 parked again under a step timeout that bounds its call's expiry, driven again it parks as it is (review 168)",
    () =>
      Effect.gen(function* () {
        const { paid, pay } = ledger()
        const options = { goal: "pay 5", tools: [pay], time: { approval: "1 hour", run: "1 day" } } as const
        assert.strictEqual((yield* RunHost.drive("r1i", options))._tag, "Parked")
        const stepped = { ...options, time: { ...options.time, step: "10 minutes" } } as const
        const again = yield* RunHost.drive("r1i", stepped)
        assert.deepStrictEqual(
          again._tag === "Parked" ? again.approvals.map((a) => a.expiresAt) : again._tag,
          [600_000]
        )
        const before = yield* logOf("r1i")
        // Before: taken up at every drive, a `run.resumed` each, the row's expiry (the step's end) not the log's.
        assert.deepStrictEqual(yield* RunHost.drive("r1i", stepped), again)
        assert.deepStrictEqual(yield* logOf("r1i"), before)
        // At the step's end the call expires, the step's layer named.
        yield* TestClock.adjust("11 minutes")
        const ended = yield* RunHost.drive("r1i", stepped)
        assert.strictEqual(ended._tag === "Finished" ? ended.result.stopReason : ended._tag, "step_timeout")
        assert.deepStrictEqual(paid, [])
      }).pipe(Effect.provide([Journal.layerMemory, oneCall("pay", { amount: 5 })]))
  )

  it.effect("R5.1 a cancel delivered to a parked run ends it cancelled, the call never run, the table emptied", () =>
    Effect.gen(function* () {
      const { paid, pay } = ledger()
      const parked = yield* RunHost.drive("r2", { goal: "pay 7", tools: [pay] })
      assert.strictEqual(parked._tag, "Parked")
      const cancelled = yield* RunHost.drive("r2", { goal: "pay 7", tools: [pay] }, { cancel: true })
      const result = cancelled._tag === "Finished" ? cancelled.result : undefined
      assert.strictEqual(result?.status, "cancelled", result?.detail)
      assert.deepStrictEqual(paid, [])
      const journal = yield* Journal.Journal
      assert.deepStrictEqual(yield* journal.pendingApprovals({ runId: "r2" }), [])
      const stored = Option.getOrThrow(yield* journal.read("r2"))
      assert.isTrue(Option.isSome(stored.result))
    }).pipe(Effect.provide([Journal.layerMemory, oneCall("pay", { amount: 7 })]))
  )

  it.effect(
    "R7 R5.1 a parked run cancelled after a person decided its call records that decision, not a withdrawal (review 138)",
    () =>
      Effect.gen(function* () {
        const { paid, pay } = ledger()
        const parked = yield* RunHost.drive("r2b", { goal: "pay 7", tools: [pay] })
        assert.strictEqual(parked._tag, "Parked")
        // Alice approves as the cancel comes: the table holds her approval, the run never took it up.
        yield* decide("r2b", "c1", Approval.approved("alice"))
        const cancelled = yield* RunHost.drive("r2b", { goal: "pay 7", tools: [pay] }, { cancel: true })
        const result = cancelled._tag === "Finished" ? cancelled.result : undefined
        assert.strictEqual(result?.status, "cancelled", result?.detail)
        assert.deepStrictEqual(paid, [])
        // Before, the log said the call was withdrawn, with no word of her approval.
        const decided = (result?.timeline ?? []).filter((e) => e._tag === "approval.decided")
        assert.deepStrictEqual(
          decided.map((e) => (e._tag === "approval.decided" ? [e.decision, e.by] : [])),
          [["approved", "alice"]]
        )
        const interrupted = (result?.timeline ?? []).find((e) => e._tag === "tool.interrupted")
        assert.include(interrupted?._tag === "tool.interrupted" ? interrupted.detail : "", "approved as the run ended")
      }).pipe(Effect.provide([Journal.layerMemory, oneCall("pay", { amount: 7 })]))
  )

  it.effect(
    "R7 R5.1 a parked run cancelled after a person rejected its call records the rejection, and stops cancelled (review 141)",
    () =>
      Effect.gen(function* () {
        const { paid, pay } = ledger()
        yield* RunHost.drive("r2d", { goal: "pay 7", tools: [pay] })
        yield* decide("r2d", "c1", Approval.rejected("too much", "bob"))
        const cancelled = yield* RunHost.drive("r2d", { goal: "pay 7", tools: [pay] }, { cancel: true })
        const result = cancelled._tag === "Finished" ? cancelled.result : undefined
        assert.strictEqual(result?.stopReason, "cancelled", result?.detail)
        assert.deepStrictEqual(
          (result?.timeline ?? []).flatMap((e) => (e._tag === "approval.decided" ? [[e.decision, e.by]] : [])),
          [["rejected", "bob"]]
        )
        assert.deepStrictEqual(paid, [])
        // The property kit takes a decision recorded as the run is stopped for what the gate held.
        const budget = { runTimeoutMillis: 600_000, maxRecoveries: 8, scheduleRetries: 2 }
        assert.deepStrictEqual(result === undefined ? ["no result"] : Properties.check(result, budget), [])
      }).pipe(Effect.provide([Journal.layerMemory, oneCall("pay", { amount: 7 })]))
  )

  it.effect(
    "R5.1 a cancel of a parked run whose gate cannot close its call (the store refuses) still ends it cancelled (review 141)",
    () =>
      Effect.gen(function* () {
        const { paid, pay } = ledger()
        const journal = yield* Journal.Journal
        const parked = yield* RunHost.drive("r2c", { goal: "pay 7", tools: [pay] })
        assert.strictEqual(parked._tag, "Parked")
        // The store refuses to close the call: asking the gate what it holds breaks.
        const refusing: Journal.Service = {
          ...journal,
          withdraw: () =>
            Effect.fail(
              JournalError.make(new JournalError.StoreFailed({ operation: "withdraw", detail: "disk says no" }))
            )
        }
        const cancelled = yield* RunHost.drive("r2c", { goal: "pay 7", tools: [pay] }, { cancel: true }).pipe(
          Effect.provideService(Journal.Journal, refusing)
        )
        const result = cancelled._tag === "Finished" ? cancelled.result : undefined
        // Before, it ended internal_error: "the approval gate failed".
        assert.deepStrictEqual([result?.status, result?.stopReason], ["cancelled", "cancelled"], result?.detail)
        assert.deepStrictEqual(paid, [])
      }).pipe(Effect.provide([Journal.layerMemory, oneCall("pay", { amount: 7 })]))
  )

  it.effect(
    "R5.1 a parked run whose tool changed cannot go on, but a cancel still ends it cancelled, nothing run",
    () =>
      Effect.gen(function* () {
        const { paid, pay } = ledger()
        const parked = yield* RunHost.drive("r3", { goal: "pay 7", tools: [pay] })
        assert.strictEqual(parked._tag, "Parked")
        const changed = Tool.make({
          name: "pay",
          description: "Pays an amount in a currency.",
          input: Schema.Struct({ amount: Schema.Number, currency: Schema.String }),
          output: Schema.Struct({ receipt: Schema.String }),
          sideEffect: "external",
          needsApproval: true,
          handler: () => Effect.die("never run")
        })
        const refused = yield* Effect.flip(RunHost.drive("r3", { goal: "pay 7", tools: [changed] }))
        assert.strictEqual(refused._tag === "ResumeError" ? refused.reason : undefined, "incompatible")
        const cancelled = yield* RunHost.drive("r3", { goal: "pay 7", tools: [changed] }, { cancel: true })
        const result = cancelled._tag === "Finished" ? cancelled.result : undefined
        assert.deepStrictEqual([result?.status, result?.stopReason], ["cancelled", "cancelled"])
        assert.deepStrictEqual(paid, [])
        const journal = yield* Journal.Journal
        assert.deepStrictEqual(yield* journal.pendingApprovals({ runId: "r3" }), [])
        assert.isTrue(Option.isSome(Option.getOrThrow(yield* journal.read("r3")).result))
      }).pipe(Effect.provide([Journal.layerMemory, oneCall("pay", { amount: 7 })]))
  )

  it.effect("R5.1 R2.2 a cancel ends a parked run whose policies and plan the host no longer gives", () =>
    Effect.gen(function* () {
      const { paid, pay } = ledger()
      const audit = Termination.make("audit", () => Termination.continue_)
      const plan = [Validation.step("pay", "pay it", [Criterion.toolSucceeded("pay")])]
      const parked = yield* RunHost.drive("r4", {
        goal: "pay 7",
        tools: [pay],
        policies: (defaults) => [...defaults, audit],
        validation: { plan }
      })
      assert.strictEqual(parked._tag, "Parked")
      // Going on, it would need them; a cancel runs nothing, and needs neither (it was refused invalid).
      const refused = yield* Effect.flip(RunHost.drive("r4", { goal: "pay 7", tools: [pay] }))
      assert.strictEqual(refused._tag === "ResumeError" ? refused.reason : undefined, "invalid")
      const cancelled = yield* RunHost.drive("r4", { goal: "pay 7", tools: [pay] }, { cancel: true })
      const result = cancelled._tag === "Finished" ? cancelled.result : undefined
      assert.deepStrictEqual([result?.status, result?.stopReason], ["cancelled", "cancelled"])
      assert.deepStrictEqual(paid, [])
      assert.deepStrictEqual(yield* (yield* Journal.Journal).pendingApprovals({ runId: "r4" }), [])
    }).pipe(Effect.provide([Journal.layerMemory, oneCall("pay", { amount: 7 })]))
  )

  it.effect("R7 a rejection found when the run goes on ends it approval_rejected", () =>
    Effect.gen(function* () {
      const { paid, pay } = ledger()
      yield* RunHost.drive("r3", { goal: "pay 9", tools: [pay] })
      yield* decide("r3", "c1", Approval.rejected("too much", "ops"))
      const finished = yield* RunHost.drive("r3", { goal: "pay 9", tools: [pay] })
      const result = finished._tag === "Finished" ? finished.result : undefined
      assert.strictEqual(result?.stopReason, "approval_rejected", result?.detail)
      assert.deepStrictEqual(paid, [])
    }).pipe(Effect.provide([Journal.layerMemory, oneCall("pay", { amount: 9 })]))
  )

  it.effect("R7 an approval whose expiry passed while the run was parked expires when it goes on", () =>
    Effect.gen(function* () {
      const { paid, pay } = ledger()
      const options = { goal: "pay 3", tools: [pay], time: { approval: "1 hour" as const, run: "1 day" as const } }
      const parked = yield* RunHost.drive("r4", options)
      const expiresAt = parked._tag === "Parked" ? (parked.approvals[0]?.expiresAt ?? 0) : 0
      yield* TestClock.adjust("2 hours")
      const finished = yield* RunHost.drive("r4", options)
      const result = finished._tag === "Finished" ? finished.result : undefined
      assert.strictEqual(result?.stopReason, "approval_expired", result?.detail)
      assert.isAbove(expiresAt, 0)
      assert.deepStrictEqual(paid, [])
    }).pipe(Effect.provide([Journal.layerMemory, oneCall("pay", { amount: 3 })]))
  )

  it.effect("R9 taking a run away while a handler runs writes no terminal event and never cancels it", () =>
    Effect.gen(function* () {
      const entered = yield* Deferred.make<void>()
      const release = yield* Deferred.make<void>()
      let runs = 0
      const fetch = Tool.make({
        name: "fetch",
        description: "Reads a page.",
        input: Schema.Struct({ url: Schema.String }),
        output: Schema.Struct({ body: Schema.String }),
        sideEffect: "read",
        idempotent: true,
        handler: () =>
          Effect.gen(function* () {
            runs++
            if (runs === 1) {
              yield* Deferred.succeed(entered, undefined)
              yield* Deferred.await(release)
            }
            return { body: "page" }
          })
      })
      const fiber = yield* Effect.forkChild(RunHost.drive("r5", { goal: "read", tools: [fetch] }))
      yield* Deferred.await(entered)
      yield* Fiber.interrupt(fiber)
      const log = tags(yield* logOf("r5"))
      assert.notInclude(log, "run.finished")
      assert.notInclude(log, "run.stopping")
      assert.notInclude(log, "tool.cancelled")
      // Driven again elsewhere, the read runs again (safe to repeat) and the run completes.
      const finished = yield* RunHost.drive("r5", { goal: "read", tools: [fetch] })
      const result = finished._tag === "Finished" ? finished.result : undefined
      assert.strictEqual(result?.status, "completed", result?.detail)
      assert.strictEqual(runs, 2)
    }).pipe(Effect.provide([Journal.layerMemory, oneCall("fetch", { url: "x" })]))
  )

  it.effect("R7 a run does not park while another call of its batch is in its handler", () =>
    Effect.gen(function* () {
      const { paid, pay } = ledger()
      const release = yield* Deferred.make<void>()
      let slowDone = false
      const slow = Tool.make({
        name: "slow",
        description: "Takes a while.",
        input: Schema.Struct({}),
        output: Schema.Struct({ ok: Schema.Boolean }),
        sideEffect: "write",
        handler: () =>
          Effect.andThen(
            Deferred.await(release),
            Effect.sync(() => {
              slowDone = true
              return { ok: true }
            })
          )
      })
      const model = ScriptedModel.layerFunction((request) =>
        request.iteration === 1
          ? ScriptedModel.toolCalls(["slow", {}, "s1"], ["pay", { amount: 1 }, "p1"])
          : ScriptedModel.finalAnswer("done")
      )
      const fiber = yield* Effect.forkChild(
        RunHost.drive("r6", { goal: "both", tools: [slow, pay], concurrency: 2 }).pipe(Effect.provide(model))
      )
      yield* Effect.yieldNow
      for (let i = 0; i < 20 && fiber.pollUnsafe() === undefined; i++) yield* Effect.yieldNow
      assert.isUndefined(fiber.pollUnsafe(), "parked while a handler ran")
      yield* Deferred.succeed(release, undefined)
      const parked = yield* Fiber.join(fiber)
      assert.strictEqual(parked._tag, "Parked")
      assert.isTrue(slowDone)
      const log = tags(yield* logOf("r6"))
      assert.include(log, "tool.succeeded")
      assert.deepStrictEqual(paid, [])
    }).pipe(Effect.provide(Layer.mergeAll(Journal.layerMemory)))
  )

  const twoPayments = ScriptedModel.layerFunction((request) =>
    request.iteration === 1
      ? ScriptedModel.toolCalls(["pay", { amount: 1 }, "call_1"], ["pay", { amount: 2 }, "call_2"])
      : ScriptedModel.finalAnswer("done")
  )

  /** A payment and a write in one batch, then the answer. */
  const payAndWrite = ScriptedModel.layerFunction((request) =>
    request.iteration === 1
      ? ScriptedModel.toolCalls(["pay", { amount: 1 }, "call_1"], ["write", {}, "call_2"])
      : ScriptedModel.finalAnswer("done")
  )

  /** A write that records its calls, and a policy whose check of it takes 200 ms. */
  const slowWriter = () => {
    const written: Array<string> = []
    const write = Tool.make({
      name: "write",
      description: "Writes.",
      input: Schema.Struct({}),
      output: Schema.String,
      sideEffect: "write",
      handler: (_, context) =>
        Effect.sync(() => {
          written.push(context.callId)
          return "ok"
        })
    })
    const slowCheck: Permission.PermissionService = {
      check: (request) =>
        request.tool.name === "write"
          ? Effect.as(Effect.sleep("200 millis"), Permission.allow)
          : Effect.succeed(Permission.allow)
    }
    return { written, write, slowCheck }
  }

  it.live("R7 an approved call runs before its run parks again on a sibling still waiting (review 125)", () =>
    Effect.gen(function* () {
      const { paid, pay } = ledger()
      const both = { goal: "pay 1 and 2", tools: [pay], concurrency: 2 }
      const first = yield* RunHost.drive("r9", both)
      assert.sameMembers(first._tag === "Parked" ? first.approvals.map((a) => a.callId) : [first._tag], [
        "call_1",
        "call_2"
      ])
      yield* decide("r9", "call_1", Approval.approved("ops"))
      const second = yield* RunHost.drive("r9", both)
      assert.deepStrictEqual(second._tag === "Parked" ? second.approvals.map((a) => a.callId) : second._tag, ["call_2"])
      // Before, it parked again at once on call_2: the approved payment waited for call_2's decision.
      assert.deepStrictEqual(paid, [1])
      const log = yield* logOf("r9")
      assert.isTrue(log.some((e) => e._tag === "tool.succeeded" && e.callId === "call_1"))
    }).pipe(
      Effect.provide([
        // Its decision read answered after its sibling's (a database over a socket): the sibling is back on the table first.
        Layer.effect(
          Journal.Journal,
          Effect.map(Journal.Journal, (journal) => ({
            ...journal,
            decision: (runId: string, callId: string) =>
              callId === "call_1"
                ? Effect.andThen(Effect.sleep("30 millis"), journal.decision(runId, callId))
                : journal.decision(runId, callId)
          }))
        ).pipe(Layer.provide(Journal.layerMemory)),
        twoPayments
      ])
    )
  )

  it.effect("R7 with one place in its batch, the run parks on the call holding it; the next waits its turn", () =>
    Effect.gen(function* () {
      const { paid, pay } = ledger()
      const inTurn = { goal: "pay 1 then 2", tools: [pay], concurrency: 1 }
      const first = yield* RunHost.drive("r10", inTurn)
      assert.deepStrictEqual(first._tag === "Parked" ? first.approvals.map((a) => a.callId) : first._tag, ["call_1"])
      yield* decide("r10", "call_1", Approval.approved("ops"))
      const second = yield* RunHost.drive("r10", inTurn)
      assert.deepStrictEqual(second._tag === "Parked" ? second.approvals.map((a) => a.callId) : second._tag, ["call_2"])
      assert.deepStrictEqual(paid, [1])
    }).pipe(Effect.provide([Journal.layerMemory, twoPayments]))
  )

  it.live("R7 a call still in its checks is not cut off by a park on its sibling's approval (review 125)", () =>
    Effect.gen(function* () {
      const { paid, pay } = ledger()
      // The write's permission check takes 200 ms: the payment is on the table before it ends.
      const { written, write, slowCheck } = slowWriter()
      const parked = yield* RunHost.drive("r11", { goal: "pay and write", tools: [pay, write], concurrency: 2 }).pipe(
        Effect.provide(Layer.succeed(Permission.Permission, slowCheck))
      )
      assert.deepStrictEqual(parked._tag === "Parked" ? parked.approvals.map((a) => a.callId) : parked._tag, ["call_1"])
      // Before, the park cut the write off in its check: it would run only once someone decided the payment.
      assert.deepStrictEqual(written, ["call_2"])
      assert.deepStrictEqual(paid, [])
    }).pipe(Effect.provide([Journal.layerMemory, payAndWrite]))
  )

  it.live("R7 R9.3 a run whose other call is a read parks once the read is done (review 127)", () =>
    Effect.gen(function* () {
      const { paid, pay } = ledger()
      const read = Tool.make({
        name: "read",
        description: "Reads.",
        input: Schema.Struct({}),
        output: Schema.String,
        sideEffect: "read",
        handler: () => Effect.succeed("the balance")
      })
      // Before, the read's result was never committed while the payment waited, and the run never parked.
      const parked = yield* RunHost.drive("r12", { goal: "read and pay", tools: [pay, read], concurrency: 2 }).pipe(
        Effect.timeoutOrElse({ duration: "5 seconds", orElse: () => Effect.succeed("still driving" as const) })
      )
      assert.deepStrictEqual(
        parked !== "still driving" && parked._tag === "Parked" ? parked.approvals.map((a) => a.callId) : parked,
        ["call_1"]
      )
      const log = yield* logOf("r12")
      assert.isTrue(log.some((e) => e._tag === "tool.succeeded" && e.callId === "call_2"))
      assert.deepStrictEqual(paid, [])
    }).pipe(
      Effect.provide([
        Journal.layerMemory,
        ScriptedModel.layerFunction((request) =>
          request.iteration === 1
            ? ScriptedModel.toolCalls(["pay", { amount: 1 }, "call_1"], ["read", {}, "call_2"])
            : ScriptedModel.finalAnswer("done")
        )
      ])
    )
  )

  it.live("R7 R9.3 a resume under another concurrency takes up calls by it: lowered, it parks again (review 127)", () =>
    Effect.gen(function* () {
      const { paid, pay } = ledger()
      const first = yield* RunHost.drive("r13", { goal: "pay 1 and 2", tools: [pay], concurrency: 2 })
      assert.strictEqual(first._tag, "Parked")
      // Before, the log's two waits never matched the one put back on the table: it never parked again.
      const second = yield* RunHost.drive("r13", { goal: "pay 1 and 2", tools: [pay], concurrency: 1 }).pipe(
        Effect.timeoutOrElse({ duration: "5 seconds", orElse: () => Effect.succeed("still driving" as const) })
      )
      assert.strictEqual(second === "still driving" ? second : second._tag, "Parked")
      assert.deepStrictEqual(paid, [])
    }).pipe(Effect.provide([Journal.layerMemory, twoPayments]))
  )

  it.live("R7 R9.3 a resume under a higher concurrency does not park while the call it took up is checked", () =>
    Effect.gen(function* () {
      const { paid, pay } = ledger()
      const { written, write, slowCheck } = slowWriter()
      const drive = (concurrency: number) =>
        RunHost.drive("r14", { goal: "pay and write", tools: [pay, write], concurrency }).pipe(
          Effect.provide(Layer.succeed(Permission.Permission, slowCheck))
        )
      assert.strictEqual((yield* drive(1))._tag, "Parked")
      assert.deepStrictEqual(written, [])
      // Raised to 2, the resumed batch takes up the write: before, the run parked in its check.
      assert.strictEqual((yield* drive(2))._tag, "Parked")
      assert.deepStrictEqual(written, ["call_2"])
      assert.deepStrictEqual(paid, [])
    }).pipe(Effect.provide([Journal.layerMemory, payAndWrite]))
  )

  it.live("R7 R9.3 a concurrency a resume laid holds in the batches after it (review 129)", () =>
    Effect.gen(function* () {
      const { paid, pay } = ledger()
      const { written, write, slowCheck } = slowWriter()
      const drive = (concurrency: number) =>
        RunHost.drive("r15", { goal: "pay, then pay and write", tools: [pay, write], concurrency }).pipe(
          Effect.provide(Layer.succeed(Permission.Permission, slowCheck))
        )
      assert.strictEqual((yield* drive(1))._tag, "Parked")
      yield* decide("r15", "call_1", Approval.approved("ops"))
      // Raised to 2 at this resume: the next batch takes up the write beside the payment. Before,
      // the batch was read at the start's concurrency, and the run parked with the write in its check.
      const second = yield* drive(2)
      assert.deepStrictEqual(second._tag === "Parked" ? second.approvals.map((a) => a.callId) : second._tag, ["call_2"])
      assert.deepStrictEqual(written, ["call_3"])
      assert.deepStrictEqual(paid, [1])
    }).pipe(
      Effect.provide([
        Journal.layerMemory,
        ScriptedModel.layerFunction((request) =>
          request.iteration === 1
            ? ScriptedModel.toolCall("pay", { amount: 1 }, "call_1")
            : request.iteration === 2
              ? ScriptedModel.toolCalls(["pay", { amount: 2 }, "call_2"], ["write", {}, "call_3"])
              : ScriptedModel.finalAnswer("done")
        )
      ])
    )
  )

  it.effect("R9.4 R7 a drive fenced off before its call's approval stops at once, the run another's (review 133)", () =>
    Effect.gen(function* () {
      const { paid, pay } = ledger()
      const store = yield* Journal.Journal
      // Another writer fences this drive off at its commit of the model's answer.
      const faulty = FaultyJournal.make(store, { conflictOn: (n) => n === 3 })
      const options = { goal: "pay 5", tools: [pay], time: { run: "1 day", approval: "12 hours" } } as const
      const exit = yield* Effect.exit(
        TestClockDriver.drive(
          RunHost.drive("r16", options).pipe(Effect.provideService(Journal.Journal, faulty.journal))
        )
      )
      // Before, it waited for the approval until it expired, 12 hours, and then said the store was out of reach.
      assert.isBelow(yield* Clock.currentTimeMillis, 60_000)
      const error = Exit.isFailure(exit) ? Cause.findErrorOption(exit.cause) : Option.none()
      assert.deepStrictEqual(
        Option.map(error, (e) => (e._tag === "ResumeError" ? e.reason : e._tag)),
        Option.some("taken")
      )
      assert.deepStrictEqual(paid, [])
    }).pipe(Effect.provide([Journal.layerMemory, oneCall("pay", { amount: 5 })]))
  )

  it.live(
    "R9.4 R7 a cancel another process's take-over fenced off leaves the call its new owner waits on (review 144)",
    () =>
      Effect.gen(function* () {
        const { paid, pay } = ledger()
        const journal = yield* Journal.Journal
        const options = { goal: "pay 7", tools: [pay] }
        assert.strictEqual((yield* RunHost.drive("r17", options))._tag, "Parked")
        // Process A, cancelling: each write it makes waits until process B has taken the run up.
        const entered = Deferred.makeUnsafe<void>()
        const taken = Deferred.makeUnsafe<void>()
        const held = <A, E>(write: Effect.Effect<A, E>) =>
          Effect.andThen(Effect.andThen(Deferred.succeed(entered, undefined), Deferred.await(taken)), write)
        const processA: Journal.Service = {
          ...journal,
          live: Journal.makeLiveRuns(),
          append: (runId, append) => held(journal.append(runId, append)),
          withdraw: (runId, callId, at) => held(journal.withdraw(runId, callId, at))
        }
        const cancelling = yield* Effect.forkChild(
          Effect.exit(
            RunHost.drive("r17", options, { cancel: true }).pipe(Effect.provideService(Journal.Journal, processA))
          )
        )
        yield* Deferred.await(entered)
        // Process B takes the run up (a wake that found the table out of reach, so could not tell the
        // run is parked still): it commits, puts the call up again and parks on it.
        let unreachable = true
        const processB: Journal.Service = {
          ...journal,
          live: Journal.makeLiveRuns(),
          pendingApprovals: (filter) =>
            Effect.suspend(() => {
              if (!unreachable) return journal.pendingApprovals(filter)
              unreachable = false
              return Effect.fail(
                JournalError.make(new JournalError.Unavailable({ operation: "pending", detail: "down" }))
              )
            })
        }
        const parked = yield* RunHost.drive("r17", options).pipe(Effect.provideService(Journal.Journal, processB))
        assert.strictEqual(parked._tag, "Parked")
        yield* Deferred.succeed(taken, undefined)
        const cancelled = yield* Fiber.join(cancelling)
        const error = Exit.isFailure(cancelled) ? Cause.findErrorOption(cancelled.cause) : Option.none()
        assert.deepStrictEqual(
          Option.map(error, (e) => (e._tag === "ResumeError" ? e.reason : e._tag)),
          Option.some("taken")
        )
        // Before, A withdrew the call B was parked on: not listed, any decision NotPending, the run stuck.
        assert.deepStrictEqual(
          (yield* journal.pendingApprovals({ runId: "r17" })).map((r) => r.callId),
          ["c1"]
        )
        yield* decide("r17", "c1", Approval.approved("ops"))
        const finished = yield* RunHost.drive("r17", options).pipe(Effect.provideService(Journal.Journal, processB))
        assert.strictEqual(finished._tag === "Finished" ? finished.result.status : finished._tag, "completed")
        assert.deepStrictEqual(paid, [7])
      }).pipe(Effect.provide([Journal.layerMemory, oneCall("pay", { amount: 7 })]))
  )

  it.live(
    "R3.11 R7 a batch a sibling's error stops while a call waits ends tool_error; it never parks (review 148)",
    () =>
      Effect.gen(function* () {
        const { paid, pay } = ledger()
        const options = payAndLook(pay)
        const ended = yield* RunHost.drive("r18", options)
        // Before: Parked on c1, its row pending; approved, the next drive paid and then ended tool_error.
        assert.strictEqual(ended._tag === "Finished" ? ended.result.stopReason : ended._tag, "tool_error")
        assert.deepStrictEqual(yield* (yield* Journal.Journal).pendingApprovals({ runId: "r18" }), [])
        assert.deepStrictEqual(paid, [])
      }).pipe(Effect.provide([Journal.layerMemory, payAndBreak]))
  )

  it.live(
    "R3.11 R7 R9 a run resumed with a sibling's rejection in its log ends approval_rejected; it never parks",
    () =>
      Effect.gen(function* () {
        const { paid, pay } = ledger()
        const store = yield* Journal.Journal
        const options = { goal: "pay twice", tools: [pay], concurrency: 2, time: { approval: "1 hour" } } as const
        // The process dies at the commit of the rejected call's block, before its batch stopped.
        let crashedAt = 0
        for (let commit = 1; commit <= 10 && crashedAt === 0; commit++) {
          const runId = `r20-${commit}`
          const faulty = FaultyJournal.make(store, { crashAt: { commit, when: "after" } })
          const running = yield* Effect.forkChild(
            Effect.exit(
              Run.run({ ...options, runId }).pipe(
                Effect.provideService(Journal.Journal, faulty.journal),
                Effect.provideService(Approval.ApprovalGate, JournalApprovals.make(faulty.journal))
              )
            )
          )
          yield* Effect.sleep("50 millis")
          yield* Effect.exit(decide(runId, "call_1", Approval.rejected("no", "ops")))
          yield* Fiber.join(running).pipe(Effect.timeout("5 seconds"), Effect.exit)
          const log = yield* logOf(runId)
          if (log.some((e) => e._tag === "tool.blocked") && !log.some((e) => e._tag === "termination.decided"))
            crashedAt = commit
        }
        assert.isAbove(crashedAt, 0, "no commit left the rejection in the log with its sibling waiting")
        const runId = `r20-${crashedAt}`
        const resumed = yield* RunHost.drive(runId, options)
        assert.strictEqual(resumed._tag === "Finished" ? resumed.result.stopReason : resumed._tag, "approval_rejected")
        assert.deepStrictEqual(paid, [])
      }).pipe(Effect.provide([Journal.layerMemory, twoPays]))
  )

  it.live(
    "R3.11 R9 a run resumed with a sibling's stopping error in its log stops: the approved call never runs (review 148)",
    () =>
      Effect.gen(function* () {
        const { paid, pay } = ledger()
        const store = yield* Journal.Journal
        const options = payAndLook(pay)
        // The process dies at the commit of the sibling's error, before its batch stopped: the log holds
        // the error, and the call waiting for approval.
        let crashedAt = 0
        for (let commit = 1; commit <= 8 && crashedAt === 0; commit++) {
          const runId = `r19-${commit}`
          const faulty = FaultyJournal.make(store, { crashAt: { commit, when: "after" } })
          yield* Effect.exit(
            Run.run({ ...options, runId }).pipe(
              Effect.provideService(Journal.Journal, faulty.journal),
              Effect.provideService(Approval.ApprovalGate, JournalApprovals.make(faulty.journal))
            )
          )
          const log = yield* logOf(runId)
          if (log.some((e) => e._tag === "tool.failed") && !log.some((e) => e._tag === "run.finished"))
            crashedAt = commit
        }
        assert.isAbove(crashedAt, 0, "no commit left the sibling's error in the log with the call waiting")
        const runId = `r19-${crashedAt}`
        yield* decide(runId, "c1", Approval.approved("ops"))
        const resumed = yield* RunHost.drive(runId, options)
        // Before: the approval was taken up and the payment made, then the run ended tool_error.
        assert.strictEqual(resumed._tag === "Finished" ? resumed.result.stopReason : resumed._tag, "tool_error")
        assert.deepStrictEqual(paid, [])
      }).pipe(Effect.provide([Journal.layerMemory, payAndBreak]))
  )

  it.live(
    "R7 R8 a parked run approved meanwhile, stopped during a permission check, records each approval the table holds (reviews 148, 150)",
    () =>
      Effect.gen(function* () {
        const { paid, pay } = ledger()
        const options = { goal: "pay 1 and 2", tools: [pay], concurrency: 2, time: { run: "2 seconds" } } as const
        assert.strictEqual((yield* RunHost.drive("r20", options))._tag, "Parked")
        for (const callId of ["call_1", "call_2"]) yield* decide("r20", callId, Approval.approved("ops"))
        // Woken one call at a time, with a policy that takes its time: the run deadline passes
        // during the first call's check, the second not taken up again.
        const ended = yield* RunHost.drive("r20", { ...options, concurrency: 1 }).pipe(
          Effect.provideService(Permission.Permission, slow)
        )
        assert.strictEqual(ended._tag === "Finished" ? ended.result.stopReason : ended._tag, "run_timeout")
        // Before, the log said withdrawn while the table held ops's approvals (review 148: the call
        // being checked; review 150: the one not taken up again).
        const decided = (yield* logOf("r20")).flatMap((e) =>
          e._tag === "approval.decided" ? [[e.callId, e.decision, e.by]] : []
        )
        for (const callId of ["call_1", "call_2"]) {
          assert.deepStrictEqual(decided.filter(([id]) => id === callId).at(-1), [callId, "approved", "ops"])
        }
        assert.deepStrictEqual(paid, [])
      }).pipe(Effect.provide([Journal.layerMemory, twoPays]))
  )

  it.live(
    "R5.1 R7 ten parked calls cancelled while the store hangs: withdrawn within a short stop grace, none left behind (review 148)",
    () =>
      Effect.gen(function* () {
        const { paid, pay } = ledger()
        const store = yield* Journal.Journal
        const options = { goal: "pay ten", tools: [pay], concurrency: 10, time: { stopGrace: "600 millis" } } as const
        assert.strictEqual((yield* RunHost.drive("r21", options))._tag, "Parked")
        const hanging: Journal.Service = { ...store, live: Journal.makeLiveRuns(), withdraw: () => Effect.never }
        const started = performance.now()
        const cancelled = yield* RunHost.drive("r21", options, { cancel: true }).pipe(
          Effect.provideService(Journal.Journal, hanging)
        )
        const result = cancelled._tag === "Finished" ? cancelled.result : undefined
        assert.strictEqual(result?.stopReason, "cancelled")
        // Before, each call was asked 5 s (then 2 s), four at a time: the cancel ran to its grace and left them behind.
        assert.notInclude(result?.detail, "left behind")
        assert.isBelow(performance.now() - started, 2_000)
        assert.deepStrictEqual(paid, [])
      }).pipe(
        Effect.provide([
          Journal.layerMemory,
          ScriptedModel.layerFunction((request) =>
            request.iteration === 1
              ? ScriptedModel.toolCalls(
                  ...Array.from({ length: 10 }, (_, i) => ["pay", { amount: i }, `c${i}`] as const)
                )
              : ScriptedModel.finalAnswer("done")
          )
        ])
      )
  )

  it.live(
    "R5.1 R7 a resumed run cancelled in a check asks a hanging gate once in all, within half its stop grace (review 152)",
    () =>
      Effect.gen(function* () {
        const { paid, pay } = ledger()
        const options = {
          goal: "pay 1 and 2",
          tools: [pay],
          concurrency: 2,
          time: { approval: "1 hour", stopGrace: "1 second" }
        } as const
        assert.strictEqual((yield* RunHost.drive("r22", options))._tag, "Parked")
        const gate: Approval.Gate = { ...JournalApprovals.make(yield* Journal.Journal), expire: () => Effect.never }
        const resumed = yield* Effect.forkChild(
          Run.resume("r22", { ...options, concurrency: 1 }).pipe(
            Effect.provideService(Permission.Permission, slow),
            Effect.provideService(Approval.ApprovalGate, gate)
          )
        )
        yield* Effect.sleep("300 millis")
        yield* Fiber.interrupt(resumed)
        const log = yield* logOf("r22")
        const stopping = log.find((e) => e._tag === "run.stopping")
        const finished = log.findLast((e) => e._tag === "run.finished")
        // Before, the call in its check and the one never taken up were each asked half the grace: all of it.
        assert.isBelow((finished?.at ?? Number.POSITIVE_INFINITY) - (stopping?.at ?? 0), 900)
        assert.deepStrictEqual(paid, [])
      }).pipe(Effect.provide([Journal.layerMemory, twoPays]))
  )

  it.live("R7 on a store that answers later (PostgreSQL), the run parks only once its call is on the table", () =>
    Effect.gen(function* () {
      const { paid, pay } = ledger()
      const parked = yield* RunHost.drive("r7", { goal: "pay 4", tools: [pay] })
      assert.strictEqual(parked._tag, "Parked")
      const journal = yield* Journal.Journal
      // Before the fix the park interrupted the insert: parked on a call nobody could see or approve.
      assert.deepStrictEqual(
        (yield* journal.pendingApprovals({ runId: "r7" })).map((r) => r.callId),
        ["c1"]
      )
      yield* decide("r7", "c1", Approval.approved("ops"))
      const finished = yield* RunHost.drive("r7", { goal: "pay 4", tools: [pay] })
      assert.strictEqual(finished._tag === "Finished" ? finished.result.status : finished._tag, "completed")
      assert.deepStrictEqual(paid, [4])
    }).pipe(Effect.provide([slowApprovals, oneCall("pay", { amount: 4 })]))
  )

  it.live("R7 two calls of one batch waiting for approval: the run parks once both are on the table", () =>
    Effect.gen(function* () {
      const { paid, pay } = ledger()
      const both = { goal: "pay 1 and 2", tools: [pay], concurrency: 2 }
      const parked = yield* RunHost.drive("r8", both)
      const journal = yield* Journal.Journal
      // It parked once the first was on the table, the second's insert interrupted: parked on a call nobody could decide.
      assert.deepStrictEqual(parked._tag === "Parked" ? parked.approvals.map((a) => a.callId) : parked._tag, [
        "call_1",
        "call_2"
      ])
      assert.deepStrictEqual(
        (yield* journal.pendingApprovals({ runId: "r8" })).map((r) => r.callId),
        ["call_1", "call_2"]
      )
      for (const callId of ["call_1", "call_2"]) yield* decide("r8", callId, Approval.approved("ops"))
      const finished = yield* RunHost.drive("r8", both)
      assert.strictEqual(finished._tag === "Finished" ? finished.result.status : finished._tag, "completed")
      assert.sameMembers(paid, [1, 2])
    }).pipe(
      Effect.provide([
        slowApprovals,
        ScriptedModel.layerFunction((request) =>
          request.iteration === 1
            ? ScriptedModel.toolCalls(["pay", { amount: 1 }, "call_1"], ["pay", { amount: 2 }, "call_2"])
            : ScriptedModel.finalAnswer("done")
        )
      ])
    )
  )
})

describe("RunHost.drive: a cancel of a run this process drives (R5.1, R5.2, R9)", () => {
  it.live(
    "R5.1 R9 reaches the running drive, which records its call as a cancel does; both drives are given the journal's ending (review 123)",
    () =>
      Effect.gen(function* () {
        const entered = Deferred.makeUnsafe<void>()
        const paid: Array<string> = []
        const pay = Tool.make({
          name: "pay",
          description: "Pays",
          input: Schema.Struct({ amount: Schema.Number }),
          output: Schema.String,
          sideEffect: "external",
          // It cannot be stopped once it has begun: it finishes within the stop grace.
          handler: (_, context) =>
            Effect.uninterruptible(
              Effect.gen(function* () {
                yield* Deferred.succeed(entered, undefined)
                yield* Effect.sleep("300 millis")
                paid.push(context.idempotencyKey)
                return "paid"
              })
            )
        })
        const options = { goal: "pay 5", tools: [pay], time: { stopGrace: "3 seconds" } } as const
        const first = yield* Effect.forkChild(RunHost.drive("h1", options))
        yield* Deferred.await(entered)
        // Before, a second driver resumed the run and ended it `cancelled`, saying the process had stopped
        // during the payment, while the first drive was given `internal_error` ("another process took the run over").
        const second = yield* RunHost.drive("h1", options, { cancel: true })
        const firstEnded = yield* Fiber.join(first)
        const result = second._tag === "Finished" ? second.result : undefined
        const theirs = firstEnded._tag === "Finished" ? firstEnded.result : undefined
        assert.deepStrictEqual([result?.status, result?.stopReason], ["cancelled", "cancelled"], result?.detail)
        assert.deepStrictEqual(
          [theirs?.status, theirs?.stopReason, theirs?.unrecorded],
          ["cancelled", "cancelled", undefined]
        )
        assert.deepStrictEqual(paid, ["h1:c1"])
        assert.isFalse(
          result?.timeline.some((e) => e._tag === "run.resumed"),
          "a second driver resumed the run"
        )
        assert.deepStrictEqual(
          result?.pendingActions.map((p) => p.callId),
          ["c1"]
        )
        assert.notInclude(result?.pendingActions[0]?.detail ?? "", "process")
        const stored = Option.getOrThrow(yield* (yield* Journal.Journal).read("h1"))
        assert.deepInclude(Option.getOrUndefined(stored.result), { status: "cancelled", stopReason: "cancelled" })
      }).pipe(Effect.provide([Journal.layerMemory, oneCall("pay", { amount: 5 })]))
  )

  it.live(
    "R9 a drive whose run another process ended meanwhile (it is fenced off) is given the journal's ending, not its own view (review 123)",
    () =>
      Effect.gen(function* () {
        const journal = yield* Journal.Journal
        // Another process: the same store, its own runs.
        const other = FaultyJournal.make(journal, {}).journal
        const entered = Deferred.makeUnsafe<void>()
        const pay = Tool.make({
          name: "pay",
          description: "Pays",
          input: Schema.Struct({ amount: Schema.Number }),
          output: Schema.String,
          sideEffect: "read",
          handler: () =>
            Effect.andThen(Deferred.succeed(entered, undefined), Effect.as(Effect.sleep("300 millis"), "paid"))
        })
        const options = { goal: "pay 5", tools: [pay] } as const
        const first = yield* Effect.forkChild(RunHost.drive("h2", options))
        yield* Deferred.await(entered)
        const cancelled = yield* RunHost.drive("h2", options, { cancel: true }).pipe(
          Effect.provideService(Journal.Journal, other)
        )
        const mine = yield* Fiber.join(first)
        const theirs = cancelled._tag === "Finished" ? cancelled.result : undefined
        const given = mine._tag === "Finished" ? mine.result : undefined
        assert.deepStrictEqual([theirs?.status, theirs?.stopReason], ["cancelled", "cancelled"])
        // Before, `failed`/`internal_error`: "another process took the run over".
        assert.deepStrictEqual(
          [given?.status, given?.stopReason, given?.unrecorded],
          ["cancelled", "cancelled", undefined]
        )
      }).pipe(Effect.provide([Journal.layerMemory, oneCall("pay", { amount: 5 })]))
  )
})
