/**
 * R9 through the server: kill -9 the server while a run is in a tool, start it again on the
 * same runs file; the run finishes, and the event stream reconnected with `Last-Event-ID`
 * continues after the last event read, with no gap and no duplicate.
 */
import * as path from "node:path"
import { assert, describe, it } from "vitest"
import { eventually, readEvents, send, startServer, tempDir } from "./support.ts"

describe("server restart", () => {
  it("R9 a server killed mid-run resumes the run on restart; the stream continues from Last-Event-ID", {
    timeout: 60_000
  }, async () => {
    const runsFile = path.join(tempDir(), "runs.db")
    const env = { DEMO_WAIT_MILLIS: "1500" }
    const first = await startServer(runsFile, env)
    const { body } = await send("POST", `${first.url}/runs`, {
      goal: "Look up, then wait",
      tools: ["lookup_invoice", "wait"]
    })
    const runId = body.runId as string
    const before = await readEvents(`${first.url}/runs/${runId}/events`, {
      until: (e) => e.event === "tool.started" && e.data.name === "wait"
    })
    await first.stop("SIGKILL")

    const second = await startServer(runsFile, env)
    try {
      const lastId = before.at(-1)?.id ?? "-1"
      const after = await readEvents(`${second.url}/runs/${runId}/events`, { lastEventId: lastId })
      const ids = [...before, ...after].map((e) => Number(e.id))
      assert.deepStrictEqual(
        ids,
        ids.map((_, i) => i)
      )
      assert.strictEqual(after.at(-1)?.event, "run.finished")
      const status = await eventually(async () => {
        const got = await send("GET", `${second.url}/runs/${runId}`)
        return got.body.state === "finished" ? got.body : undefined
      })
      assert.strictEqual(status.result.status, "completed")
      // The first process died with the run unfinished: the second one finished it.
      assert.isFalse(before.some((e) => e.event === "run.finished"))
      assert.isAbove(after.length, 0)
    } finally {
      await second.stop()
    }
  })
})
