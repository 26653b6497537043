import { NodeServices } from "@effect/platform-node"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer, Option, Schema } from "effect"
import * as Journal from "../../src/journal/Journal.ts"
import * as Model from "../../src/model/Model.ts"
import * as Run from "../../src/run/Run.ts"
import * as RunResult from "../../src/run/RunResult.ts"
import * as Termination from "../../src/termination/Termination.ts"
import * as ScriptedModel from "../../src/testing/ScriptedModel.ts"
import * as Tool from "../../src/tools/Tool.ts"
import * as Criterion from "../../src/validation/Criterion.ts"
import { assertRoundTrips } from "../support/schema.ts"
import { echo } from "../support/tools.ts"

/** A model that records each request's tool definitions and answers at once. */
const recordingModel = () => {
  const requests: Array<Model.Request> = []
  const layer = Layer.mergeAll(
    Layer.succeed(Model.Model, {
      generate: (request) =>
        Effect.sync(() => {
          requests.push(request)
          return Model.response({ text: "done" })
        })
    }),
    NodeServices.layer
  )
  return { requests, layer }
}

const fallback = (name: string): Model.Fallback => ({
  name,
  model: { generate: () => Effect.succeed(Model.response({ text: "x" })) }
})

const duration = 'Expected a positive duration of at most 365250 days (1000 years; "30 seconds", or milliseconds)'
const fine = "Expected a duration of at least 1 nanosecond (effect counts time in whole nanoseconds)"

