/**
 * Provider benchmark: `npm run bench:provider` (node bench/provider.ts).
 *
 * The OpenAI-compatible client against `FakeOpenAiServer` on 127.0.0.1 with
 * keep-alive, beside a bare `fetch` loop sending the same bytes and parsing the same
 * JSON. Requests go one at a time (latency) and eight at a time (throughput). Cases:
 *
 * - `fetch`: `await fetch(...)` then `await response.json()` (undici, keep-alive).
 * - `client`: `OpenAiCompatible.make(...).generate` over `NodeTransport.layer()`, the
 *   default on Node: `@effect/platform-node`'s undici client with connection reports
 *   (three timeout phases, schema decoding, classification).
 * - `client/fetch`: the same client over effect's `FetchHttpClient.layer` (no connection
 *   reports), what users without `@effect/platform-node` get.
 * - `fetch/stream`: a bare `fetch` of the same request with `stream: true`, reading the
 *   body as it arrives and `JSON.parse`-ing each event as it completes.
 * - `client/stream`: the client with `stream: true` (SSE parsing, schema decoding of each
 *   chunk, delta folding, an idle-read timer per read).
 * - `client/no-span`: `client` with `Tracer.DisablePropagation`, which turns off the
 *   span `HttpClient` makes per request (shows what tracing costs).
 *
 * The server shares the process, so every case pays the same server cost. Cases are
 * interleaved round by round against drift. Prints figures and the ratio to `fetch`
 * (targets: `client` at most 1.3x `fetch`, and `client/stream` at most 1.3x
 * `fetch/stream`, by median latency); it never asserts.
 *
 * Last, the SSE parser alone: one event of 1 MiB and one of 4 MiB, fed in 64 KiB
 * pieces. Linear parsing shows as a ratio near 4 between the two.
 * Options: `--rounds=N` (default 10), `--batch=N` requests per case and round (default 200).
 */
import { Clock, Effect, Layer, Redacted, Tracer } from "effect"
import * as FetchHttpClient from "effect/http/FetchHttpClient"
import type * as Model from "../src/model/Model.ts"
import * as NodeTransport from "../src/providers/node/NodeTransport.ts"
import * as OpenAiCompatible from "../src/providers/OpenAiCompatible.ts"
import * as OpenAiWire from "../src/providers/OpenAiWire.ts"
import * as Sse from "../src/providers/Sse.ts"
import * as FakeOpenAiServer from "../src/testing/FakeOpenAiServer.ts"

const argValue = (name: string): string | undefined =>
  process.argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3)

const ROUNDS = Number(argValue("rounds") ?? 10)
const BATCH = Number(argValue("batch") ?? 200)
const WARMUP = 300
const CONCURRENCY = 8
const TARGET_RATIO = 1.3

const median = (xs: ReadonlyArray<number>): number => quantile(xs, 0.5)
const quantile = (xs: ReadonlyArray<number>, q: number): number => {
  const s = [...xs].sort((a, b) => a - b)
  return s[Math.min(s.length - 1, Math.max(0, Math.round(q * (s.length - 1))))] ?? Number.NaN
}

/** A request of a realistic size: a system prompt, a few turns, two tool definitions. */
const request = (): Model.Request => ({
  runId: "bench",
  iteration: 1,
  messages: [
    { _tag: "system", content: "You are a careful agent. ".repeat(20) },
    { _tag: "user", content: "Write the insight report from the data in data.csv." },
    {
      _tag: "assistant",
      content: "",
      toolCalls: [{ id: "c1", name: "read_file", arguments: '{"path":"data.csv"}' }]
    },
    { _tag: "tool", toolCallId: "c1", name: "read_file", content: "a,b\n1,2\n".repeat(40) }
  ],
  tools: ["read_file", "write_json_file"].map((name) => ({
    name,
    description: `The ${name} tool`,
    parameters: { type: "object", properties: { path: { type: "string" } }, required: ["path"] }
  })),
  deadlineAt: Number.MAX_SAFE_INTEGER
})

const script = (): FakeOpenAiServer.Step =>
  FakeOpenAiServer.reply({
    text: "Reading the file first.",
    toolCalls: [
      { id: "c2", name: "write_json_file", arguments: '{"path":"insight_report.json","content":{"rows":[1,2]}}' }
    ],
    usage: { input: 420, output: 37 }
  })

interface Case {
  readonly name: string
  readonly once: Effect.Effect<void, unknown>
  readonly latencies: Array<number>
  throughput: Array<number>
}

const timed = (effect: Effect.Effect<void, unknown>) =>
  Effect.gen(function* () {
    const start = performance.now()
    yield* effect
    return performance.now() - start
  })

