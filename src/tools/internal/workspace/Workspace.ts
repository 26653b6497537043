/**
 * One workspace root, and the only way the file tools reach what is under it (R3.6,
 * R3.11, R12). A path is resolved one name at a time from a descriptor of the root, and
 * no symbolic link is ever followed by the kernel: each step opens `<directory>/<name>`
 * with `O_NOFOLLOW`, and a link found on the way is read and resolved here, against the
 * root. Links that stay inside keep working; a link or a `..` that leads out is refused.
 * What is checked is what is used: a file is read through the descriptor that was
 * checked, and a write goes to a new file in the checked directory, renamed over the
 * target.
 *
 * On Linux `<directory>` is `/proc/self/fd/<n>`, the directory a descriptor holds, so
 * another process that renames or swaps a directory for a link between two steps cannot
 * redirect the walk; the descriptor finally used is checked once more against the root.
 * A directory moved out of the root while a write runs is found after the fact: a directory
 * the walk made there, or the file it placed (while it is still that file), is removed again
 * and the call fails `outside_root` (for a moment it was there, and a file of that name it
 * replaced out there is gone).
 * Where there is no `/proc/self/fd` (macOS, the BSDs), the walk runs by path: links are
 * still resolved here and refused when they lead out, but such a concurrent swap between
 * two steps is not detected.
 *
 * This module uses `node:fs/promises` directly rather than effect's `FileSystem`: the
 * flags it needs (`O_NOFOLLOW`, `O_NONBLOCK`, `O_DIRECTORY`, `O_EXCL`) are not in that
 * interface. Every call is short (a FIFO or a device is never opened blocking), so none
 * takes an `AbortSignal`; interruption takes effect between calls, and every descriptor
 * is closed by the scope it was opened in.
 *
 * The walk itself is `internal/Walk.ts`; this module holds what each operation (read,
 * list, write) does at the end of it.
 *
 * @internal
 */
import { isUtf8 } from "node:buffer"
import { constants, type Dirent } from "node:fs"
import * as Fsp from "node:fs/promises"
import * as NodePath from "node:path"
import { Effect, Exit } from "effect"
import { isEnvNames } from "../EnvFiles.ts"
import { call, fail, fromErrno, open, type Reason, WorkspaceError } from "./internal/syscalls.ts"
import * as Walk from "./internal/Walk.ts"
import { isTemporaryName, staleTemporaryMillis, temporaryName } from "./Names.ts"

const { O_RDONLY, O_WRONLY, O_CREAT, O_EXCL, O_NOFOLLOW, O_NONBLOCK, O_NOCTTY } = constants

/** @internal */
export { type Reason, WorkspaceError }

/** @internal */
export type Kind = "file" | "directory"

/** @internal */
export { isTemporaryName, isWellFormed, namesDirectory } from "./Names.ts"

/** An entry of a directory: its name as text, and what the directory says it is. */
interface Named {
  readonly name: string
  readonly entry: Pick<
    Dirent,
    "isFile" | "isDirectory" | "isSymbolicLink" | "isFIFO" | "isSocket" | "isCharacterDevice" | "isBlockDevice"
  >
}

// Node's typings give `opendir` only text encodings; it takes "buffer", and then names entries by their bytes.
const bytesEncoding = "buffer" as BufferEncoding

/**
 * The first `limit` entries of the directory at `at` by name, how many it holds, and how many
 * have a name that is not UTF-8 (`unnamed`): read one entry at a time, keeping only the
 * `limit` smallest names seen so far. A name that is not UTF-8 would read as one with U+FFFD
 * in it, which names another file or none, so it is counted, not listed. Temporary files of
 * writes ({@link isTemporaryName}) are neither.
 */
