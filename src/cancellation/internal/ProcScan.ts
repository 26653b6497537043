/**
 * Which process groups have a live member, and whether a child has exited, read from
 * `/proc` (Linux), private to `cancellation/`: what tells a group whose only members left
 * are zombies (gone: see `ProcessGroup`) from one still running.
 *
 * There is no call that lists a group's members: a read is of every process on the
 * machine. So one read answers every group asked about: a caller joins the next read to
 * begin (never one already under way, which may have passed its group's members before
 * they changed), and at most one read runs at a time. A hundred groups stopped at once
 * cost one read per round, not a hundred, which on a busy host took longer than their
 * grace periods and recorded every stopped process as killed. The reads are asynchronous
 * (`node:fs`'s pool), never on the event loop.
 */
import * as fs from "node:fs"
import { Context, Effect } from "effect"

/** The text of `/proc/<pid>/stat`, or `undefined` once the process is gone: one open and one read (`readFile` costs 3x as much). */
const readStat = (pid: string): Promise<string | undefined> =>
  new Promise((resolve) => {
    fs.open(`/proc/${pid}/stat`, "r", (error, fd) => {
      if (error !== null) return resolve(undefined)
      const buffer = Buffer.alloc(1024)
      fs.read(fd, buffer, 0, buffer.length, 0, (error, bytes) => {
        fs.close(fd, () => {})
        resolve(error === null ? buffer.toString("latin1", 0, bytes) : undefined)
      })
    })
  })

/** The groups with a member other than a zombie: one read of `/proc`. Never rejects. */
const liveGroups = async (): Promise<ReadonlySet<number>> => {
  const entries = await fs.promises.readdir("/proc").catch(() => [])
  const stats = await Promise.all(entries.filter((entry) => /^\d+$/.test(entry)).map(readStat))
  const live = new Set<number>()
  for (const stat of stats) {
    if (stat === undefined) continue
    // pid (comm) state ppid pgrp ...; comm may contain spaces and parentheses.
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ")
    if (fields[0] !== "Z") live.add(Number(fields[2]))
  }
  return live
}

/**
 * Whether our child `pid` has exited, by its own `/proc/<pid>/stat`: a zombie, or reaped
 * (no entry). The kernel knows of an exit before Node has run its handler (a busy event
 * loop), and Node reaps a child before its handle says so. `false` where there is no `/proc`.
 */
const hasExited = (pid: number): Effect.Effect<boolean> =>
  process.platform !== "linux"
    ? Effect.succeed(false)
    : Effect.promise(() =>
        readStat(String(pid)).then((stat) => stat === undefined || stat.slice(stat.lastIndexOf(")") + 2)[0] === "Z")
      )

/** The reader: whether a group has a live member, by the next read of `/proc`; whether a child has exited. */
export interface ProcScan {
  readonly hasLiveMember: (pgid: number) => Effect.Effect<boolean>
  readonly hasExited: (pid: number) => Effect.Effect<boolean>
}

/** A reader whose callers share its reads. */
export const make = (): ProcScan => {
  let running: Promise<ReadonlySet<number>> | undefined
  let next: Promise<ReadonlySet<number>> | undefined
  const start = (): Promise<ReadonlySet<number>> => {
    const read = liveGroups()
    running = read
    read.finally(() => {
      if (running === read) running = undefined
    })
    return read
  }
  const nextRead = (): Promise<ReadonlySet<number>> => {
    if (running === undefined) return start()
    if (next === undefined) {
      next = running.then(() => {
        next = undefined
        return start()
      })
    }
    return next
  }
  return { hasLiveMember: (pgid) => Effect.promise(() => nextRead().then((live) => live.has(pgid))), hasExited }
}

/**
 * The process's reader (there is one `/proc` to read): a reference with a default, so a
 * test can give its own.
 */
export const ProcScanRef = Context.Reference<ProcScan>("effect-agent-runtime/cancellation/ProcScan", {
  defaultValue: make
})