const program = Effect.gen(function* () {
  const server = yield* FakeOpenAiServer.make(script)
  const apiKey = Redacted.make("sk-bench")
  const options = { baseUrl: server.url, model: "fake-model", apiKey }
  const req = request()
  const body = JSON.stringify(OpenAiWire.requestBody({ model: "fake-model", stream: false }, req))
  const fetchOnce = Effect.promise(() =>
    fetch(`${server.url}/chat/completions`, {
      method: "POST",
      headers: { authorization: "Bearer sk-bench", "content-type": "application/json", accept: "application/json" },
      body
    }).then((r) => r.json())
  ).pipe(Effect.asVoid)
  // The transports live in the benchmark's scope, not just while the clients are made.
  const transport = yield* Layer.build(NodeTransport.layer())
  const fetchTransport = yield* Layer.build(FetchHttpClient.layer)
  const streamBody = JSON.stringify(OpenAiWire.requestBody({ model: "fake-model", stream: true }, req))
  // The streamed baseline reads the body as it arrives and parses each event's JSON as it completes.
  const fetchStream = Effect.promise(async () => {
    const response = await fetch(`${server.url}/chat/completions`, {
      method: "POST",
      headers: { authorization: "Bearer sk-bench", "content-type": "application/json", accept: "text/event-stream" },
      body: streamBody
    })
    const reader = response.body?.getReader()
    const decoder = new TextDecoder()
    let pending = ""
    while (reader !== undefined) {
      const { value, done } = await reader.read()
      if (done) break
      pending += decoder.decode(value, { stream: true })
      let end = pending.indexOf("\n\n")
      while (end >= 0) {
        const data = pending.slice(6, end)
        if (data !== "[DONE]") JSON.parse(data)
        pending = pending.slice(end + 2)
        end = pending.indexOf("\n\n")
      }
    }
  })
  const client = yield* OpenAiCompatible.make(options).pipe(Effect.provide(transport))
  const overFetch = yield* OpenAiCompatible.make(options).pipe(Effect.provide(fetchTransport))
  const streamed = yield* OpenAiCompatible.make({ ...options, stream: true }).pipe(Effect.provide(transport))
  const cases: Array<Case> = [
    { name: "fetch", once: fetchOnce, latencies: [], throughput: [] },
    { name: "client", once: Effect.asVoid(client.generate(req)), latencies: [], throughput: [] },
    { name: "client/fetch", once: Effect.asVoid(overFetch.generate(req)), latencies: [], throughput: [] },
    { name: "fetch/stream", once: fetchStream, latencies: [], throughput: [] },
    { name: "client/stream", once: Effect.asVoid(streamed.generate(req)), latencies: [], throughput: [] },
    {
      name: "client/no-span",
      once: Effect.asVoid(client.generate(req)).pipe(Effect.provideService(Tracer.DisablePropagation, true)),
      latencies: [],
      throughput: []
    }
  ]
  for (const c of cases) {
    for (let i = 0; i < WARMUP; i++) yield* c.once
    // Open the pool's connections for the concurrent batches too.
    yield* Effect.forEach(
      Array.from({ length: WARMUP }, () => c.once),
      (e) => e,
      { concurrency: CONCURRENCY, discard: true }
    )
  }
  const connectionsBefore = yield* server.connections
  for (let round = 0; round < ROUNDS; round++) {
    for (const c of cases) {
      for (let i = 0; i < BATCH; i++) c.latencies.push(yield* timed(c.once))
      const start = yield* Clock.currentTimeMillis
      yield* Effect.forEach(
        Array.from({ length: BATCH }, () => c.once),
        (e) => e,
        { concurrency: CONCURRENCY, discard: true }
      )
      c.throughput.push((BATCH * 1000) / Math.max(1, (yield* Clock.currentTimeMillis) - start))
    }
  }
  const connections = (yield* server.connections) - connectionsBefore
  const base = median(cases[0]?.latencies ?? [])
  console.log(`Provider benchmark: ${ROUNDS} rounds x ${BATCH} requests per case, Node ${process.version}`)
  console.log(`request body ${body.length} bytes; keep-alive: ${connections} new connections during measurement\n`)
  console.log("case            median µs   p90 µs   seq req/s   x8 req/s   ratio to fetch (median latency)")
  for (const c of cases) {
    const med = median(c.latencies)
    const line = [
      c.name.padEnd(14),
      (med * 1000).toFixed(0).padStart(10),
      (quantile(c.latencies, 0.9) * 1000).toFixed(0).padStart(8),
      (1000 / med).toFixed(0).padStart(11),
      median(c.throughput).toFixed(0).padStart(10),
      `${(med / base).toFixed(2)}x`.padStart(12)
    ]
    console.log(line.join(" "))
  }
  const verdict = (name: string, against: string) => {
    const of = (n: string) => median(cases.find((c) => c.name === n)?.latencies ?? [])
    const ratio = of(name) / of(against)
    console.log(
      `${name} against ${against}: ${((of(name) - of(against)) * 1000).toFixed(0)} µs added per request; ` +
        `ratio ${ratio.toFixed(2)}x (target <= ${TARGET_RATIO}x: ${ratio <= TARGET_RATIO ? "PASS" : "MISS"})`
    )
  }
  console.log("")
  verdict("client", "fetch")
  verdict("client/stream", "fetch/stream")
  console.log("\nSSE parser, one event fed in 64 KiB pieces (median of 5):")
  const parseMillis = (size: number) => {
    const text = `data: ${"x".repeat(size)}\n\n`
    const runs: Array<number> = []
    for (let run = 0; run < 5; run++) {
      const parser = Sse.parser({ maxEventLength: 2 * size })
      const start = performance.now()
      for (let i = 0; i < text.length; i += 65_536) parser.feed(text.slice(i, i + 65_536))
      runs.push(performance.now() - start)
    }
    return median(runs)
  }
  const one = parseMillis(1024 * 1024)
  const four = parseMillis(4 * 1024 * 1024)
  console.log(
    `1 MiB: ${one.toFixed(2)} ms; 4 MiB: ${four.toFixed(2)} ms; ratio ${(four / one).toFixed(1)} (linear: ~4)`
  )
}).pipe(Effect.scoped)

Effect.runPromise(program).then(
  () => process.exit(0),
  (error) => {
    console.error(error)
    process.exit(1)
  }
)