const firstByName = async (at: string, limit: number) => {
  const first: Array<Named> = []
  let total = 0
  let unnamed = 0
  for await (const entry of await Fsp.opendir(at, { bufferSize: 128, encoding: bytesEncoding })) {
    const bytes: unknown = entry.name
    if (Buffer.isBuffer(bytes) && !isUtf8(bytes)) {
      unnamed++
      continue
    }
    const name = Buffer.isBuffer(bytes) ? bytes.toString("utf8") : entry.name
    if (isTemporaryName(name) && !entry.isDirectory()) continue
    total++
    const last = first[limit - 1]
    if (limit === 0 || (last !== undefined && name >= last.name)) continue
    let low = 0
    let high = first.length
    while (low < high) {
      const middle = (low + high) >>> 1
      if ((first[middle]?.name ?? "") < name) low = middle + 1
      else high = middle
    }
    first.splice(low, 0, { name, entry })
    if (first.length > limit) first.pop()
  }
  return { first, total, unnamed }
}

/** @internal */
export interface Workspace {
  /** The file's bytes, at most `maxBytes` of them, else `too_large`. */
  readonly read: (names: ReadonlyArray<string>, maxBytes: number) => Effect.Effect<Buffer, WorkspaceError>
  /**
   * The entries that are files or directories inside the root, links resolved; nothing
   * else: the first `maxEntries` by name, and how many entries were not looked at, those
   * whose names are not UTF-8 included (no path names them). Temporary files of writes are
   * left out, and not counted.
   */
  readonly list: (
    names: ReadonlyArray<string>,
    maxEntries: number
  ) => Effect.Effect<
    { readonly entries: ReadonlyArray<{ readonly name: string; readonly kind: Kind }>; readonly more: number },
    WorkspaceError
  >
  /**
   * Replaces the file (creating missing directories) with `data`, atomically: `data` goes to
   * a temporary file ({@link temporaryName}) in the target's directory, renamed over the
   * target. A process killed mid-write leaves that file behind; the next write to the
   * directory (at most once a minute per directory) removes those older than a minute.
   */
  readonly write: (names: ReadonlyArray<string>, data: Uint8Array) => Effect.Effect<void, WorkspaceError>
}

// Read in pieces this large, so a read never allocates more than it needs.
const chunkBytes = 64 * 1024

/**
 * @internal
 */
