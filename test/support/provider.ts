/**
 * Helpers shared by the provider tests: a request with a deadline, a client of a
 * scripted `FakeOpenAiServer`, and the failure an exit carries.
 */
import * as Http from "node:http"
import type { AddressInfo } from "node:net"
import { Cause, Clock, Effect, Exit, Redacted } from "effect"
import * as Failure from "../../src/failure/Failure.ts"
import type * as Model from "../../src/model/Model.ts"
import * as OpenAiCompatible from "../../src/providers/OpenAiCompatible.ts"
import * as FakeOpenAiServer from "../../src/testing/FakeOpenAiServer.ts"

export const KEY = "sk-test-SECRET-7f3a9c1e5b"
export const apiKey = Redacted.make(KEY)

export const request = (
  options: {
    readonly deadlineIn?: number
    readonly deadlineLayer?: Model.Request["deadlineLayer"]
    readonly messages?: ReadonlyArray<Model.Message>
    readonly tools?: ReadonlyArray<Model.ToolDefinition>
  } = {}
) =>
  Effect.map(
    Clock.currentTimeMillis,
    (now): Model.Request => ({
      runId: "run-1",
      iteration: 3,
      messages: options.messages ?? [{ _tag: "user", content: "hi" }],
      tools: options.tools ?? [],
      deadlineAt: now + (options.deadlineIn ?? 5_000),
      deadlineLayer: options.deadlineLayer
    })
  )

/** A server playing `script` and a client of it; both live in the test's scope. */
export const setup = Effect.fnUntraced(function* (
  script: FakeOpenAiServer.Script,
  options: Partial<OpenAiCompatible.Options> = {}
) {
  const server = yield* FakeOpenAiServer.make(script)
  const model = yield* OpenAiCompatible.make({ baseUrl: server.url, model: "fake-model", apiKey, ...options })
  return { server, model }
})

/** One `generate` against one scripted step: its exit, time taken and the requests the server got. */
export const once = Effect.fnUntraced(function* (
  step: FakeOpenAiServer.Step,
  options: Partial<OpenAiCompatible.Options> = {},
  deadlineIn?: number,
  tools: ReadonlyArray<Model.ToolDefinition> = []
) {
  const { server, model } = yield* setup([step], options)
  const start = yield* Clock.currentTimeMillis
  const exit = yield* Effect.exit(
    model.generate(yield* request({ ...(deadlineIn === undefined ? {} : { deadlineIn }), tools }))
  )
  const elapsed = (yield* Clock.currentTimeMillis) - start
  return { exit, elapsed, requests: yield* server.requests, server }
})

export const failureOf = (exit: Exit.Exit<unknown, unknown>): Failure.Failure => {
  if (Exit.isSuccess(exit)) throw new Error(`expected a failure, got ${JSON.stringify(exit.value).slice(0, 300)}`)
  const failure = Cause.squash(exit.cause)
  if (!Failure.isFailure(failure)) throw new Error(`expected a Failure, got ${String(failure)}`)
  return failure
}

export const classOf = (failure: Failure.Failure) => [failure._tag, failure.category, failure.code]

/**
 * A raw HTTP server on a free local port, for what `FakeOpenAiServer` does not play (headers
 * alone, a body that never ends); closed, its connections with it, when the scope closes.
 * Gives its base URL (`http://127.0.0.1:<port>/v1`).
 */
export const rawServer = (handle: Http.RequestListener) =>
  Effect.acquireRelease(
    Effect.callback<Http.Server>((resume) => {
      const created = Http.createServer(handle)
      created.listen(0, "127.0.0.1", () => resume(Effect.succeed(created)))
    }),
    (created) =>
      Effect.sync(() => {
        created.closeAllConnections()
        created.close()
      })
  ).pipe(Effect.map((server) => `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`))