/** Options that cannot work, one per kind of field, and the path and reason the error gives. */
const invalid: ReadonlyArray<readonly [string, unknown, ReadonlyArray<string | number>, string]> = [
  ["the options as a whole", 5, [], "Expected object, got 5"],
  ["a required field", { tools: [] }, ["goal"], "field is required"],
  ["a key that is not an option", { goal: "x", tools: [], fallbackModels: [] }, ["fallbackModels"], "no such option"],
  [
    "a key that is not in its group",
    { goal: "x", tools: [], limits: { runTimeout: "1 second" } },
    ["limits", "runTimeout"],
    "no such option"
  ],
  ["a string", { goal: 42, tools: [] }, ["goal"], "Expected string, got 42"],
  ["the tool list", { goal: "x", tools: "all" }, ["tools"], 'Expected array, got "all"'],
  [
    "a value that is not a tool",
    { goal: "x", tools: [echo, {}] },
    ["tools", 1],
    "Expected a tool (build tools with Tool.make, or AiTools.fromTool for an effect/ai tool), got an object"
  ],
  [
    "two tools of one name",
    { goal: "x", tools: [echo, echo] },
    ["tools", 1, "name"],
    'two tools are named "echo"; tool names must be unique'
  ],
  [
    "two plan steps of one id",
    {
      goal: "x",
      tools: [],
      validation: {
        plan: [
          { id: "a", description: "a", required: true, criteria: [Criterion.toolSucceeded("echo")] },
          { id: "a", description: "again", required: true, criteria: [Criterion.toolSucceeded("echo")] }
        ]
      }
    },
    ["validation", "plan", 1, "id"],
    'two plan steps have the id "a"; step ids must be unique'
  ],
  [
    "a plan step with nothing to check",
    { goal: "x", tools: [], validation: { plan: [{ id: "a", description: "a", required: true, criteria: [] }] } },
    ["validation", "plan", 0, "criteria"],
    "a step needs at least one criterion (it is done when they all hold); got none"
  ],
  [
    "two stop hooks of one name (their checks could not be told apart)",
    {
      goal: "x",
      tools: [],
      validation: {
        stopHooks: [
          { name: "tests", check: () => Effect.succeed({ passed: true, detail: "ok" }) },
          { name: "tests", check: () => Effect.succeed({ passed: false, detail: "no" }) }
        ]
      }
    },
    ["validation", "stopHooks", 1, "name"],
    'two stop hooks have the name "tests"; hook names must be unique'
  ],
  [
    "a blank stop hook name",
    {
      goal: "x",
      tools: [],
      validation: { stopHooks: [{ name: " ", check: () => Effect.succeed({ passed: true, detail: "" }) }] }
    },
    ["validation", "stopHooks", 0, "name"],
    'Expected a name that is not blank, got " "'
  ],
  [
    "two artifact contracts of one path",
    {
      goal: "x",
      tools: [],
      validation: {
        artifacts: [
          { path: "a.json", format: "json", nonEmpty: true },
          { path: "a.json", format: "json", nonEmpty: false }
        ]
      }
    },
    ["validation", "artifacts", 1, "path"],
    'two artifact contracts have the path "a.json"; one contract a file'
  ],
  [
    "two policies of one name",
    { goal: "x", tools: [], policies: [Termination.maxIterations(3), Termination.maxIterations(5)] },
    ["policies", 1, "name"],
    'two policies are named "max_iterations"; the log names the policy that decided'
  ],
  [
    "a blank policy name",
    { goal: "x", tools: [], policies: [Termination.make("  ", () => Termination.continue_)] },
    ["policies", 0, "name"],
    'Expected a name that is not blank, got "  "'
  ],
  [
    "a policy named as the runtime's own stops (R13: Explain took them for the policy's)",
    { goal: "x", tools: [], policies: [Termination.make("runtime", () => Termination.continue_)] },
    ["policies", 0, "name"],
    '"runtime" is the name the runtime records for stops of its own; a policy so named would be taken for them'
  ],
  [
    "a tool's metadata",
    { goal: "x", tools: [{ ...echo, metadata: { ...echo.metadata, maxRetries: -1 } }] },
    ["tools", 0, "metadata", "maxRetries"],
    "Expected a value greater than or equal to 0, got -1"
  ],
  [
    "a tool renamed by hand",
    { goal: "x", tools: [{ ...echo, name: "other" }] },
    ["tools", 0, "definition"],
    "Expected the definition Tool.make made for this tool's name, got an object"
  ],
  [
    "a count of limits",
    { goal: "x", tools: [], limits: { maxIterations: 0 } },
    ["limits", "maxIterations"],
    "Expected a value greater than or equal to 1, got 0"
  ],
  [
    "a count that must be whole",
    { goal: "x", tools: [], limits: { maxTokens: 1.5 } },
    ["limits", "maxTokens"],
    "Expected an integer, got 1.5"
  ],
  [
    "a size of limits",
    { goal: "x", tools: [], limits: { maxArgumentDepth: 0 } },
    ["limits", "maxArgumentDepth"],
    "Expected a value greater than or equal to 1, got 0"
  ],
  [
    "a depth past what the runtime walks (R12)",
    { goal: "x", tools: [], limits: { maxArgumentDepth: 1000 } },
    ["limits", "maxArgumentDepth"],
    "Expected a value less than or equal to 512, got 1000"
  ],
  [
    "a cost",
    { goal: "x", tools: [], limits: { maxCostUsd: -1 } },
    ["limits", "maxCostUsd"],
    "Expected a value greater than or equal to 0, got -1"
  ],
  [
    "the run deadline",
    { goal: "x", tools: [], time: { run: Number.POSITIVE_INFINITY } },
    ["time", "run"],
    `${duration}, got Infinity`
  ],
  [
    "the step deadline",
    { goal: "x", tools: [], time: { step: "0 millis" } },
    ["time", "step"],
    `${duration}, got "0 millis"`
  ],
  // Positive, but less than effect's nanosecond: refused as what it is, not as a duration that is not positive.
  [
    "a run deadline too fine to count",
    { goal: "x", tools: [], time: { run: 1e-9 } },
    ["time", "run"],
    `${fine}, got 1e-9`
  ],
  [
    "a step deadline too fine to count",
    { goal: "x", tools: [], time: { step: "0.000000001 millis" } },
    ["time", "step"],
    `${fine}, got "0.000000001 millis"`
  ],
  ["the attempt timeout", { goal: "x", tools: [], time: { attempt: -5 } }, ["time", "attempt"], `${duration}, got -5`],
  [
    "the approval timeout",
    { goal: "x", tools: [], time: { approval: "soon" } },
    ["time", "approval"],
    `${duration}, got "soon"`
  ],
  [
    "the stop grace",
    { goal: "x", tools: [], time: { stopGrace: "1 fortnight" } },
    ["time", "stopGrace"],
    `${duration}, got "1 fortnight"`
  ],
  [
    "a stop grace longer than a real-time timer can wait",
    { goal: "x", tools: [], time: { stopGrace: "30 days" } },
    ["time", "stopGrace"],
    'Expected a positive duration of at most 24 days, got "30 days"'
  ],
  [
    "the backoff",
    { goal: "x", tools: [], recovery: { backoff: "50 millis" } },
    ["recovery", "backoff"],
    'Expected a Schedule (build one with Recovery.backoff), got "50 millis"'
  ],
  [
    "a budget of recovery",
    { goal: "x", tools: [], recovery: { correctionBudget: -1 } },
    ["recovery", "correctionBudget"],
    "Expected a value greater than or equal to 0, got -1"
  ],
  [
    "a fallback without a model",
    { goal: "x", tools: [], recovery: { fallbackModels: [{ name: "b" }] } },
    ["recovery", "fallbackModels", 0, "model"],
    "field is required"
  ],
  [
    "a fallback named like the model in use",
    { goal: "x", tools: [], modelName: "a", recovery: { fallbackModels: [fallback("b"), fallback("a")] } },
    ["recovery", "fallbackModels", 1, "name"],
    'the name "a" is used twice; model names must be unique'
  ],
  [
    "a limit no policy in the list enforces (it would be ignored)",
    { goal: "x", tools: [], limits: { maxIterations: 3 }, policies: [Termination.finalAnswer] },
    ["limits", "maxIterations"],
    "no policy in force enforces it (it would be ignored): pass policies as a function of the defaults, which are built from the limits, or build the list with Termination.defaults(limits)"
  ],
  [
    "a limit the list enforces otherwise",
    {
      goal: "x",
      tools: [],
      limits: { maxIterations: 3, maxToolCalls: 4 },
      policies: [...Termination.defaults(), Termination.make("mine", () => Termination.continue_)]
    },
    ["limits", "maxIterations"],
    "the policies in force enforce 20 (3 would be ignored): pass policies as a function of the defaults, which are built from the limits, or build the list with Termination.defaults(limits)"
  ],
  [
    "a limit whose policy the function removed",
    {
      goal: "x",
      tools: [],
      limits: { maxIterations: 3 },
      policies: (defaults: ReadonlyArray<Termination.Policy>) => Termination.remove(defaults, "max_iterations")
    },
    ["limits", "maxIterations"],
    "no policy in force enforces it (it would be ignored): pass policies as a function of the defaults, which are built from the limits, or build the list with Termination.defaults(limits)"
  ],
  [
    "a policy's limit that another policy in force enforces otherwise (run.started records one value)",
    {
      goal: "x",
      tools: [],
      policies: (defaults: ReadonlyArray<Termination.Policy>) => [
        ...defaults,
        Termination.make("my_audit", () => Termination.continue_, { maxIterations: 100 })
      ]
    },
    ["policies", 12, "limits", "maxIterations"],
    'the policy "my_audit" declares maxIterations: 100, but "max_iterations" enforces 20: a limit has one value (set it in limits, or name your own limit otherwise)'
  ],
  [
    "a token budget a policy declares beside the default budget, which has none (a resume would build the budget with it)",
    {
      goal: "x",
      tools: [],
      policies: (defaults: ReadonlyArray<Termination.Policy>) => [
        Termination.make("per_response_tokens", () => Termination.continue_, { maxTokens: 150 }),
        ...defaults
      ]
    },
    ["policies", 0, "limits", "maxTokens"],
    'the policy "per_response_tokens" declares maxTokens: 150, but "budget_exhausted" is in force without one: a limit has one value (set it in limits, or name your own limit otherwise)'
  ],
  [
    "a limit the run knows by name, declared by a policy as the limits option cannot take it (a resume reads it back as one)",
    {
      goal: "x",
      tools: [],
      policies: [{ name: "mine", decide: () => Termination.continue_, limits: { maxIterations: -1 } }]
    },
    ["policies", 0, "limits", "maxIterations"],
    "Expected what limits.maxIterations takes (the run knows this limit by name), got -1"
  ],
  [
    "a repeated call at the first call",
    { goal: "x", tools: [], limits: { repeatedToolCall: 1 } },
    ["limits", "repeatedToolCall"],
    "Expected a value greater than or equal to 2, got 1"
  ],
  [
    "a policy's limit that is no number",
    {
      goal: "x",
      tools: [],
      policies: [{ name: "mine", decide: () => Termination.continue_, limits: { maxRefunds: "3" } }]
    },
    ["policies", 0, "limits", "maxRefunds"],
    'Expected number, got "3"'
  ],
  [
    "a policy's limit whose name is none (it goes into run.started)",
    {
      goal: "x",
      tools: [],
      policies: [{ name: "mine", decide: () => Termination.continue_, limits: JSON.parse('{"__proto__": 1}') }]
    },
    ["policies", 0, "limits", "__proto__"],
    "Expected a limit's name (a letter, then letters, digits or _; 64 at most)"
  ],
  [
    "the policies",
    { goal: "x", tools: [], policies: "defaults" },
    ["policies"],
    'Expected an array of policies, or a function of the defaults, got "defaults"'
  ],
  [
    "a policy",
    { goal: "x", tools: [], policies: [Termination.finalAnswer, { name: "mine" }] },
    ["policies", 1, "decide"],
    "field is required"
  ],
  [
    "what the policies function returned",
    { goal: "x", tools: [], policies: (defaults: ReadonlyArray<unknown>) => [...defaults, 7] },
    ["policies", 12],
    "the function returned an invalid list: Expected a policy (a name and a decide function), got 7"
  ],
  [
    "a policies function that throws",
    {
      goal: "x",
      tools: [],
      policies: (defaults: ReadonlyArray<Termination.Policy>) => Termination.remove(defaults, "no")
    },
    ["policies"],
    `Termination: no policy named "no" in [${Termination.defaults()
      .map((p) => p.name)
      .join(", ")}]`
  ],
  [
    "the concurrency",
    { goal: "x", tools: [], concurrency: 0 },
    ["concurrency"],
    "Expected a value greater than or equal to 1, got 0"
  ],
  [
    "the run id",
    { goal: "x", tools: [], runId: "" },
    ["runId"],
    'Expected 1 to 256 characters of well-formed text, none of them a control character, other than "." and "..", got ""'
  ],
  [
    "a run id with a NUL (no store keeps it)",
    { goal: "x", tools: [], runId: "a\u0000b" },
    ["runId"],
    'Expected 1 to 256 characters of well-formed text, none of them a control character, other than "." and "..", got "a\\u0000b"'
  ],
  [
    "a run id with half a surrogate pair (a store writes U+FFFD: two ids would share one run)",
    { goal: "x", tools: [], runId: "x\ud800" },
    ["runId"],
    'Expected 1 to 256 characters of well-formed text, none of them a control character, other than "." and "..", got "x\\ud800"'
  ],
  [
    "a run id of a dot segment, which a URL cannot carry (review 182)",
    { goal: "x", tools: [], runId: ".." },
    ["runId"],
    'Expected 1 to 256 characters of well-formed text, none of them a control character, other than "." and "..", got ".."'
  ],
  [
    "the model name",
    { goal: "x", tools: [], modelName: " " },
    ["modelName"],
    'Expected a name that is not blank, got " "'
  ],
  [
    "a plan step",
    { goal: "x", tools: [], validation: { plan: [{ id: 7, description: "d", required: true, criteria: [] }] } },
    ["validation", "plan", 0, "id"],
    "Expected string, got 7"
  ],
  [
    "a criterion",
    {
      goal: "x",
      tools: [],
      validation: { plan: [{ id: "a", description: "d", required: true, criteria: [{ description: "c" }] }] }
    },
    ["validation", "plan", 0, "criteria", 0, "observe"],
    "field is required"
  ],
  [
    "a stop hook",
    { goal: "x", tools: [], validation: { stopHooks: [{ name: 99, check: () => Effect.void }] } },
    ["validation", "stopHooks", 0, "name"],
    "Expected string, got 99"
  ],
  [
    "an artifact contract",
    { goal: "x", tools: [], validation: { artifacts: [{ path: "a.pdf", format: "pdf", nonEmpty: true }] } },
    ["validation", "artifacts", 0, "format"],
    'Expected "text" | "markdown" | "json", got "pdf"'
  ],
  [
    "an artifact contract with a schema its format never applies (review 79)",
    {
      goal: "x",
      tools: [],
      validation: { artifacts: [{ path: "a.txt", format: "text", schema: Schema.Struct({}), nonEmpty: true }] }
    },
    ["validation", "artifacts", 0, "schema"],
    "format text takes no schema; only json does"
  ],
  [
    "an artifact root that is no path (review 100)",
    { goal: "x", tools: [], validation: { root: "" } },
    ["validation", "root"],
    `Expected a directory's path, neither empty nor with a NUL byte or a lone surrogate, got ""`
  ]
]

