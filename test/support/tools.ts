import { Effect, Schema } from "effect"
import * as Failure from "../../src/failure/Failure.ts"
import * as Tool from "../../src/tools/Tool.ts"

/** An in-memory key-value store the test tools write to: a side-effect ledger. */
export const makeStore = () => {
  const files = new Map<string, string>()
  const writes: Array<string> = []
  const write = Tool.make({
    name: "write_json_file",
    description: "Write a JSON artifact",
    input: Schema.Struct({ artifact_name: Schema.String, content: Schema.String }),
    output: Schema.Struct({ artifact_name: Schema.String, bytes: Schema.Int }),
    sideEffect: "write",
    idempotent: true,
    handler: ({ artifact_name, content }) =>
      Effect.sync(() => {
        files.set(artifact_name, content)
        writes.push(artifact_name)
        return { artifact_name, bytes: content.length }
      })
  })
  const read = Tool.make({
    name: "read_file",
    description: "Read an artifact",
    input: Schema.Struct({ name: Schema.String }),
    output: Schema.String,
    sideEffect: "read",
    idempotent: true,
    recoverErrors: true,
    handler: ({ name }) => {
      const content = files.get(name)
      return content === undefined
        ? Effect.fail(
            new Failure.Permanent({
              source: "tool",
              category: "not_found",
              code: "not_found",
              attempts: 1,
              hint: `no file ${name}`
            })
          )
        : Effect.succeed(content)
    }
  })
  return { files, writes, write, read }
}

export const echo = Tool.make({
  name: "echo",
  description: "Echo the text back",
  input: Schema.Struct({ text: Schema.String }),
  output: Schema.String,
  sideEffect: "none",
  idempotent: true,
  handler: ({ text }) => Effect.succeed(text)
})

export const thrower = Tool.make({
  name: "thrower",
  description: "A tool whose handler throws",
  input: Schema.Struct({}),
  output: Schema.String,
  handler: () => {
    throw new Error("boom at /secret/path")
  }
})

/** A tool whose handler ignores interruption for `millis` of real time, then answers "late". */
export const deaf = (name: string, millis: number) =>
  Tool.make({
    name,
    description: "ignores interruption for a while",
    input: Schema.Struct({}),
    output: Schema.String,
    sideEffect: "none",
    handler: () => Effect.uninterruptible(Effect.as(Effect.sleep(millis), "late"))
  })

/** A payment (`pay`) whose handler never answers: cut off, it may have been made. */
export const hangingPay = Tool.make({
  name: "pay",
  description: "pays",
  input: Schema.Struct({}),
  output: Schema.String,
  sideEffect: "external",
  handler: () => Effect.never
})
