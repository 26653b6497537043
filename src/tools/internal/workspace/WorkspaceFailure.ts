/**
 * What the file tools tell the model of a workspace's failure: a permanent `Failure` in
 * the runtime's words, its path relative to the root and cut short, the platform's own
 * text kept in `diagnostic`. Private to the file tools.
 */
import * as Failure from "../../../failure/Failure.ts"
import * as Text from "../../../failure/Text.ts"
import type * as Workspace from "./Workspace.ts"

/** A permanent failure of a file tool. */
export const permanent = (
  code: string,
  category: Failure.Category,
  hint: string,
  diagnostic?: string
): Failure.Permanent => new Failure.Permanent({ source: "tool", category, code, attempts: 1, hint, diagnostic })

export type Operation = "read" | "list" | "write"

const maxShownChars = 200

// A path as a hint shows it: relative to the root, and cut short.
export const shown = (display: string): string => Text.clip(display, maxShownChars)

export const fromWorkspaceError =
  (operation: Operation, display: string, maxReadBytes: number) =>
  (error: Workspace.WorkspaceError): Failure.Permanent => {
    const diagnostic = error.detail
    const at = shown(display)
    switch (error.reason) {
      case "not_found": {
        const hint =
          operation === "read"
            ? `no file at ${at}; list the directory first`
            : operation === "list"
              ? `no directory at ${at}; list its parent first`
              : `could not write ${at}: a directory on the way is missing`
        return permanent("not_found", "not_found", hint, diagnostic)
      }
      case "is_a_directory": {
        const hint =
          operation === "read"
            ? `${at} is a directory; use list_files`
            : `${at} is a directory; write to a file path inside it`
        return permanent("is_a_directory", "invalid_target", hint, diagnostic)
      }
      case "not_a_directory": {
        const hint =
          operation === "list"
            ? `${at} is a file, not a directory; use read_file`
            : `a parent of ${at} is a file, not a directory`
        return permanent("not_a_directory", "invalid_target", hint, diagnostic)
      }
      case "not_a_regular_file":
        return permanent(
          "not_a_regular_file",
          "invalid_target",
          `${at} is not a regular file (a FIFO, a socket or a device); the file tools only read and write regular files`,
          diagnostic
        )
      case "outside_root":
        return permanent(
          "outside_root",
          "permission",
          `${at} leads outside the workspace root (through a symbolic link, or a directory moved out of it while the call ran); use a path inside it`,
          diagnostic
        )
      case "invalid_argument":
        return permanent("invalid_path", "invalid_argument", error.detail, diagnostic)
      case "link_loop":
        return permanent("link_loop", "invalid_target", `${at} goes through a loop of symbolic links`, diagnostic)
      case "name_too_long":
        return permanent(
          "invalid_path",
          "invalid_argument",
          "a name in the path is longer than the file system allows (255 bytes); use shorter names",
          diagnostic
        )
      case "too_large": {
        const size = error.size === undefined ? `more than ${maxReadBytes} bytes` : `${error.size} bytes`
        return permanent(
          "file_too_large",
          "too_large",
          `${at} is ${size}, over the read limit of ${maxReadBytes} bytes; read_file does not read it`,
          diagnostic
        )
      }
      case "env_file":
        return permanent(
          "env_file",
          "permission",
          `${at} is a .env file (or a link to one), which may hold secrets; the file tools do not ${operation} it`,
          diagnostic
        )
      case "permission_denied":
        return permanent(
          "permission_denied",
          "permission",
          `the file system does not let the tool ${operation} ${at} (a read-only file, or another user's)`,
          diagnostic
        )
      case "io":
        return permanent("io_error", "io", `could not ${operation} ${at}`, diagnostic)
      case "root_unavailable":
        return permanent(
          "workspace_unavailable",
          "not_found",
          operation === "write"
            ? "the workspace root is not a directory: nothing can be written; no other path will do"
            : "the workspace is empty: its root does not exist yet (nothing was written) or is not a directory",
          diagnostic
        )
    }
  }
