import { NodeServices } from "@effect/platform-node"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer, Schema } from "effect"
import type * as Event from "../../src/events/Event.ts"
import * as Run from "../../src/run/Run.ts"
import * as ScriptedModel from "../../src/testing/ScriptedModel.ts"
import * as Signature from "../../src/tools/Signature.ts"
import * as Tool from "../../src/tools/Tool.ts"

const withScript = (script: ReadonlyArray<ScriptedModel.Step>) =>
  Layer.mergeAll(ScriptedModel.layer(script), NodeServices.layer)

const ofTag = <T extends Event.Event["_tag"]>(timeline: ReadonlyArray<Event.Event>, tag: T) =>
  timeline.filter((e): e is Event.Of<T> => e._tag === tag)

describe("Signature.canonicalJson", () => {
  it("R2.3 sorts object keys at every depth", () => {
    const value = { b: 1, a: { d: [{ z: 1, y: 2 }], c: null }, "": true }
    assert.strictEqual(Signature.canonicalJson(value), '{"":true,"a":{"c":null,"d":[{"y":2,"z":1}]},"b":1}')
    assert.strictEqual(
      Signature.canonicalJson({ a: 1, b: { c: 2, d: 3 } }),
      Signature.canonicalJson(JSON.parse('{ "b": { "d": 3, "c": 2 }, "a": 1 }'))
    )
  })

  it("R2.3 arrays keep their order", () => {
    assert.strictEqual(Signature.canonicalJson([3, 1, 2]), "[3,1,2]")
    assert.notStrictEqual(Signature.canonicalJson({ ids: [1, 2] }), Signature.canonicalJson({ ids: [2, 1] }))
  })

  it("R2.3 scalars, null and undefined have a canonical text", () => {
    assert.strictEqual(Signature.canonicalJson("x"), '"x"')
    assert.strictEqual(Signature.canonicalJson(1.5), "1.5")
    assert.strictEqual(Signature.canonicalJson(null), "null")
    assert.strictEqual(Signature.canonicalJson(undefined), "null")
    assert.strictEqual(Signature.canonicalJson({ a: undefined, b: 1 }), '{"b":1}')
  })

  it("R2.3 a __proto__ key is kept as data and changes no prototype", () => {
    const parsed: unknown = JSON.parse('{"b":1,"__proto__":{"polluted":true,"z":1,"a":2}}')
    const text = Signature.canonicalJson(parsed)
    assert.strictEqual(text, '{"__proto__":{"a":2,"polluted":true,"z":1},"b":1}')
    assert.notStrictEqual(text, Signature.canonicalJson({ b: 1 }))
    const probe: Record<string, unknown> = {}
    assert.isUndefined(probe.polluted)
    assert.isUndefined(Object.getOwnPropertyDescriptor(Object.prototype, "polluted"))
    assert.strictEqual(Object.getPrototypeOf(probe), Object.prototype)
    // The signature of a call carrying it is stable and still distinguishes it.
    const call = Signature.toolCall("t", '{"__proto__":{"x":1}}')
    assert.strictEqual(call, Signature.toolCall("t", '{"__proto__":{"x":1}}'))
    assert.notStrictEqual(call, Signature.toolCall("t", "{}"))
  })
})

describe("Signature.digest", () => {
  it("R2.3 distinct texts have distinct digests: 238,328 names three characters apart, and 100,000 ids", () => {
    // With the 32-bit digest before, {"q":"file_aad.txt"}, "file_Bbd.txt" and "file_BCe.txt" shared one
    // signature, and three different reads ended the run repeated_tool_call.
    const chars = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
    const digests = new Set<string>()
    let texts = 0
    for (const a of chars)
      for (const b of chars)
        for (const c of chars) {
          digests.add(Signature.toolCallParsed("read", { q: `file_${a}${b}${c}.txt` }))
          texts++
        }
    for (let id = 0; id < 100_000; id++) {
      digests.add(Signature.digest(JSON.stringify({ id })))
      texts++
    }
    assert.strictEqual(digests.size, texts)
    assert.strictEqual(Signature.digest("same text"), Signature.digest("same text"))
    assert.match(Signature.digest("abc"), /^\d{1,10}\.\d{1,10}:3$/)
  })
})

