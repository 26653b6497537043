// The server's layers, chosen from the environment:
//   HOST, PORT            where it listens (default 127.0.0.1:3000; PORT=0 picks a free port)
//   RUNS_DB               the SQLite file of runs and their journal (default runs.db)
//   DATABASE_URL          PostgreSQL instead: the runs on a cluster runner (RUNNER_PORT, default 34431)
//   OPENAI_API_KEY        the OpenAI-compatible provider instead of the scripted demo model
//   MAX_BODY_BYTES        the largest request body taken (default 16 MiB; a larger one is a 413)
import { createServer } from "node:http"
import { NodeHttpServer } from "@effect/platform-node"
import { PgClient } from "@effect/sql-pg"
import { ByteSize, Config, Console, Effect, Layer, Option } from "effect"
import { FetchHttpClient, HttpIncomingMessage, HttpRouter, HttpServer, HttpServerResponse } from "effect/http"
import { HttpApiBuilder, HttpApiMiddleware } from "effect/http-api"
import { DurableRun } from "effect-agent-runtime/durable"
import { JournalPg } from "effect-agent-runtime/journal/pg"
import { OpenAiCompatible } from "effect-agent-runtime/providers"
import { Api } from "./Api.ts"
import { RunsHandlers } from "./Handlers.ts"
import { demoModel, tools } from "./Tools.ts"

const settings = Config.all({
  host: Config.String("HOST").pipe(Config.withDefault("127.0.0.1")),
  port: Config.Int("PORT").pipe(Config.withDefault(3000)),
  runsFile: Config.String("RUNS_DB").pipe(Config.withDefault("runs.db")),
  databaseUrl: Config.option(Config.Redacted("DATABASE_URL")),
  runnerPort: Config.Port("RUNNER_PORT").pipe(Config.withDefault(34431)),
  openAi: Config.option(Config.String("OPENAI_API_KEY")),
  maxBodyBytes: Config.Int("MAX_BODY_BYTES").pipe(Config.withDefault(16 * 1024 * 1024))
})

/** The runs: this server's tools on the engine and journal (one SQLite file, or PostgreSQL). */
const runsLayer = (config: Config.Success<typeof settings>) => {
  const storage = Option.match(config.databaseUrl, {
    onNone: () => DurableRun.layerEmbedded({ filename: config.runsFile }),
    onSome: (url) =>
      DurableRun.layerCluster({
        // What PostgreSQL takes the client must give back: a run's row holds its goal (R9).
        sql: PgClient.layer({ url, maxMessageSize: JournalPg.maxMessageSize }),
        runnerAddress: { host: config.host, port: config.runnerPort }
      })
  })
  const model = Option.isSome(config.openAi)
    ? OpenAiCompatible.layerConfig("openai").pipe(Layer.provide(FetchHttpClient.layer))
    : demoModel
  return DurableRun.layer({ tools }).pipe(Layer.provideMerge(storage), Layer.provide(model))
}

/** The routes of `Api`, `GET /openapi.json`, and 400 problems that name the bad field. */
const routes = HttpApiBuilder.layer(Api, { openapiPath: "/openapi.json" }).pipe(
  Layer.provide(RunsHandlers),
  Layer.provide(HttpApiMiddleware.layerProblemDetails({ includeDetails: true }))
)

/** The longest id segment the router reads (its default, 100, is shorter than a run id may be). */
const maxParamLength = 4096

/** A path segment as the handlers read it; one that is no percent-encoding is kept as it is. */
const decoded = (segment: string): string => {
  try {
    return decodeURIComponent(segment)
  } catch {
    return segment
  }
}

/**
 * The methods each path of `Api` answers, by its shape (ids are opaque segments, never empty).
 * The router answers no `HEAD` for a `GET` route, so none is offered (review 182).
 */
const allowedOn = (parts: ReadonlyArray<string>): string | undefined => {
  if (parts[0] !== "runs" || parts.slice(1).some((part) => part === "")) return undefined
  if (parts.length === 1) return "POST"
  if (parts.length === 2) return "GET"
  if (parts.length === 3)
    return parts[2] === "cancel" ? "POST" : ["events", "approvals", "view"].includes(parts[2] ?? "") ? "GET" : undefined
  return parts.length === 4 && parts[2] === "approvals" ? "POST" : undefined
}

/**
 * What the router finds no route for is answered as the API answers: a path of the API asked
 * with a method it does not take is a 405 naming the ones it does (`Allow`); a run id or call
 * id past the router's longest parameter is what the handlers say of an id no run or call can
 * have (review 138: both were an empty 404): the run not found, the call not waiting. A path
 * that is none of the API's (`/runs/x/approvals/`, a segment more) is a 404 that names no run
 * (review 182: it said an existing run was not found). A path the router cannot decode at all
 * (`%ff`) it still answers with its own 404.
 */
const unrouted = HttpRouter.add("*", "/*", (request) => {
  const url = new URL(request.url, "http://server")
  const parts = url.pathname.split("/").slice(1)
  const allow = allowedOn(parts)
  if (allow === undefined) {
    return Effect.succeed(
      HttpServerResponse.jsonUnsafe({ _tag: "NoSuchRoute", path: url.pathname.slice(0, 256) }, { status: 404 })
    )
  }
  if (!allow.split(", ").includes(request.method)) {
    return Effect.succeed(HttpServerResponse.empty({ status: 405, headers: { allow } }))
  }
  // Only a segment past the router's longest parameter gets here: the run id's, or the call id's.
  const [, runId = "", , callId = ""] = parts.map(decoded)
  const runNotFound = HttpServerResponse.jsonUnsafe(
    { _tag: "RunNotFound", runId: runId.slice(0, 256) },
    { status: 404 }
  )
  if ((parts[1] ?? "").length > maxParamLength) return Effect.succeed(runNotFound)
  // A call id no call can have, of a run that is there (the decide handler's answers): the call is not waiting.
  return Effect.flatMap(DurableRun.DurableRuns, (runs) => Effect.result(runs.events(runId))).pipe(
    Effect.map((known) =>
      known._tag === "Success"
        ? HttpServerResponse.jsonUnsafe({ _tag: "NotWaiting", runId, callId: callId.slice(0, 256) }, { status: 409 })
        : known.failure.reason === "not_found"
          ? runNotFound
          : HttpServerResponse.jsonUnsafe(
              { _tag: "StoreUnavailable", detail: known.failure.detail, runId },
              { status: 503 }
            )
    )
  )
})

/** Says where it listens, on stdout (a test started on port 0 reads it there). */
const announce = Layer.effectDiscard(HttpServer.addressFormattedWith((url) => Console.log(`listening on ${url}`)))

export const ServerLive = Layer.unwrap(
  Effect.gen(function* () {
    const config = yield* settings
    return HttpRouter.serve(Layer.merge(routes, unrouted), {
      disableLogger: true,
      disableListenLog: true,
      // Any id reaches the handlers (a run id may be 256 characters); one past the longest is answered by `unrouted`.
      routerConfig: { maxParamLength }
    }).pipe(
      Layer.merge(announce),
      // A body over MAX_BODY_BYTES (default 16 MiB) is refused before it is read whole.
      Layer.provide(Layer.succeed(HttpIncomingMessage.MaxBodySize)(ByteSize.bytes(config.maxBodyBytes))),
      Layer.provide(NodeHttpServer.layer(createServer, { host: config.host, port: config.port })),
      Layer.provide(runsLayer(config))
    )
  })
)
