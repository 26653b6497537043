/**
 * The in-memory backend: the same rows as the SQL tables (encoded JSON text), held in maps.
 * Each operation is one synchronous step, so a commit is all or nothing as in SQL.
 */
import { Effect, Option } from "effect"
import * as JournalError from "../JournalError.ts"
import { type ApprovalRow, type CommitRow, notWritten, type RunRow, type Store } from "./Store.ts"

/** The tables, reachable for tests that damage rows on purpose. */
export interface Tables {
  readonly runs: Map<string, RunRow>
  readonly commits: Map<string, Array<CommitRow>>
  readonly approvals: Map<string, ApprovalRow>
}

const approvalKey = (runId: string, callId: string) => JSON.stringify([runId, callId])

const byRequestTime = (a: ApprovalRow, b: ApprovalRow) =>
  a.requestedAt - b.requestedAt || (a.runId < b.runId ? -1 : a.runId > b.runId ? 1 : a.callId < b.callId ? -1 : 1)

export const make = (): { readonly store: Store; readonly tables: Tables } => {
  const tables: Tables = { runs: new Map(), commits: new Map(), approvals: new Map() }
  const ended = (runId: string) => (tables.runs.get(runId)?.result ?? null) !== null
  const store: Store = {
    insertRun: (row) =>
      Effect.suspend(() => {
        if (tables.runs.has(row.runId)) {
          return Effect.fail(
            JournalError.make(new JournalError.Conflict({ runId: row.runId, detail: "a run with this id exists" }))
          )
        }
        tables.runs.set(row.runId, row)
        tables.commits.set(row.runId, [])
        return Effect.void
      }),
    commit: (commit) =>
      Effect.suspend(() => {
        const { runId, row } = commit
        const run = tables.runs.get(runId)
        const commits = tables.commits.get(runId) ?? []
        const last = commits.at(-1)
        const next = last === undefined ? 0 : last.seq + last.count
        if (run === undefined || next !== row.seq || run.result !== null || row.count === 0) {
          const why = notWritten(commit, { nextSeq: run === undefined ? undefined : next, ended: run?.result != null })
          return why === undefined ? Effect.void : Effect.fail(why)
        }
        commits.push(row)
        tables.commits.set(runId, commits)
        if (row.result !== null) {
          tables.runs.set(runId, {
            ...run,
            nextSeq: row.seq + row.count,
            state: row.state,
            result: row.result,
            updatedAt: row.at
          })
          // Its calls still pending close with it.
          for (const [key, approval] of tables.approvals) {
            if (approval.runId === runId && approval.decision === null) {
              tables.approvals.set(key, { ...approval, decision: "withdrawn", decidedAt: row.at })
            }
          }
        }
        return Effect.void
      }),
    readRun: (runId, fromSeq) =>
      Effect.sync(() => {
        const run = tables.runs.get(runId)
        if (run === undefined) return Option.none()
        const commits = [...(tables.commits.get(runId) ?? [])].sort((a, b) => a.seq - b.seq)
        // As SQL reads them: from the last commit that starts at or before `fromSeq`.
        const start = commits.findLast((commit) => commit.seq <= fromSeq)?.seq ?? 0
        return Option.some({ run, commits: commits.filter((commit) => commit.seq >= start) })
      }),
    unfinished: Effect.sync(() =>
      [...tables.runs.values()]
        .filter((run) => run.result === null)
        .sort((a, b) => a.createdAt - b.createdAt || (a.runId < b.runId ? -1 : 1))
        .map((run) => run.runId)
    ),
    insertApproval: (row) =>
      Effect.suspend(() => {
        const key = approvalKey(row.runId, row.callId)
        if (tables.approvals.has(key)) {
          return Effect.fail(
            JournalError.make(
              new JournalError.Conflict({
                runId: row.runId,
                detail: `call ${row.callId} was put up for approval already`
              })
            )
          )
        }
        tables.approvals.set(key, row)
        return Effect.void
      }),
    pendingApprovals: (runId) =>
      Effect.sync(() =>
        [...tables.approvals.values()]
          .filter((row) => row.decision === null && (runId === undefined || row.runId === runId) && !ended(row.runId))
          .sort(byRequestTime)
      ),
    decide: (decide) =>
      Effect.suspend(() => {
        const key = approvalKey(decide.runId, decide.callId)
        const row = tables.approvals.get(key)
        // Expired (by the decider's clock) is not pending for a person's decision, whether or not
        // the run has seen it yet; a withdrawal may come at any time.
        // Nor is a call of a run that has ended (put up by a process the ending fenced off).
        const closed =
          decide.decision !== "withdrawn" &&
          row !== undefined &&
          (row.expiresAt <= decide.decidedAt || ended(row.runId))
        if (row === undefined || row.decision !== null || closed) {
          return Effect.fail(
            JournalError.make(new JournalError.NotPending({ runId: decide.runId, callId: decide.callId }))
          )
        }
        tables.approvals.set(key, { ...row, ...decide })
        return Effect.void
      }),
    reopenApproval: (row) =>
      Effect.sync(() => {
        const key = approvalKey(row.runId, row.callId)
        const found = tables.approvals.get(key)
        const renewed = found?.decision === null && found.expiresAt !== row.expiresAt
        if (found?.decision !== "withdrawn" && !renewed) return false
        tables.approvals.set(key, row)
        return true
      }),
    approval: (runId, callId) =>
      Effect.sync(() => Option.fromNullishOr(tables.approvals.get(approvalKey(runId, callId))))
  }
  return { store, tables }
}
