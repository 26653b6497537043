/**
 * The reference backend (scratchpad/server.ts) over real HTTP: `fetch` against the server
 * started as a child process on 127.0.0.1, on a SQLite runs file of its own.
 */
import * as path from "node:path"
import { afterAll, assert, beforeAll, describe, it } from "vitest"
import { eventually, readEvents, type Server, send, startServer, tempDir } from "./support.ts"

let server: Server
beforeAll(async () => {
  server = await startServer(path.join(tempDir(), "runs.db"), { DEMO_WAIT_MILLIS: "5000" })
}, 30_000)
afterAll(() => server?.stop())

const start = async (body: unknown) => {
  const started = await send("POST", `${server.url}/runs`, body)
  assert.strictEqual(started.status, 202, JSON.stringify(started.body))
  return started.body.runId as string
}

const waitingCall = (runId: string) =>
  eventually(async () => {
    const { body } = await send("GET", `${server.url}/runs/${runId}/approvals`)
    return body[0] as { callId: string; tool: string } | undefined
  })

const finished = (runId: string) =>
  eventually(async () => {
    const { body } = await send("GET", `${server.url}/runs/${runId}`)
    return body.state === "finished" ? body : undefined
  })

describe("server over durable runs", () => {
  it("POST /runs starts a run; its event stream runs from seq 0 to run.finished; GET /runs/:id has the result", {
    timeout: 30_000
  }, async () => {
    const runId = await start({ goal: "Look up INV-7", tools: ["lookup_invoice"], limits: { maxIterations: 5 } })
    const events = await readEvents(`${server.url}/runs/${runId}/events`)
    assert.deepStrictEqual(
      events.map((e) => e.id),
      events.map((_, i) => String(i))
    )
    assert.deepStrictEqual(
      events.map((e) => e.event),
      events.map((e) => e.data._tag)
    )
    assert.strictEqual(events.at(-1)?.event, "run.finished")
    assert.deepStrictEqual(events[0]?.data.tools, ["lookup_invoice"])
    const status = await send("GET", `${server.url}/runs/${runId}`)
    assert.strictEqual(status.body.state, "finished")
    assert.strictEqual(status.body.result.status, "completed")
    assert.strictEqual(status.body.counters.events, events.length)
    assert.strictEqual(status.body.counters.toolCalls, 1)
  })

  it("R9 a start under a run id of the client's starts once: tried again (after a 503), the same run", {
    timeout: 30_000
  }, async () => {
    const body = { goal: "Look up INV-8", tools: ["lookup_invoice"], limits: { maxIterations: 5 }, runId: "order-8" }
    assert.strictEqual(await start(body), "order-8")
    assert.strictEqual(await start(body), "order-8")
    const result = await finished("order-8")
    assert.strictEqual(result.result.status, "completed")
    // One run: one run.started in its log.
    const events = await readEvents(`${server.url}/runs/order-8/events`)
    assert.lengthOf(
      events.filter((e) => e.event === "run.started"),
      1
    )
  })

  it("an approved call runs and the run finishes; deciding it again is 409", { timeout: 30_000 }, async () => {
    const runId = await start({ goal: "Pay INV-7", tools: ["pay_invoice"] })
    const call = await waitingCall(runId)
    assert.strictEqual(call.tool, "pay_invoice")
    assert.strictEqual((await send("GET", `${server.url}/runs/${runId}`)).body.state, "waiting")
    const decided = await send("POST", `${server.url}/runs/${runId}/approvals/${call.callId}`, {
      decision: "approve",
      by: "ops@example.com"
    })
    assert.strictEqual(decided.status, 204)
    const result = (await finished(runId)).result
    assert.strictEqual(result.status, "completed")
    assert.deepStrictEqual(
      result.sideEffects.map((s: { name: string }) => s.name),
      ["pay_invoice"]
    )
    const again = await send("POST", `${server.url}/runs/${runId}/approvals/${call.callId}`, { decision: "approve" })
    assert.strictEqual(again.status, 409)
    assert.strictEqual(again.body._tag, "NotWaiting")
  })

  it("a rejected call does not run: the run ends approval_rejected with the reason", { timeout: 30_000 }, async () => {
    const runId = await start({ goal: "Pay INV-7", tools: ["pay_invoice"] })
    const call = await waitingCall(runId)
    const decided = await send("POST", `${server.url}/runs/${runId}/approvals/${call.callId}`, {
      decision: "reject",
      reason: "over budget"
    })
    assert.strictEqual(decided.status, 204)
    const result = (await finished(runId)).result
    assert.strictEqual(result.stopReason, "approval_rejected")
    assert.deepStrictEqual(result.sideEffects, [])
    assert.include(JSON.stringify(result.timeline), "over budget")
  })

  // The stream carries committed events only (a reconnect must never see an event the run
  // later replaces), and a read-only call's `tool.started` is committed with its result: the
  // first model response is what shows the wait call on its way.
  it("POST /runs/:id/cancel ends a running run cancelled", { timeout: 30_000 }, async () => {
    const runId = await start({ goal: "Wait", tools: ["wait"] })
    await readEvents(`${server.url}/runs/${runId}/events`, { until: (e) => e.event === "model.responded" })
    await new Promise((resolve) => setTimeout(resolve, 300)) // the 5 s handler is running by then
    assert.strictEqual((await send("POST", `${server.url}/runs/${runId}/cancel`)).status, 202)
    const events = await readEvents(`${server.url}/runs/${runId}/events`)
    assert.strictEqual(events.at(-1)?.event, "run.finished")
    const result = (await finished(runId)).result
    assert.strictEqual(result.stopReason, "cancelled", events.map((e) => e.event).join(" "))
    // The handler was stopped, not waited out: no tool result, no second model call.
    assert.notInclude(
      events.map((e) => e.event),
      "tool.succeeded"
    )
    assert.strictEqual(events.filter((e) => e.event === "model.requested").length, 1)
  })

  it("a bad body is a 400 naming the field; a tool the server does not register is a 400", async () => {
    const cases: ReadonlyArray<readonly [unknown, string]> = [
      [{}, "goal"],
      [{ goal: 7 }, "goal"],
      [{ goal: "x", tools: "wait" }, "tools"],
      [{ goal: "x", limits: { maxIterations: "many" } }, "limits"]
    ]
    for (const [body, field] of cases) {
      const response = await send("POST", `${server.url}/runs`, body)
      assert.strictEqual(response.status, 400, JSON.stringify(body))
      assert.strictEqual(response.body.errors[0].path[1], field, JSON.stringify(response.body))
    }
    const unregistered = await send("POST", `${server.url}/runs`, { goal: "x", tools: ["wait", "shell"] })
    assert.strictEqual(unregistered.status, 400)
    assert.deepStrictEqual(unregistered.body, {
      _tag: "InvalidStart",
      field: "tools[1]",
      message: 'no tool named "shell" is registered'
    })
    const badLimit = await send("POST", `${server.url}/runs`, { goal: "x", limits: { maxIterations: -1 } })
    assert.strictEqual(badLimit.status, 400)
    assert.strictEqual(badLimit.body.field, "limits.maxIterations")
    const decision = await send("POST", `${server.url}/runs/any/approvals/call_1`, { decision: "maybe" })
    assert.strictEqual(decision.status, 400)
    assert.deepStrictEqual(decision.body.errors[0].path, ["payload", "decision"])
  })

  it("bodies the server cannot keep are refused: too large (413), an unknown field, a NUL in a decision (400)", {
    timeout: 30_000
  }, async () => {
    const huge = await fetch(`${server.url}/runs`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ goal: "x".repeat(17 * 1024 * 1024) })
    })
    assert.strictEqual(huge.status, 413)
    const extra = await send("POST", `${server.url}/runs`, { goal: "x", filename: "/etc/passwd" })
    assert.strictEqual(extra.status, 400)
    assert.include(JSON.stringify(extra.body), "filename")
    const runId = await start({ goal: "Pay INV-7", tools: ["pay_invoice"] })
    const call = await waitingCall(runId)
    const nul = await send("POST", `${server.url}/runs/${runId}/approvals/${call.callId}`, {
      decision: "reject",
      by: "alice\u0000mallory"
    })
    assert.strictEqual(nul.status, 400)
    assert.deepStrictEqual(nul.body.errors[0].path, ["payload", "by"])
    // Nothing was decided: the call still waits, and a clean decision goes through.
    const decided = await send("POST", `${server.url}/runs/${runId}/approvals/${call.callId}`, { decision: "approve" })
    assert.strictEqual(decided.status, 204)
    assert.strictEqual((await finished(runId)).result.status, "completed")
    // A cancel of a run that has finished changed nothing: 409.
    const late = await send("POST", `${server.url}/runs/${runId}/cancel`)
    assert.strictEqual(late.status, 409)
    assert.strictEqual(late.body._tag, "AlreadyFinished")
  })

  it("Last-Event-ID: empty or -1 is from the first event; one that is no event id is a 400", {
    timeout: 30_000
  }, async () => {
    const runId = await start({ goal: "Look up INV-7", tools: ["lookup_invoice"] })
    const all = await readEvents(`${server.url}/runs/${runId}/events`)
    for (const id of ["", "-1"]) {
      const again = await readEvents(`${server.url}/runs/${runId}/events`, { lastEventId: id })
      assert.deepStrictEqual(
        again.map((e) => e.id),
        all.map((e) => e.id),
        JSON.stringify(id)
      )
    }
    // (A header value's leading space is not sent: HTTP trims it.)
    for (const id of ["5.5", "0x5", "1e1", "-0", "-7"]) {
      const response = await fetch(`${server.url}/runs/${runId}/events`, { headers: { "last-event-id": id } })
      assert.strictEqual(response.status, 400, JSON.stringify(id))
      await response.body?.cancel()
    }
  })

  it("an unknown run is 404 on every route", async () => {
    const routes: ReadonlyArray<readonly [string, string, unknown?]> = [
      ["GET", "/runs/nope"],
      ["GET", "/runs/nope/events"],
      ["GET", "/runs/nope/approvals"],
      ["GET", "/runs/nope/view"],
      ["POST", "/runs/nope/cancel"],
      ["POST", "/runs/nope/approvals/call_1", { decision: "approve" }]
    ]
    for (const [method, route, body] of routes) {
      const response = await fetch(`${server.url}${route}`, {
        method,
        ...(body === undefined ? {} : { headers: { "content-type": "application/json" }, body: JSON.stringify(body) })
      })
      assert.strictEqual(response.status, 404, `${method} ${route}`)
    }
  })

  it("an id longer than any run's or call's is a RunNotFound or a NotWaiting, however long (review 138: past 4096 characters an empty 404)", async () => {
    for (const [method, route, status, tag] of [
      ["GET", `/runs/${"r".repeat(300)}`, 404, "RunNotFound"],
      ["GET", `/runs/${"r".repeat(5000)}`, 404, "RunNotFound"],
      ["GET", `/runs/${"r".repeat(5000)}/view`, 404, "RunNotFound"],
      // As the handler answers a call id of 300 characters: the run is not there.
      ["POST", `/runs/x/approvals/${"c".repeat(300)}`, 404, "RunNotFound"],
      ["POST", `/runs/x/approvals/${"c".repeat(5000)}`, 404, "RunNotFound"]
    ] as const) {
      const answer = await send(
        method,
        `${server.url}${route}`,
        method === "POST" ? { decision: "approve" } : undefined
      )
      assert.strictEqual(answer.status, status, `${method} ${route.slice(0, 20)}`)
      assert.strictEqual(answer.body?._tag, tag, `${method} ${route.slice(0, 20)}`)
    }
  })

  it("a path that is none of the API's names no run; HEAD, which no route answers, is not offered (review 182)", async () => {
    for (const route of ["/runs/x/approvals/", "/runs/x/approvals/call_1/extra", "/runs//view", "/elsewhere"]) {
      const { status, body } = await send("POST", `${server.url}${route}`, { decision: "approve" })
      assert.strictEqual(status, 404, route)
      assert.strictEqual(body?._tag, "NoSuchRoute", route)
    }
    // Of a run that is there, waiting: still no run named, and a call id no call can have is not waiting.
    const runId = await start({ goal: "Pay INV-8", tools: ["pay_invoice"] })
    await waitingCall(runId)
    for (const route of [`/runs/${runId}/approvals/`, `/runs/${runId}/approvals/call_1/extra`]) {
      const { status, body } = await send("POST", `${server.url}${route}`, { decision: "approve" })
      assert.deepStrictEqual([status, body?._tag], [404, "NoSuchRoute"], route)
    }
    // A start under its id with another goal would start nothing: refused, naming the id (review 180).
    const other = await send("POST", `${server.url}/runs`, { goal: "Refund INV-8", runId })
    assert.deepStrictEqual([other.status, other.body?._tag, other.body?.field], [400, "InvalidStart", "runId"])
    const long = await send("POST", `${server.url}/runs/${runId}/approvals/${"c".repeat(5000)}`, {
      decision: "approve"
    })
    assert.deepStrictEqual([long.status, long.body?._tag], [409, "NotWaiting"])
    // A run id no URL can carry is refused at its start.
    for (const dots of [".", ".."]) {
      const refused = await send("POST", `${server.url}/runs`, { goal: "Pay INV-9", runId: dots })
      assert.deepStrictEqual([refused.status, refused.body?._tag], [400, "InvalidStart"], dots)
    }
    const head = await fetch(`${server.url}/runs/x`, { method: "HEAD" })
    assert.strictEqual(head.status, 405)
    assert.strictEqual(head.headers.get("allow"), "GET")
  })

  it("a method a path of the API does not take is 405 with the methods it does (Allow), not 404 (review 138)", async () => {
    for (const [method, route, allow] of [
      ["DELETE", "/runs/x", "GET"],
      ["PUT", "/runs", "POST"],
      ["GET", "/runs", "POST"],
      ["GET", "/runs/x/cancel", "POST"]
    ] as const) {
      const response = await fetch(`${server.url}${route}`, { method })
      assert.strictEqual(response.status, 405, `${method} ${route}`)
      assert.strictEqual(response.headers.get("allow"), allow, `${method} ${route}`)
    }
  })

  it("GET /openapi.json is the document of the HttpApi definition", async () => {
    const { status, body } = await send("GET", `${server.url}/openapi.json`)
    assert.strictEqual(status, 200)
    assert.hasAllKeys(body.paths, [
      "/runs",
      "/runs/{id}",
      "/runs/{id}/events",
      "/runs/{id}/approvals",
      "/runs/{id}/approvals/{callId}",
      "/runs/{id}/cancel",
      "/runs/{id}/view"
    ])
  })
})
