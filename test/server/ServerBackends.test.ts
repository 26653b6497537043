/**
 * The reference backend on its other configurations: runs on PostgreSQL (`DATABASE_URL`, a
 * cluster runner in the server's process) and the OpenAI-compatible provider
 * (`OPENAI_API_KEY`, `OPENAI_BASE_URL` at a scripted chat-completions server over a real
 * socket). Each is started as a child process and driven over real HTTP.
 */
import { Effect, Exit, Scope } from "effect"
import { afterAll, assert, describe, it } from "vitest"
import * as FakeOpenAiServer from "../../src/testing/FakeOpenAiServer.ts"
import { Databases, postgres, required, unusedPort } from "../support/postgres.ts"
import { eventually, readEvents, type Server, send, startServer, tempDir } from "./support.ts"

const runOf = (server: Server) => ({
  start: async (body: unknown) => {
    const started = await send("POST", `${server.url}/runs`, body)
    assert.strictEqual(started.status, 202, JSON.stringify(started.body))
    return started.body.runId as string
  },
  finished: (runId: string) =>
    eventually(async () => {
      const { body } = await send("GET", `${server.url}/runs/${runId}`)
      return body.state === "finished" ? body : undefined
    }, 60_000)
})

const found = await postgres()
if (found._tag === "Missing" && required) throw new Error(`PostgreSQL: ${found.why} (SKIP_PG=1 skips)`)

describe.runIf(found._tag === "Server")("server on PostgreSQL (DATABASE_URL)", () => {
  if (found._tag !== "Server") return
  const databases = Databases.on(found.server.url)
  let server: Server | undefined
  afterAll(async () => {
    await server?.stop()
    await databases.dropAll()
    found.server.stop()
  })

  it("a run streams to run.finished; an approved payment runs once; a second decision is 409", {
    timeout: 90_000
  }, async () => {
    const url = await databases.fresh()
    server = await startServer(`${tempDir()}/unused.db`, {
      DATABASE_URL: url,
      RUNNER_PORT: String(await unusedPort())
    })
    const runs = runOf(server)
    const lookup = await runs.start({ goal: "Look up INV-7", tools: ["lookup_invoice"] })
    const events = await readEvents(`${server.url}/runs/${lookup}/events`)
    assert.deepStrictEqual(
      events.map((e) => Number(e.id)),
      events.map((_, i) => i)
    )
    assert.strictEqual(events.at(-1)?.event, "run.finished")
    assert.strictEqual((await runs.finished(lookup)).result.status, "completed")

    const pay = await runs.start({ goal: "Pay INV-7", tools: ["pay_invoice"] })
    const call = await eventually(async () => {
      const { body } = await send("GET", `${server?.url}/runs/${pay}/approvals`)
      return body[0] as { callId: string } | undefined
    }, 60_000)
    const decide = () => send("POST", `${server?.url}/runs/${pay}/approvals/${call.callId}`, { decision: "approve" })
    assert.strictEqual((await decide()).status, 204)
    const result = (await runs.finished(pay)).result
    assert.strictEqual(result.status, "completed")
    assert.deepStrictEqual(
      result.sideEffects.map((s: { name: string }) => s.name),
      ["pay_invoice"]
    )
    assert.strictEqual((await decide()).status, 409)
  })
})

describe("server on the OpenAI-compatible provider (OPENAI_API_KEY)", () => {
  const key = "sk-test-SERVER-4d1f8a2c"
  const scope = Effect.runSync(Scope.make())
  afterAll(() => Effect.runPromise(Scope.close(scope, Exit.void)))

  it("the provider's tool call runs the registered tool; the answer ends the run; the key is in no response", {
    timeout: 60_000
  }, async () => {
    // A tool call first; once the conversation carries the tool's result, the answer.
    const fake = await Effect.runPromise(
      Scope.provide(scope)(
        FakeOpenAiServer.make((_, request) =>
          JSON.stringify(request.body).includes('"role":"tool"')
            ? FakeOpenAiServer.reply({ text: "INV-7 is 120 EUR and due." })
            : FakeOpenAiServer.reply({
                toolCalls: [{ name: "lookup_invoice", arguments: JSON.stringify({ invoice: "INV-7" }) }]
              })
        )
      )
    )
    const server = await startServer(`${tempDir()}/runs.db`, {
      OPENAI_API_KEY: key,
      OPENAI_BASE_URL: fake.url,
      OPENAI_MODEL: "fake-model"
    })
    try {
      const runs = runOf(server)
      const runId = await runs.start({ goal: "What does INV-7 cost?", tools: ["lookup_invoice"] })
      const events = await readEvents(`${server.url}/runs/${runId}/events`)
      const status = await runs.finished(runId)
      assert.strictEqual(status.result.status, "completed", JSON.stringify(status.result))
      assert.strictEqual(status.result.finalAnswer, "INV-7 is 120 EUR and due.")
      assert.strictEqual(status.counters.toolCalls, 1)
      const requests = await Effect.runPromise(fake.requests)
      assert.strictEqual(requests.length, 2)
      assert.strictEqual(requests[0]?.headers.authorization, `Bearer ${key}`)
      assert.include(JSON.stringify(requests[1]?.body), "INV-7: 120 EUR, due")
      const view = await fetch(`${server.url}/runs/${runId}/view`).then((r) => r.text())
      for (const text of [JSON.stringify(events), JSON.stringify(status), view]) assert.notInclude(text, key)
    } finally {
      await server.stop()
    }
  })
})
