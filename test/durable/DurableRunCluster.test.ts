/**
 * DurableRun on a cluster of real processes over PostgreSQL (R9.4, R3.8, R7): three runner
 * processes on 127.0.0.1 and a client-only process that starts the runs and approves one.
 * The runner in the middle of a payment is `kill -9`ed by its pid; its runs move to the
 * others once its shard locks expire, and go on from their journals there.
 */
import { PgClient } from "@effect/sql-pg"
import { Effect, Layer, Redacted } from "effect"
import { afterAll, assert, it } from "vitest"
import { DurableRun } from "../../src/durable/index.ts"
import { assertPaid, type Runner, resultOf, setUp } from "../support/durable/world.ts"
import { Databases, postgres, required, unusedPort } from "../support/postgres.ts"

/** Shard settings for a test: a dead runner's shards are taken within about 5 s (the engine's defaults: 35-60 s). */
const shardingConfig = {
  shardsPerGroup: 16,
  shardLockExpiration: "4 seconds",
  shardLockRefreshInterval: "1 second",
  refreshAssignmentsInterval: "1 second",
  entityMessagePollInterval: "250 millis",
  runnerHealthCheckInterval: "1 second"
}

/** The first line of any of `children` that `match` accepts, polled for at most 60 s; with the child that printed it. */
const firstOf = async (children: ReadonlyArray<Runner>, match: (line: string) => boolean) => {
  const deadline = performance.now() + 60_000
  while (performance.now() < deadline) {
    for (const child of children) {
      const line = child.lines.find(match)
      if (line !== undefined) return { child, line }
    }
    await new Promise((resolve) => setTimeout(resolve, 5))
  }
  throw new Error(`no process printed the line looked for: ${children.map((c) => c.lines.join(" | ")).join("\n")}`)
}

/**
 * The runs a process had committed steps of: those it paid for, or asked the model for
 * after a first answer (each answer is committed before the run goes on). A run taken from
 * it before its first commit starts afresh elsewhere, with nothing to resume.
 */
const runsOf = (lines: ReadonlyArray<string>): ReadonlySet<string> =>
  new Set(lines.flatMap((line) => /^(?:paying (\S+) |model (\S+) (?!1$))/.exec(line)?.slice(1).filter(Boolean) ?? []))

/** What each process printed of the run `runId`, for a failure's message. */
const traceOf = (children: ReadonlyArray<Runner>, runId: string) =>
  children.map((c) => `${c.pid}: ${c.lines.filter((l) => l.includes(` ${runId} `)).join(" | ")}`).join("\n")

const found = await postgres()

if (found._tag === "Server") {
  const { url, stop } = found.server
  afterAll(stop)
  const { world } = setUp()
  const databases = Databases.on(url)
  // After the processes are killed (a server given by PG_URL keeps no test's database).
  afterAll(databases.dropAll)

  it("R9.4 three runners, one killed -9 in a payment: all eight runs end on the others, each payment once, the moved runs resumed and reconciled", async () => {
    const began = performance.now()
    const w = world("failover")
    const pg = await databases.fresh()
    const settings = { shardingConfig, modelMillis: 100, payMillis: 200, answerMillis: 1_500 }
    const runner = async () => w.start({ mode: { _tag: "runner", pg, port: await unusedPort() }, ...settings })
    // The first runner creates the tables; the others join it.
    const first = await runner()
    await first.waitFor("ready")
    const runners = [first, await runner(), await runner()]
    await Promise.all(runners.map((r) => r.waitFor("ready")))
    const ready = performance.now()

    const runIds = [...Array.from({ length: 7 }, (_, i) => `pay2-r${i}`), "approve-r7"]
    const client = w.start({
      mode: { _tag: "client", pg },
      shardingConfig,
      start: runIds,
      watch: runIds,
      approve: ["approve-r7"]
    })

    // The runner that books a payment first is killed while its handler still runs (1.5 s before it answers).
    const { child: victim, line } = await firstOf(runners, (l) => l.startsWith("paid "))
    await victim.kill()
    const killed = performance.now()
    const [, inDoubtRun = "", inDoubtCall = ""] = line.split(" ")
    const survivors = runners.filter((r) => r !== victim)
    const linesAtKill = new Map(survivors.map((r) => [r, r.lines.length]))

    await client.waitFor("done")
    const done = performance.now()
    const results = await Promise.all(runIds.map((runId) => resultOf(client, runId)))
    const counts = w.payments()
    for (const result of results) {
      assert.include(["completed", "unknown_outcome"], result.status, `${result.runId}: ${result.detail}`)
      assertPaid(result, counts)
    }

    // Every run the dead runner had was resumed on a survivor, from its journal.
    const moved = runsOf(victim.lines)
    assert.include([...moved], inDoubtRun)
    for (const runId of moved) {
      const result = results.find((r) => r.runId === runId)
      assert.isNotEmpty(result?.resumed, `${runId} moved: ${result?.tags.join(" ")}\n${traceOf(runners, runId)}`)
      const after = survivors.flatMap((r) => r.lines.slice(linesAtKill.get(r)))
      assert.isTrue(
        after.some((l) => l.startsWith(`model ${runId} `)),
        `${runId} went on on a survivor`
      )
    }
    // The payment booked when its runner died was in doubt: the survivor asked the ledger, and never paid it again.
    const inDoubt = results.find((r) => r.runId === inDoubtRun)
    assert.isTrue(
      inDoubt?.resumed.some((r) => r.inDoubt.includes(inDoubtCall)),
      JSON.stringify(inDoubt)
    )
    assert.deepInclude(inDoubt?.reconciled, { callId: inDoubtCall, verdict: "applied" })
    assert.strictEqual(counts.get(`${inDoubtRun}:${inDoubtCall}`), 1)
    assert.include(client.lines, "approved approve-r7 c2", "the client-only process approved the call")

    console.log(
      `cluster failover: 3 runners ready in ${Math.round(ready - began)} ms; killed ${Math.round(killed - ready)} ms after, ` +
        `${moved.size} runs moved (${[...moved].join(", ")}); all 8 ended ${Math.round(done - killed)} ms after the kill; ` +
        `statuses ${JSON.stringify(results.map((r) => r.status))}; runs per runner ${JSON.stringify(runners.map((r) => [...runsOf(r.lines)]))}`
    )
  }, 120_000)

  it("R9.4 layerCluster loads NodeClusterSocket by itself when the transport is not given (a client-only process)", async () => {
    const pg = await databases.fresh()
    const failed = await Effect.runPromise(
      Effect.gen(function* () {
        const runs = yield* DurableRun.DurableRuns
        return yield* Effect.flip(runs.poll("never-started"))
      }).pipe(
        Effect.scoped,
        Effect.provide(
          DurableRun.layerClient.pipe(
            Layer.provideMerge(
              DurableRun.layerCluster({
                sql: PgClient.layer({ url: Redacted.make(pg) }),
                clientOnly: true,
                shardingConfig: { shardsPerGroup: shardingConfig.shardsPerGroup }
              })
            )
          )
        )
      )
    )
    assert.strictEqual(failed._tag === "DurableRunError" ? failed.reason : failed._tag, "not_found")
  }, 60_000)
} else if (required) {
  it("R9.4 PostgreSQL is there for the cluster's tests", () => {
    throw new Error(`no PostgreSQL: ${found.why} (set PG_URL, install postgresql, or opt out with SKIP_PG=1)`)
  })
} else {
  console.warn(`SKIP_PG=1: the cluster tests are not run (${found.why})`)
}