const fieldOf = (path: ReadonlyArray<string | number>): string =>
  path.length === 0
    ? "options"
    : path.map((key, i) => (typeof key === "number" ? `[${key}]` : i === 0 ? key : `.${key}`)).join("")

describe("R12 run options are checked by one Schema", () => {
  for (const [kind, options, path, reason] of invalid) {
    it.effect(`R12 an invalid option is an InvalidRunOptions naming the field: ${kind}`, () =>
      Effect.gen(function* () {
        const error = yield* Effect.flip(Run.validateOptions(options as Run.Options))
        assert.instanceOf(error, Run.InvalidRunOptions)
        assert.strictEqual(error._tag, "InvalidRunOptions")
        assert.deepStrictEqual(error.path, path)
        assert.strictEqual(error.reason, reason)
        assert.strictEqual(error.field, fieldOf(path))
        assert.strictEqual(error.message, `invalid run options: ${fieldOf(path)}: ${reason}`)
      })
    )
  }

  it.effect("R12 valid options, every group set, pass the check", () =>
    Run.validateOptions({
      goal: "x",
      tools: [echo],
      limits: { maxIterations: 3, maxTokens: 1000, maxCostUsd: 0.5, maxObservationChars: 100 },
      time: { run: "1 minute", step: 5000, attempt: "10 seconds", approval: "1 hour", stopGrace: "1 second" },
      recovery: { maxRecoveries: 0, correctionBudget: 0, fallbackModels: [fallback("backup")] },
      policies: (defaults) => Termination.remove(defaults, "loop_detected"),
      validation: { plan: [{ id: "a", description: "d", required: true, criteria: [Criterion.toolSucceeded("echo")] }] }
    })
  )

  it.effect(
    "R12 Run.run, Run.runOrFail and Run.start report an invalid option the same way, without asking the model",
    () =>
      Effect.gen(function* () {
        const model = recordingModel()
        const options: Run.Options<Tool.Any<never>> = { goal: "x", tools: [echo], limits: { maxIterations: 0 } }
        const error = yield* Effect.flip(Run.validateOptions(options))
        const result = yield* Run.run(options).pipe(Effect.provide(model.layer))
        assert.strictEqual(result.status, "failed")
        assert.strictEqual(result.stopReason, "internal_error")
        assert.strictEqual(result.detail, error.message)
        assert.strictEqual(
          result.detail,
          "invalid run options: limits.maxIterations: Expected a value greater than or equal to 1, got 0"
        )
        const tags = result.timeline.map((e) => e._tag)
        assert.strictEqual(tags[0], "run.started")
        assert.strictEqual(tags.at(-1), "run.finished")
        assert.notInclude(tags, "model.requested")
        assert.notInclude(tags, "tool.started")
        const decided = result.timeline.find((e) => e._tag === "termination.decided")
        assert.isTrue(decided?._tag === "termination.decided" && decided.policy === "runtime")
        assert.isTrue(decided?._tag === "termination.decided" && decided.detail === error.message)
        assertRoundTrips(result)

        const stopped = yield* Effect.flip(Run.runOrFail(options).pipe(Effect.provide(model.layer)))
        assert.instanceOf(stopped, RunResult.RunStopped)
        assert.strictEqual(stopped.result.detail, error.message)

        const started = yield* Effect.scoped(
          Effect.flatMap(Run.start(options), (handle) => handle.result).pipe(Effect.provide(model.layer))
        )
        assert.strictEqual(started.stopReason, "internal_error")
        assert.strictEqual(started.detail, error.message)
        assert.lengthOf(model.requests, 0)
      })
  )

  it.effect("R12 options refused for another field keep the run id they give: the result is found under it", () =>
    Effect.gen(function* () {
      const model = recordingModel()
      const result = yield* Run.run({ goal: "x", tools: [], runId: "order-17", limits: { maxIterations: 0 } }).pipe(
        Effect.provide(model.layer)
      )
      assert.deepStrictEqual([result.runId, result.stopReason], ["order-17", "internal_error"])
      assert.isTrue(result.timeline.every((e) => e.runId === "order-17"))
      // A run id that is none itself is replaced by a fresh one.
      const bad = yield* Run.run({ goal: "x", tools: [], runId: "" }).pipe(Effect.provide(model.layer))
      assert.notStrictEqual(bad.runId, "")
      assert.strictEqual(bad.stopReason, "internal_error")
      assert.lengthOf(model.requests, 0)
    })
  )

  it.effect("R9 R12 options that cannot start a run write nothing to the journal: the id stays free", () =>
    Effect.gen(function* () {
      const model = recordingModel()
      const refused = yield* Run.run({ goal: "x", tools: [], runId: "r2", limits: { maxIterations: 0 } }).pipe(
        Effect.provide(model.layer)
      )
      assert.deepStrictEqual([refused.runId, refused.stopReason], ["r2", "internal_error"])
      const journal = yield* Journal.Journal
      assert.isTrue(Option.isNone(yield* journal.read("r2")))
      // The corrected start under the same id runs, and is the one recorded.
      const fixed = yield* Run.run({ goal: "x", tools: [], runId: "r2" }).pipe(Effect.provide(model.layer))
      assert.deepStrictEqual([fixed.runId, fixed.stopReason], ["r2", "goal_reached"])
      const stored = yield* journal.read("r2")
      assert.isTrue(Option.isSome(stored) && Option.isSome(stored.value.result))
    }).pipe(Effect.provide(Journal.layerMemory))
  )

  it.effect("R12 options that cannot be read name the field that throws", () =>
    Effect.gen(function* () {
      const throwing = (path: ReadonlyArray<string>) => {
        const boom = {
          get() {
            throw new Error("boom")
          }
        }
        const limits = path[0] === "limits" ? Object.defineProperty({}, path[1] ?? "", boom) : {}
        const options = { goal: "x", tools: [], limits }
        return path[0] === "limits" ? options : Object.defineProperty(options, path[0] ?? "", boom)
      }
      for (const path of [["goal"], ["limits", "maxIterations"]]) {
        const error = yield* Effect.flip(Run.validateOptions(throwing(path) as unknown as Run.Options))
        assert.deepStrictEqual(error.path, path)
        assert.strictEqual(error.reason, "cannot be read (Error)")
      }
    })
  )

  it.effect("R12 each option is read once: a getter that changes after the check cannot reach the run", () =>
    Effect.gen(function* () {
      const model = recordingModel()
      let reads = 0
      const limits = {
        get maxIterations() {
          reads++
          return reads === 1 ? 1 : 0
        }
      }
      const result = yield* Run.run({ goal: "x", tools: [echo], limits }).pipe(Effect.provide(model.layer))
      assert.strictEqual(result.status, "completed")
      assert.strictEqual(reads, 1)
    })
  )
})

