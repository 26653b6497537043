/**
 * How a stop is recorded (R5.2): a child is `cancelled` only when it stopped on SIGTERM;
 * one that took SIGKILL is `outcome_unknown`, however quickly it went. The handle here
 * stands for a child whose group is gone (its pid is past any pid this machine hands
 * out), so only the record is under test; real processes are in `../Subprocess*.test.ts`.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, PlatformError, Sink, Stream } from "effect"
import { ChildProcessSpawner } from "effect/process"
import * as ProcessGroup from "../../../src/cancellation/internal/ProcessGroup.ts"
import * as ProcScan from "../../../src/cancellation/internal/ProcScan.ts"

/** Beyond the largest pid_max Linux allows (2^22), so no process and no group has it. */
const unusedPid = ChildProcessSpawner.ProcessId(5_000_000)

const diedOf = (signal: string) =>
  PlatformError.systemError({
    _tag: "Unknown",
    module: "ChildProcess",
    method: "exitCode",
    cause: new Error(`Process interrupted due to receipt of signal: '${signal}'`)
  })

/**
 * What `/proc` says of the fake pid: no group, and a child that has not exited (its handle
 * says when it has), as a live child's own entry says.
 */
const scan: ProcScan.ProcScan = { hasLiveMember: () => Effect.succeed(false), hasExited: () => Effect.succeed(false) }
const reclaim = (target: ProcessGroup.Target) =>
  Effect.provideService(ProcessGroup.reclaim(target, 500, 1000), ProcScan.ProcScanRef, scan)

/** A child that is running until `kill`, and then has died as `exitCode` says. */
const child = (exitCode: Effect.Effect<ChildProcessSpawner.ExitCode, PlatformError.PlatformError>) => {
  let running = true
  const signals: Array<string | undefined> = []
  const handle = ChildProcessSpawner.makeHandle({
    pid: unusedPid,
    exitCode,
    isRunning: Effect.sync(() => running),
    kill: (options) =>
      Effect.sync(() => {
        signals.push(options?.killSignal)
        running = false
      }),
    stdin: Sink.drain,
    stdout: Stream.empty,
    stderr: Stream.empty,
    all: Stream.empty,
    getInputFd: () => Sink.drain,
    getOutputFd: () => Stream.empty,
    unref: Effect.succeed(Effect.void)
  })
  return { target: { handle, cgroup: undefined } satisfies ProcessGroup.Target, signals }
}

describe("ProcessGroup.reclaim", () => {
  it.live(
    "R5.2 a leader that died of SIGKILL is outcome_unknown, even when its group went within the grace period",
    () =>
      Effect.gen(function* () {
        const { target, signals } = child(Effect.fail(diedOf("SIGKILL")))
        const settled = yield* reclaim(target)
        assert.deepStrictEqual(signals, ["SIGTERM"])
        assert.isBelow(settled.millis, 500)
        assert.strictEqual(settled.settlement, "outcome_unknown")
        assert.deepStrictEqual(settled.signals, ["SIGTERM", "SIGKILL"])
      })
  )

  it.live("R5.2 a group gone within the grace period, its leader ended by SIGTERM or an exit, is cancelled", () =>
    Effect.gen(function* () {
      for (const exitCode of [Effect.fail(diedOf("SIGTERM")), Effect.succeed(ChildProcessSpawner.ExitCode(0))]) {
        const { target } = child(exitCode)
        const settled = yield* reclaim(target)
        assert.strictEqual(settled.settlement, "cancelled")
        assert.deepStrictEqual(settled.signals, ["SIGTERM"])
        assert.match(settled.detail, /stopped on SIGTERM/)
      }
    })
  )
})
