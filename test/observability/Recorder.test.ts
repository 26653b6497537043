import { assert, describe, it } from "@effect/vitest"
import { Effect, Fiber, FileSystem, Layer, Result, Schema, Stream } from "effect"
import * as Counters from "../../src/events/Counters.ts"
import type * as Event from "../../src/events/Event.ts"
import * as Failure from "../../src/failure/Failure.ts"
import * as FailureBoundary from "../../src/failure/FailureBoundary.ts"
import * as Journal from "../../src/journal/Journal.ts"
import * as JournalApprovals from "../../src/journal/JournalApprovals.ts"
import * as Model from "../../src/model/Model.ts"
import * as Recorder from "../../src/observability/Recorder.ts"
import * as Recording from "../../src/observability/Recording.ts"
import * as Viewer from "../../src/observability/Viewer.ts"
import * as Run from "../../src/run/Run.ts"
import * as RunHost from "../../src/run/RunHost.ts"
import * as RunObserver from "../../src/run/RunObserver.ts"
import type * as RunResult from "../../src/run/RunResult.ts"
import * as ScriptedModel from "../../src/testing/ScriptedModel.ts"
import * as Approval from "../../src/tools/Approval.ts"
import * as Permission from "../../src/tools/Permission.ts"
import * as Signature from "../../src/tools/Signature.ts"
import * as Tool from "../../src/tools/Tool.ts"
import { drive } from "../support/clock.ts"
import { echo } from "../support/tools.ts"
import { nodeLayer, recordedRun, tempDirectory } from "./support.ts"

const answered = (goal: string, runId?: string) =>
  Run.run({ goal, tools: [], runId }).pipe(Effect.provide(ScriptedModel.layer([ScriptedModel.finalAnswer("done")])))

/**
 * A run recorded with `content: false`: `secret` is on its timeline and not in its file.
 * Gives the events the file reads back as.
 */
const recordedWithoutContent = <E, R>(
  directory: string,
  run: Effect.Effect<RunResult.RunResult, E, R>,
  secret: string
) =>
  Effect.gen(function* () {
    const result = yield* run.pipe(Effect.provide(Recorder.layer({ directory, content: false })))
    assert.include(JSON.stringify(result.timeline), secret)
    const file = `${directory}/${Recorder.fileName(result.runId)}`
    assert.notInclude(yield* (yield* FileSystem.FileSystem).readFileString(file), secret)
    return (yield* Recording.read(file)).events
  })

/** The `run.resumed` a run going on from `seq` records first, in place of its event `seq`. */
const resumedAt = (timeline: ReadonlyArray<Event.Event>, seq: number): Event.Event => ({
  _tag: "run.resumed",
  runId: timeline[0]?.runId ?? "",
  seq,
  at: timeline[seq]?.at ?? 0,
  fromSeq: seq,
  reason: "restart",
  inDoubt: []
})

