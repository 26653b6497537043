#!/usr/bin/env node
/**
 * The package's `bin`, `effect-agent-runtime` (see `Cli`): runs the command line on Node's
 * file system (`@effect/platform-node`, loaded here, so that only the command needs it).
 */
import { Cause, Effect, type FileSystem, type Layer, type Path } from "effect"
import * as Timeline from "../events/Timeline.ts"
import * as Cli from "./Cli.ts"

// Not a literal, so that bundlers leave the optional peer dependency to the command's users.
const nodeServices = "@effect/platform-node/NodeServices"

const platform: { readonly layer: Layer.Layer<FileSystem.FileSystem | Path.Path> } = await import(nodeServices).catch(
  (cause: unknown) => {
    console.error(`effect-agent-runtime needs @effect/platform-node (npm install @effect/platform-node): ${cause}`)
    process.exit(1)
  }
)

const exit = await Effect.runPromiseExit(Effect.provide(Cli.main(process.argv.slice(2)), platform.layer))
if (exit._tag === "Success") console.log(exit.value)
else {
  const error = Cause.findErrorOption(exit.cause)
  if (error._tag === "Some") {
    console.error(error.value.message)
    process.exitCode = error.value.exitCode
  } else {
    // A defect's message may quote the file: each line with its control characters written out.
    const lines = Cause.pretty(exit.cause).split("\n").map(Timeline.visible)
    console.error(`effect-agent-runtime: ${lines.join("\n")}`)
    process.exitCode = 1
  }
}
