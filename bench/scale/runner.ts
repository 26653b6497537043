/**
 * A runner process of the scale benchmark (started by `cluster.ts` with `fork`, never by
 * hand): `DurableRun.layer` on `layerCluster` over PostgreSQL at `argv[2]`, listening on
 * 127.0.0.1:`argv[3]`. It says `ready` over IPC once it is built, answers `heap` with its
 * settled heap (it runs with --expose-gc), its resident run workflows and its CPU time, and exits when told `stop` or when its parent
 * goes.
 */
import { PgClient } from "@effect/sql-pg"
import { Effect, Layer, Redacted } from "effect"
import { DurableRun } from "../../src/durable/index.ts"
import { settledHeap } from "../heap.ts"
import { cpuHere, residentHere } from "./measure.ts"
import { definitions, model } from "./workload.ts"

/** What the parent asks and what this runner answers. */
export type Request = { readonly _tag: "heap" } | { readonly _tag: "stop" }
export type Reply =
  | { readonly _tag: "ready" }
  | { readonly _tag: "heap"; readonly bytes: number; readonly resident: number; readonly cpuMicros: number }

const [, , url = "", port = "0"] = process.argv
const send = (reply: Reply) => process.send?.(reply)

const runner = DurableRun.layer(definitions).pipe(
  Layer.provideMerge(
    DurableRun.layerCluster({
      sql: PgClient.layer({ url: Redacted.make(url) }),
      runnerAddress: { host: "127.0.0.1", port: Number(port) }
    })
  ),
  Layer.provide(model)
)

const serve = Effect.callback<void>((resume) => {
  process.on("message", (request: Request) => {
    if (request._tag === "stop") resume(Effect.void)
    else
      Effect.runPromise(Effect.all({ bytes: settledHeap, resident: residentHere, cpuMicros: cpuHere })).then((heap) =>
        send({ _tag: "heap", ...heap })
      )
  })
  process.once("disconnect", () => resume(Effect.void))
})

Effect.runPromise(
  Effect.scoped(
    Effect.gen(function* () {
      yield* Layer.build(runner)
      send({ _tag: "ready" })
      yield* serve
    })
  )
).then(
  () => process.exit(0),
  (error) => {
    console.error(error)
    process.exit(1)
  }
)
