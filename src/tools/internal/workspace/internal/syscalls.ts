/**
 * The system calls under the workspace (see `Workspace.ts`), as Effects: each failure
 * keeps its errno code, and every descriptor opened belongs to a scope.
 *
 * @internal
 */
import * as Fsp from "node:fs/promises"
import { Data, Effect, Predicate, type Scope } from "effect"

/**
 * Why an operation failed. `detail` is platform text with absolute paths: it belongs in
 * a failure's `diagnostic`, never in its hint.
 *
 * @internal
 */
export type Reason =
  | "not_found"
  | "not_a_directory"
  | "is_a_directory"
  | "not_a_regular_file"
  | "outside_root"
  | "link_loop"
  | "name_too_long"
  | "too_large"
  /** The path leads to a `.env` file (a link to one included), which may hold secrets. */
  | "env_file"
  | "permission_denied"
  | "io"
  /** The root itself is missing (nothing was written yet) or is not a directory. */
  | "root_unavailable"
  /** What was asked cannot name a file or a limit (an empty root, a `maxBytes` of NaN). */
  | "invalid_argument"

/** @internal */
export class WorkspaceError extends Data.TaggedError("WorkspaceError")<{
  readonly reason: Reason
  readonly detail: string
  /** For `too_large`: the file's size when it is known. */
  readonly size?: number | undefined
}> {}

/** @internal */
export interface Errno {
  readonly code: string | undefined
  readonly message: string
}

const toErrno = (cause: unknown): Errno => ({
  code: Predicate.hasProperty(cause, "code") && Predicate.isString(cause.code) ? cause.code : undefined,
  message: Predicate.isError(cause) ? cause.message : "unknown error"
})

/** @internal */
export const call = <A>(run: () => Promise<A>): Effect.Effect<A, Errno> =>
  Effect.tryPromise({ try: run, catch: toErrno })

/** @internal */
export const fail = (reason: Reason, detail: string, size?: number) =>
  Effect.fail(new WorkspaceError({ reason, detail, size }))

const reasonOf = (code: string | undefined): Reason => {
  switch (code) {
    case "ENOENT":
      return "not_found"
    case "ENOTDIR":
      return "not_a_directory"
    case "EISDIR":
      return "is_a_directory"
    case "ELOOP":
      return "link_loop"
    case "ENAMETOOLONG":
      return "name_too_long"
    case "ENXIO":
    case "ENODEV":
      return "not_a_regular_file"
    case "EACCES":
    case "EPERM":
    case "EROFS":
      return "permission_denied"
    default:
      return "io"
  }
}

// `where` is the real path the call was about: the platform's own message names a
// `/proc/self/fd` path, which says little to a person reading the diagnostic.
/** @internal */
export const fromErrno = (where: string) => (error: Errno) =>
  new WorkspaceError({ reason: reasonOf(error.code), detail: `${where}: ${error.message}` })

/** @internal */
export const close = (handle: Fsp.FileHandle) => Effect.ignore(call(() => handle.close()))

// The handle is closed when the scope closes (closing twice is harmless), and the open
// itself is never abandoned half-way by an interruption, so no descriptor leaks.
/** @internal */
export const open = (at: string, flags: number, mode?: number): Effect.Effect<Fsp.FileHandle, Errno, Scope.Scope> =>
  Effect.acquireRelease(
    call(() => Fsp.open(at, flags, mode)),
    (handle) => close(handle)
  )