describe("Signature.toolCall", () => {
  it("R2.3 the signature is the tool name and canonical arguments, whatever the key order or spacing", () => {
    const a = Signature.toolCall("search", '{"a":1,"b":2}')
    // A short digest of the canonical JSON, not a copy of the arguments.
    assert.strictEqual(a, `search:${Signature.digest('{"a":1,"b":2}')}`)
    assert.strictEqual(Signature.toolCall("search", '{"b":2,"a":1}'), a)
    assert.strictEqual(Signature.toolCall("search", '{ "b" : 2,\n "a": 1 }'), a)
    assert.strictEqual(Signature.toolCall("search", { b: 2, a: 1 }), a)
    assert.notStrictEqual(Signature.toolCall("find", '{"a":1,"b":2}'), a)
    assert.notStrictEqual(Signature.toolCall("search", '{"a":1,"b":3}'), a)
  })

  it("R2.3 malformed JSON text still has a signature: a digest of the text", () => {
    const bad = Signature.toolCall("t", "{not json")
    assert.strictEqual(bad, `t:~${Signature.digest("{not json")}`)
    assert.strictEqual(Signature.toolCall("t", "{not json"), bad)
    assert.notStrictEqual(Signature.toolCall("t", "{not json!"), bad)
  })

  it("R12 arguments nested thousands deep get a signature without a deep walk", () => {
    const deep = `${"[".repeat(3000)}${"]".repeat(3000)}`
    const text = `{"a":${deep}}`
    assert.strictEqual(Signature.toolCall("t", text), `t:~${Signature.digest(text)}`)
    let cyclic: Record<string, unknown> = {}
    cyclic = { self: cyclic }
    cyclic.self = cyclic
    assert.strictEqual(Signature.toolCall("t", cyclic), "t:~object")
    assert.throws(() => Signature.canonicalJson(JSON.parse(deep)), RangeError)
  })

  it("R2.3 refused arguments handed over parsed keep apart: distinct values, distinct signatures", () => {
    // NaN is no JSON: the pipeline refuses these, and each is still its own call (it was `t:~object` for all).
    const signed = [1, 2, 3].map((page) => Signature.toolCall("t", { q: Number.NaN, page }))
    assert.strictEqual(new Set(signed).size, 3)
    assert.strictEqual(Signature.toolCall("t", { page: 1, q: Number.NaN }), signed[0])
    assert.strictEqual(Signature.toolCall("t", { n: 1n }), "t:~object")
  })

  it("R12 refused arguments whose parts are shared at every level are signed by their type, not walked path by path", () => {
    // 2^40 paths: walked whole, the signature froze the run past its deadline and ran the process out of memory.
    let shared: unknown = 1
    for (let level = 0; level < 40; level++) shared = { a: shared, b: shared }
    assert.strictEqual(Signature.toolCall("t", shared), "t:~object")
  })

  it("R2.3 the failure signature is tool, code and message", () => {
    assert.strictEqual(Signature.failure("read", "not_found", "no file a"), "read|not_found|no file a")
    assert.notStrictEqual(
      Signature.failure("read", "not_found", "no file b"),
      Signature.failure("read", "not_found", "no file a")
    )
  })
})

describe("Signature.digest of equal values", () => {
  it("R2.3 equal values have equal digests; different ones differ", () => {
    const x = Signature.digest(Signature.canonicalJson({ a: 1, b: [1, 2] }))
    assert.strictEqual(Signature.digest(Signature.canonicalJson({ b: [1, 2], a: 1 })), x)
    assert.notStrictEqual(Signature.digest(Signature.canonicalJson({ a: 1, b: [2, 1] })), x)
    assert.strictEqual(Signature.digest("abc"), Signature.digest("abc"))
    assert.notStrictEqual(Signature.digest("abc"), Signature.digest("abd"))
    assert.match(Signature.digest(""), /^\d+\.\d+:0$/)
    assert.match(Signature.digest("hello"), /:5$/)
  })
})

