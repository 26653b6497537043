import { existsSync, symlinkSync } from "node:fs"
import { NodeFileSystem, NodePath } from "@effect/platform-node"
import { assert, describe, layer } from "@effect/vitest"
import { Cause, Effect, FileSystem, Layer, Path, Schema } from "effect"
import type * as Event from "../../src/events/Event.ts"
import * as Run from "../../src/run/Run.ts"
import * as ScriptedModel from "../../src/testing/ScriptedModel.ts"
import * as FileTools from "../../src/tools/FileTools.ts"
import * as Permission from "../../src/tools/Permission.ts"
import * as Tool from "../../src/tools/Tool.ts"
import * as ToolArguments from "../../src/tools/ToolArguments.ts"

const probe = (name: string) =>
  Tool.make({
    name,
    description: "a probe with one path field and one content field",
    input: Schema.Struct({ path: Schema.String, content: Schema.String }),
    output: Schema.String,
    pathFields: ["path"],
    contentFields: ["content"],
    handler: () => Effect.succeed("ok")
  })

const writer = probe("write_text_file")

const check = (
  policy: Permission.PermissionService,
  args: Readonly<Record<string, unknown>>,
  tool: Tool.Any = writer
): Effect.Effect<Permission.Decision> => policy.check({ tool, arguments: args, runId: "run-1", callId: "call-1" })

const assertAllowed = (decision: Permission.Decision) => assert.deepStrictEqual(decision, Permission.allow)

const assertDenied = (decision: Permission.Decision, rule: Permission.Rule, ...mentions: ReadonlyArray<string>) => {
  assert.strictEqual(decision._tag, "Deny", `expected ${rule}`)
  if (decision._tag === "Deny") {
    assert.strictEqual(decision.rule, rule, decision.reason)
    for (const mention of mentions) assert.include(decision.reason, mention)
  }
}

// base/root is the allowed root; base/outside and base/root-evil are its neighbours.
const workspace = Effect.gen(function* () {
  const fs = yield* FileSystem.FileSystem
  const path = yield* Path.Path
  const base = yield* fs.makeTempDirectoryScoped({ prefix: "permission-" })
  const root = path.join(base, "root")
  const outside = path.join(base, "outside")
  yield* fs.makeDirectory(path.join(root, "docs"), { recursive: true })
  yield* fs.makeDirectory(outside)
  yield* fs.makeDirectory(path.join(base, "root-evil"))
  yield* fs.writeFileString(path.join(outside, "secret.txt"), "secret")
  yield* fs.writeFileString(path.join(root, "docs", "notes.md"), "notes")
  const policy = yield* Permission.make({ roots: [root] })
  return { base, root, outside, policy, path }
})

