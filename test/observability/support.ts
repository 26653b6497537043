/**
 * A recorded run with something of everything the viewer draws: a model attempt that is
 * rate limited and its backoff, a tool call that fails once and is retried, a call that
 * waits for approval (approved), the step and attempt deadlines, and a stop by a budget
 * (`max_iterations`). Recorded with the real `Recorder` on Node's file system.
 */
import { NodeServices } from "@effect/platform-node"
import { Effect, FileSystem, Schema } from "effect"
import * as Recorder from "../../src/observability/Recorder.ts"
import * as Run from "../../src/run/Run.ts"
import type * as RunResult from "../../src/run/RunResult.ts"
import * as FaultyModel from "../../src/testing/FaultyModel.ts"
import * as FaultyTools from "../../src/testing/FaultyTools.ts"
import * as ScriptedModel from "../../src/testing/ScriptedModel.ts"
import * as Tool from "../../src/tools/Tool.ts"

export const deploy = Tool.make({
  name: "deploy",
  description: "Deploys the build",
  input: Schema.Struct({ target: Schema.String }),
  output: Schema.String,
  sideEffect: "external",
  needsApproval: true,
  handler: ({ target }) => Effect.succeed(`deployed to ${target}`)
})

export const script = [
  FaultyModel.rateLimited(),
  FaultyModel.respond(ScriptedModel.toolCalls(["fetch", { page: 1 }], ["deploy", { target: "staging" }])),
  FaultyModel.respond(ScriptedModel.toolCall("fetch", { page: 2 })),
  FaultyModel.respond(ScriptedModel.toolCall("fetch", { page: 3 }))
]

/** The run's options, on a recorder into `directory`. */
export const recordedRun = (directory: string, options: { readonly content?: boolean } = {}) =>
  Effect.gen(function* () {
    const fetch = FaultyTools.flaky({ name: "fetch", failures: 1 })
    const handle = yield* Run.start({
      goal: "Fetch the pages, then deploy to staging",
      tools: [fetch.tool, deploy],
      limits: { maxIterations: 3, maxTokens: 10_000 },
      time: { run: "1 minute", step: "2 seconds", attempt: "150 millis" }
    })
    // The person approving: each call on the gate is approved, a few milliseconds after it came.
    yield* handle.pendingApprovals.pipe(
      Effect.flatMap((pending) =>
        Effect.forEach(pending, (request) => Effect.ignore(handle.approve(request.callId, { by: "ops" })))
      ),
      Effect.delay("40 millis"),
      Effect.forever,
      Effect.forkScoped
    )
    const result: RunResult.RunResult = yield* handle.result
    const recorder = yield* Recorder.Recorder
    return { result, file: recorder.path(result.runId) }
  }).pipe(
    Effect.scoped,
    Effect.provide(FaultyModel.layer(FaultyModel.make(script))),
    Effect.provide(Recorder.layer({ directory, content: options.content }))
  )

/** A temporary directory for the test, removed after it. */
export const tempDirectory = Effect.flatMap(FileSystem.FileSystem, (fs) =>
  fs.makeTempDirectoryScoped({ prefix: "observability-" })
)

export const nodeLayer = NodeServices.layer
