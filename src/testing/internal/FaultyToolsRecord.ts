/**
 * What a faulty tool records: the `Input` it accepts, the `Call`s its handler received
 * (`Calls`), and for a ledgered tool its `Receipt`s and the `Entry`s of its `Ledger`,
 * with their constructors. Re-exported from `FaultyTools`.
 */
import { Clock, Effect, Schema } from "effect"
import type * as Tool from "../../tools/Tool.ts"

/**
 * The arguments every faulty tool accepts: whatever JSON object a test sends, so it can vary the
 * arguments (and with them the call's signature) freely.
 *
 * @category models
 * @since 0.1.0
 */
export const Input = Schema.Record(Schema.String, Schema.Unknown)

/**
 * @category models
 * @since 0.1.0
 */
export type Input = typeof Input.Type

/**
 * One handler invocation, as the tool saw it.
 *
 * @category models
 * @since 0.1.0
 */
export interface Call {
  /** 1-based: the n-th invocation of this tool's handler in all. */
  readonly n: number
  readonly callId: string
  readonly idempotencyKey: string
  /** 1-based: the n-th invocation for this idempotency key (2 and up are retries of one call). */
  readonly attempt: number
  readonly input: Input
  /** When the handler started, by Effect's `Clock`. */
  readonly at: number
}

/**
 * The calls a faulty tool received.
 *
 * @category models
 * @since 0.1.0
 */
export interface Calls {
  readonly all: ReadonlyArray<Call>
  /** Handler invocations in all (retries included). */
  readonly count: number
  /** The invocations for one idempotency key. */
  readonly forKey: (idempotencyKey: string) => ReadonlyArray<Call>
  /** The invocations for one tool call id. */
  readonly forCall: (callId: string) => ReadonlyArray<Call>
  /** The distinct idempotency keys seen, in order of first use. */
  readonly keys: ReadonlyArray<string>
}

/**
 * A fresh call record: the `Calls` a test reads, and `record`, which the handler runs
 * first to log its invocation with the time by Effect's `Clock`.
 */
export const makeCalls = () => {
  const all: Array<Call> = []
  const record = (input: Input, context: Tool.CallContext): Effect.Effect<Call> =>
    Effect.map(Clock.currentTimeMillis, (at) => {
      const call: Call = {
        n: all.length + 1,
        callId: context.callId,
        idempotencyKey: context.idempotencyKey,
        attempt: all.filter((c) => c.idempotencyKey === context.idempotencyKey).length + 1,
        input,
        at
      }
      all.push(call)
      return call
    })
  const calls: Calls = {
    all,
    get count() {
      return all.length
    },
    forKey: (key) => all.filter((c) => c.idempotencyKey === key),
    forCall: (callId) => all.filter((c) => c.callId === callId),
    get keys() {
      return [...new Set(all.map((c) => c.idempotencyKey))]
    }
  }
  return { calls, record }
}

/**
 * The output of a ledgered call that applied.
 *
 * @category models
 * @since 0.1.0
 */
export const Receipt = Schema.Struct({
  receipt: Schema.String,
  idempotencyKey: Schema.String
})

/**
 * @category models
 * @since 0.1.0
 */
export type Receipt = typeof Receipt.Type

/**
 * One application of the side effect.
 *
 * @category models
 * @since 0.1.0
 */
export interface Entry {
  readonly idempotencyKey: string
  readonly callId: string
  readonly input: Input
  readonly output: Receipt
  readonly at: number
}

/**
 * The record of what really happened in the world.
 *
 * @category models
 * @since 0.1.0
 */
export interface Ledger {
  readonly entries: ReadonlyArray<Entry>
  /** Applications in all. */
  readonly total: number
  /** Applications under one idempotency key: the number a test asserts is exactly 1. */
  readonly count: (idempotencyKey: string) => number
  /** The first application under a key, if any. */
  readonly lookup: (idempotencyKey: string) => Entry | undefined
}

/**
 * A fresh, empty ledger: the `Ledger` a test reads, over `entries`, to which the tool
 * appends each application.
 */
export const makeLedger = () => {
  const entries: Array<Entry> = []
  const ledger: Ledger = {
    entries,
    get total() {
      return entries.length
    },
    count: (key) => entries.filter((e) => e.idempotencyKey === key).length,
    lookup: (key) => entries.find((e) => e.idempotencyKey === key)
  }
  return { entries, ledger }
}
