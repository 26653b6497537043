/**
 * What a path or a name must be for the file tools to name one file by it, and the names the
 * workspace keeps for itself (see `Workspace.ts`). Private to the tools.
 *
 * @internal
 */
import { randomBytes } from "node:crypto"
import * as NodePath from "node:path"
import * as Text from "../../../failure/Text.ts"

/**
 * Whether a path is well-formed text: no lone surrogate (`"\ud800"`), which has no UTF-8
 * bytes of its own. The file system would get U+FFFD for it, so two different paths would
 * name one file (`report-\ud800.txt` and `report-\udfff.txt`), and neither the file's name.
 *
 * @internal
 */
export const isWellFormed = (path: string): boolean => Text.wellFormed(path)

/**
 * Whether a path names a directory on its face, as the file system reads it (`notes/`,
 * `notes/.`, `..`): never a file, whatever is there. A separator is the platform's (`sep`,
 * by default `node:path`'s): on Windows both `/` and `\`, elsewhere only `/`, where a file
 * may be named `a\`.
 *
 * @internal
 */
export const namesDirectory = (path: string, sep: string = NodePath.sep): boolean =>
  path !== "" && (sep === "\\" ? /(^|[/\\])\.{0,2}$/ : /(^|\/)\.{0,2}$/).test(path)

/**
 * The name of a write's temporary file: a dot, 16 hexadecimal digits, `.tmp`. A write makes
 * one in the target's directory and renames it over the target; one is left behind only when
 * the process dies mid-write (a `SIGKILL`).
 *
 * @internal
 */
export const temporaryName = (): string => `.${randomBytes(8).toString("hex")}.tmp`

const temporaryPattern = /^\.[0-9a-f]{16}\.tmp$/

/**
 * Whether `name` has the form of a write's temporary file ({@link temporaryName}): such files
 * are not listed, cannot be read or written by the tools, and are swept when stale.
 *
 * @internal
 */
export const isTemporaryName = (name: string): boolean => temporaryPattern.test(name)

/**
 * How old a temporary file must be (by its modification time) before a write to its
 * directory removes it: a write in progress, this process's or another's, is far younger.
 *
 * @internal
 */
export const staleTemporaryMillis = 60_000
