import { spawn } from "node:child_process"
import { once } from "node:events"
import { mkdirSync, readdirSync, symlinkSync, writeFileSync } from "node:fs"
import { fileURLToPath } from "node:url"
import { NodeFileSystem, NodePath } from "@effect/platform-node"
import { assert, describe, layer } from "@effect/vitest"
import { Effect, FileSystem, Layer, Path } from "effect"
import * as FileTools from "../../src/tools/FileTools.ts"
import * as Permission from "../../src/tools/Permission.ts"

const flipper = fileURLToPath(new URL("../fixtures/flip-link.mjs", import.meta.url))

const context = { runId: "run-1", callId: "call-1", idempotencyKey: "run-1/call-1", settle: () => {} }

// How many reads and how many writes race the flipping link.
const rounds = 2000

// "refused" is the policy's denial or the tool's outside_root; anything else is its code.
type Outcome = "inside" | "outside" | "refused" | `failed: ${string}`

layer(Layer.mergeAll(NodeFileSystem.layer, NodePath.layer))("FileTools under a race", (it) => {
  describe("a link flipped by another process", () => {
    it.effect(
      "R3.11 the file checked is the file used: 0 of 2,000 writes and 0 of 2,000 reads get out of the root",
      () =>
        Effect.gen(function* () {
          const fs = yield* FileSystem.FileSystem
          const path = yield* Path.Path
          const base = yield* fs.makeTempDirectoryScoped({ prefix: "file-tools-race-" })
          const root = path.join(base, "root")
          const inside = path.join(root, "inside")
          const outside = path.join(base, "outside")
          mkdirSync(inside, { recursive: true })
          mkdirSync(outside)
          writeFileSync(path.join(inside, "secret.txt"), "inside")
          writeFileSync(path.join(outside, "secret.txt"), "OUTSIDE")
          writeFileSync(path.join(outside, "outside-marker.txt"), "")
          const link = path.join(root, "flip")
          symlinkSync(inside, link)
          const tools = yield* FileTools.make({ root })
          // The policy checks first, as in a run: the race is between its check and the tool's use.
          const policy = yield* Permission.make({ roots: [root] })
          const allowed = (tool: FileTools.FileTools["readFile"] | FileTools.FileTools["writeTextFile"], p: string) =>
            Effect.map(
              policy.check({ tool, arguments: { path: p }, runId: "run-1", callId: "call-1" }),
              (decision) => decision._tag === "Allow"
            )

          const child = spawn(process.execPath, [flipper, link, inside, outside], {
            stdio: ["ignore", "pipe", "inherit"]
          })
          // Waits until the flipper is gone, so that it cannot touch the directory being removed.
          const stop = Effect.promise(async () => {
            if (child.exitCode !== null || child.signalCode !== null) return
            const exited = once(child, "exit")
            child.kill("SIGKILL")
            await exited
          })
          yield* Effect.addFinalizer(() => stop)
          yield* Effect.promise(() => once(child.stdout, "data"))

          const refusedOr = (code: string): Outcome => (code === "outside_root" ? "refused" : `failed: ${code}`)
          const read = Effect.fnUntraced(function* (_: number) {
            if (!(yield* allowed(tools.readFile, "flip/secret.txt"))) return "refused" as Outcome
            const result = yield* Effect.result(tools.readFile.handler({ path: "flip/secret.txt" }, context))
            if (result._tag === "Failure") return refusedOr(result.failure.code)
            return result.success.content === "inside" ? ("inside" as Outcome) : ("outside" as Outcome)
          })
          // Half the writes also create a directory under the link: the new chain must stay inside too.
          const write = Effect.fnUntraced(function* (n: number) {
            const target = n % 2 === 0 ? `flip/w-${n}.txt` : `flip/d-${n}/f.txt`
            if (!(yield* allowed(tools.writeTextFile, target))) return "refused" as Outcome
            const result = yield* Effect.result(tools.writeTextFile.handler({ path: target, content: "x" }, context))
            if (result._tag === "Failure") return refusedOr(result.failure.code)
            return "inside" as Outcome
          })
          const count = (outcomes: ReadonlyArray<Outcome>, outcome: Outcome) =>
            outcomes.filter((o) => o === outcome).length
          const indices = Array.from({ length: rounds }, (_, n) => n)
          const [reads, writes, listed] = yield* Effect.all(
            [
              Effect.forEach(indices, read, { concurrency: 8 }),
              Effect.forEach(indices, write, { concurrency: 8 }),
              Effect.forEach(
                indices.slice(0, 200),
                () =>
                  Effect.match(tools.listFiles.handler({ path: "flip" }, context), {
                    onFailure: (error) => error.code,
                    onSuccess: (listing) => listing.entries.map((entry) => entry.name).join(",")
                  }),
                { concurrency: 2 }
              )
            ],
            { concurrency: "unbounded" }
          )
          yield* stop

          assert.strictEqual(count(reads, "outside"), 0, "reads of the outside file")
          assert.deepStrictEqual(readdirSync(outside).sort(), ["outside-marker.txt", "secret.txt"])
          assert.isFalse(
            listed.some((entries) => entries.includes("outside-marker")),
            "a listing showed the outside"
          )
          // Nothing failed for another reason.
          assert.deepStrictEqual(
            [...reads, ...writes].filter((o) => o.startsWith("failed")),
            []
          )
          // The race was real: the link led outside at times and inside at others.
          assert.isAbove(count(reads, "refused") + count(writes, "refused"), 0)
          assert.isAbove(count(reads, "inside"), 0)
          // Every write reported as done is inside, where it said.
          const landed = readdirSync(inside).filter((name) => name.startsWith("w-") || name.startsWith("d-"))
          assert.strictEqual(landed.length, count(writes, "inside"))
        }),
      { timeout: 60_000 }
    )
  })
})