describe("Repeated tool call in a run", () => {
  it.effect(
    "R2.3 repeated_tool_call: the same call with keys in a different order counts as the same signature",
    () => {
      const seen: Array<string> = []
      const add = Tool.make({
        name: "add",
        description: "Add two numbers",
        input: Schema.Struct({ a: Schema.Number, b: Schema.Number }),
        output: Schema.Number,
        sideEffect: "none",
        idempotent: true,
        handler: ({ a, b }) =>
          Effect.sync(() => {
            seen.push(`${a}+${b}`)
            return a + b
          })
      })
      return Effect.gen(function* () {
        const result = yield* Run.run({ goal: "add", tools: [add] })
        assert.strictEqual(result.stopReason, "repeated_tool_call")
        const decided = ofTag(result.timeline, "termination.decided")
        assert.deepStrictEqual(
          decided.map((e) => [e.policy, e.reason]),
          [["repeated_tool_call", "repeated_tool_call"]]
        )
        // The third request is stopped right after the model response: its handler never runs.
        assert.deepStrictEqual(seen, ["1+2", "1+2"])
        const signatures = ofTag(result.timeline, "model.responded").flatMap((e) => e.signatures)
        const one = `add:${Signature.digest('{"a":1,"b":2}')}`
        assert.deepStrictEqual(signatures, [one, one, one])
        assert.strictEqual(result.counters.repeatedToolCallCount, 3)
      }).pipe(
        Effect.provide(
          withScript([
            ScriptedModel.toolCall("add", '{"a":1,"b":2}'),
            ScriptedModel.toolCall("add", '{"b":2,"a":1}'),
            ScriptedModel.toolCall("add", '{ "a": 1, "b": 2 }'),
            ScriptedModel.finalAnswer("3")
          ])
        )
      )
    }
  )

  it.effect("R2.3 repeated_tool_call: the threshold is configurable, and different arguments do not count", () =>
    Effect.gen(function* () {
      const echo = Tool.make({
        name: "echo",
        description: "Echo",
        input: Schema.Struct({ text: Schema.String }),
        output: Schema.String,
        sideEffect: "none",
        idempotent: true,
        handler: ({ text }) => Effect.succeed(text)
      })
      const result = yield* Run.run({ goal: "echo", tools: [echo], limits: { repeatedToolCall: 2 } })
      assert.strictEqual(result.stopReason, "repeated_tool_call")
      assert.strictEqual(result.counters.iterations, 4)
      assert.strictEqual(result.counters.repeatedToolCallCount, 2)
    }).pipe(
      Effect.provide(
        withScript([
          ScriptedModel.toolCall("echo", { text: "a" }),
          ScriptedModel.toolCall("echo", { text: "b" }),
          ScriptedModel.toolCall("echo", { text: "c" }),
          ScriptedModel.toolCall("echo", { text: "b" }),
          ScriptedModel.finalAnswer("done")
        ])
      )
    )
  )
})