describe("R12 tools are read once", () => {
  it("R12 Tool.make makes a frozen tool, which a run can keep as it is", () => {
    assert.isTrue(Object.isFrozen(echo))
    assert.isTrue(Object.isFrozen(echo.metadata))
    assert.isTrue(Object.isFrozen(echo.metadata.pathFields))
  })

  it.effect("R12 a tool built by hand is copied when checked: a getter that changes later cannot reach the run", () =>
    Effect.gen(function* () {
      const calls: Array<string> = []
      let reads = 0
      const answer = (name: string) => (_input: never) =>
        Effect.sync(() => {
          calls.push(name)
          return name
        })
      const checked = answer("checked")
      const swapped = answer("swapped")
      const tool: Tool.Any<never> = {
        ...echo,
        get handler() {
          reads++
          return reads === 1 ? checked : swapped
        }
      }
      const result = yield* Run.run({ goal: "x", tools: [tool] }).pipe(
        Effect.provide(
          Layer.mergeAll(
            ScriptedModel.layer([ScriptedModel.toolCall("echo", { text: "a" }), ScriptedModel.finalAnswer("done")]),
            NodeServices.layer
          )
        )
      )
      assert.strictEqual(result.status, "completed")
      assert.deepStrictEqual(calls, ["checked"])
      assert.strictEqual(reads, 1)
    })
  )
})

