import { assert, describe, it } from "@effect/vitest"
import { Effect, Schema, Stream } from "effect"
import { TestClock } from "effect/testing"
import type * as Event from "../../src/events/Event.ts"
import * as Explain from "../../src/explain/Explain.ts"
import * as Failure from "../../src/failure/Failure.ts"
import * as Recording from "../../src/observability/Recording.ts"
import * as Viewer from "../../src/observability/Viewer.ts"
import * as Run from "../../src/run/Run.ts"
import * as FaultyModel from "../../src/testing/FaultyModel.ts"
import * as ScriptedModel from "../../src/testing/ScriptedModel.ts"
import * as Tool from "../../src/tools/Tool.ts"
import * as Validation from "../../src/validation/Validation.ts"
import { drive } from "../support/clock.ts"
import { dies, layers, pay, payThenAnswer } from "../support/restart.ts"
import { nodeLayer, recordedRun, tempDirectory } from "./support.ts"

const recorded = Effect.runPromise(
  Effect.gen(function* () {
    const directory = yield* tempDirectory
    const { result, file } = yield* recordedRun(directory)
    return { result, recording: yield* Recording.read(file) }
  }).pipe(Effect.scoped, Effect.provide(nodeLayer))
)

const count = (html: string, pattern: RegExp) => html.match(pattern)?.length ?? 0