describe("Signature.observation (R2.3)", () => {
  const echoed = (q: string) => JSON.stringify({ query: q, results: [] })

  it("R2.3 a result echoing near-identical queries is one result; an echo of other words another", () => {
    const key = (q: string) => Signature.observation(echoed(q), JSON.stringify({ q }))
    assert.strictEqual(key("report 2024"), key("report 2024   "))
    assert.strictEqual(key("report 2024"), key("Report\t2024"))
    assert.notStrictEqual(key("report 2024"), key("report 2025"))
    // Arguments handed over parsed count as their JSON text does.
    assert.strictEqual(key("report 2024"), Signature.observation(echoed("REPORT 2024"), { q: "REPORT 2024" }))
    // The echo as a text writes it, as Python's json.dumps escapes it, and as JSON inside a string.
    const shapes = [
      (q: string) => `No results for '${q}'.`,
      (q: string) =>
        echoed(q).replace(/[\u0080-\uffff]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`),
      (q: string) => JSON.stringify({ text: echoed(q) })
    ]
    for (const shape of shapes) {
      const of = (q: string) => Signature.observation(shape(q), { q })
      assert.strictEqual(of("café report 2024"), of("Café  report 2024"), shape("café"))
      assert.notStrictEqual(of("café report 2024"), of("café report 2025"), shape("café"))
    }
    // Among other string arguments (their keys are no echoes), and escaped as .NET and Go escape.
    const many = (q: string) => ({
      index: "documents",
      language: "english",
      sort: "relevance",
      order: "desc",
      query: q
    })
    const dotnet = (q: string) =>
      echoed(q).replace(
        /[\u0080-\uffff&<>]/g,
        (c) => `\\u${c.charCodeAt(0).toString(16).toUpperCase().padStart(4, "0")}`
      )
    for (const shape of [echoed, dotnet, (q: string) => JSON.stringify(dotnet(q))]) {
      const of = (q: string) => Signature.observation(shape(q), many(q))
      assert.strictEqual(of("R&D café 2024"), of("r&d Café  2024"), shape("R&D café 2024"))
    }
    // Escapes read even when another argument is echoed as it is.
    const formatted = (q: string) =>
      JSON.stringify({ format: "json", query: q }).replace(
        /[\u0080-\uffff&]/g,
        (c) => `\\u${c.charCodeAt(0).toString(16).toUpperCase().padStart(4, "0")}`
      )
    assert.strictEqual(
      Signature.observation(formatted("R&D café"), { query: "R&D café", format: "json" }),
      Signature.observation(formatted("r&d Café "), { query: "r&d Café ", format: "json" })
    )
    // A log that names its job and grows past the cut is no unchanged observation: its count of what was cut differs.
    const cut = (more: number) => `log of build-42: line 1 … [observation cut: ${more} more characters]`
    assert.notStrictEqual(
      Signature.observation(cut(10), { job: "build-42" }),
      Signature.observation(cut(11), { job: "build-42" })
    )
    // The rest of a result keeps its escapes as written: lines that differ only in them differ.
    const line = (text: string) => JSON.stringify({ path: "fixtures/esc.ts", text })
    assert.notStrictEqual(
      Signature.observation(line('decode("é")'), { path: "fixtures/esc.ts" }),
      Signature.observation(line('decode("\\u00e9")'), { path: "fixtures/esc.ts" })
    )
    // An argument that holds escape text is found as it is written.
    const grep = (pattern: string) => `No matches for "${pattern}"`
    assert.strictEqual(
      Signature.observation(grep("\\u2019"), { pattern: "\\u2019" }),
      Signature.observation(grep("\\u2019 "), { pattern: "\\u2019 " })
    )
    // An emoji as Python escapes it (a surrogate pair of escapes), a quote as .NET does.
    const py = (q: string) =>
      JSON.stringify({ q, hits: [] }).replace(
        /[\u0080-\uffff]/g,
        (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`
      )
    assert.strictEqual(
      Signature.observation(py("rocket 🚀 launch"), { q: "rocket 🚀 launch" }),
      Signature.observation(py("Rocket 🚀  launch"), { q: "Rocket 🚀  launch" })
    )
    const quoted = (q: string) => JSON.stringify({ q }).replace(/\\"/g, "\\u0022")
    assert.strictEqual(
      Signature.observation(quoted('say "hi"'), { q: 'say "hi"' }),
      Signature.observation(quoted('Say "hi" '), { q: 'Say "hi" ' })
    )
    // A value within another does not cut it apart; `/` written as PHP writes it.
    const none = (q: string) => `No results for ${q}`
    assert.strictEqual(
      Signature.observation(none("report 2024"), { topic: "report", q: "report 2024" }),
      Signature.observation(none("report  2024"), { topic: "report", q: "report  2024" })
    )
    const php = (q: string) => JSON.stringify({ q }).replaceAll("/", "\\/")
    assert.strictEqual(
      Signature.observation(php("docs/api"), { q: "docs/api" }),
      Signature.observation(php("Docs/API "), { q: "Docs/API " })
    )
    // A value echoed as written and escaped too is left out in both forms.
    const twice = (q: string) => `${JSON.stringify({ q })} ${JSON.stringify({ q }).replace(/é/g, "\\u00e9")}`
    assert.strictEqual(
      Signature.observation(twice("café 2024"), { q: "café 2024" }),
      Signature.observation(twice("Café  2024"), { q: "Café  2024" })
    )
    // Escapes read to find a value do not change the rest: lines that differ only in them still differ.
    const pyLine = (q: string, text: string) =>
      JSON.stringify({ q, text }).replace(
        /[\u0080-\uffff]/g,
        (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`
      )
    assert.strictEqual(
      Signature.observation(pyLine("café 2024", 'decode("é")'), { q: "café 2024" }),
      Signature.observation(pyLine("Café  2024", 'decode("é")'), { q: "Café  2024" })
    )
    assert.notStrictEqual(
      Signature.observation(pyLine("café 2024", 'decode("é")'), { q: "café 2024" }),
      Signature.observation(pyLine("café 2024", 'decode("\\u00e9")'), { q: "café 2024" })
    )
    // Two echoed values whose lengths change places with their spacing.
    const both = (q: string, topic: string) => `No results for ${q} in ${topic}`
    assert.strictEqual(
      Signature.observation(both("ab  cd", "wxyzv"), { topic: "wxyzv", q: "ab  cd" }),
      Signature.observation(both("ab cd", "wxyzv"), { topic: "wxyzv", q: "ab cd" })
    )
    // A value as a page writes it (`&amp;`, `&quot;`, `&#39;` or `&#x27;`).
    const page = (q: string) =>
      `<p>No results for <b>${q.replace(/&/g, "&amp;").replace(/"/g, "&quot;").replace(/'/g, "&#x27;")}</b></p>`
    assert.strictEqual(
      Signature.observation(page(`R&D "Bob's" notes`), { q: `R&D "Bob's" notes` }),
      Signature.observation(page(`r&d "bob's"  notes`), { q: `r&d "bob's"  notes` })
    )
    const goPage = (q: string) => `<p>${q.replace(/&/g, "&amp;").replace(/"/g, "&#34;").replace(/'/g, "&#39;")}</p>`
    assert.strictEqual(
      Signature.observation(goPage(`"café" report`), { q: `"café" report` }),
      Signature.observation(goPage(`"Café"  report`), { q: `"Café"  report` })
    )
    // Where each value was, and which it was: a route and its reverse differ, as do swapped results.
    const route = (from: string, to: string) =>
      Signature.observation(`No direct flight from ${from} to ${to}`, { from, to })
    assert.notStrictEqual(route("Paris", "Lille"), route("Lille", "Paris"))
    const swapped = (done: string, pending: string) =>
      Signature.observation(`done: ${done}; pending: ${pending}`, { items: ["alpha", "omega"] })
    assert.notStrictEqual(swapped("alpha", "omega"), swapped("omega", "alpha"))
    // The same call with its keys written in another order is one.
    const twoArgs = (q: string) => `${q}: no results (english)`
    assert.strictEqual(
      Signature.observation(twoArgs("café report"), '{"q":"café report","lang":"english"}'),
      Signature.observation(twoArgs("Café  report"), '{"lang":"english","q":"Café  report"}')
    )
    // One value in two arguments, its case differing in one: one query.
    const tagged = (q: string, tag: string) => Signature.observation(`${q}: 3 posts tagged ${tag}`, { q, tag })
    assert.strictEqual(tagged("rust", "rust"), tagged("Rust", "rust"))
    // What was on either side of an echo is not joined into a new one.
    assert.notStrictEqual(
      Signature.observation("found: aabcbc", { q: "abc" }),
      Signature.observation("found: ababcc", { q: "abc" })
    )
    // Argument text past 64 KiB is not parsed again: the result is keyed whole, at once.
    const big = JSON.stringify({ content: `"${"x".repeat(70_000)}`, q: "report 2024" })
    assert.strictEqual(Signature.observation(echoed("report 2024"), big), Signature.digest(echoed("report 2024")))
    // An echo tool's results are its different inputs: different.
    assert.notStrictEqual(
      Signature.observation(JSON.stringify("hello"), { text: "hello" }),
      Signature.observation(JSON.stringify("world"), { text: "world" })
    )
  })

  it("R2.3 queries alike but for characters that show nothing are one query (review 181)", () => {
    const plain = "café report"
    // A zero-width space, a soft hyphen, a word joiner, a zero-width non-joiner, a byte order
    // mark, a variation selector and a Hangul filler: on screen, each is the plain query.
    const hidden = [
      "caf\u200bé report",
      "café re\u00adport",
      "café\u2060 report",
      "ca\u200cfé report",
      "\ufeffcafé report",
      "café\ufe0f report",
      "café report\u3164",
      // Tag characters outside a flag show nothing (review 186).
      "café\u{E0041} report\u{E007F}"
    ]
    const shapes = [
      (q: string) => `No results for ${q}`,
      (q: string) => echoed(q).replace(/[\u0080-\uffff]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`)
    ]
    for (const shape of shapes) {
      const of = (q: string) => Signature.observation(shape(q), JSON.stringify({ q }))
      for (const q of hidden) assert.strictEqual(of(q), of(plain), JSON.stringify(q))
      // Characters that show still tell queries apart: a letter's accent, a hyphen, the tags
      // that make a flag England's or Scotland's (review 184), the Arabic number sign.
      assert.notStrictEqual(of("café report"), of("cafe report"))
      assert.notStrictEqual(of("café report"), of("café-report"))
      const flag = (tags: string) =>
        `weather \u{1F3F4}${[...tags].map((c) => String.fromCodePoint(0xe0000 + c.charCodeAt(0))).join("")}\u{E007F}`
      assert.notStrictEqual(of(flag("gbeng")), of(flag("gbsct")))
      assert.notStrictEqual(of("\u0600123 report"), of("123 report"))
    }
  })

  it("R2.3 any other result is keyed whole: the same text for other arguments is one, other spacing or case is not", () => {
    assert.strictEqual(
      Signature.observation("no results", { q: "a query" }),
      Signature.observation("no results", { q: "another" })
    )
    const yaml = (indent: number) => `a:\n${" ".repeat(indent)}b: 1`
    assert.notStrictEqual(
      Signature.observation(yaml(2), { path: "one.yaml" }),
      Signature.observation(yaml(4), { path: "two.yaml" })
    )
    assert.notStrictEqual(Signature.observation("Hello"), Signature.observation("hello"))
  })
})