export const make = Effect.fnUntraced(function* (options: {
  readonly root: string
  /** Use `/proc/self/fd`; default: when it exists. */
  readonly descriptorPaths?: boolean | undefined
  /** Refuse a file that is a `.env` file where links lead (`env_file`, R3.6). Default `false`. */
  readonly denyEnvFiles?: boolean | undefined
}): Effect.fn.Return<Workspace> {
  const rootPath = NodePath.resolve(options.root)
  const descriptorPaths =
    options.descriptorPaths ??
    (yield* Effect.promise(() =>
      Fsp.stat("/proc/self/fd").then(
        (info) => info.isDirectory(),
        () => false
      )
    ))

  const { openRoot, walk, directoryFinal, verify, lastName, lstat, readLink, pathOf, childOf, shownAt } =
    Walk.makeWalker(rootPath, descriptorPaths)

  const isDirectoryAt = (what: string) => (_root: Walk.Root, _directory: Walk.Directory) =>
    fail("is_a_directory", `${what} names a directory`)

  // Judged where links led: the file's canonical names below the root.
  const checkEnv = (directory: Walk.Directory, name: string, where: string) =>
    options.denyEnvFiles === true && isEnvNames([...directory.names, name])
      ? fail("env_file", `${where} is a .env file`)
      : Effect.void

  const fileFinal: Walk.Final<{ readonly handle: Fsp.FileHandle; readonly size: number }> = {
    create: false,
    onName: Effect.fnUntraced(function* (root, directory, name) {
      const at = childOf(root, directory, name)
      const where = shownAt(root, directory, name)
      // Judged before opening, so a FIFO or a device is never even opened in the common case.
      const info = yield* lstat(at, where)
      if (info === undefined) return yield* fail("not_found", `${where} does not exist`)
      if (info.isSymbolicLink()) {
        const target = yield* readLink(at)
        if (target !== undefined) return Walk.link(target)
      }
      if (info.isDirectory()) return yield* fail("is_a_directory", `${where} is a directory`)
      if (!info.isFile()) return yield* fail("not_a_regular_file", `${where} is not a regular file`)
      yield* checkEnv(directory, name, where)
      // Non-blocking, and judged again on the descriptor: the name may have changed since.
      const handle = yield* open(at, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY).pipe(
        Effect.mapError(fromErrno(where))
      )
      const opened = yield* call(() => handle.stat()).pipe(Effect.mapError(fromErrno(where)))
      if (opened.isDirectory()) return yield* fail("is_a_directory", `${where} is a directory`)
      if (!opened.isFile()) return yield* fail("not_a_regular_file", `${where} is not a regular file`)
      yield* verify(root, handle)
      return Walk.done({ handle, size: opened.size })
    }),
    onDirectory: isDirectoryAt("the path")
  }

  interface Target {
    readonly directory: Walk.Directory
    readonly name: string
    /** The permission bits of the file being replaced, if there is one. */
    readonly mode: number | undefined
  }

  const targetFinal: Walk.Final<Target> = {
    create: true,
    onName: Effect.fnUntraced(function* (root, directory, name) {
      const { where, info, target } = yield* lastName(root, directory, name)
      if (target !== undefined) return Walk.link(target)
      if (info?.isDirectory()) return yield* fail("is_a_directory", `${where} is a directory`)
      if (info !== undefined && !info.isFile())
        return yield* fail("not_a_regular_file", `${where} is not a regular file`)
      yield* checkEnv(directory, name, where)
      yield* verify(root, directory.handle)
      return Walk.done({ directory, name, mode: info === undefined ? undefined : info.mode & 0o777 })
    }),
    onDirectory: isDirectoryAt("the path")
  }

  // What an entry of a listing is, judged without opening it; `undefined` for anything
  // that is not a file or a directory inside the root.
  const kindFinal: Walk.Final<Kind | undefined> = {
    create: false,
    onName: Effect.fnUntraced(function* (root, directory, name) {
      const { info, target } = yield* lastName(root, directory, name)
      if (target !== undefined) return Walk.link(target)
      return Walk.done(info?.isDirectory() ? "directory" : info?.isFile() ? "file" : undefined)
    }),
    onDirectory: () => Effect.succeed("directory")
  }

  const read = (names: ReadonlyArray<string>, maxBytes: number) =>
    Effect.scoped(
      Effect.gen(function* () {
        const root = yield* openRoot(false)
        const { handle, size } = yield* walk(root, root.directory, names, fileFinal)
        const where = NodePath.join(root.real, ...names)
        if (size > maxBytes) return yield* fail("too_large", `${size} bytes`, size)
        // At most one byte more than allowed is ever read: enough to know the file grew past it.
        const chunks: Array<Buffer> = []
        let total = 0
        while (total <= maxBytes) {
          const chunk = Buffer.alloc(Math.min(chunkBytes, maxBytes + 1 - total))
          const { bytesRead } = yield* call(() => handle.read(chunk, 0, chunk.length, null)).pipe(
            Effect.mapError(fromErrno(where))
          )
          if (bytesRead === 0) break
          chunks.push(chunk.subarray(0, bytesRead))
          total += bytesRead
        }
        if (total > maxBytes) return yield* fail("too_large", `more than ${maxBytes} bytes`)
        return Buffer.concat(chunks, total)
      })
    )

  // The first `maxEntries` entries by name, and how many more there are: a directory of a
  // million files is read one entry at a time, holding only the first `maxEntries` names,
  // never a million `lstat`s, a million names in memory or a million-entry output.
  const list = (names: ReadonlyArray<string>, maxEntries: number) =>
    Effect.scoped(
      Effect.gen(function* () {
        const root = yield* openRoot(false)
        const directory = yield* walk(root, root.directory, names, directoryFinal(false))
        const {
          first: entries,
          total,
          unnamed
        } = yield* call(() => firstByName(pathOf(root, directory), maxEntries)).pipe(
          Effect.mapError(fromErrno(shownAt(root, directory)))
        )
        const listed: Array<{ readonly name: string; readonly kind: Kind }> = []
        let seen = 0
        for (const { name, entry } of entries) {
          if (listed.length >= maxEntries) break
          seen++
          const kind: Kind | undefined = entry.isFile()
            ? "file"
            : entry.isDirectory()
              ? "directory"
              : entry.isSymbolicLink() ||
                  !(entry.isFIFO() || entry.isSocket() || entry.isCharacterDevice() || entry.isBlockDevice())
                ? yield* walk(root, directory, [name], kindFinal).pipe(Effect.orElseSucceed(() => undefined))
                : undefined
          if (kind !== undefined) listed.push({ name, kind })
        }
        return { entries: listed, more: total - seen + unnamed }
      })
    )

  // When each directory (by its names below the root) was last swept.
  const swept = new Map<string, number>()

  // Removes the temporary files a killed write left in `directory`, those older than
  // `staleTemporaryMillis` (file times are wall-clock times, so `Date.now`), at most once a
  // minute per directory. Only exact temporary names, only regular files; every error ignored.
  const sweep = (root: Walk.Root, directory: Walk.Directory) => {
    const key = directory.names.join("/")
    const now = Date.now()
    if (now - (swept.get(key) ?? Number.NEGATIVE_INFINITY) < staleTemporaryMillis) return Effect.void
    if (swept.size >= 1024) swept.clear()
    swept.set(key, now)
    return Effect.ignore(
      call(async () => {
        for await (const entry of await Fsp.opendir(pathOf(root, directory), { bufferSize: 128 })) {
          if (!isTemporaryName(entry.name) || !entry.isFile()) continue
          const at = childOf(root, directory, entry.name)
          const info = await Fsp.lstat(at).catch(() => undefined)
          if (info?.isFile() && now - info.mtimeMs > staleTemporaryMillis) await Fsp.unlink(at).catch(() => undefined)
        }
      })
    )
  }

  const write = (names: ReadonlyArray<string>, data: Uint8Array) =>
    Effect.scoped(
      Effect.gen(function* () {
        const root = yield* openRoot(true)
        const target = yield* walk(root, root.directory, names, targetFinal)
        // A fresh name in the checked directory: O_EXCL | O_NOFOLLOW create a new file or fail,
        // and the rename replaces the name itself, never what a link there points to. So a
        // hard link to a file elsewhere is replaced, not written through.
        yield* sweep(root, target.directory)
        const temporary = childOf(root, target.directory, temporaryName())
        const onError = Effect.mapError(fromErrno(shownAt(root, target.directory, target.name)))
        // A file that is there is replaced only if it could be written: the rename needs only the
        // directory's permission, and would replace a read-only file, or another user's (EACCES).
        if (target.mode !== undefined) {
          const existing = childOf(root, target.directory, target.name)
          yield* open(existing, O_WRONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY).pipe(onError)
        }
        // Made and given its removal in one step: an interruption between the two would leave it behind.
        const handle = yield* Effect.uninterruptible(
          open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0o666).pipe(
            onError,
            Effect.tap(() =>
              Effect.addFinalizer((exit) =>
                Exit.isSuccess(exit) ? Effect.void : Effect.ignore(call(() => Fsp.unlink(temporary)))
              )
            )
          )
        )
        const { mode } = target
        if (mode !== undefined) yield* call(() => handle.chmod(mode)).pipe(onError)
        yield* call(() => handle.writeFile(data)).pipe(onError)
        // What it is on disk, to take back this file and no other (below).
        const made = yield* call(() => handle.stat({ bigint: true })).pipe(onError)
        yield* call(() => handle.close()).pipe(onError)
        yield* verify(root, target.directory.handle)
        const placed = childOf(root, target.directory, target.name)
        yield* call(() => Fsp.rename(temporary, placed)).pipe(onError)
        // Checked again once placed: a directory another process moved out of the root between
        // the check and the rename took the file with it (review 188). It is taken back out,
        // if it is still this write's file (review 191: not another one put there since).
        const takeBack = async () => {
          const there = await Fsp.lstat(placed, { bigint: true })
          if (there.ino === made.ino && there.dev === made.dev) await Fsp.unlink(placed)
        }
        yield* verify(root, target.directory.handle).pipe(Effect.tapError(() => Effect.ignore(call(takeBack))))
      })
    )

  return { read, list, write }
})
