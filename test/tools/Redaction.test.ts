import { NodeServices } from "@effect/platform-node"
import { assert, describe, it } from "@effect/vitest"
import { Chunk, Effect, HashMap, HashSet, Layer, Redacted, Schema } from "effect"
import * as Run from "../../src/run/Run.ts"
import * as ScriptedModel from "../../src/testing/ScriptedModel.ts"
import * as Redaction from "../../src/tools/Redaction.ts"
import * as Tool from "../../src/tools/Tool.ts"

describe("Redaction (R3.1, R12)", () => {
  it("R12 a secret that holds another is masked whole, whatever order the secrets come in", () => {
    for (const secrets of [
      ["alice", "alice-TOPSECRET-2024"],
      ["alice-TOPSECRET-2024", "alice"]
    ]) {
      assert.strictEqual(
        Redaction.maskText("pw=alice-TOPSECRET-2024 user=alice", Redaction.secrets(secrets)),
        "pw=<redacted> user=<redacted>"
      )
    }
  })

  it("R12 a secret quoted as JSON (its quote and backslash escaped) is masked too", () => {
    const secret = 'tok"TOP\\SECRET99'
    const text = `the tool failed: ${JSON.stringify({ token: secret })}`
    assert.strictEqual(Redaction.maskText(text, Redaction.secrets([secret])), 'the tool failed: {"token":"<redacted>"}')
  })

  it("R12 a secret written as a URL, a form, ASCII-only JSON, JSON twice or base64 writes it is masked too (review 188)", () => {
    const secret = "sk+TOPSECRET/ab=cd\u00c442 x"
    const known = Redaction.secrets([secret])
    const ascii = (text: string, hex: (code: string) => string) =>
      text.replace(/[\u0080-\uffff]/g, (c) => `\\u${hex(c.charCodeAt(0).toString(16).padStart(4, "0"))}`)
    const json = JSON.stringify(secret).slice(1, -1)
    const url = encodeURIComponent(secret)
    const base64 = (text: string) => Buffer.from(text).toString("base64")
    // Each form as a text would hold it, within other text.
    const written = {
      url,
      lowerHex: url.replace(/%[0-9A-F]{2}/g, (code) => code.toLowerCase()),
      path: encodeURI(secret),
      form: url.replaceAll("%20", "+"),
      python: ascii(json, (code) => code),
      dotnet: ascii(json, (code) => code.toUpperCase()),
      twice: JSON.stringify(json).slice(1, -1),
      slashed: json.replaceAll("/", "\\/"),
      base64: base64(secret),
      base64url: Buffer.from(secret).toString("base64url"),
      // Basic auth: base64 of "user:secret", the secret starting one or two bytes into a group of three.
      basic1: base64(`abc:${secret}`),
      basic2: base64(`u:${secret}`)
    }
    for (const [form, encoded] of Object.entries(written)) {
      const masked = Redaction.maskText(`before ${encoded} after`, known)
      assert.include(masked, Redaction.mask, form)
      assert.notInclude(masked, encoded.slice(6, -6), form)
    }
    // Text that only shares a few characters with a form is left alone.
    assert.strictEqual(Redaction.maskText("sk+TOP and %2B and 42", known), "sk+TOP and %2B and 42")
  })

  it("R12 a secret percent-encoded strictly, or in base64 wrapped over lines, is masked too (review 191)", () => {
    const secret = "Pa$$w0rd!(2024)*-and-more"
    const known = Redaction.secrets([secret])
    const strict = encodeURIComponent(secret).replace(
      /[!'()*]/g,
      (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`
    )
    assert.strictEqual(Redaction.maskText(`curl -d key=${strict} x`, known), "curl -d key=<redacted> x")
    // `openssl base64` wraps at 64 columns: the secret straddles a line break.
    const wrapped = Buffer.from(`${"x".repeat(40)}${secret}${"y".repeat(40)}`)
      .toString("base64")
      .replace(/.{64}/g, "$&\n")
    const masked = Redaction.maskText(`-----BEGIN-----\n${wrapped}\n-----END-----`, known)
    assert.include(masked, "<redacted>")
    assert.notInclude(masked, wrapped.slice(60, 70))
    // Ordinary lines of words are left alone.
    assert.strictEqual(Redaction.maskText("compiling\nmodules\ndone", known), "compiling\nmodules\ndone")
  })

  it("R12 a secret percent-encoded with any of its characters left as they are is masked; lines of words stay (review 192)", () => {
    const key = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"
    const known = Redaction.secrets([key, "p@ss/word!9"])
    // Python's quote() keeps `/`, Go's PathEscape keeps `+`.
    for (const written of [
      "wJalrXUtnFEMI/K7MDENG%2BbPxRfiCYEXAMPLEKEY",
      "wJalrXUtnFEMI%2FK7MDENG+bPxRfiCYEXAMPLEKEY",
      "p%40ss/word%219"
    ]) {
      assert.strictEqual(Redaction.maskText(`GET /v1?k=${written}&x=1`, known), "GET /v1?k=<redacted>&x=1", written)
    }
    // A base64 line of the secret among lines of words masks that line only.
    const lines = ["build", "compiling", "linking", Buffer.from(key).toString("base64"), "finished", "ok: 3 files"]
    assert.strictEqual(
      Redaction.maskText(lines.join("\n"), known),
      ["build", "compiling", "linking", "<redacted>", "finished", "ok: 3 files"].join("\n")
    )
  })

  it("R12 a text cut short in the middle of a secret does not keep the secret's beginning", () => {
    const secret = "TOPSECRET-abcdef"
    assert.strictEqual(
      Redaction.maskText(`hint: key=${secret.slice(0, 11)}…`, Redaction.secrets([secret])),
      "hint: key=<redacted>…"
    )
    assert.strictEqual(
      Redaction.maskText(
        `denied: arguments.path "/data/${secret.slice(0, 9)}…" is outside`,
        Redaction.secrets([secret])
      ),
      'denied: arguments.path "/data/<redacted>…" is outside'
    )
    // Seven characters say little of a secret, and text may share them with one: left as they are.
    assert.strictEqual(Redaction.maskText("key=TOPSECR…", Redaction.secrets([secret])), "key=TOPSECR…")
    assert.strictEqual(Redaction.maskText("see http…", Redaction.secrets(["https://user:pw@host"])), "see http…")
  })

  it("R12 a large text with many cuts and many secrets: only the cut inside a secret is masked", () => {
    const secrets = Array.from({ length: 200 }, (_, i) => `secret-${i}-${"z".repeat(40)}`)
    const text = `${"hello world…".repeat(3_000)} secret-7-${"z".repeat(20)}…`
    const masked = Redaction.maskText(text, Redaction.secrets(secrets))
    // Only the cut inside a secret is masked; the 3,000 others are text.
    assert.strictEqual(masked, `${"hello world…".repeat(3_000)} <redacted>…`)
    // Searched at a cost past the bound (the pipeline masks what it sends, at most
    // `maxObservationChars` and the longest secret), a text is masked whole.
    assert.strictEqual(Redaction.maskText("hello world…".repeat(1_000_000), Redaction.secrets(secrets)), Redaction.mask)
  })

  it.effect(
    "R3.1 R12 a Redacted struct whose password holds the user name: nothing of the password reaches the log",
    () =>
      Effect.gen(function* () {
        const login = Tool.make({
          name: "login",
          description: "Logs in.",
          input: Schema.Struct({
            creds: Schema.RedactedFromValue(Schema.Struct({ password: Schema.String, user: Schema.String }))
          }),
          output: Schema.Struct({ echoed: Schema.String }),
          sideEffect: "read",
          // A careless tool that echoes the password: the runtime masks it by value.
          handler: ({ creds }) => Effect.succeed({ echoed: `pw=${Redacted.value(creds).password}` })
        })
        const model = ScriptedModel.layer([
          ScriptedModel.toolCall("login", { creds: { password: "alice-TOPSECRET-2024", user: "alice" } }),
          ScriptedModel.finalAnswer("ok")
        ])
        const result = yield* Run.run({ goal: "log in", tools: [login] }).pipe(
          Effect.provide(Layer.merge(model, NodeServices.layer))
        )
        // The model's own message keeps what it sent; nothing the runtime derived may.
        const derived = JSON.stringify(result.timeline.filter((e) => e._tag !== "model.responded"))
        assert.notInclude(derived, "TOPSECRET")
        assert.include(derived, "pw=<redacted>")
      })
  )

  it("R12 the secrets of a value are found inside maps and sets, their keys too, and masked in a copy", () => {
    const secret = (n: number) => Redacted.make(`TOPSECRET-${n}`)
    const value = {
      map: new Map<unknown, unknown>([
        ["a", secret(1)],
        [secret(2), "b"]
      ]),
      set: new Set([secret(3)]),
      hashMap: HashMap.make(["c", secret(4)]),
      hashSet: HashSet.make(secret(5)),
      chunk: Chunk.make(secret(6))
    }
    assert.deepStrictEqual(
      [...Redaction.secretsOf(value)].sort(),
      [1, 2, 3, 4, 5, 6].map((n) => `TOPSECRET-${n}`)
    )
    const copy = Redaction.withoutSecrets(value)
    // Every secret is now masked, each its own value: two secrets that key a Map stay two entries.
    assert.deepStrictEqual([...new Set(Redaction.secretsOf(copy))], [Redaction.mask])
    const keyed = Redaction.withoutSecrets(
      new Map([
        [secret(7), "valid"],
        [secret(8), "revoked"]
      ])
    )
    assert.deepStrictEqual([...(keyed as Map<unknown, string>).values()], ["valid", "revoked"])
    // Effect's collections key by value: their masks are numbered, and no entry merges away.
    const hashed = Redaction.withoutSecrets(HashMap.make([secret(7), "valid"], [secret(8), "revoked"]))
    assert.deepStrictEqual([...HashMap.values(hashed as HashMap.HashMap<unknown, string>)].sort(), ["revoked", "valid"])
    assert.strictEqual(
      HashSet.size(Redaction.withoutSecrets(HashSet.make(secret(7), secret(8))) as HashSet.HashSet<unknown>),
      2
    )
    // A part a secret shares with the plain value is the secret's all the same, in either order.
    const shared = { token: "TOPSECRET-9" }
    assert.deepStrictEqual(Redaction.secretsOf({ plain: shared, secret: Redacted.make(shared) }), ["TOPSECRET-9"])
    assert.deepStrictEqual(Redaction.secretsOf({ secret: Redacted.make(shared), plain: shared }), ["TOPSECRET-9"])
    // The original is untouched.
    assert.isTrue(Redacted.isRedacted(value.map.get("a")))
    assert.notInclude(JSON.stringify([...(copy as typeof value).map.values()]), "TOPSECRET")
    assert.deepStrictEqual([...Redaction.allLeaves(new Map([["k", new Set(["v"])]]))].sort(), ["k", "v"])
  })

  it("R12 a value that shares its parts (60 levels, each holding the next twice) is walked once per part", () => {
    let shared: unknown = Redacted.make("TOPSECRET-SHARED")
    let plain: unknown = "leaf"
    for (let i = 0; i < 60; i++) {
      shared = { a: shared, b: [shared] }
      plain = { a: plain, b: plain }
    }
    assert.deepStrictEqual(Redaction.secretsOf(shared), ["TOPSECRET-SHARED"])
    assert.deepStrictEqual([...new Set(Redaction.allLeaves(plain))], ["leaf"])
    assert.deepStrictEqual([...new Set(Redaction.secretsOf(Redaction.withoutSecrets(shared)))], [Redaction.mask])
  })

  it("R12 a secret used as an object's key is masked in the masked copy, as in text", () => {
    const secrets = Redaction.secrets(["TOPSECRET-1"])
    assert.deepStrictEqual(Redaction.maskValue({ "TOPSECRET-1": "valid", other: 1 }, secrets), {
      [Redaction.mask]: "valid",
      other: 1
    })
    // Keys masked alike stay apart, numbered past the names the tool's own keys have: nothing
    // the tool said is dropped, and no value takes another key's name.
    const two = Redaction.secrets(["TOPSECRET-1", "TOPSECRET-2"])
    const own = `${Redaction.mask} (2)`
    assert.deepStrictEqual(
      Redaction.maskValue({ "TOPSECRET-1": "valid", "TOPSECRET-2": "revoked", [own]: "the tool's own" }, two),
      { [Redaction.mask]: "valid", [`${Redaction.mask} (3)`]: "revoked", [own]: "the tool's own" }
    )
  })

  it.effect("R3.1 R12 Redacted values inside a map of the input and a set of the output reach no record", () =>
    Effect.gen(function* () {
      const vault = Tool.make({
        name: "vault",
        description: "Checks tokens.",
        input: Schema.Struct({ creds: Schema.ReadonlyMap(Schema.String, Schema.RedactedFromValue(Schema.String)) }),
        output: Schema.Struct({ keys: Schema.ReadonlySet(Schema.Redacted(Schema.String)) }),
        sideEffect: "read",
        handler: ({ creds }) => Effect.succeed({ keys: new Set([...creds.values(), Redacted.make("TOPSECRET-OUT")]) })
      })
      const model = ScriptedModel.layer([
        ScriptedModel.toolCall("vault", { creds: [["github", "TOPSECRET-IN"]] }),
        ScriptedModel.finalAnswer("ok")
      ])
      const result = yield* Run.run({ goal: "check", tools: [vault] }).pipe(
        Effect.provide(Layer.merge(model, NodeServices.layer))
      )
      const derived = JSON.stringify(result.timeline.filter((e) => e._tag !== "model.responded"))
      assert.notInclude(derived, "TOPSECRET")
      const succeeded = result.timeline.find((e) => e._tag === "tool.succeeded")
      assert.deepStrictEqual(succeeded?._tag === "tool.succeeded" ? succeeded.input : undefined, {
        creds: [["github", Redaction.mask]]
      })
    })
  )
})
