/**
 * `layer({ url })`: the journal on a PostgreSQL database through `@effect/sql-pg`'s pool. The
 * tables (`<prefix>runs`, `<prefix>events`, `<prefix>approvals`, `<prefix>migrations`) are
 * created by effect's `Migrator` on first use. For a pool you configure yourself, provide
 * `PgClient.layer(...)` to `Journal.layerSql()` instead, with a `maxMessageSize` as large as
 * your largest commit (the client's default is 16 MiB; this layer's, 1 GiB).
 *
 * @since 0.3.0
 */
import { PgClient } from "@effect/sql-pg"
import { Effect, Layer, Redacted } from "effect"
import * as OptionKeys from "../../failure/OptionKeys.ts"
import * as UserCode from "../../failure/UserCode.ts"
import * as Layers from "../internal/Layers.ts"
import { Journal, type SqlOptions } from "../Journal.ts"
import type * as JournalError from "../JournalError.ts"

/**
 * @category models
 * @since 0.3.0
 */
export interface Options extends SqlOptions {
  /** `postgres://user@host:port/database` */
  readonly url: string | Redacted.Redacted
  /** The pool's largest size, a whole number of at least 1. Default: `@effect/sql-pg`'s. */
  readonly maxConnections?: number | undefined
}

/**
 * PostgreSQL's largest text value, and a message to carry one: the `maxMessageSize` to give
 * a `PgClient` of your own (`DurableRun.layerCluster`'s `sql`, `Journal.layerSql`), whose
 * default of 16 MiB cannot read back a run whose goal or commit is larger.
 *
 * @category constants
 * @since 0.3.0
 */
export const maxMessageSize = 1024 ** 3 + 1024 * 1024

const maxRowBytes = maxMessageSize

/** Every option: one the layer does not know is refused (review 173). */
const knownOptions: OptionKeys.Known<Options> = { url: true, maxConnections: true, tablePrefix: true }

/**
 * @category layers
 * @since 0.3.0
 */
export const layer = (options: Options): Layer.Layer<Journal, JournalError.JournalError> => {
  const unknown = OptionKeys.unknownOption(options, knownOptions)
  if (unknown !== undefined) return Layer.effect(Journal, Effect.fail(Layers.misconfigured(unknown)))
  const size: unknown = options.maxConnections
  // A pool of no session, or of a size no pool has, would wait for a session forever (review 157).
  if (size !== undefined && !(typeof size === "number" && Number.isSafeInteger(size) && size >= 1)) {
    const detail = `maxConnections must be a whole number of at least 1; got ${UserCode.shown(size)}`
    return Layer.effect(Journal, Effect.fail(Layers.misconfigured(detail)))
  }
  return Layers.layerOwnClient(
    PgClient.make({
      url: Redacted.isRedacted(options.url) ? options.url : Redacted.make(options.url),
      // What PostgreSQL takes it must give back: a commit row may hold up to 1 GB of text (a
      // tool's large output), past the client's default 16 MiB message (R9).
      maxMessageSize: maxRowBytes,
      ...(options.maxConnections === undefined ? {} : { maxConnections: options.maxConnections })
    }),
    options
  )
}
