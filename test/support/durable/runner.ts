/**
 * A process of the durable-run suites (R9, R7): a runner of `DurableRun` (embedded on one
 * SQLite file, or one of a cluster on PostgreSQL) or a client-only process, with payment
 * tools whose ledger is a SQLite file of its own. The tests `kill -9` it and start others on
 * the same storage. Run with the pinned node (the suites run it bundled, see
 * ../crash/harness.ts):
 *
 *   node_modules/.bin/node --disable-warning=ExperimentalWarning test/support/durable/runner.ts '<Config as JSON>'
 *
 * Markers, one a line: `ready` (its layers are built: a runner hosts runs now); `started
 * <run>`; `model <run> <iteration>` (the model is asked, here); `paying <run> <call>`,
 * `paid <run> <call>` (the ledger has it; the tool answers `answerMillis` later);
 * `awaiting-approval <run> <call>` (a watched run's call is pending on the journal);
 * `approved <run> <call>`, `cancelling <run>`; `result <json>` for each watched run
 * (see `Result` in config.ts) and `done` once all of them are in. It then goes on hosting
 * until it is killed.
 *
 * `hold` (a marker line) stops the whole process right after that marker (see
 * ../crash/payment.ts), so that nothing more happens before the parent's `kill -9` lands.
 */
import { NodeClusterSocket } from "@effect/platform-node"
import { PgClient } from "@effect/sql-pg"
import { Effect, Layer, Option, Redacted, References } from "effect"
import type { ShardingConfig } from "effect/cluster"
import { DurableRun } from "../../../src/durable/index.ts"
import type * as RunResult from "../../../src/run/RunResult.ts"
import * as ScriptedModel from "../../../src/testing/ScriptedModel.ts"
import * as Ledger from "../crash/ledger.ts"
import { marker, payment } from "../crash/payment.ts"
import type { Config, Result } from "./config.ts"

const config: Config = JSON.parse(process.argv[2] ?? "{}")
const mark = marker(config.hold)

const ledger = Ledger.open(config.ledger)

const millis = { payMillis: config.payMillis ?? 5, answerMillis: config.answerMillis ?? 5 }
const tools = [
  payment("pay", { ledger, mark, reconcile: true, ...millis }),
  payment("transfer", { ledger, mark, reconcile: true, needsApproval: true, ...millis })
]

/** The model: each run's id is its plan (see `planned` in config.ts). */
const model = ScriptedModel.layerFunction((request) => {
  mark("model", request.runId, String(request.iteration))
  const [, kind = "", count = "1"] = /^(pay|approve|expire)(\d*)-/.exec(request.runId) ?? []
  const i = request.iteration
  const invoice = { invoice: `inv-${i}`, amount: 10 * i }
  const answer =
    kind === "pay"
      ? i <= Number(count)
        ? ScriptedModel.toolCall("pay", invoice, `c${i}`)
        : ScriptedModel.finalAnswer(`paid ${count} invoices`)
      : i === 1
        ? ScriptedModel.toolCall("pay", invoice, "c1")
        : i === 2
          ? ScriptedModel.toolCall("transfer", invoice, "c2")
          : ScriptedModel.finalAnswer("paid and transferred")
  return Effect.as(Effect.sleep(config.modelMillis ?? 10), answer)
})

const definitions = { tools, time: { run: "2 minutes", approval: "1 minute" } } as const

// Durations as strings ("4 seconds"), as the engine reads them.
const shardingConfig = (config.shardingConfig ?? {}) as Partial<ShardingConfig.ShardingConfig["Service"]>

const layerOf = (mode: Config["mode"]) => {
  switch (mode._tag) {
    case "embedded":
      if (mode.clientOnly === true) {
        return DurableRun.layerClient.pipe(
          Layer.provideMerge(DurableRun.layerEmbedded({ filename: mode.filename, shardingConfig, clientOnly: true }))
        )
      }
      return DurableRun.layer(definitions).pipe(
        Layer.provideMerge(DurableRun.layerEmbedded({ filename: mode.filename, shardingConfig })),
        Layer.provide(model)
      )
    case "runner":
      return DurableRun.layer(definitions).pipe(
        Layer.provideMerge(
          DurableRun.layerCluster({
            sql: PgClient.layer({ url: Redacted.make(mode.pg) }),
            runnerAddress: { host: "127.0.0.1", port: mode.port },
            shardingConfig,
            // Bundled (see harness.ts): the transport is passed, so the bundle holds it.
            socket: NodeClusterSocket
          })
        ),
        Layer.provide(model)
      )
    case "client":
      return DurableRun.layerClient.pipe(
        Layer.provideMerge(
          DurableRun.layerCluster({
            sql: PgClient.layer({ url: Redacted.make(mode.pg) }),
            clientOnly: true,
            shardingConfig,
            socket: NodeClusterSocket
          })
        )
      )
  }
}

const printResult = (result: RunResult.RunResult) => {
  const printed: Result = {
    runId: result.runId,
    status: result.status,
    stopReason: result.stopReason,
    detail: result.detail,
    pending: result.pendingActions.map((p) => p.callId),
    tags: result.timeline.map((e) => e._tag),
    resumed: result.timeline.flatMap((e) =>
      e._tag === "run.resumed" ? [{ fromSeq: e.fromSeq, inDoubt: e.inDoubt }] : []
    ),
    reconciled: result.timeline.flatMap((e) =>
      e._tag === "tool.reconciled" ? [{ callId: e.callId, verdict: e.verdict }] : []
    ),
    succeeded: result.timeline.flatMap((e) => (e._tag === "tool.succeeded" ? [e.callId] : []))
  }
  mark("result", JSON.stringify(printed))
}

/** Follows the run until its result is in: reports (and approves or cancels) each call it waits on, then prints the result. */
const follow = (runs: DurableRun.Service, runId: string) =>
  Effect.gen(function* () {
    const reported = new Set<string>()
    while (true) {
      // A run another process starts may not be known yet.
      const result = yield* Effect.catchIf(
        runs.poll(runId),
        (e) => e.reason === "not_found",
        () => Effect.succeedNone
      )
      if (Option.isSome(result)) return printResult(result.value)
      for (const request of yield* runs.pending(runId)) {
        if (reported.has(request.callId)) continue
        reported.add(request.callId)
        mark("awaiting-approval", runId, request.callId)
        if (config.approve?.includes(runId)) {
          yield* runs.approve(runId, request.callId, { by: "ops" })
          mark("approved", runId, request.callId)
        }
        if (config.cancel?.includes(runId)) {
          mark("cancelling", runId)
          yield* runs.cancel(runId)
        }
      }
      yield* Effect.sleep(100)
    }
  })

const program = Effect.gen(function* () {
  const runs = yield* DurableRun.DurableRuns
  mark("ready")
  for (const runId of config.start ?? []) {
    const time = runId.startsWith("expire-") ? { approval: "3 seconds" } : undefined
    yield* runs.start({ goal: `run ${runId}`, runId, time })
    mark("started", runId)
  }
  const followed = [...new Set([...(config.watch ?? []), ...(config.approve ?? []), ...(config.cancel ?? [])])]
  yield* Effect.forEach(followed, (runId) => follow(runs, runId), { concurrency: "unbounded", discard: true })
  mark("done")
  return yield* Effect.never
})

Effect.runPromise(
  program.pipe(Effect.provide(layerOf(config.mode)), Effect.provideService(References.MinimumLogLevel, "Warn"))
).then(
  () => process.exit(0),
  (error) => {
    console.error(error)
    process.exit(1)
  }
)
