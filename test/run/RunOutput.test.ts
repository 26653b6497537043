import { assert, describe, it } from "@effect/vitest"
import { BigDecimal, DateTime, Effect, Result, Schema } from "effect"
import * as FinalOutput from "../../src/run/internal/FinalOutput.ts"
import * as Run from "../../src/run/Run.ts"
import * as RunResult from "../../src/run/RunResult.ts"
import * as ScriptedModel from "../../src/testing/ScriptedModel.ts"

const City = Schema.Struct({ city: Schema.String, population: Schema.Number })

const run = (answers: ReadonlyArray<string>, correctionBudget?: number) =>
  Run.run({
    goal: "Which city is the capital of France? Answer as JSON.",
    tools: [],
    output: City,
    ...(correctionBudget === undefined ? {} : { recovery: { correctionBudget } })
  }).pipe(Effect.provide(ScriptedModel.layer(answers.map(ScriptedModel.finalAnswer))))

const kinds = (timeline: ReadonlyArray<{ readonly _tag: string; readonly kind?: unknown }>) =>
  timeline.flatMap((e) =>
    (e._tag === "recovery.started" || e._tag === "recovery.completed" || e._tag === "recovery.failed") &&
    e.kind === "output_correction"
      ? [e._tag]
      : []
  )

describe("Run.run({ output })", () => {
  it.effect(
    "R12 R6.1 an answer nested past the depth limit, or holding a __proto__ key, is the model's to correct, whatever the schema",
    () =>
      Effect.gen(function* () {
        interface Tree {
          readonly kids: ReadonlyArray<Tree>
        }
        const TreeSchema: Schema.Codec<Tree> = Schema.Struct({ kids: Schema.Array(Schema.suspend(() => TreeSchema)) })
        let deep = '{"kids":[]}'
        for (let i = 0; i < 5_000; i++) deep = `{"kids":[${deep}]}`
        const cases: ReadonlyArray<readonly [Schema.Codec<unknown>, string]> = [
          [TreeSchema, deep],
          [Schema.Unknown, `${"[".repeat(10_000)}${"]".repeat(10_000)}`],
          [Schema.Unknown, '{"__proto__":{"admin":true}}']
        ]
        for (const [output, first] of cases) {
          const result = yield* Run.run({ goal: "answer as JSON", tools: [], output }).pipe(
            Effect.provide(
              ScriptedModel.layer([ScriptedModel.finalAnswer(first), ScriptedModel.finalAnswer('{"kids":[]}')])
            )
          )
          // Refused before any decoder walks it (a recursive schema overflowed its stack: internal_error).
          assert.deepStrictEqual([result.status, result.output], ["completed", { kids: [] }])
          assert.deepStrictEqual(kinds(result.timeline), ["recovery.started", "recovery.completed"])
          // The result can be written out as JSON.
          assert.isString(JSON.stringify(result))
        }
      })
  )

  it.effect("R6.1 the final answer decoded with the output schema is the typed result.output", () =>
    Effect.gen(function* () {
      const result = yield* run(['{"city":"Paris","population":2100000}'])
      assert.strictEqual(result.status, "completed")
      // Typed: `output` is `{ city: string; population: number } | undefined`.
      const city: string | undefined = result.output?.city
      assert.strictEqual(city, "Paris")
      assert.deepStrictEqual(result.output, { city: "Paris", population: 2_100_000 })
      const check = result.checks.find((c) => c.kind === "output")
      assert.deepStrictEqual([check?.name, check?.passed], ["output", true])
    })
  )

  it.effect(
    "R6.1 a Date or a bigint output decodes from the answer's JSON (ISO text, digits), as tool arguments do (review 173)",
    () =>
      Effect.gen(function* () {
        const Due = Schema.Struct({ when: Schema.Date, amount: Schema.BigInt, at: Schema.DateTimeUtc })
        const result = yield* Run.run({ goal: "when, and how much? Answer as JSON.", tools: [], output: Due }).pipe(
          Effect.provide(
            ScriptedModel.layer([
              ScriptedModel.finalAnswer(
                '{"when":"2026-12-07T10:00:00.000Z","amount":"12345678901234567890","at":"2026-12-07T10:00:00.000Z"}'
              )
            ])
          )
        )
        // Before: "Expected a valid Date", the correction budget spent, `validation_failed`.
        assert.strictEqual(result.status, "completed")
        assert.instanceOf(result.output?.when, Date)
        assert.strictEqual(result.output?.when.toISOString(), "2026-12-07T10:00:00.000Z")
        assert.strictEqual(result.output?.amount, 12345678901234567890n)
        assert.isTrue(result.output !== undefined && DateTime.isDateTime(result.output.at))
        // What JSON cannot mean is still the model's to correct: a Date that is no date, a number that is none.
        const wrong = yield* Run.run({ goal: "when?", tools: [], output: Due, recovery: { correctionBudget: 0 } }).pipe(
          Effect.provide(
            ScriptedModel.layer([
              ScriptedModel.finalAnswer('{"when":"not a date","amount":"12","at":"2026-12-07T10:00:00.000Z"}')
            ])
          )
        )
        assert.deepStrictEqual(
          [wrong.status, wrong.stopReason, wrong.output],
          ["failed", "validation_failed", undefined]
        )
        const finite = yield* Run.run({
          goal: "how many?",
          tools: [],
          output: Schema.Struct({ n: Schema.Number }),
          recovery: { correctionBudget: 0 }
        }).pipe(Effect.provide(ScriptedModel.layer([ScriptedModel.finalAnswer('{"n":"NaN"}')])))
        assert.strictEqual(finite.stopReason, "validation_failed")
      })
  )

  it.effect(
    "R6.1 R6.5 an output's plain objects are frozen; class instances (Uint8Array, DateTime, BigDecimal, your own) are handed over as decoded, and work",
    () =>
      Effect.gen(function* () {
        class Place extends Schema.Class<Place>("Place")({ city: Schema.String }) {
          // Fills a cache of its own once asked, on itself, as effect's DateTime and BigDecimal do.
          get label(): string {
            const self = this as { labelCache?: string }
            self.labelCache ??= this.city.toUpperCase()
            return self.labelCache
          }
        }
        const Blob = Schema.Struct({
          data: Schema.Uint8ArrayFromBase64,
          when: Schema.DateTimeUtcFromString,
          amount: Schema.BigDecimalFromString,
          place: Place,
          tags: Schema.Array(Schema.String)
        })
        const answer =
          '{"data":"AQID","when":"2026-01-02T03:04:05Z","amount":"1.50","place":{"city":"Paris"},"tags":["a"]}'
        const result = yield* Run.run({ goal: "answer as JSON", tools: [], output: Blob }).pipe(
          Effect.provide(ScriptedModel.layer([ScriptedModel.finalAnswer(answer)]))
        )
        // Freezing a typed array with elements throws: the run died at its close, its result rebuilt with no output.
        assert.deepStrictEqual(
          [result.status, result.stopReason, result.policy],
          ["completed", "goal_reached", "final_answer"]
        )
        const output = result.output
        assert.isDefined(output)
        if (output === undefined) return
        assert.deepStrictEqual(Array.from(output.data), [1, 2, 3])
        // Frozen, they threw: DateTime's and BigDecimal's caches, and the class's own.
        assert.strictEqual(DateTime.getPartUtc(output.when, "year"), 2026)
        assert.strictEqual(BigDecimal.format(output.amount), "1.5")
        assert.strictEqual(output.place.label, "PARIS")
        // Every caller is handed this one output: its plain parts none can change for the others.
        assert.isTrue(Object.isFrozen(output))
        assert.isTrue(Object.isFrozen(output.tags))
        assert.strictEqual(result.finalAnswer, answer)
      })
  )

  it.effect("R6.1 R12 a typed output's -0 is 0, live as after the result's JSON round trip (review 118)", () =>
    Effect.gen(function* () {
      const codec = Schema.toCodecJson(RunResult.RunResult)
      const roundTrip = (result: RunResult.RunResult) =>
        Schema.decodeUnknownSync(codec)(JSON.parse(JSON.stringify(Schema.encodeUnknownSync(codec)(result))))
      const Numbers = Schema.Struct({ n: Schema.Number, list: Schema.Array(Schema.Number) })
      const result = yield* Run.run({ goal: "answer as JSON", tools: [], output: Numbers }).pipe(
        Effect.provide(ScriptedModel.layer([ScriptedModel.finalAnswer('{"n":-0,"list":[-0,1]}')]))
      )
      assert.strictEqual(result.status, "completed")
      const back = roundTrip(result).output as typeof result.output
      for (const output of [result.output, back]) {
        assert.isFalse(Object.is(output?.n, -0))
        assert.isFalse(Object.is(output?.list[0], -0))
      }
      assert.deepStrictEqual(back, result.output)
      // A bare number too.
      const bare = yield* Run.run({ goal: "answer as JSON", tools: [], output: Schema.Number }).pipe(
        Effect.provide(ScriptedModel.layer([ScriptedModel.finalAnswer("-0")]))
      )
      assert.isTrue(Object.is(bare.output, 0))
      assert.isTrue(Object.is(roundTrip(bare).output, 0))
    })
  )

  it.effect("R6.1 an answer wholly inside a code fence is read as the JSON inside it", () =>
    Effect.gen(function* () {
      for (const answer of [
        '```json\n{"city":"Paris","population":1}\n```',
        '```JSON \r\n{"city":"Paris","population":1}\r\n```',
        '```\n\n{"city":"Paris","population":1}```'
      ]) {
        const result = yield* run([answer])
        assert.deepStrictEqual(result.output, { city: "Paris", population: 1 }, JSON.stringify(answer))
      }
    })
  )

  it.effect("R12 R6.1 an unclosed fence of 100,000 blank lines is refused at once, not after seconds (review 79)", () =>
    Effect.sync(() => {
      // Before, the fence's pattern tried every split of the blank lines: 200 KB took 10 s, 1 MiB minutes.
      const answer = `\`\`\`json\n${" \n".repeat(100_000)}x`
      const decoded = FinalOutput.decode(Schema.Struct({ city: Schema.String }), answer)
      assert.isTrue(Result.isFailure(decoded))
      assert.include(Result.isFailure(decoded) ? decoded.failure.message : "", "not JSON")
    })
  )

  it.effect("R3.5 R6.1 an answer that does not decode goes back to the model as a correction naming the field", () =>
    Effect.gen(function* () {
      const result = yield* run(['{"city":"Paris","population":"many"}', '{"city":"Paris","population":3}'])
      assert.strictEqual(result.status, "completed")
      assert.deepStrictEqual(result.output, { city: "Paris", population: 3 })
      assert.deepStrictEqual(kinds(result.timeline), ["recovery.started", "recovery.completed"])
      const reminder = result.timeline.find((e) => e._tag === "reminder.injected")
      assert.strictEqual(reminder?._tag === "reminder.injected" && reminder.kind, "output_invalid")
      assert.include(reminder?._tag === "reminder.injected" ? reminder.text : "", "population")
      assert.strictEqual(result.counters.toolCorrectionAttempts, 1)
    })
  )

  it.effect("R6.1 R6.3 once the correction budget is spent, validation refutes the answer: no output", () =>
    Effect.gen(function* () {
      const result = yield* run(["Paris, about two million people", "still Paris"], 1)
      assert.deepStrictEqual([result.status, result.stopReason], ["failed", "validation_failed"])
      assert.isUndefined(result.output)
      assert.strictEqual(result.finalAnswer, "still Paris")
      assert.deepStrictEqual(kinds(result.timeline), ["recovery.started", "recovery.failed"])
      const check = result.checks.find((c) => c.kind === "output")
      assert.isFalse(check?.passed)
      // Its detail starts with its name, as every check's does (review 90).
      assert.match(check?.detail ?? "", /^output: .*not JSON/)
    })
  )

  it.effect(
    "R6.1 R3.5 R2.2 at the last iteration, or its token budget spent, no correction is announced (review 126)",
    () =>
      Effect.gen(function* () {
        for (const [limits, reason] of [
          [{ maxIterations: 1 }, "max_iterations"],
          [{ maxTokens: 1 }, "budget_exhausted"]
        ] as const) {
          const result = yield* Run.run({ goal: "The capital, as JSON.", tools: [], output: City, limits }).pipe(
            Effect.provide(
              ScriptedModel.layer([
                { ...ScriptedModel.finalAnswer("Paris"), usage: { inputTokens: 5, outputTokens: 5 } }
              ])
            )
          )
          assert.strictEqual(result.stopReason, reason)
          // Before, a correction was announced and counted, its episode never closed, for a turn never given.
          assert.deepStrictEqual(kinds(result.timeline), [])
          assert.isFalse(result.timeline.some((e) => e._tag === "reminder.injected"))
          assert.strictEqual(result.counters.toolCorrectionAttempts, 0)
        }
      })
  )

  it.effect("an output that is not a Schema is a clear invalid option, and the run ends at once", () =>
    Effect.gen(function* () {
      const result = yield* Run.run({
        goal: "g",
        tools: [],
        output: { decode: () => 1 } as unknown as typeof City
      }).pipe(Effect.provide(ScriptedModel.layer([])))
      assert.deepStrictEqual([result.status, result.stopReason], ["failed", "internal_error"])
      assert.include(result.detail, "output: Expected a Schema")
    })
  )
})
