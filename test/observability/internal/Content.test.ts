import { assert, describe, it } from "@effect/vitest"
import { Effect, Schema } from "effect"
import * as Counters from "../../../src/events/Counters.ts"
import type * as Event from "../../../src/events/Event.ts"
import * as Model from "../../../src/model/Model.ts"
import { omitted, withoutContent } from "../../../src/observability/internal/Content.ts"
import * as Run from "../../../src/run/Run.ts"
import * as ScriptedModel from "../../../src/testing/ScriptedModel.ts"
import * as Tool from "../../../src/tools/Tool.ts"

/** What stands in for a text whose sameness the counters read. */
const standIn = /^<not recorded #[\w-]{16}>$/

describe("content left out of a recording", () => {
  const stamp = { runId: "r", seq: 3, at: 0 }
  it("R3.1 R13 a contradicted success's output is content: left out, and a failure's message with it", () => {
    const contradicted: Event.Event = {
      _tag: "tool.failed",
      ...stamp,
      callId: "c1",
      name: "write",
      error: { code: "inconsistent_result", message: "the check answered false", correctable: false },
      maxRetries: 0,
      output: { account: "IBAN DE00 1234" }
    }
    const left = withoutContent(contradicted)
    assert.strictEqual(left._tag === "tool.failed" ? left.output : undefined, omitted)
    assert.notInclude(JSON.stringify(left), "IBAN")
    const plain: Event.Event = { ...contradicted, output: undefined }
    const { output: _, ...without } = plain
    // A failure's message may quote the arguments (`read_file` names the path): left out, its code kept.
    const stripped = withoutContent(without as Event.Event)
    const message = stripped._tag === "tool.failed" ? stripped.error.message : ""
    assert.match(message, standIn)
    assert.deepStrictEqual(stripped, { ...without, error: { ...contradicted.error, message } })
  })

  it("R13 what the counters compare stays comparable: equal texts, one stand-in; different texts, different ones; blank, blank but not as written (review 187)", () => {
    const succeeded = (observation: string): Event.Event => ({
      _tag: "tool.succeeded",
      ...stamp,
      callId: "c1",
      name: "search",
      sideEffect: "read",
      observation,
      input: {},
      output: observation
    })
    const observed = (e: Event.Event) => (e._tag === "tool.succeeded" ? e.observation : "")
    const [a, again, b] = ["no results", "no results", "3 results"].map((o) => observed(withoutContent(succeeded(o))))
    assert.match(a ?? "", standIn)
    assert.strictEqual(a, again)
    assert.notStrictEqual(a, b)
    const blank: Event.Event = {
      _tag: "model.responded",
      ...stamp,
      iteration: 1,
      text: " \u200b ",
      toolCalls: [],
      callIds: [],
      signatures: [],
      usage: { inputTokens: 1, outputTokens: 1 }
    }
    // Blank stays blank (the counters read an empty answer), but not as it was: characters that
    // show nothing may still say something (review 187: an answer in Unicode tag characters).
    const tags = [..."db-password=hunter2"].map((c) => String.fromCodePoint(0xe0000 + c.charCodeAt(0))).join("")
    const blanks = [" \u200b ", tags, tags, `${tags}x`.slice(0, -1), "", " \t "].map((text) => {
      const left = withoutContent({ ...blank, text })
      return left._tag === "model.responded" ? left.text : "not an answer"
    })
    const [zeroWidth, hidden, hiddenAgain, , empty, spaces] = blanks
    for (const text of blanks) assert.isTrue(Model.isBlank(text), JSON.stringify(text))
    assert.strictEqual(empty, "")
    assert.match(hidden ?? "", /^[ \t]+$/)
    assert.strictEqual(hidden, hiddenAgain)
    assert.notStrictEqual(hidden, zeroWidth)
    assert.notStrictEqual(spaces, " \t ")
    assert.notInclude(JSON.stringify(blanks), "\\udb40")
  })

  it("R13 R12 a call id the model wrote and the run did not take is left out: the run's id stands in (review 187)", () => {
    const responded: Event.Event = {
      _tag: "model.responded",
      ...stamp,
      iteration: 1,
      text: "",
      toolCalls: [
        { id: "call_1", name: "search", arguments: "{}" },
        { id: `SECRET-${"x".repeat(100_000)}`, name: "search", arguments: "{}" }
      ],
      callIds: ["call_1", "call#1"],
      signatures: [],
      usage: { inputTokens: 1, outputTokens: 1 }
    }
    const left = withoutContent(responded)
    assert.deepStrictEqual(left._tag === "model.responded" ? left.toolCalls.map((call) => call.id) : [], [
      "call_1",
      "call#1"
    ])
    assert.notInclude(JSON.stringify(left), "SECRET")
  })

  it("R13 R12 a status query's failure after it keeps its code, not its hint (review 187)", () => {
    const reconciled: Event.Event = {
      _tag: "tool.reconciled",
      ...stamp,
      callId: "c1",
      name: "write",
      idempotencyKey: "r/c1",
      verdict: "not_applied",
      detail: "no file at /home/ada/SECRET-PATH",
      after: {
        classification: "permanent",
        source: "tool",
        category: "other",
        code: "write_failed",
        attempts: 2,
        hint: "could not write /home/ada/SECRET-PATH"
      }
    }
    const left = withoutContent(reconciled)
    assert.notInclude(JSON.stringify(left), "SECRET-PATH")
    assert.deepInclude(left._tag === "tool.reconciled" ? left.after : undefined, {
      code: "write_failed",
      hint: omitted
    })
  })

  it("R13 R12 what a call was given or a person wrote is left out: a refusal's message, a reviewer's reason, the plan", () => {
    const secret = "/home/ada/SECRET-PATH/notes.txt"
    const events: ReadonlyArray<Event.Event> = [
      {
        _tag: "plan.set",
        ...stamp,
        steps: [{ id: "s1", description: `read ${secret}`, required: true }]
      },
      {
        _tag: "tool.blocked",
        ...stamp,
        callId: "c1",
        name: "read_file",
        error: { code: "permission_denied", message: `outside_roots: ${secret} is outside`, correctable: false }
      },
      {
        _tag: "approval.decided",
        ...stamp,
        callId: "c2",
        name: "pay",
        decision: "rejected",
        by: "bob",
        reason: `not ${secret}`
      },
      {
        _tag: "termination.decided",
        ...stamp,
        policy: "approval",
        reason: "approval_rejected",
        detail: `pay (c2) was rejected by bob: not ${secret}`
      }
    ]
    const left = events.map((event) => withoutContent(event))
    assert.notInclude(JSON.stringify(left), "SECRET-PATH")
    const [plan, blocked, decided, decision] = left
    assert.deepStrictEqual(plan?._tag === "plan.set" ? plan.steps : [], [
      { id: "s1", description: omitted, required: true }
    ])
    assert.deepInclude(blocked?._tag === "tool.blocked" ? blocked.error : undefined, {
      code: "permission_denied",
      correctable: false
    })
    assert.match(blocked?._tag === "tool.blocked" ? blocked.error.message : "", standIn)
    assert.deepInclude(decided, { decision: "rejected", by: "bob", reason: omitted })
    assert.deepInclude(decision, { policy: "approval", reason: "approval_rejected", detail: omitted })
    // A stop the runtime or a policy worded keeps its detail.
    const budget: Event.Event = {
      _tag: "termination.decided",
      ...stamp,
      policy: "max_iterations",
      reason: "max_iterations",
      detail: "3 model responses of 3"
    }
    assert.deepStrictEqual(withoutContent(budget), budget)
  })

  it.effect("R13 R2.1 a run's counters fold from its events without content as from the events themselves", () =>
    Effect.gen(function* () {
      const search = Tool.make({
        name: "search",
        description: "Searches.",
        input: Schema.Struct({ q: Schema.String }),
        output: Schema.String,
        sideEffect: "read",
        handler: ({ q }) => Effect.succeed(q === "a" || q === "b" ? "no results" : `results for ${q}`)
      })
      const empty = ScriptedModel.finalAnswer(" ")
      const script = [
        ScriptedModel.toolCall("search", { q: "a" }),
        ScriptedModel.toolCall("search", { q: "b" }),
        ScriptedModel.toolCall("search", { q: "c" }),
        ScriptedModel.toolCall("nothing", {}),
        ScriptedModel.toolCall("nothing", {}),
        empty,
        empty,
        empty
      ]
      const result = yield* Run.run({ goal: "find", tools: [search] }).pipe(Effect.provide(ScriptedModel.layer(script)))
      assert.strictEqual(result.stopReason, "empty_output")
      // The counts (the maps behind them are keyed by the texts, or their stand-ins).
      const counts = (counters: Counters.Counters) =>
        Object.entries(counters).filter(([, value]) => typeof value === "number" || typeof value === "boolean")
      const left = Counters.fold(result.timeline.map((event) => withoutContent(event)))
      assert.deepStrictEqual(counts(left), counts(Counters.fold(result.timeline)))
      assert.strictEqual(left.emptyOutputs, 3)
      assert.strictEqual(left.unchangedObservations, 1)
      assert.strictEqual(left.repeatedFailureCount, 2)
    })
  )
})