describe("Viewer", () => {
  it("draws the model attempts, tool attempts, backoffs and the approval wait as bars", async () => {
    const { recording } = await recorded
    const html = Viewer.html(recording)
    // Iteration 1: two model attempts (the first rate limited), a backoff; fetch failed once, backoff, then ok.
    assert.strictEqual(count(html, /data-kind="model_failed"/g), 1)
    assert.strictEqual(count(html, /data-kind="model"/g), 3)
    assert.strictEqual(count(html, /data-kind="backoff"/g), 2)
    assert.strictEqual(count(html, /data-kind="tool_failed"/g), 1)
    assert.strictEqual(count(html, /data-kind="approval"/g), 1)
    assert.strictEqual(count(html, /data-iteration="[1-9]"/g), 3)
    assert.include(html, "deploy [call_2]")
  })

  it("draws the time layers: the attempt and step deadlines, the approval expiry", async () => {
    const { recording } = await recorded
    const html = Viewer.html(recording)
    assert.isAbove(count(html, /data-layer="attempt"/g), 3)
    assert.isAbove(count(html, /data-layer="step"/g), 2)
    assert.include(html, "run deadline at +60.0 s (off the chart)")
    // The approval's expiry, set by the step layer, on the waiting call's row.
    const requested = recording.events.find((e) => e._tag === "approval.requested")
    assert.include(html, `data-seq="${requested?.seq}" data-layer="step"`)
  })

  it("shows the stop reason and its detail, and the budgets beside their limits", async () => {
    const { result, recording } = await recorded
    const html = Viewer.html(recording)
    assert.include(html, `<span id="stop-reason" class="reason">max_iterations</span>`)
    assert.include(html, `<span id="policy">max_iterations</span>`)
    assert.include(html, result.detail)
    assert.match(
      html,
      /<tr class="budget spent" data-budget="iterations"><td>iterations<\/td><td class="num">3<\/td><td class="num">3<\/td>/
    )
    assert.match(html, /data-budget="tokens"><td>tokens<\/td><td class="num">\d+<\/td><td class="num">10000<\/td>/)
  })

  it("takes a RunResult: its status and reason after validation", async () => {
    const { result } = await recorded
    const html = Viewer.html(result)
    assert.include(html, `<span id="status" class="status">${result.status}</span>`)
    assert.include(html, `<span id="stop-reason" class="reason">${result.stopReason}</span>`)
  })

  it("R13 a recording whose head was cut (tail -n, a rotated log) is timed from its first event, and says so (review 187)", async () => {
    const { recording } = await recorded
    const tail = recording.events.slice(5)
    const first = tail[0]
    const lastAt = tail[tail.length - 1]?.at ?? 0
    // Before, its time was counted from 1970: a run of 56 years, whose limit was to be raised.
    assert.strictEqual(Explain.explain(tail).elapsedMillis, lastAt - (first?.at ?? 0))
    const html = Viewer.html({ ...recording, events: tail })
    assert.include(html, `The recording does not begin with the run&#39;s start: its first event is seq ${first?.seq}`)
    assert.notInclude(Viewer.html(recording), "does not begin with the run")
  })

  it("is self-contained: no request leaves the page", async () => {
    const { recording } = await recorded
    const html = Viewer.html(recording)
    assert.notMatch(html, /\b(src|href)=/)
    assert.notMatch(html, /https?:\/\//)
    assert.include(html, "default-src 'none'")
  })

  it("message content: shown when recorded, left out with content: false", async () => {
    const { recording } = await recorded
    assert.include(Viewer.html(recording), "Fetch the pages, then deploy to staging")
    const without = Viewer.html(recording, { content: false })
    assert.notInclude(without, "Fetch the pages")
    assert.notInclude(without, "staging")
    assert.include(without, "Message content was not recorded")
  })

  it("R13 content: false leaves out what a tool's failure and the stop it caused quote of the arguments", () => {
    const mark = "MergerWithAcmeCorp"
    const lookup = Tool.make({
      name: "lookup",
      description: "Looks a record up",
      input: Schema.Struct({ q: Schema.String }),
      output: Schema.String,
      handler: ({ q }) =>
        Effect.fail(
          new Failure.Permanent({
            source: "tool",
            category: "not_found",
            code: "no_match",
            attempts: 1,
            hint: `no record matches ${q}`
          })
        )
    })
    const result = Effect.runSync(
      Run.run({ goal: "g", tools: [lookup] }).pipe(
        Effect.provide(ScriptedModel.layer([ScriptedModel.toolCall("lookup", { q: `${mark} minutes` })]))
      )
    )
    assert.strictEqual(result.stopReason, "tool_error")
    assert.include(Viewer.html(result), mark)
    const without = Viewer.html(result, { content: false })
    assert.notInclude(without, mark)
    // What it was stays: the tool, its code, the stop.
    assert.include(without, "no_match")
    assert.include(without, "tool_error")
  })

  it("a run still going: open bars to the last event, and no stop yet", async () => {
    const { recording } = await recorded
    const cut = recording.events.findIndex((e) => e._tag === "approval.decided")
    const html = Viewer.html(recording.events.slice(0, cut))
    assert.include(html, `class="bar approval open"`)
    assert.include(html, `<span id="stop-reason" class="reason">not stopped yet</span>`)
    assert.include(html, "running (awaiting_approval)")
  })

  it("a finished run: no bar is drawn open, its last phase ends with it", async () => {
    const { recording } = await recorded
    const html = Viewer.html(recording)
    assert.notInclude(html, "still going")
    assert.strictEqual(count(html, /class="bar [a-z_]+ open"/g), 0)
  })

  it("text of the run cannot break out of the page: a goal with markup is escaped", () => {
    const goal = `</script><script>alert("x")</script><img src=x onerror=alert(1)>`
    const result = Effect.runSync(
      Run.run({ goal, tools: [] }).pipe(Effect.provide(ScriptedModel.layer([ScriptedModel.finalAnswer("ok")])))
    )
    const html = Viewer.html(result)
    assert.strictEqual(count(html, /<script/g), 2)
    assert.notInclude(html, "<img")
    assert.include(html, "&lt;/script&gt;&lt;script&gt;")
  })

  it("R12 a right-to-left override in the run's text is shown, not obeyed: the page reads as the text is ordered", () => {
    // U+061C, the Arabic letter mark, is a mark of bidirectional text too (review 120).
    const goal = "deploy \u202Egnirahs\u202C now \u061C"
    const result = Effect.runSync(
      Run.run({ goal, tools: [] }).pipe(Effect.provide(ScriptedModel.layer([ScriptedModel.finalAnswer("ok")])))
    )
    // What the page shows: everything but its scripts (the run's data keeps the text as it is).
    const shown = Viewer.html(result).replace(/<script[^>]*>[\s\S]*?<\/script>/g, "")
    assert.notInclude(shown, "\u202E")
    assert.notInclude(shown, "\u061C")
    assert.include(shown, "deploy \\u202egnirahs\\u202c now \\u061c")
  })

  it("R12 R13 a timeline made by hand at a time no Date holds gives its page, its start shown as milliseconds", () => {
    const at = (time: number): ReadonlyArray<Event.Event> => [
      { _tag: "run.started", runId: "far", seq: 0, at: time, goal: "g", model: "m", tools: [], deadlineAt: time },
      { _tag: "state.changed", runId: "far", seq: 1, at: time, from: "created", to: "initializing" }
    ]
    assert.include(Viewer.html(at(1e20)), "<dt>started</dt><dd>100000000000000000000 ms since 1970 (no date)</dd>")
    assert.include(Viewer.html(at(0)), "<dt>started</dt><dd>1970-01-01T00:00:00.000Z</dd>")
  })

  it("R13 a run of 200,000 events gives its page, its last event ending the chart (no spread into Math.max)", () => {
    const events: Array<Event.Event> = [
      { _tag: "run.started", runId: "long", seq: 0, at: 0, goal: "g", model: "m", tools: [], deadlineAt: 1e12 }
    ]
    for (let i = 1; i <= 200_000; i++)
      events.push({ _tag: "reminder.injected", runId: "long", seq: i, at: i, kind: "k", text: "t" })
    const html = Viewer.html(events)
    assert.include(html, "<dt>elapsed</dt><dd>200.0 s</dd>")
    assert.include(html, "<dt>events</dt><dd>200001</dd>")
  })

  it.effect(
    "R9 R13 a resume that brings the run deadline closer: the page draws the deadline and time limit in force",
    () =>
      Effect.gen(function* () {
        const payment = pay(true)
        yield* dies({ crashAt: { commit: 2, when: "after" } }, { goal: "pay 10", tools: [payment.tool] }, payThenAnswer)
        const resumed = yield* drive(
          Run.resume("r1", { tools: [payment.tool], time: { run: "2 seconds" } }, "restart")
        ).pipe(Effect.provide(payThenAnswer))
        const started = resumed.timeline[0]
        assert.strictEqual(started?._tag === "run.started" ? started.deadlineAt - started.at : 0, 600_000)
        const html = Viewer.html(resumed)
        assert.include(html, `<p class="note">run deadline at +2.00 s`)
        assert.match(
          html,
          /data-budget="run time"><td>run time<\/td><td class="num">[^<]*<\/td><td class="num">2\.00 s</
        )
      }).pipe(Effect.provide(layers))
  )

  it.effect("R5 R13 a backoff a cancel cut short ends at the cancel, not at the end it was planned to", () =>
    Effect.gen(function* () {
      const handle = yield* Run.start({ goal: "x", tools: [] })
      yield* Stream.runHead(Stream.filter(handle.events, (e) => e._tag === "recovery.started"))
      yield* TestClock.adjust("100 millis")
      yield* handle.cancel
      const result = yield* handle.result
      assert.strictEqual(result.stopReason, "cancelled")
      const backoff = result.timeline.find((e) => e._tag === "recovery.started")
      assert.strictEqual(backoff?._tag === "recovery.started" ? backoff.delayMillis : 0, 30_000)
      const bars = Viewer.html(result).match(/data-kind="backoff"[^>]*title="([^"]*)"/g) ?? []
      assert.strictEqual(bars.length, 1)
      assert.include(bars[0], `title="backoff 30000 ms (http_429): +0 ms for 100 ms"`)
    }).pipe(
      Effect.scoped,
      Effect.provide(
        FaultyModel.layer(
          FaultyModel.make([FaultyModel.rateLimited("30"), FaultyModel.respond(ScriptedModel.finalAnswer("x"))])
        )
      )
    )
  )

  it("shows why the run stopped: the explanation of its log, or the one given", async () => {
    const { recording } = await recorded
    assert.include(
      Viewer.html(recording, { explanation: "3 of 3 iterations" }),
      `<pre id="explanation">3 of 3 iterations</pre>`
    )
    const own = Viewer.html(recording)
    const text = Explain.format(Explain.explain(recording.events))
    assert.isAbove(text.length, 0)
    const escaped = text
      .replaceAll("&", "&amp;")
      .replaceAll("<", "&lt;")
      .replaceAll(">", "&gt;")
      .replaceAll('"', "&quot;")
    assert.include(own, `<pre id="explanation">`)
    assert.include(own, escaped.split("\n")[0] ?? "")
  })

  const section = (html: string, pattern: RegExp) => html.match(pattern)?.[0] ?? ""

  it.effect(
    "R13 R6.2 the page of a refuted answer's timeline names its stop as the page of its result does (review 166)",
    () =>
      Effect.gen(function* () {
        const hook = Validation.stopHook("tests_pass", () => Effect.succeed({ passed: false, detail: "3 tests fail" }))
        const result = yield* Run.run({ goal: "fix", tools: [], validation: { stopHooks: [hook] } }).pipe(
          Effect.provide(ScriptedModel.layer([ScriptedModel.finalAnswer("all fixed")]))
        )
        assert.deepStrictEqual([result.stopReason, result.policy], ["validation_failed", "validation"])
        const stop = /<section id="stop"[\s\S]*?<pre id="explanation">/
        const fromTimeline = section(Viewer.html(result.timeline), stop)
        // Before: "validation_failed by final_answer: the model gave a final answer (a candidate: …)".
        assert.include(fromTimeline, `<span id="policy">validation</span>`)
        assert.include(fromTimeline, "3 tests fail")
        assert.strictEqual(fromTimeline, section(Viewer.html(result), stop))
      })
  )

  it.effect("R13 R3.9 the page of a run's timeline names the model in use after a fallback (review 166)", () =>
    Effect.gen(function* () {
      const bad = new Failure.Permanent({
        source: "provider",
        category: "permanent_http",
        code: "http_400",
        attempts: 1,
        hint: "bad request"
      })
      const backup = { name: "backup", model: ScriptedModel.make([ScriptedModel.finalAnswer("done")]) }
      const result = yield* Run.run({ goal: "x", tools: [], recovery: { fallbackModels: [backup] } }).pipe(
        Effect.provide(ScriptedModel.layer([bad]))
      )
      assert.strictEqual(result.model, "backup")
      const facts = /<dl class="facts">[\s\S]*?<\/dl>/
      // Before: the start's model.
      assert.include(section(Viewer.html(result.timeline), facts), "<dt>model</dt><dd>backup</dd>")
    })
  )
})