layer(Layer.mergeAll(NodeFileSystem.layer, NodePath.layer))("Permission", (it) => {
  describe("service", () => {
    it.effect("R3.6 the default policy allows everything, so a run needs no layer", () =>
      Effect.gen(function* () {
        const policy = yield* Permission.Permission
        assertAllowed(yield* check(policy, { path: "../../etc/passwd", content: "x" }))
      })
    )

    it.effect("R3.6 layer installs a policy in place of the default", () =>
      Effect.gen(function* () {
        const policy = yield* Permission.Permission
        assertDenied(yield* check(policy, { path: "a.txt" }), "tool_not_allowed")
      }).pipe(Effect.provide(Permission.layer({ allowTools: ["read_file"] })))
    )
  })

  describe("allow-list", () => {
    it.effect("R3.6 a tool not on the allow-list is denied as tool_not_allowed, naming the tool", () =>
      Effect.gen(function* () {
        const policy = yield* Permission.make({ allowTools: ["read_file"] })
        assertDenied(yield* check(policy, {}), "tool_not_allowed", "write_text_file")
        assertAllowed(yield* check(policy, {}, probe("read_file")))
      })
    )

    it.effect("R3.6 the allow-list is checked before the paths", () =>
      Effect.gen(function* () {
        const policy = yield* Permission.make({ allowTools: [], roots: ["/nonexistent-root"] })
        assertDenied(yield* check(policy, { path: "/etc/passwd" }), "tool_not_allowed")
      })
    )
  })

  describe("roots", () => {
    it.effect("R3.6 a path with .. that leaves the root is denied as outside_roots", () =>
      Effect.gen(function* () {
        const { policy } = yield* workspace
        assertDenied(
          yield* check(policy, { path: "docs/../../outside/secret.txt" }),
          "outside_roots",
          "write_text_file",
          "arguments.path",
          '"docs/../../outside/secret.txt"'
        )
      })
    )

    it.effect("R3.6 .. that stays inside the root is allowed", () =>
      Effect.gen(function* () {
        const { policy } = yield* workspace
        assertAllowed(yield* check(policy, { path: "docs/../docs/notes.md" }))
      })
    )

    it.effect("R3.6 an absolute path outside the roots is denied as outside_roots", () =>
      Effect.gen(function* () {
        const { policy, outside, path } = yield* workspace
        assertDenied(yield* check(policy, { path: path.join(outside, "secret.txt") }), "outside_roots")
        assertDenied(yield* check(policy, { path: "/etc/passwd" }), "outside_roots")
      })
    )

    it.effect(
      "R3.6 a root reached through a symbolic link: an absolute path under its real path is inside, one outside both is not",
      () =>
        Effect.gen(function* () {
          const { base, root, outside, path } = yield* workspace
          const link = path.join(base, "link")
          symlinkSync(root, link)
          const policy = yield* Permission.make({ roots: [link] })
          assertAllowed(yield* check(policy, { path: path.join(root, "docs", "notes.md") }))
          assertAllowed(yield* check(policy, { path: path.join(link, "docs", "notes.md") }))
          assertAllowed(yield* check(policy, { path: "docs/new.md" }))
          assertDenied(yield* check(policy, { path: path.join(outside, "secret.txt") }), "outside_roots")
          assertDenied(yield* check(policy, { path: path.join(root, "..", "outside", "secret.txt") }), "outside_roots")
        })
    )

    it.effect("R3.6 the root itself, absolute paths inside it and new files are allowed", () =>
      Effect.gen(function* () {
        const { policy, root, path } = yield* workspace
        assertAllowed(yield* check(policy, { path: "." }))
        assertAllowed(yield* check(policy, { path: root }))
        assertAllowed(yield* check(policy, { path: path.join(root, "docs", "notes.md") }))
        assertAllowed(yield* check(policy, { path: "reports/2024/new.md" }))
      })
    )

    it.effect("R3.6 a sibling sharing the root's prefix (root-evil vs root) is outside", () =>
      Effect.gen(function* () {
        const { policy, base, path } = yield* workspace
        assertDenied(yield* check(policy, { path: path.join(base, "root-evil", "x.txt") }), "outside_roots")
        assertDenied(yield* check(policy, { path: "../root-evil/x.txt" }), "outside_roots")
      })
    )

    it.effect("R3.6 relative paths resolve against the first root; any root may hold a path", () =>
      Effect.gen(function* () {
        const { root, outside, path } = yield* workspace
        const policy = yield* Permission.make({ roots: [root, outside] })
        assertAllowed(yield* check(policy, { path: "docs/notes.md" }))
        assertAllowed(yield* check(policy, { path: path.join(outside, "secret.txt") }))
        assertAllowed(yield* check(policy, { path: "../outside/secret.txt" }))
      })
    )
  })

  describe("symbolic links", () => {
    it.effect("R3.6 a link inside the root to a file outside is denied as symlink_escape", () =>
      Effect.gen(function* () {
        const { policy, root, outside, path } = yield* workspace
        symlinkSync(path.join(outside, "secret.txt"), path.join(root, "innocent.txt"))
        assertDenied(yield* check(policy, { path: "innocent.txt" }), "symlink_escape", '"innocent.txt"')
      })
    )

    it.effect("R3.6 a new file under a linked directory that leads outside is denied as symlink_escape", () =>
      Effect.gen(function* () {
        const { policy, root, outside, path } = yield* workspace
        symlinkSync(outside, path.join(root, "linked"))
        assertDenied(yield* check(policy, { path: "linked/new/deeper.txt" }), "symlink_escape")
      })
    )

    it.effect("R3.6 a dangling link is judged by where a write through it would land", () =>
      Effect.gen(function* () {
        const { policy, root, outside, path } = yield* workspace
        symlinkSync(path.join(outside, "not-yet.txt"), path.join(root, "dangling.txt"))
        symlinkSync(path.join(root, "docs", "later.md"), path.join(root, "dangling-inside.md"))
        assertDenied(yield* check(policy, { path: "dangling.txt" }), "symlink_escape")
        assertAllowed(yield* check(policy, { path: "dangling-inside.md" }))
      })
    )

    it.effect("R3.6 `..` after a link is the parent of where the link led, as the file system sees it", () =>
      Effect.gen(function* () {
        const { policy, root, outside, path } = yield* workspace
        // By text, "sub/../x" is "x", inside; on disk sub/.. is the outside directory.
        symlinkSync(path.join(outside), path.join(root, "sub"))
        symlinkSync("sub/../x", path.join(root, "sneaky"))
        assertDenied(yield* check(policy, { path: "sneaky" }), "symlink_escape")
        // And the other way round: "docs-link/.." is the root, inside.
        symlinkSync(path.join(root, "docs"), path.join(root, "docs-link"))
        symlinkSync("docs-link/../docs/notes.md", path.join(root, "fine"))
        assertAllowed(yield* check(policy, { path: "fine" }))
      })
    )

    it.effect("R3.6 R12 a `..` the model sends after a link is judged where the kernel takes it (review 188)", () =>
      Effect.gen(function* () {
        const { policy, root, outside, path } = yield* workspace
        yield* Effect.promise(() => import("node:fs/promises").then((fs) => fs.mkdir(path.join(outside, "sub"))))
        symlinkSync(path.join(outside, "sub"), path.join(root, "link"))
        // By text "link/../secret.txt" is root/secret.txt; a tool that opens the path as sent
        // reads outside/secret.txt. Before, the policy erased the link with the `..` and allowed it.
        assertDenied(yield* check(policy, { path: "link/../secret.txt" }), "symlink_escape")
        assertDenied(yield* check(policy, { path: `${path.join(root, "link")}/../secret.txt` }), "symlink_escape")
        assertDenied(yield* check(policy, { path: "link/../new/file.txt" }), "symlink_escape")
        // Also when a file of that name exists inside the root, where the text leads.
        symlinkSync(path.join(root, "docs", "notes.md"), path.join(root, "secret.txt"))
        assertDenied(yield* check(policy, { path: "link/../secret.txt" }), "symlink_escape")
        // A `..` after a link that stays inside is where the link led, and allowed.
        symlinkSync(path.join(root, "docs"), path.join(root, "docs-link"))
        assertAllowed(yield* check(policy, { path: "docs-link/../docs/notes.md" }))
        // Without roots, a `..` after a link cannot reach a .env file unseen either.
        yield* Effect.promise(() =>
          import("node:fs/promises").then((fs) => fs.writeFile(path.join(outside, ".env"), "K=1"))
        )
        symlinkSync(path.join(outside, ".env"), path.join(outside, "settings.txt"))
        const noRoots = yield* Permission.make({})
        assertDenied(yield* check(noRoots, { path: `${path.join(root, "link")}/../settings.txt` }), "env_file")
      })
    )

    it.effect(
      "R3.6 R12 a `..` out of a directory still to come, then a link, is judged where the link leads (review 191)",
      () =>
        Effect.gen(function* () {
          const { policy, root, outside, path } = yield* workspace
          symlinkSync(outside, path.join(root, "link"))
          // `fresh` does not exist yet: a tool that makes it (mkdir -p) then writes through `link`.
          for (const target of ["fresh/../link/x.txt", "fresh/../link/../pwned.txt", `${root}/a/b/../../link/x.txt`]) {
            assertDenied(yield* check(policy, { path: target }), "symlink_escape", target)
          }
          // A `..` out of a directory still to come that stays inside is allowed.
          assertAllowed(yield* check(policy, { path: "fresh/../docs/notes.md" }))
          assertAllowed(yield* check(policy, { path: "fresh/deeper/../new.txt" }))
        })
    )

    it.effect("R12 a path whose links expand past 4,096 names is denied, in bounded time (review 191)", () =>
      Effect.gen(function* () {
        const { policy, root, path } = yield* workspace
        symlinkSync(Array.from({ length: 500 }, () => "docs/..").join("/"), path.join(root, "L"))
        const target = `${Array.from({ length: 20 }, () => "L").join("/")}/ok.txt`
        assertDenied(yield* check(policy, { path: target }), "symlink_escape", "4096 names")
        assertAllowed(yield* check(policy, { path: "L/L/ok.txt" }))
      })
    )

    it.effect(
      "R3.6 R12 a link whose target has a `..` after another link is judged where the kernel takes it (review 192)",
      () =>
        Effect.gen(function* () {
          const { policy, root, outside, path } = yield* workspace
          yield* Effect.promise(() =>
            import("node:fs/promises").then((fs) => fs.mkdir(path.join(outside, "deep", "dir"), { recursive: true }))
          )
          symlinkSync(path.join(outside, "deep", "dir"), path.join(root, "inner"))
          symlinkSync("inner/../x", path.join(root, "l"))
          // By text `inner/../x` is root/x, and a decoy is there; the kernel opens outside/deep/x.
          symlinkSync(path.join(root, "docs", "notes.md"), path.join(root, "x"))
          assertDenied(yield* check(policy, { path: "l" }), "symlink_escape")
          assertDenied(yield* check(policy, { path: path.join(root, "l") }), "symlink_escape")
          // Without roots, a path that cannot be followed to its end may lead to a .env file: denied.
          symlinkSync("l2", path.join(root, "l1"))
          symlinkSync("l1", path.join(root, "l2"))
          const noRoots = yield* Permission.make({})
          assertDenied(yield* check(noRoots, { path: path.join(root, "l1") }), "symlink_escape")
        })
    )

    it.effect("R3.6 a loop of links is denied as symlink_escape", () =>
      Effect.gen(function* () {
        const { policy, root, path } = yield* workspace
        symlinkSync(path.join(root, "loop-b"), path.join(root, "loop-a"))
        symlinkSync(path.join(root, "loop-a"), path.join(root, "loop-b"))
        assertDenied(yield* check(policy, { path: "loop-a" }), "symlink_escape")
      })
    )

    it.effect("R3.6 links that stay inside the root, and a root reached through a link, are allowed", () =>
      Effect.gen(function* () {
        const { policy, base, root, path } = yield* workspace
        symlinkSync(path.join(root, "docs"), path.join(root, "shortcut"))
        assertAllowed(yield* check(policy, { path: "shortcut/notes.md" }))
        symlinkSync(root, path.join(base, "root-link"))
        const viaLink = yield* Permission.make({ roots: [path.join(base, "root-link")] })
        assertAllowed(yield* check(viaLink, { path: "docs/notes.md" }))
        assertAllowed(yield* check(viaLink, { path: "docs/new.md" }))
      })
    )
  })

  describe(".env files", () => {
    it.effect("R3.6 .env, .env.local and config/.env are denied as env_file", () =>
      Effect.gen(function* () {
        const { policy } = yield* workspace
        for (const target of [".env", ".env.local", "config/.env", ".ENV", ".env/secrets.txt", "a/.env.production"]) {
          assertDenied(yield* check(policy, { path: target }), "env_file", JSON.stringify(target))
        }
      })
    )

    it.effect("R3.6 only .env and .env.* are denied: .envrc, .environment and env.txt are allowed", () =>
      Effect.gen(function* () {
        const { policy } = yield* workspace
        for (const target of [".envrc", ".environment", "env.txt", "docs/my.env"]) {
          assertAllowed(yield* check(policy, { path: target }))
        }
      })
    )

    it.effect("R3.6 .env files are denied without roots, and a link to one inside the root too", () =>
      Effect.gen(function* () {
        const { policy, root, path } = yield* workspace
        const noRoots = yield* Permission.make({})
        assertDenied(yield* check(noRoots, { path: "/srv/app/.env" }), "env_file")
        symlinkSync(path.join(root, ".env"), path.join(root, "settings.txt"))
        assertDenied(yield* check(policy, { path: "settings.txt" }), "env_file")
      })
    )

    it.effect("R3.6 copies of a .env file are denied too: an editor's backup, an old one, a copy", () =>
      Effect.gen(function* () {
        const { policy } = yield* workspace
        for (const target of [".env~", "#.env#", ".env-old", ".env_backup", ".env copy", "config/.ENV.bak"]) {
          assertDenied(yield* check(policy, { path: target }), "env_file", JSON.stringify(target))
        }
      })
    )

    it.effect("R3.6 without roots, a link to a .env file is followed and denied (review 77)", () =>
      Effect.gen(function* () {
        const { root, path } = yield* workspace
        const noRoots = yield* Permission.make({})
        symlinkSync(path.join(root, ".env"), path.join(root, "settings.txt"))
        // Before, a policy without roots judged the text alone: the link read the secrets.
        assertDenied(yield* check(noRoots, { path: path.join(root, "settings.txt") }), "env_file")
        assertAllowed(yield* check(noRoots, { path: path.join(root, "notes.txt") }))
        const off = yield* Permission.make({ denyEnvFiles: false })
        assertAllowed(yield* check(off, { path: path.join(root, "settings.txt") }))
      })
    )

    it.effect("R3.6 denyEnvFiles: false lets .env files through", () =>
      Effect.gen(function* () {
        const policy = yield* Permission.make({ denyEnvFiles: false })
        assertAllowed(yield* check(policy, { path: ".env.local" }))
      })
    )
  })

  describe("invalid paths and content", () => {
    it.effect("R3.6 an empty path or one with a NUL byte is denied as invalid_path", () =>
      Effect.gen(function* () {
        const { policy } = yield* workspace
        assertDenied(yield* check(policy, { path: "" }), "invalid_path")
        assertDenied(yield* check(policy, { path: "notes.md\0.txt" }), "invalid_path", "\\u0000")
      })
    )

    it.effect("R12 a path with a lone surrogate is denied as invalid_path: it would name the file U+FFFD does", () =>
      Effect.gen(function* () {
        const { policy } = yield* workspace
        assertDenied(yield* check(policy, { path: "report-\ud800.txt" }), "invalid_path", "lone", "\\ud800")
        assertDenied(yield* check(policy, { path: "docs/\udfff/a.txt" }), "invalid_path", "\\udfff")
        // Without roots too, and in a list of paths.
        const open = yield* Permission.make({})
        assertDenied(yield* check(open, { path: "a-\udc00.txt" }), "invalid_path")
        assertAllowed(yield* check(policy, { path: "docs/report-\ud83d\ude00.md" }))
        const exit = yield* Effect.exit(Permission.make({ roots: ["/tmp/root-\ud800"] }))
        assert.isTrue(exit._tag === "Failure" && Cause.squash(exit.cause) instanceof RangeError)
      })
    )

    it.effect("R3.6 a path longer than 4096 bytes is denied as invalid_path, with its size", () =>
      Effect.gen(function* () {
        const { policy } = yield* workspace
        const long = `${"d/".repeat(2048)}x`
        assertDenied(yield* check(policy, { path: long }), "invalid_path", "4097 bytes", "4096")
        assertAllowed(yield* check(policy, { path: `${"d/".repeat(2047)}xy` }))
      })
    )

    it.effect("R3.6 content over the limit is denied as content_too_large, with sizes and no content", () =>
      Effect.gen(function* () {
        const policy = yield* Permission.make({ maxContentBytes: 10 })
        const decision = yield* check(policy, { path: "a.txt", content: "SECRET-TEXT" })
        assertDenied(decision, "content_too_large", "arguments.content", "11 bytes", "10 bytes")
        if (decision._tag === "Deny") assert.notInclude(decision.reason, "SECRET")
        assertAllowed(yield* check(policy, { path: "a.txt", content: "0123456789" }))
        // Bytes, not characters: five "é" are ten bytes, six are twelve.
        assertAllowed(yield* check(policy, { content: "ééééé" }))
        assertDenied(yield* check(policy, { content: "éééééé" }), "content_too_large", "12 bytes")
      })
    )

    it.effect("R3.6 non-string content is measured as its JSON text", () =>
      Effect.gen(function* () {
        const policy = yield* Permission.make({ maxContentBytes: 10 })
        // {"a":"123"} is 11 bytes of JSON.
        assertDenied(yield* check(policy, { content: { a: "123" } }), "content_too_large", "11 bytes")
        assertAllowed(yield* check(policy, { content: { a: "12" } }))
      })
    )

    it.effect("R3.6 missing and wrongly typed fields are left to schema validation", () =>
      Effect.gen(function* () {
        const { root } = yield* workspace
        const policy = yield* Permission.make({ roots: [root], maxContentBytes: 1 })
        assertAllowed(yield* check(policy, {}))
        assertAllowed(yield* check(policy, { path: 42, content: undefined }))
      })
    )

    it.effect("R3.6 a path field that holds a list has each of its paths checked", () =>
      Effect.gen(function* () {
        const { root } = yield* workspace
        const many = Tool.make({
          name: "read_many",
          description: "reads several files",
          input: Schema.Struct({ paths: Schema.Array(Schema.String) }),
          output: Schema.String,
          pathFields: ["paths"],
          handler: () => Effect.succeed("ok")
        })
        const policy = yield* Permission.make({ roots: [root] })
        assertAllowed(yield* check(policy, { paths: ["docs/notes.md", "docs"] }, many))
        assertDenied(
          yield* check(policy, { paths: ["docs/notes.md", "../outside/secret.txt"] }, many),
          "outside_roots",
          "paths[1]"
        )
        assertDenied(yield* check(policy, { paths: ["/etc/passwd"] }, many), "outside_roots", "paths[0]")
        assertDenied(yield* check(policy, { paths: ["docs", ".env"] }, many), "env_file")
      })
    )

    it.effect("R3.6 R12 options that cannot work are refused when the policy is built, naming the option", () =>
      Effect.gen(function* () {
        const { root } = yield* workspace
        for (const [options, message] of [
          [{ roots: [] }, "roots is empty"],
          [{ roots: [root], maxContentBytes: Number.NaN }, "maxContentBytes must be an integer >= 0, got NaN"],
          [{ maxContentBytes: -1 }, "maxContentBytes must be an integer >= 0, got -1"],
          [{ roots: root as never }, "roots must be an array of directory paths"],
          [{ allowTools: ["read_text_file", 7 as never] }, "allowTools must be an array of tool names"]
        ] as const) {
          const exit = yield* Effect.exit(Permission.make(options))
          assert.isTrue(exit._tag === "Failure", JSON.stringify(options))
          if (exit._tag === "Failure") assert.include(String(Cause.squash(exit.cause)), `Permission.make: ${message}`)
        }
      })
    )

    it.effect("R3.6 paths are checked before content", () =>
      Effect.gen(function* () {
        const { root } = yield* workspace
        const policy = yield* Permission.make({ roots: [root], maxContentBytes: 1 })
        assertDenied(yield* check(policy, { path: "../x", content: "too long" }), "outside_roots")
        assertDenied(yield* check(policy, { path: "x", content: "too long" }), "content_too_large")
      })
    )
  })

  describe("default limits", () => {
    const blockedOrFailed = (timeline: ReadonlyArray<Event.Event>) =>
      timeline.flatMap((e) => (e._tag === "tool.blocked" || e._tag === "tool.failed" ? [e] : []))

    const runWrites = (root: string, contents: ReadonlyArray<string>) =>
      Effect.gen(function* () {
        const tools = yield* FileTools.make({ root })
        return yield* Run.run({ goal: "write", tools: tools.all }).pipe(
          Effect.provide(
            ScriptedModel.layer([
              ...contents.map((content, n) =>
                ScriptedModel.toolCall("write_text_file", { path: `out-${n}.txt`, content }, `call-${n}`)
              ),
              ScriptedModel.finalAnswer("done")
            ])
          ),
          Effect.provide(Permission.layer({ roots: [root] }))
        )
      })

    it.effect(
      "R3.6 at default limits, content just over the policy's limit is permission_denied and spends nothing",
      () =>
        Effect.gen(function* () {
          const { root, path } = yield* workspace
          const over = Permission.defaultMaxContentBytes + 1
          // Plain text, and text whose JSON encoding is six characters a byte (the worst case).
          const result = yield* runWrites(root, ["x".repeat(over), "\u0001".repeat(over)])
          const ended = blockedOrFailed(result.timeline)
          assert.deepStrictEqual(
            ended.map((e) => [e._tag, e.error.code, e.error.correctable]),
            [
              ["tool.blocked", "permission_denied", false],
              ["tool.blocked", "permission_denied", false]
            ]
          )
          for (const e of ended) assert.include(e.error.message, "content_too_large")
          assert.strictEqual(result.counters.toolCorrectionAttempts, 0)
          assert.strictEqual(result.status, "completed")
          assert.isFalse(existsSync(path.join(root, "out-0.txt")))
        })
    )

    it.effect("R3.6 at default limits, arguments over the argument limit are a correctable invalid_arguments", () =>
      Effect.gen(function* () {
        const { root, path } = yield* workspace
        const result = yield* runWrites(root, ["x".repeat(ToolArguments.defaultLimits.maxArgumentChars)])
        const ended = blockedOrFailed(result.timeline)
        assert.deepStrictEqual(
          ended.map((e) => [e._tag, e.error.code, e.error.correctable]),
          [["tool.failed", "invalid_arguments", true]]
        )
        assert.include(
          ended[0]?.error.message ?? "",
          `over the limit of ${ToolArguments.defaultLimits.maxArgumentChars}`
        )
        assert.strictEqual(result.counters.toolCorrectionAttempts, 1)
        assert.isFalse(existsSync(path.join(root, "out-0.txt")))
      })
    )

    it.effect("R3.6 the argument limit leaves room for the content limit in its worst JSON encoding", () =>
      Effect.sync(() => {
        // Six characters a byte (`\u0001`), plus room for the other fields.
        assert.isAtLeast(ToolArguments.defaultLimits.maxArgumentChars, 6 * Permission.defaultMaxContentBytes + 4096)
      })
    )
  })
})
