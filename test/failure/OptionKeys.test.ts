/**
 * R12 (review 173): a constructor refuses an option it does not know, naming it and the option
 * it likely misspells. Let go, a misspelt option asked for something (an approval, a limit to
 * some tools, a confinement) that was silently not done.
 */
import { NodeServices } from "@effect/platform-node"
import { assert, describe, it } from "@effect/vitest"
import { Cause, Effect, Exit, Layer, Schema } from "effect"
import { Tool as AiTool, Toolkit } from "effect/ai"
import { CircuitBreaker } from "effect/persistence"
import * as Abortable from "../../src/cancellation/Abortable.ts"
import * as Subprocess from "../../src/cancellation/Subprocess.ts"
import * as DurableRun from "../../src/durable/DurableRun.ts"
import * as OptionKeys from "../../src/failure/OptionKeys.ts"
import * as Journal from "../../src/journal/Journal.ts"
import * as JournalApprovals from "../../src/journal/JournalApprovals.ts"
import * as JournalPg from "../../src/journal/pg/JournalPg.ts"
import * as LiveView from "../../src/observability/LiveView.ts"
import * as Recorder from "../../src/observability/Recorder.ts"
import * as NodeTransport from "../../src/providers/node/NodeTransport.ts"
import * as Breakers from "../../src/recovery/Breakers.ts"
import * as Recovery from "../../src/recovery/Recovery.ts"
import * as AiTools from "../../src/tools/AiTools.ts"
import * as FileTools from "../../src/tools/FileTools.ts"
import * as Permission from "../../src/tools/Permission.ts"
import * as Tool from "../../src/tools/Tool.ts"
import * as Validation from "../../src/validation/Validation.ts"

/** Options as a caller without types (or with a non-literal object) passes them. */
const untyped = <T>(options: object): T => options as T

const pay = {
  name: "pay",
  description: "pays",
  input: Schema.Struct({ amount: Schema.Number }),
  output: Schema.String,
  sideEffect: "external" as const,
  handler: () => Effect.succeed("paid")
}

/** The defect a layer or an effect died with, as its message. */
const diedWith = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.map(Effect.exit(effect), (exit) => {
    const defect = Exit.isFailure(exit) ? Cause.squash(exit.cause) : undefined
    assert.instanceOf(defect, RangeError)
    return defect instanceof RangeError ? defect.message : ""
  })

