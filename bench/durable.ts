/**
 * Durable runs benchmark: `npm run bench:durable`, about a minute.
 *
 * - Per step: a run of K=200 steps (a model response with one idempotent tool call, then
 *   its result) without a journal, on the memory journal, on SQLite (WAL, NORMAL) and on
 *   PostgreSQL over loopback; the median per step of whole runs, and what each store
 *   adds to the run without a journal. Two commits per step: the model response, and the
 *   end of the iteration. The cases take turns, one run each per round, after warm-up
 *   rounds (`BENCH_ROUNDS`, default 12; `BENCH_WARM_UP`, default 3).
 * - Resume: a 200-step run cut off before its last commit, resumed from SQLite (read,
 *   decode and check, fold, then one more model call that answers at once).
 * - Journal bytes per step: the stored events' JSON over the steps.
 *
 * Prints figures beside issue 13's targets (PASS or MISS); asserts nothing and exits 0.
 */
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { Context, Effect, Layer, Schema } from "effect"
import { Reactivity } from "effect/reactivity"
import { SqlClient } from "effect/sql"
import * as SqliteClient from "../src/journal/internal/SqliteClient.ts"
import * as Journal from "../src/journal/Journal.ts"
import type * as JournalError from "../src/journal/JournalError.ts"
import { JournalPg } from "../src/journal/pg/index.ts"
import * as Run from "../src/run/Run.ts"
import * as FaultyJournal from "../src/testing/FaultyJournal.ts"
import * as ScriptedModel from "../src/testing/ScriptedModel.ts"
import * as Tool from "../src/tools/Tool.ts"
import { postgres } from "../test/support/postgres.ts"
import { median } from "./stats.ts"

const K = Number(process.env.BENCH_STEPS ?? 200)
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 12)
const WARM_UP = Number(process.env.BENCH_WARM_UP ?? 3)

const step = Tool.make({
  name: "step",
  description: "Returns its step number.",
  input: Schema.Struct({ n: Schema.Number }),
  output: Schema.Struct({ n: Schema.Number }),
  sideEffect: "read",
  idempotent: true,
  handler: ({ n }) => Effect.succeed({ n })
})

const model = ScriptedModel.layerFunction((request) =>
  request.iteration <= K ? ScriptedModel.toolCall("step", { n: request.iteration }) : ScriptedModel.finalAnswer("done")
)

const options = (runId: string) => ({
  goal: "count",
  runId,
  tools: [step],
  limits: { maxIterations: K + 10, maxToolCalls: K + 10 }
})

let runs = 0

/** One whole run with `journal` (or none): its time per step, in µs. */
const oneRun = (journal: Journal.Service | undefined) =>
  Effect.gen(function* () {
    const run = Run.run(options(`bench-${runs++}`))
    const start = performance.now()
    const result = yield* journal === undefined ? run : Effect.provideService(run, Journal.Journal, journal)
    const elapsed = performance.now() - start
    if (result.status !== "completed") throw new Error(`the run ended ${result.status}: ${result.detail}`)
    return (elapsed * 1000) / K
  })

interface Case {
  readonly name: string
  readonly journal: Journal.Service | undefined
  /** Most it may add per step to the run without a journal, in µs. */
  readonly target: number | undefined
}

/**
 * The median time per step of each case. The cases take turns, one run each per round
 * (after `WARM_UP` rounds that are not counted), so that the machine's drift and the
 * JIT's warm-up fall on all of them alike.
 */
const perStep = (cases: ReadonlyArray<Case>) =>
  Effect.gen(function* () {
    const times = cases.map(() => [] as Array<number>)
    for (let round = 0; round < WARM_UP + ROUNDS; round++) {
      for (const [i, c] of cases.entries()) {
        const time = yield* oneRun(c.journal)
        if (round >= WARM_UP) times[i]?.push(time)
      }
    }
    return times.map(median)
  }).pipe(Effect.provide(model))

const build = (layer: Layer.Layer<Journal.Journal, JournalError.JournalError>) =>
  Effect.map(Layer.build(Layer.fresh(layer)), (context) => Context.get(context, Journal.Journal))

const withJournal = <A, E>(
  layer: Layer.Layer<Journal.Journal, JournalError.JournalError>,
  f: (journal: Journal.Service) => Effect.Effect<A, E>
) => Effect.scoped(Effect.flatMap(build(layer), f))