describe("Recorder", () => {
  it.live("records every event of a run, one a line, written before the run gives its result", () =>
    Effect.gen(function* () {
      const directory = yield* tempDirectory
      const fs = yield* FileSystem.FileSystem
      const { result, file } = yield* recordedRun(directory)
      // Read at once: the run gave its result only once its run.finished was written.
      const text = yield* fs.readFileString(file)
      assert.isTrue(text.endsWith("\n"))
      const lines = text.trimEnd().split("\n")
      assert.strictEqual(lines.length, result.timeline.length)
      const recording = Result.getOrThrow(Recording.decode(text))
      assert.deepStrictEqual(recording.events, result.timeline)
      assert.isFalse(recording.torn)
      const tags = new Set(recording.events.map((e) => e._tag))
      for (const tag of ["recovery.started", "approval.decided", "tool.succeeded", "run.finished"] as const)
        assert.isTrue(tags.has(tag), tag)
    }).pipe(Effect.scoped, Effect.provide(nodeLayer))
  )

  it.effect("records each run of the layer in a file of its own, named by its escaped id", () =>
    Effect.gen(function* () {
      const directory = yield* tempDirectory
      const fs = yield* FileSystem.FileSystem
      const ids = yield* Effect.gen(function* () {
        const a = yield* answered("first")
        const b = yield* answered("second", "../team/b c")
        return [a.runId, b.runId]
      }).pipe(Effect.provide(Recorder.layer({ directory })))
      const files = (yield* fs.readDirectory(directory)).sort()
      assert.deepStrictEqual(files, ids.map(Recorder.fileName).sort())
      assert.include(files, "%2E%2E%2Fteam%2Fb%20c.jsonl")
      const second = yield* Recording.read(`${directory}/%2E%2E%2Fteam%2Fb%20c.jsonl`)
      assert.strictEqual(second.events[0]?._tag === "run.started" ? second.events[0].goal : "", "second")
    }).pipe(Effect.scoped, Effect.provide(nodeLayer))
  )

  it.effect("R9 a line a crash tore is cut off before a resumed run, going on under its id, appends to its file", () =>
    Effect.gen(function* () {
      const fs = yield* FileSystem.FileSystem
      const directory = yield* tempDirectory
      const result = yield* answered("g", "torn-1").pipe(Effect.provide(Recorder.layer({ directory })))
      const file = `${directory}/${Recorder.fileName("torn-1")}`
      const lines = (yield* fs.readFileString(file)).split("\n")
      // What a kill in the middle of a write leaves: whole lines, then half of the next.
      yield* fs.writeFileString(file, `${lines.slice(0, 3).join("\n")}\n${lines[3]?.slice(0, 20)}`)
      // The run going on in a new process from its fourth event: its resume, then its events, as its observers see them.
      const goesOn = [resumedAt(result.timeline, 3), ...result.timeline.slice(4)]
      yield* Effect.gen(function* () {
        const observers = yield* RunObserver.RunObservers
        const attached = observers.map((observer) => observer.attach("torn-1"))
        for (const event of goesOn) for (const a of attached) a.event(event)
        for (const a of attached) yield* a.settled
      }).pipe(Effect.provide(Recorder.layer({ directory })))
      const recording = yield* Recording.read(file)
      assert.isFalse(recording.torn)
      assert.deepStrictEqual(recording.events, [...result.timeline.slice(0, 3), ...goesOn])
    }).pipe(Effect.scoped, Effect.provide(nodeLayer))
  )

  it.effect(
    "R12 R13 a run that left the recorder is let go: back, its file is read again and a line torn meanwhile cut off (review 130)",
    () =>
      Effect.gen(function* () {
        const fs = yield* FileSystem.FileSystem
        const directory = yield* tempDirectory
        const result = yield* answered("g", "back-1")
        const file = `${directory}/${Recorder.fileName("back-1")}`
        const goesOn = [resumedAt(result.timeline, 2), ...result.timeline.slice(3)]
        yield* Effect.gen(function* () {
          const observers = yield* RunObserver.RunObservers
          // The run parks: its first events, then it leaves this process.
          const parked = observers.map((observer) => observer.attach("back-1"))
          for (const event of result.timeline.slice(0, 2)) for (const a of parked) a.event(event)
          for (const a of parked) yield* a.settled
          // Another process resumed it and was killed in the middle of a write.
          yield* fs.writeFileString(file, '{"_tag":"state.changed","runId":"back-1","se', { flag: "a" })
          // Back in this process, resumed: its file is one this process has not written to since, read again.
          const back = observers.map((observer) => observer.attach("back-1"))
          for (const event of goesOn) for (const a of back) a.event(event)
          for (const a of back) yield* a.settled
        }).pipe(Effect.provide(Recorder.layer({ directory })))
        const recording = yield* Recording.read(file)
        assert.isFalse(recording.torn)
        assert.deepStrictEqual(recording.events, [...result.timeline.slice(0, 2), ...goesOn])
      }).pipe(Effect.scoped, Effect.provide(nodeLayer))
  )

  it.effect("R13 a run id used again starts a file of its own; the earlier recording is kept beside it", () =>
    Effect.gen(function* () {
      const fs = yield* FileSystem.FileSystem
      const directory = yield* tempDirectory
      const first = yield* answered("first", "again").pipe(Effect.provide(Recorder.layer({ directory })))
      const second = yield* answered("second", "again").pipe(Effect.provide(Recorder.layer({ directory })))
      assert.deepStrictEqual((yield* fs.readDirectory(directory)).sort(), ["again.1.jsonl", "again.jsonl"])
      assert.deepStrictEqual((yield* Recording.read(`${directory}/again.jsonl`)).events, second.timeline)
      assert.deepStrictEqual((yield* Recording.read(`${directory}/again.1.jsonl`)).events, first.timeline)
    }).pipe(Effect.scoped, Effect.provide(nodeLayer))
  )

  it.effect("R13 a run id used again and again looks up one name to set the last recording aside (review 196)", () =>
    Effect.gen(function* () {
      const fs = yield* FileSystem.FileSystem
      const directory = yield* tempDirectory
      let looked = 0
      const counting = Layer.succeed(FileSystem.FileSystem, {
        ...fs,
        exists: (file: string) =>
          Effect.andThen(
            Effect.sync(() => looked++),
            fs.exists(file)
          )
      })
      const runs = 40
      yield* Effect.gen(function* () {
        for (let i = 0; i < runs; i++) yield* answered(`run ${i}`, "again")
      }).pipe(Effect.provide(Recorder.layer({ directory }).pipe(Layer.provide(counting))))
      assert.strictEqual((yield* fs.readDirectory(directory)).length, runs)
      assert.strictEqual((yield* Recording.read(`${directory}/again.39.jsonl`)).events[0]?._tag, "run.started")
      // Before, each run looked up every name set aside before it: 40 runs, 820 lookups.
      assert.isAtMost(looked, 3 * runs)
    }).pipe(Effect.scoped, Effect.provide(nodeLayer))
  )

  it.live(
    "R13 a file a run is still writing is never set aside: runs at once in one file are refused as two runs, not split",
    () =>
      Effect.gen(function* () {
        const fs = yield* FileSystem.FileSystem
        const directory = yield* tempDirectory
        const waits = Tool.make({
          name: "wait",
          description: "waits",
          input: Schema.Struct({ i: Schema.Number }),
          output: Schema.Number,
          sideEffect: "read",
          idempotent: true,
          handler: ({ i }) => Effect.as(Effect.sleep("5 millis"), i)
        })
        const run = (runId: string) =>
          Run.run({ goal: runId, runId, tools: [waits] }).pipe(
            Effect.provide(
              ScriptedModel.layer([
                ...[1, 2, 3].map((i) => ScriptedModel.toolCall("wait", { i })),
                ScriptedModel.finalAnswer("done")
              ])
            )
          )
        for (const ids of [
          ["run-a", "run-b"],
          ["same", "same"]
        ]) {
          const file = `${ids[0]}-at-once.jsonl`
          yield* Effect.all(
            ids.map((id) => run(id)),
            { concurrency: 2 }
          ).pipe(Effect.provide(Recorder.layer({ directory, file: () => file })))
          const read = yield* Effect.flip(Recording.read(`${directory}/${file}`))
          assert.strictEqual(read.reason, "not_a_run", file)
        }
        assert.deepStrictEqual((yield* fs.readDirectory(directory)).sort(), [
          "run-a-at-once.jsonl",
          "same-at-once.jsonl"
        ])
      }).pipe(Effect.scoped, Effect.provide(nodeLayer))
  )

  it.effect("R13 a run gone from the process without an ending (parked, taken away) no longer holds its file", () =>
    Effect.gen(function* () {
      const fs = yield* FileSystem.FileSystem
      const directory = yield* tempDirectory
      const first = yield* answered("first", "p1")
      yield* Effect.gen(function* () {
        // A run that parks: its events up to its wait, then it leaves the process, with no run.finished.
        const observers = yield* RunObserver.RunObservers
        const attached = observers.map((observer) => observer.attach("p1"))
        for (const event of first.timeline.slice(0, -2)) for (const a of attached) a.event(event)
        for (const a of attached) yield* a.settled
        yield* answered("second", "p2")
      }).pipe(Effect.provide(Recorder.layer({ directory, file: () => "latest.jsonl" })))
      assert.deepStrictEqual((yield* fs.readDirectory(directory)).sort(), ["latest.1.jsonl", "latest.jsonl"])
      assert.strictEqual((yield* Recording.read(`${directory}/latest.jsonl`)).events[0]?.runId, "p2")
      assert.strictEqual((yield* Recording.read(`${directory}/latest.1.jsonl`)).events[0]?.runId, "p1")
    }).pipe(Effect.scoped, Effect.provide(nodeLayer))
  )

  it.live(
    "R13 the writer keeps the order events came in: a run starting after another ended, on a slow disk, sets it aside",
    () =>
      Effect.gen(function* () {
        const fs = yield* FileSystem.FileSystem
        const directory = yield* tempDirectory
        // Each append takes 300 ms: the end of one run and the start of the next come in one batch.
        const slow = FileSystem.FileSystem.of({
          ...fs,
          writeFileString: (path, data, options) =>
            Effect.andThen(Effect.sleep("300 millis"), fs.writeFileString(path, data, options))
        })
        for (const [first, second] of [
          ["run-a", "run-b"],
          ["again", "again"]
        ] as const) {
          const file = `${first}-${second}.jsonl`
          yield* Effect.gen(function* () {
            const a = yield* Effect.forkChild(answered("first", first))
            yield* Effect.sleep("150 millis")
            yield* answered("second", second)
            yield* Fiber.join(a)
          }).pipe(
            Effect.provide(Recorder.layer({ directory, file: () => file })),
            Effect.provideService(FileSystem.FileSystem, slow)
          )
          const goals = []
          for (const name of [`${first}-${second}.1.jsonl`, file]) {
            const [started] = (yield* Recording.read(`${directory}/${name}`)).events
            goals.push(started?._tag === "run.started" ? started.goal : "")
          }
          assert.deepStrictEqual(goals, ["first", "second"])
        }
      }).pipe(Effect.scoped, Effect.provide(nodeLayer))
  )

  it("an empty file says no event was written to it yet", () => {
    const read = Recording.decode("", "runs/r.jsonl")
    assert.isTrue(Result.isFailure(read))
    if (Result.isFailure(read)) assert.include(read.failure.message, "no event was written to it yet")
  })

  it.live("content: false leaves the message content out, and the events still decode", () =>
    Effect.gen(function* () {
      const directory = yield* tempDirectory
      const { result, file } = yield* recordedRun(directory, { content: false })
      const recording = yield* Recording.read(file)
      assert.strictEqual(recording.events.length, result.timeline.length)
      const started = recording.events[0] as Event.Of<"run.started">
      assert.strictEqual(started.goal, "<not recorded>")
      const succeeded = recording.events.filter((e) => e._tag === "tool.succeeded")
      assert.isTrue(succeeded.length > 0)
      // Each observation's stand-in: what the counters compare stays comparable, nothing of it shown.
      for (const e of succeeded) assert.match(e.observation, /^<not recorded #[\w-]{16}>$/)
      const text = yield* Effect.flatMap(FileSystem.FileSystem, (fs) => fs.readFileString(file))
      assert.notInclude(text, "staging")
      assert.notInclude(text, "Fetch the pages")
    }).pipe(Effect.scoped, Effect.provide(nodeLayer))
  )

  it.effect(
    "R13 content: false leaves out what reminders and checks quote of the model's answer; kinds and verdicts stay",
    () =>
      Effect.gen(function* () {
        const directory = yield* tempDirectory
        const fs = yield* FileSystem.FileSystem
        // An answer whose keys the model chose: the output schema's refusal names them.
        const answer = ScriptedModel.finalAnswer(JSON.stringify({ "PATIENT-SECRET": "x" }))
        const result = yield* Run.run({
          goal: "count",
          tools: [],
          output: Schema.Record(Schema.String, Schema.Number),
          recovery: { correctionBudget: 1 }
        }).pipe(
          Effect.provide(ScriptedModel.layer([answer, answer])),
          Effect.provide(Recorder.layer({ directory, content: false }))
        )
        assert.include(JSON.stringify(result.timeline), "PATIENT-SECRET")
        const file = `${directory}/${Recorder.fileName(result.runId)}`
        assert.notInclude(yield* fs.readFileString(file), "PATIENT-SECRET")
        const events = (yield* Recording.read(file)).events
        const reminder = events.find((e) => e._tag === "reminder.injected")
        const check = events.find((e) => e._tag === "validation.checked" && e.check.kind === "output")
        assert.deepInclude(reminder?._tag === "reminder.injected" ? reminder : undefined, {
          kind: "output_invalid",
          text: "<not recorded>"
        })
        assert.deepInclude(check?._tag === "validation.checked" ? check.check : undefined, {
          kind: "output",
          passed: false,
          detail: "<not recorded>"
        })
      }).pipe(Effect.scoped, Effect.provide(nodeLayer))
  )

  it.effect(
    "R13 R12 content: false leaves no guess to test: call signatures are keyed stand-ins, keys the model chose in a refusal's field paths and tool names it made up are left out (review 120)",
    () =>
      Effect.gen(function* () {
        const directory = yield* tempDirectory
        const read = Tool.make({
          name: "read_file",
          description: "reads",
          input: Schema.Record(Schema.String, Schema.Number),
          output: Schema.String,
          sideEffect: "read",
          handler: () => Effect.succeed("ok")
        })
        const guessed = { path: 7 }
        const events = yield* recordedWithoutContent(
          directory,
          Run.run({ goal: "read", tools: [read], limits: { maxIterations: 6 } }).pipe(
            Effect.provide(
              ScriptedModel.layer([
                ScriptedModel.toolCall("read_file", guessed, "c1"),
                ScriptedModel.toolCall("read_file", guessed, "c2"),
                ScriptedModel.toolCall("read_file", { "PATIENT-SECRET": "x" }, "c3"),
                ScriptedModel.toolCall("sk-live-ABCDEF123456", {}, "c4"),
                ScriptedModel.finalAnswer("done")
              ])
            )
          ),
          "PATIENT-SECRET"
        )
        const text = JSON.stringify(events)
        assert.notInclude(text, "sk-live-ABCDEF123456")
        // A guess of the arguments gives a signature that is not in the file.
        assert.notInclude(text, Signature.toolCallParsed("read_file", guessed))
        const signatures = events.flatMap((e) => (e._tag === "model.responded" ? e.signatures : []))
        assert.lengthOf(signatures, 4)
        // Equal calls keep equal stand-ins, under the name of the run's own tool, so the counters fold as the run's did.
        assert.strictEqual(signatures[0], signatures[1])
        assert.notStrictEqual(signatures[0], signatures[2])
        assert.strictEqual(Signature.toolName(signatures[0] ?? ""), "read_file")
        const refused = events.find((e) => e._tag === "tool.failed" && e.callId === "c3")
        assert.match(
          refused?._tag === "tool.failed" ? (refused.error.fieldPaths ?? []).join() : "",
          /^<not recorded #[\w-]{16}>$/
        )
        const folded = (timeline: ReadonlyArray<Event.Event>) => Counters.fold(timeline).repeatedToolCallCount
        assert.strictEqual(folded(events), 2)
      }).pipe(Effect.scoped, Effect.provide(nodeLayer))
  )

  it.effect(
    "R13 R12 content: false leaves a made-up tool name out of a repeated_tool_failure's detail, in the file and on the page (review 122)",
    () =>
      Effect.gen(function* () {
        const directory = yield* tempDirectory
        const secret = "PATIENTSECRETTOOL"
        const script = Array.from({ length: 12 }, (_, i) => ScriptedModel.toolCall(secret, { a: i }))
        const result = yield* Run.run({ goal: "g", tools: [] }).pipe(
          Effect.provide(ScriptedModel.layer([...script, ScriptedModel.finalAnswer("done")])),
          Effect.provide(Recorder.layer({ directory, content: false }))
        )
        assert.strictEqual(result.stopReason, "repeated_tool_failure")
        assert.include(result.detail, secret)
        const file = `${directory}/${Recorder.fileName(result.runId)}`
        assert.notInclude(yield* (yield* FileSystem.FileSystem).readFileString(file), secret)
        assert.notInclude(Viewer.html(result, { content: false }), secret)
      }).pipe(Effect.scoped, Effect.provide(nodeLayer))
  )

  it.effect("R13 content: false leaves out what a status query and a model failure say, which may quote the call", () =>
    Effect.gen(function* () {
      const directory = yield* tempDirectory
      const lost = new Failure.UnknownOutcome({
        source: "tool",
        category: "connection",
        code: "connection_lost",
        attempts: 1,
        hint: "lost"
      })
      const pay = Tool.make({
        name: "pay",
        description: "charges a card",
        input: Schema.Struct({ card: Schema.String }),
        output: Schema.String,
        sideEffect: "external",
        handler: () => Effect.fail(lost),
        reconcile: (input: { readonly card: string }) =>
          Effect.succeed<Tool.Reconciliation<string>>({
            _tag: "Undecidable",
            detail: `no record yet of a charge to card ${input.card}`
          })
      })
      const refused = FailureBoundary.http({
        status: 400,
        now: 0,
        providerMessage: "invalid card CARD-SECRET-4111 in messages[1]"
      })
      const paying = ScriptedModel.layer([ScriptedModel.toolCall("pay", { card: "CARD-SECRET-4111" })])
      const refusing = Layer.succeed(Model.Model, { generate: () => Effect.fail(refused) })
      const recorded = (model: Layer.Layer<Model.Model>) =>
        recordedWithoutContent(
          directory,
          Run.run({ goal: "pay", tools: [pay] }).pipe(Effect.provide(model)),
          "CARD-SECRET"
        )
      // The provider's refusal quoted what it was sent: its code stays.
      const failed = (yield* recorded(refusing)).find((e) => e._tag === "model.failed")
      assert.deepInclude(failed?._tag === "model.failed" ? failed.failure : undefined, {
        code: "http_400",
        hint: "<not recorded>"
      })
      const events = yield* recorded(paying)
      const reconciled = events.find((e) => e._tag === "tool.reconciled")
      assert.deepInclude(reconciled?._tag === "tool.reconciled" ? reconciled : undefined, {
        verdict: "undecidable",
        detail: "<not recorded>"
      })
    }).pipe(Effect.scoped, Effect.provide(nodeLayer))
  )

  it.effect(
    "R13 content: false leaves out what a handler said of its interrupted action, which may quote the call",
    () =>
      Effect.gen(function* () {
        const directory = yield* tempDirectory
        const pay = Tool.make({
          name: "pay",
          description: "charges a card",
          input: Schema.Struct({ card: Schema.String }),
          output: Schema.String,
          sideEffect: "external",
          timeout: "1 second",
          handler: (input, context) =>
            Effect.onInterrupt(Effect.never, () =>
              Effect.sync(() => context.settle("outcome_unknown", `the charge to card ${input.card} was in flight`))
            )
        })
        const run = Run.run({ goal: "pay", tools: [pay] }).pipe(
          drive,
          Effect.provide(ScriptedModel.layer([ScriptedModel.toolCall("pay", { card: "CARD-SECRET-4111" })])),
          Effect.tap((result) =>
            Effect.sync(() => {
              const interrupted = result.timeline.find((e) => e._tag === "tool.interrupted")
              assert.include(interrupted?._tag === "tool.interrupted" ? interrupted.detail : "", "CARD-SECRET")
            })
          )
        )
        const events = yield* recordedWithoutContent(directory, run, "CARD-SECRET")
        const recorded = events.find((e) => e._tag === "tool.interrupted")
        assert.deepInclude(recorded?._tag === "tool.interrupted" ? recorded : undefined, {
          settlement: "outcome_unknown",
          detail: "<not recorded>"
        })
      }).pipe(Effect.scoped, Effect.provide(nodeLayer))
  )

  it.live(
    "R13 content: false leaves out the reasoning's parts and what a provider attached to them and to calls (review 186)",
    () =>
      Effect.gen(function* () {
        const directory = yield* tempDirectory
        const answer = Model.response({
          toolCalls: [
            { id: "c1", name: "echo", arguments: '{"text":"hi"}', metadata: { google: { thought: "SECRET-T" } } }
          ],
          reasoning: "SECRET-REASONING",
          reasoningParts: [{ text: "SECRET-REASONING", metadata: { anthropic: { signature: "SECRET-SIG" } } }]
        })
        const run = Run.run({ goal: "echo", tools: [echo] }).pipe(
          Effect.provide(ScriptedModel.layer([answer, ScriptedModel.finalAnswer("done")]))
        )
        const events = yield* recordedWithoutContent(directory, run, "SECRET-")
        const responded = events.find((e) => e._tag === "model.responded")
        assert.deepInclude(responded?._tag === "model.responded" ? responded : undefined, {
          reasoning: "<not recorded>",
          reasoningParts: [{ text: "<not recorded>" }]
        })
      }).pipe(Effect.scoped, Effect.provide(nodeLayer))
  )

  it.effect("R13 content: false leaves out the path a permission denial quotes; the refusal's code stays", () =>
    Effect.gen(function* () {
      const directory = yield* tempDirectory
      const read = Tool.make({
        name: "read_file",
        description: "reads a file",
        input: Schema.Struct({ path: Schema.String }),
        output: Schema.String,
        sideEffect: "read",
        pathFields: ["path"],
        handler: () => Effect.succeed("text")
      })
      const run = Run.run({ goal: "read", tools: [read] }).pipe(
        Effect.provide(
          ScriptedModel.layer([
            ScriptedModel.toolCall("read_file", { path: "/home/ada/PATH-SECRET/notes.txt" }),
            ScriptedModel.finalAnswer("done")
          ])
        ),
        Effect.provide(Permission.layer({ roots: [directory] })),
        Effect.tap((result) =>
          Effect.sync(() => {
            const blocked = result.timeline.find((e) => e._tag === "tool.blocked")
            assert.include(JSON.stringify(blocked), "PATH-SECRET")
          })
        )
      )
      const recorded = (yield* recordedWithoutContent(directory, run, "PATH-SECRET")).find(
        (e) => e._tag === "tool.blocked"
      )
      assert.deepInclude(recorded?._tag === "tool.blocked" ? recorded.error : undefined, { code: "permission_denied" })
      assert.match(recorded?._tag === "tool.blocked" ? recorded.error.message : "", /^<not recorded #[\w-]{16}>$/)
    }).pipe(Effect.scoped, Effect.provide(nodeLayer))
  )

  it.effect("a recording is readable while the run is going: what is written so far decodes", () =>
    Effect.gen(function* () {
      const directory = yield* tempDirectory
      const seen = yield* Effect.gen(function* () {
        const recorder = yield* Recorder.Recorder
        const handle = yield* Run.start({ goal: "wait", tools: [] })
        // The model never answers: the run is going while its file is read.
        yield* Stream.runHead(Stream.filter(handle.events, (e) => e._tag === "model.requested"))
        yield* recorder.flush
        const partial = yield* Recording.read(recorder.path(handle.runId))
        yield* handle.cancel
        return partial
      }).pipe(
        Effect.scoped,
        Effect.provide(ScriptedModel.layerFunction(() => Effect.never)),
        Effect.provide(Recorder.layer({ directory }))
      )
      assert.strictEqual(seen.events[0]?._tag, "run.started")
      assert.isFalse(seen.events.some((e) => e._tag === "run.finished"))
      const whole = yield* Recording.read(`${directory}/${Recorder.fileName(seen.events[0]?.runId ?? "")}`)
      const last = whole.events.at(-1)
      assert.strictEqual(last?._tag, "run.finished")
      assert.strictEqual(last?._tag === "run.finished" ? last.status : "", "cancelled")
    }).pipe(Effect.scoped, Effect.provide(nodeLayer))
  )

  it.effect(
    "R12 a `file` option that throws costs its events only: the run gives its result, later runs are recorded",
    () =>
      Effect.gen(function* () {
        const directory = yield* tempDirectory
        const fs = yield* FileSystem.FileSystem
        const file = (runId: string) => {
          if (runId === "named-badly") throw new Error("no name for this one")
          return Recorder.fileName(runId)
        }
        const results = yield* Effect.gen(function* () {
          const first = yield* answered("first", "named-badly")
          const second = yield* answered("second", "named-well")
          const recorder = yield* Recorder.Recorder
          yield* recorder.flush
          return [first, second]
        }).pipe(Effect.provide(Recorder.layer({ directory, file })))
        assert.deepStrictEqual(
          results.map((r) => r.status),
          ["completed", "completed"]
        )
        assert.deepStrictEqual(yield* fs.readDirectory(directory), [Recorder.fileName("named-well")])
        const recording = yield* Recording.read(`${directory}/${Recorder.fileName("named-well")}`)
        assert.deepStrictEqual(recording.events, results[1]?.timeline)
      }).pipe(Effect.scoped, Effect.provide(nodeLayer))
  )

  it.effect("a directory that cannot be made is a RecorderError naming it", () =>
    Effect.gen(function* () {
      const directory = yield* tempDirectory
      const fs = yield* FileSystem.FileSystem
      yield* fs.writeFileString(`${directory}/file`, "")
      const error = yield* Effect.flip(
        Effect.scoped(Layer.build(Recorder.layer({ directory: `${directory}/file/runs` })))
      )
      assert.strictEqual(error._tag, "RecorderError")
      assert.include(error.message, `${directory}/file/runs`)
    }).pipe(Effect.scoped, Effect.provide(nodeLayer))
  )
})

describe("Recorder without content, a run parked and woken in one process (R13, R12)", () => {
  it.effect("R13 R12 a tool name the model made up after the wake is left out, as before the park (review 151)", () => {
    const pay = Tool.make({
      name: "pay",
      description: "Pays an amount.",
      input: Schema.Struct({ amount: Schema.Number }),
      output: Schema.String,
      sideEffect: "external",
      needsApproval: true,
      handler: ({ amount }) => Effect.succeed(`r-${amount}`)
    })
    const madeUp = "customer_ssn_123456789"
    const model = ScriptedModel.layerFunction((request) =>
      request.iteration === 1
        ? ScriptedModel.toolCall("pay", { amount: 5 }, "c1")
        : request.iteration === 2
          ? ScriptedModel.toolCall(madeUp, { x: 1 }, "c2")
          : ScriptedModel.finalAnswer("done")
    )
    return Effect.gen(function* () {
      const directory = yield* tempDirectory
      const file = yield* Effect.gen(function* () {
        assert.strictEqual((yield* RunHost.drive("p1", { goal: "pay 5", tools: [pay] }))._tag, "Parked")
        yield* JournalApprovals.make(yield* Journal.Journal).decide("p1", "c1", Approval.approved("ops"))
        assert.strictEqual((yield* RunHost.drive("p1", { goal: "pay 5", tools: [pay] }))._tag, "Finished")
        const recorder = yield* Recorder.Recorder
        yield* recorder.flush
        return recorder.path("p1")
      }).pipe(Effect.provide(Recorder.layer({ directory, content: false })))
      const text = yield* Effect.flatMap(FileSystem.FileSystem, (fs) => fs.readFileString(file))
      // Before, the recorder let the run's tools go at the park, and kept every name after it.
      assert.include(text, '"pay"')
      assert.notInclude(text, madeUp)
    }).pipe(Effect.scoped, Effect.provide([nodeLayer, Journal.layerMemory, model]))
  })
})