describe("R3.7 a tool's definition is made once, by Tool.make", () => {
  it.effect("R3.7 every run sends the definition Tool.make made, the same object each time", () =>
    Effect.gen(function* () {
      const model = recordingModel()
      const definition = echo.definition
      assert.deepStrictEqual(definition, {
        name: "echo",
        description: "Echo the text back",
        parameters: {
          type: "object",
          properties: { text: { type: "string" } },
          required: ["text"],
          additionalProperties: true
        },
        strict: definition.strict
      })
      for (let i = 0; i < 2; i++) yield* Run.run({ goal: "x", tools: [echo] }).pipe(Effect.provide(model.layer))
      assert.lengthOf(model.requests, 2)
      for (const request of model.requests) assert.strictEqual(request.tools[0], definition)
    })
  )

  it("R3.7 a tool's input schema is compiled once, when the tool is made", () => {
    const tool = Tool.make({
      name: "n",
      description: "d",
      input: Schema.Struct({ n: Schema.Int }),
      output: Schema.Int,
      handler: ({ n }) => Effect.succeed(n)
    })
    assert.strictEqual(tool.codec.decode({ n: 1 })._tag, "Success")
    assert.strictEqual(tool.codec.decode({ n: 1.5 })._tag, "Failure")
    assert.isFalse(tool.codec.sensitiveInput)
  })
})

