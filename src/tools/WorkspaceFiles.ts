/**
 * Reading one file under a root as the file tools read it (R3.6, R12): the path is
 * resolved one name at a time from a descriptor of the root, no symbolic link is
 * followed out of it (a link swapped in while the read runs included), nothing that could
 * block is opened (a FIFO, a device), and at most `maxBytes` are read. Artifact contracts
 * read the files they check through it; a check of your own can too.
 *
 * On Linux the walk holds descriptors (`/proc/self/fd`); elsewhere it runs by path, and a
 * concurrent swap between two of its steps is not detected (see `FileTools`).
 *
 * @since 0.3.0
 */
import * as NodePath from "node:path"
import { Effect } from "effect"
import * as UserCode from "../failure/UserCode.ts"
import * as Workspace from "./internal/workspace/Workspace.ts"

/**
 * Why a file could not be read: `reason` says what was found (`not_found`,
 * `is_a_directory`, `not_a_regular_file`, `outside_root`, `link_loop`, `too_large` with
 * the file's `size` when known, `permission_denied`, `root_unavailable`, ...).
 *
 * @category errors
 * @since 0.3.0
 */
export { WorkspaceError } from "./internal/workspace/Workspace.ts"

/**
 * @category models
 * @since 0.3.0
 */
export type Reason = Workspace.Reason

const invalid = (detail: string) => Effect.fail(new Workspace.WorkspaceError({ reason: "invalid_argument", detail }))

/**
 * The bytes of the file at `relativePath` under `root`, at most `maxBytes` of them (a whole
 * number, 0 or more; `Infinity` for no limit). A path that leads out of the root on its face
 * (`..`, an absolute path elsewhere) fails `outside_root`, and one that names a directory
 * (`notes/`, `notes/.`) `is_a_directory`, before the file system is asked; a root, a path or
 * a limit that cannot work (a path with a NUL byte, or a lone UTF-16 surrogate that the file
 * system would read as U+FFFD) fails `invalid_argument`, saying which.
 *
 * @category reading
 * @since 0.3.0
 */
export const read = (
  root: string,
  relativePath: string,
  maxBytes: number
): Effect.Effect<Uint8Array, Workspace.WorkspaceError> =>
  Effect.gen(function* () {
    if (typeof root !== "string" || root === "" || root.includes("\0") || !Workspace.isWellFormed(root))
      return yield* invalid("root must be a directory's path, neither empty nor with a NUL byte or a lone surrogate")
    // A lone surrogate would reach the file system as U+FFFD: two paths, one file.
    if (
      typeof relativePath !== "string" ||
      relativePath === "" ||
      relativePath.includes("\0") ||
      !Workspace.isWellFormed(relativePath)
    )
      return yield* invalid("the path must name a file, neither empty nor with a NUL byte or a lone surrogate")
    if (!(typeof maxBytes === "number" && maxBytes >= 0 && (Number.isInteger(maxBytes) || maxBytes === Infinity)))
      return yield* invalid(`maxBytes must be a whole number of bytes, 0 or more, got ${UserCode.shown(maxBytes)}`)
    if (Workspace.namesDirectory(relativePath))
      return yield* Effect.fail(new Workspace.WorkspaceError({ reason: "is_a_directory", detail: relativePath }))
    const base = NodePath.resolve(root)
    const relative = NodePath.relative(base, NodePath.resolve(base, relativePath))
    if (relative === ".." || relative.startsWith(`..${NodePath.sep}`) || NodePath.isAbsolute(relative)) {
      return yield* Effect.fail(new Workspace.WorkspaceError({ reason: "outside_root", detail: relativePath }))
    }
    const names = relative.split(NodePath.sep).filter((name) => name.length > 0)
    if (names.length === 0) {
      return yield* Effect.fail(new Workspace.WorkspaceError({ reason: "is_a_directory", detail: relativePath }))
    }
    const workspace = yield* Workspace.make({ root: base })
    return yield* workspace.read(names, maxBytes)
  })