describe("R12 an option a constructor does not know is refused, named (review 173)", () => {
  it("OptionKeys.unknownOption names the key, and the option it likely misspells", () => {
    const known: OptionKeys.Known<{ needsApproval?: boolean; allowTools?: ReadonlyArray<string> }> = {
      needsApproval: true,
      allowTools: true
    }
    assert.strictEqual(OptionKeys.unknownOption({ allowTools: [] }, known), undefined)
    assert.strictEqual(OptionKeys.unknownOption(undefined, known), undefined)
    assert.strictEqual(
      OptionKeys.unknownOption({ needApproval: true }, known),
      '"needApproval" is no option (did you mean "needsApproval"?)'
    )
    assert.strictEqual(
      OptionKeys.unknownOption({ allowedTools: [] }, known),
      '"allowedTools" is no option (did you mean "allowTools"?)'
    )
    assert.strictEqual(
      OptionKeys.unknownOption({ colour: "red" }, known),
      '"colour" is no option (the options: needsApproval, allowTools)'
    )
    assert.strictEqual(
      OptionKeys.unknownOption(JSON.parse('{"__proto__": {"x": 1}}'), known),
      '"__proto__" is no option (the options: needsApproval, allowTools)'
    )
    const hostile = new Proxy(
      {},
      {
        ownKeys: () => {
          throw new Error("no keys")
        }
      }
    )
    assert.strictEqual(OptionKeys.unknownOption(hostile, known), "its keys cannot be read")
  })

  it("Tool.make: a misspelt needsApproval is an InvalidToolDefinition, not a payment without approval", () => {
    const error = (() => {
      try {
        Tool.make(untyped<Tool.Options<{ amount: number }, string, never>>({ ...pay, needApproval: true }))
      } catch (e) {
        return e
      }
    })()
    assert.instanceOf(error, Tool.InvalidToolDefinition)
    assert.include(
      String((error as Tool.InvalidToolDefinition).message),
      '"needApproval" is no option (did you mean "needsApproval"?)'
    )
    assert.strictEqual(Tool.make({ ...pay, needsApproval: true }).metadata.needsApproval, true)
    // A made tool spread into a new definition would lose its approval: said so, not let go.
    const approved = Tool.make({ ...pay, needsApproval: true })
    assert.throws(
      () => Tool.make(untyped<Tool.Options<{ amount: number }, string, never>>({ ...approved, name: "pay_again" })),
      /a made tool is no definition/
    )
    const { metadata, name: _name, description, input, output, handler } = approved
    assert.isTrue(
      Tool.make({ ...metadata, name: "pay_again", description, input, output, handler }).metadata.needsApproval
    )
  })

  it.effect("Permission.make: allowedTools and root are refused, naming the option meant", () =>
    Effect.gen(function* () {
      const allowed = yield* diedWith(Permission.make(untyped<Permission.Options>({ allowedTools: ["read_file"] })))
      assert.include(allowed, '"allowedTools" is no option (did you mean "allowTools"?)')
      const root = yield* diedWith(Permission.make(untyped<Permission.Options>({ root: ["/tmp"] })))
      assert.include(root, '"root" is no option (did you mean "roots"?)')
    }).pipe(Effect.provide(NodeServices.layer))
  )

  it.effect("FileTools.make: an option it does not know is refused", () =>
    Effect.gen(function* () {
      const message = yield* diedWith(FileTools.make(untyped<FileTools.Options>({ root: "/tmp", maxReadByte: 10 })))
      assert.include(message, '"maxReadByte" is no option (did you mean "maxReadBytes"?)')
    }).pipe(Effect.provide(NodeServices.layer))
  )

  it("Recovery.backoff: an option it does not know, or a jitter that is no boolean, is a RangeError", () => {
    assert.throws(() => Recovery.backoff(untyped({ retry: 5 })), /"retry" is no option \(did you mean "retries"\?\)/)
    assert.throws(() => Recovery.backoff(untyped({ jitter: "no" })), /jitter must be a boolean/)
  })

  it.effect("AiTools: options for a tool the toolkit lacks, or an option fromTool does not know, are refused", () => {
    const GetWeather = AiTool.make("get_weather", {
      description: "The weather",
      parameters: Schema.Struct({ city: Schema.String }),
      success: Schema.Number
    })
    const kit = Toolkit.make(GetWeather)
    const handlers = kit.toLayer({ get_weather: () => Effect.succeed(21) })
    return Effect.gen(function* () {
      const stray = yield* Effect.flip(
        Effect.catchDefect(AiTools.fromToolkit(kit, untyped({ get_wether: { maxRetries: 0 } })), Effect.fail)
      )
      assert.instanceOf(stray, Tool.InvalidToolDefinition)
      assert.include(String(stray), "the toolkit has no tool of this name (its tools: get_weather)")
      // The options of a tool it has are taken.
      const [made] = yield* AiTools.fromToolkit(kit, { get_weather: { maxRetries: 0 } })
      assert.strictEqual(made?.metadata.maxRetries, 0)
      assert.throws(
        () => AiTools.fromTool(GetWeather, untyped<never>({ handler: () => Effect.succeed(1), needsApproval: true })),
        /"needsApproval" is no option/
      )
    }).pipe(Effect.provide(handlers))
  })

  it.effect("Breakers: a policy with no trip policy, a bad open duration, an unknown option: refused when built", () =>
    Effect.gen(function* () {
      const build = (options: unknown) =>
        diedWith(Layer.build(Breakers.layerMemory(untyped(options as object))).pipe(Effect.scoped))
      const trip = CircuitBreaker.consecutive(3)
      assert.include(
        yield* build({ provider: { openDuration: "1 minute" } }),
        "provider: tripPolicy must be a trip policy"
      )
      assert.include(
        yield* build({ provider: { tripPolicy: trip, openDuration: Number.NaN } }),
        "provider: openDuration must be a duration >= 0 or a Schedule, got NaN"
      )
      assert.include(yield* build({ tool: { tripPolicy: trip, openDuration: -1 } }), "tool: openDuration must be")
      assert.include(yield* build({ tools: 5 }), "tools must be an object of policies by tool name")
      assert.include(yield* build({ providers: false }), '"providers" is no option (did you mean "provider"?)')
      assert.include(
        yield* build({ tools: { pay: { tripPolicy: trip, openDuration: "1 minute", openFor: 1 } } }),
        'tools["pay"]: "openFor" is no option'
      )
      // What effect's CircuitBreaker takes still builds: a policy, false, an infinite open duration.
      const built = yield* Effect.exit(
        Layer.build(
          Breakers.layerMemory({ provider: { tripPolicy: trip, openDuration: "Infinity" }, tool: false })
        ).pipe(Effect.scoped)
      )
      assert.isTrue(Exit.isSuccess(built))
    })
  )

  it.effect(
    "and so do the artifact contract, the journal's gate, the recorder, the live view and the HTTP transport",
    () =>
      Effect.gen(function* () {
        assert.throws(
          () => Validation.artifact("a.json", untyped({ nonempty: false })),
          /"nonempty" is no option \(did you mean "nonEmpty"\?\)/
        )
        assert.throws(
          () => Validation.artifact("a.json", untyped({ format: "yaml" })),
          /format must be one of text, markdown, json/
        )
        assert.throws(() => Validation.artifact("a.json", untyped({ nonEmpty: "no" })), /nonEmpty must be a boolean/)
        assert.throws(
          () => Validation.artifact("a.json", untyped({ schema: { fields: {} } })),
          /schema must be a Schema/
        )
        const journal = yield* Journal.Journal
        assert.throws(
          () => JournalApprovals.make(journal, untyped({ pollIntervall: "1 second" })),
          /"pollIntervall" is no option/
        )
        const recorder = yield* Effect.flip(
          Layer.build(Recorder.layer(untyped({ directory: "/tmp", contents: false }))).pipe(Effect.scoped)
        )
        assert.include(recorder.message, '"contents" is no option (did you mean "content"?)')
        const view = yield* Effect.flip(LiveView.observer(untyped({ refersh: 500 })))
        assert.include(view.message, '"refersh" is no option (did you mean "refresh"?)')
        const transport = yield* Effect.flip(NodeTransport.make(untyped({ maxSocket: 4 })).pipe(Effect.scoped))
        assert.include(transport.message, '"maxSocket" is no option (did you mean "maxSockets"?)')
      }).pipe(Effect.provide(Layer.merge(Journal.layerMemory, NodeServices.layer)))
  )

  it.effect("and so do Abortable.handler, Subprocess.tool, and Subprocess.run's options and spec", () =>
    Effect.gen(function* () {
      assert.throws(() => Abortable.handler(async () => 1, untyped({ graceMillis: 10 })), /"graceMillis" is no option/)
      assert.throws(
        () =>
          Subprocess.tool(
            untyped<Subprocess.ToolOptions<{ n: number }, string, never>>({
              name: "count",
              description: "counts",
              input: Schema.Struct({ n: Schema.Number }),
              output: Schema.String,
              command: () => ({ command: "true" }),
              parse: () => "ok",
              needApproval: true
            })
          ),
        /"needApproval" is no option \(did you mean "needsApproval"\?\)/
      )
      const options = yield* Effect.flip(Subprocess.run({ command: "true" }, untyped({ graceMilis: 10 })))
      assert.include(options.hint, '"graceMilis" is no option (did you mean "graceMillis"?)')
      const spec = yield* Effect.flip(Subprocess.run(untyped({ command: "ls", arg: ["-l"] })))
      assert.include(spec.hint, 'the spec: "arg" is no option (did you mean "args"?)')
    }).pipe(Effect.provide(NodeServices.layer))
  )

  it.effect("and so do the journal's layers: SQLite, any SqlClient, PostgreSQL (before any connection)", () =>
    Effect.gen(function* () {
      const refused = (layer: Layer.Layer<Journal.Journal, unknown>) =>
        Effect.map(Effect.flip(Layer.build(layer).pipe(Effect.scoped)), (error) => String(error))
      assert.include(
        yield* refused(Journal.layerSqlite(untyped({ filename: "/tmp/never-opened.db", sync: "FULL" }))),
        '"sync" is no option'
      )
      assert.include(
        yield* refused(JournalPg.layer(untyped({ url: "postgres://nobody@127.0.0.1:1/x", maxConnection: 2 }))),
        '"maxConnection" is no option (did you mean "maxConnections"?)'
      )
    })
  )

  it.effect("and so do the durable engines' layers, naming their own options (review 174)", () =>
    Effect.gen(function* () {
      const refused = <A, E>(layer: Layer.Layer<A, E>) =>
        Effect.map(Effect.flip(Layer.build(layer).pipe(Effect.scoped)), (error) => String(error))
      const embedded = yield* refused(
        DurableRun.layerEmbedded(untyped({ filename: "/tmp/never.db", clientOnyl: true }))
      )
      assert.include(embedded, '"clientOnyl" is no option (did you mean "clientOnly"?)')
      // Inside shardingConfig too (review 176): a dead runner's runs would move at the default time.
      const sharding = yield* refused(
        DurableRun.layerEmbedded({
          filename: "/tmp/never.db",
          shardingConfig: untyped({ shardLockExpirations: "5 seconds" })
        })
      )
      assert.include(
        sharding,
        'shardingConfig: "shardLockExpirations" is no option (did you mean "shardLockExpiration"?)'
      )
      // Refused before any transport is made: a misspelt clientOnly would make a client a host.
      const made: Array<boolean> = []
      const socket = {
        layer: (options: { readonly clientOnly: boolean }) => {
          made.push(options.clientOnly)
          return Layer.empty
        }
      }
      const cluster = yield* refused(
        DurableRun.layerCluster(
          untyped<DurableRun.ClusterOptions<never>>({
            sql: Journal.layerSqliteWithClient({ filename: "/tmp/never.db" }),
            socket,
            clientOnyl: true
          })
        )
      )
      assert.include(cluster, '"clientOnyl" is no option (did you mean "clientOnly"?)')
      assert.deepStrictEqual(made, [])
    })
  )
})