describe("R4.2 run.started records the limits a run resolved to", () => {
  const limitsOf = (options: Omit<Run.Options<typeof echo>, "goal" | "tools">) =>
    Effect.map(Run.run({ goal: "x", tools: [echo], ...options }), (result) => {
      const started = result.timeline[0]
      return started?._tag === "run.started" ? started.limits : undefined
    }).pipe(Effect.provide(ScriptedModel.layer([ScriptedModel.finalAnswer("done")])))

  it.effect("R4.2 a run that sets no limit records what a run that sets each to its default records", () =>
    Effect.gen(function* () {
      const none = yield* limitsOf({})
      const given = yield* limitsOf({
        limits: { ...Termination.defaultLimits, maxArgumentChars: none?.maxArgumentChars },
        time: { run: "10 minutes", stopGrace: "5 seconds" },
        recovery: { maxRecoveries: none?.maxRecoveries, correctionBudget: 3 },
        concurrency: 1
      })
      assert.deepStrictEqual(given, none)
      assert.strictEqual(none?.runTimeoutMillis, 600_000)
      assert.strictEqual(none?.maxIterations, Termination.defaultLimits.maxIterations)
    })
  )

  it.effect("R2.2 a policy of the user's that declares its limits: they are recorded, and enforce a limit given", () =>
    Effect.gen(function* () {
      const mine = Termination.make(
        "my_iterations",
        ({ counters }) =>
          counters.iterations >= 5 ? Termination.stop("max_iterations", "mine") : Termination.continue_,
        { maxIterations: 5, maxRefunds: 2 }
      )
      const limits = yield* limitsOf({
        limits: { maxIterations: 5 },
        policies: (defaults) => Termination.replace(defaults, "max_iterations", mine)
      })
      assert.strictEqual(limits?.maxIterations, 5)
      assert.strictEqual(limits?.maxRefunds, 2)
    })
  )
})