const us = (n: number) => `${n.toFixed(1).padStart(8)} µs`

const dir = fs.mkdtempSync(path.join(os.tmpdir(), "durable-bench-"))

const main = Effect.gen(function* () {
  console.log(
    `durable runs on Node ${process.version}, ${os.cpus().length} cores; K=${K} steps, ` +
      `${ROUNDS} runs per case after ${WARM_UP} warm-up rounds, cases interleaved`
  )
  const found = yield* Effect.promise(postgres)
  if (found._tag === "Missing") console.log(`PostgreSQL: skipped (${found.why})`)
  const cases: Array<Case> = [
    { name: "no journal", journal: undefined, target: undefined },
    { name: "memory journal", journal: yield* build(Journal.layerMemory), target: undefined },
    {
      name: "SQLite (WAL, NORMAL)",
      journal: yield* build(Journal.layerSqlite({ filename: path.join(dir, "runs.db") })),
      target: 100
    }
  ]
  if (found._tag === "Server") {
    yield* Effect.addFinalizer(() => Effect.sync(found.server.stop))
    cases.push({
      name: "PostgreSQL (loopback)",
      journal: yield* build(JournalPg.layer({ url: found.server.url })),
      target: 2000
    })
  }
  const figures = yield* perStep(cases)
  const bare = figures[0] ?? Number.NaN
  console.log("")
  console.log("store                   per step      added   target (added)")
  for (const [i, c] of cases.entries()) {
    const figure = figures[i] ?? Number.NaN
    const verdict = c.target === undefined ? "-" : `<= ${c.target} µs: ${figure - bare <= c.target ? "PASS" : "MISS"}`
    console.log(`${c.name.padEnd(22)} ${us(figure)} ${us(figure - bare)}   ${verdict}`)
  }

  // Resume a 200-step run cut off before its last commit.
  const resumeTimes: Array<number> = []
  let bytesPerStep = 0
  let resultBytes = 0
  yield* withJournal(Journal.layerSqlite({ filename: path.join(dir, "resume.db") }), (journal) =>
    Effect.gen(function* () {
      for (let round = 0; round < 6; round++) {
        const runId = `resume-${round}`
        // 2 commits per step; the last one (the final answer's) is lost.
        const faulty = FaultyJournal.make(journal, { crashAt: { commit: 2 * K + 1, when: "before" } })
        yield* Effect.provideService(Run.run(options(runId)), Journal.Journal, faulty.journal)
        const start = performance.now()
        const resumed = yield* Effect.provideService(
          Run.resume(runId, { tools: [step], limits: options(runId).limits }),
          Journal.Journal,
          journal
        )
        resumeTimes.push(performance.now() - start)
        if (resumed.status !== "completed")
          throw new Error(`the resumed run ended ${resumed.status}: ${resumed.detail}`)
      }
    }).pipe(Effect.provide(model))
  )
  yield* Effect.scoped(
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const [row] = yield* sql<{
        readonly bytes: number
        readonly n: number
      }>`SELECT sum(length(body)) AS bytes, sum(event_count) AS n FROM agent_commits WHERE run_id = 'resume-0'`
      bytesPerStep = Number(row?.bytes ?? 0) / K
      const [run] = yield* sql<{
        readonly bytes: number
      }>`SELECT length(result) AS bytes FROM agent_runs WHERE run_id = 'resume-0'`
      resultBytes = Number(run?.bytes ?? 0)
    }).pipe(
      Effect.provide(
        Layer.effect(SqlClient.SqlClient, SqliteClient.make({ filename: path.join(dir, "resume.db") })).pipe(
          Layer.provide(Reactivity.layer)
        )
      )
    )
  )
  console.log("")
  const resume = median(resumeTimes)
  console.log(
    `resume a ${K}-step run from SQLite: median ${resume.toFixed(1)} ms (target <= 50 ms: ${resume <= 50 ? "PASS" : "MISS"})`
  )
  console.log(`journal bytes per step: ${bytesPerStep.toFixed(0)} B of event JSON; the run's result: ${resultBytes} B`)
})

Effect.runPromise(Effect.scoped(main))
  .catch((error) => {
    console.error(error)
    process.exitCode = 1
  })
  .finally(() => fs.rmSync(dir, { recursive: true, force: true }))
