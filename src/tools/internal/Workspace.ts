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
 * @internal
 */
import { randomBytes } from "node:crypto"
import { constants, type Stats } from "node:fs"
import * as Fsp from "node:fs/promises"
import * as NodePath from "node:path"
import { Effect, Exit, type Scope } from "effect"
import { call, close, fail, fromErrno, open, type Reason, WorkspaceError } from "./syscalls.ts"

const { O_RDONLY, O_WRONLY, O_CREAT, O_EXCL, O_DIRECTORY, O_NOFOLLOW, O_NONBLOCK, O_NOCTTY } = constants

/** @internal */
export { type Reason, WorkspaceError }

/** @internal */
export type Kind = "file" | "directory"

/** @internal */
export interface Workspace {
  /** The file's bytes, at most `maxBytes` of them, else `too_large`. */
  readonly read: (names: ReadonlyArray<string>, maxBytes: number) => Effect.Effect<Buffer, WorkspaceError>
  /**
   * The entries that are files or directories inside the root, links resolved; nothing
   * else: the first `maxEntries` by name, and how many entries were not looked at.
   */
  readonly list: (
    names: ReadonlyArray<string>,
    maxEntries: number
  ) => Effect.Effect<
    { readonly entries: ReadonlyArray<{ readonly name: string; readonly kind: Kind }>; readonly more: number },
    WorkspaceError
  >
  /** Replaces the file (creating missing directories) with `data`, atomically. */
  readonly write: (names: ReadonlyArray<string>, data: Uint8Array) => Effect.Effect<void, WorkspaceError>
}

// Links followed in one resolution before giving up; the kernel's own limit.
const maxLinks = 40

// Read in pieces this large, so a read never allocates more than it needs.
const chunkBytes = 64 * 1024

/** A directory reached from the root: its descriptor and its canonical names below the root. */
interface Directory {
  readonly handle: Fsp.FileHandle
  readonly names: ReadonlyArray<string>
}

interface Root {
  readonly directory: Directory
  /** The root's real path, as the kernel reports it. */
  readonly real: string
}

type Step<A> = { readonly _tag: "Done"; readonly value: A } | { readonly _tag: "Link"; readonly target: string }

const done = <A>(value: A): Step<A> => ({ _tag: "Done", value })
const link = (target: string): Step<never> => ({ _tag: "Link", target })

/** What a walk does with the last name of a path, and with a path that names a directory. */
interface Final<A> {
  /** Missing directories on the way are created (for writes). */
  readonly create: boolean
  /** The last name; `undefined` treats it as one more directory. */
  readonly onName:
    | ((root: Root, directory: Directory, name: string) => Effect.Effect<Step<A>, WorkspaceError, Scope.Scope>)
    | undefined
  readonly onDirectory: (root: Root, directory: Directory) => Effect.Effect<A, WorkspaceError, Scope.Scope>
}

const splitTarget = (target: string): Array<string> => target.split("/").filter((name) => name !== "" && name !== ".")

const isUnder = (base: string, target: string): boolean =>
  target === base || target.startsWith(base.endsWith("/") ? base : `${base}/`)

/**
 * @internal
 */
export const make = Effect.fnUntraced(function* (options: {
  readonly root: string
  /** Use `/proc/self/fd`; default: when it exists. */
  readonly descriptorPaths?: boolean | undefined
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

  const pathOf = (root: Root, directory: Directory): string =>
    descriptorPaths ? `/proc/self/fd/${directory.handle.fd}` : NodePath.join(root.real, ...directory.names)
  const childOf = (root: Root, directory: Directory, name: string): string => `${pathOf(root, directory)}/${name}`
  const shownAt = (root: Root, directory: Directory, name?: string): string =>
    NodePath.join(root.real, ...directory.names, ...(name === undefined ? [] : [name]))

  // The root is trusted configuration: it may itself be reached through a link.
  const openRoot = Effect.fnUntraced(function* (create: boolean) {
    const flags = O_RDONLY | O_DIRECTORY
    let opened = yield* Effect.result(open(rootPath, flags))
    if (opened._tag === "Failure" && opened.failure.code === "ENOENT" && create) {
      yield* Effect.ignore(call(() => Fsp.mkdir(rootPath, { recursive: true })))
      opened = yield* Effect.result(open(rootPath, flags))
    }
    if (opened._tag === "Failure")
      return yield* Effect.fail(fromErrno(`the workspace root ${rootPath}`)(opened.failure))
    const handle = opened.success
    const real = yield* call(() =>
      descriptorPaths ? Fsp.readlink(`/proc/self/fd/${handle.fd}`) : Fsp.realpath(rootPath)
    ).pipe(Effect.mapError(fromErrno(rootPath)))
    return { directory: { handle, names: [] }, real } satisfies Root
  })

  // The descriptor finally used must still be under the root: a directory moved out by
  // another process after the walk passed through it is caught here.
  const verify = Effect.fnUntraced(function* (root: Root, handle: Fsp.FileHandle) {
    if (!descriptorPaths) return
    const real = yield* call(() => Fsp.readlink(`/proc/self/fd/${handle.fd}`)).pipe(
      Effect.mapError(fromErrno(`descriptor ${handle.fd}`))
    )
    if (!isUnder(root.real, real)) {
      return yield* fail("outside_root", `the opened ${real} is not under the root ${root.real}`)
    }
  })

  // The target of the link at `at`, or `undefined` when `at` is not a link.
  const readLink = (at: string): Effect.Effect<string | undefined> =>
    call(() => Fsp.readlink(at)).pipe(Effect.orElseSucceed(() => undefined))

  const lstat = (at: string, where: string): Effect.Effect<Stats | undefined, WorkspaceError> =>
    call(() => Fsp.lstat(at)).pipe(
      Effect.map((info): Stats | undefined => info),
      Effect.catch((error) =>
        error.code === "ENOENT" ? Effect.succeed(undefined) : Effect.fail(fromErrno(where)(error))
      )
    )

  // One directory down, without following a link; creating it if asked and missing.
  const enter = Effect.fnUntraced(function* (root: Root, directory: Directory, name: string, create: boolean) {
    const at = childOf(root, directory, name)
    const where = shownAt(root, directory, name)
    for (let attempt = 0; ; attempt++) {
      const opened = yield* Effect.result(open(at, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK))
      if (opened._tag === "Success") {
        return done<Directory>({ handle: opened.success, names: [...directory.names, name] })
      }
      const error = opened.failure
      // A link fails with ELOOP, or ENOTDIR along with O_DIRECTORY, as a file does.
      if (error.code === "ENOTDIR" || error.code === "ELOOP") {
        const target = yield* readLink(at)
        if (target !== undefined) return link(target)
        return yield* fail("not_a_directory", `${where}: ${error.message}`)
      }
      if (error.code === "ENOENT" && create && attempt < 3) {
        // EEXIST means another call created it first: open it on the next turn.
        const made = yield* Effect.result(call(() => Fsp.mkdir(at)))
        if (made._tag === "Failure" && made.failure.code !== "EEXIST")
          return yield* Effect.fail(fromErrno(where)(made.failure))
        continue
      }
      return yield* Effect.fail(fromErrno(where)(error))
    }
  })

  /**
   * Resolves `names` from `start`, one name at a time, with links resolved against the
   * root and `..` taken physically (the parent of the directory actually reached).
   */
  const walk = <A>(
    root: Root,
    start: Directory,
    names: ReadonlyArray<string>,
    final: Final<A>
  ): Effect.Effect<A, WorkspaceError, Scope.Scope> =>
    Effect.gen(function* () {
      let directory = start
      let links = 0
      const queue = [...names]
      // Only descriptors this walk opened are closed as it moves on.
      const moveTo = (next: Directory) => {
        const previous = directory
        directory = next
        return previous.handle === start.handle || previous.handle === root.directory.handle
          ? Effect.void
          : close(previous.handle)
      }
      const follow = Effect.fnUntraced(function* (target: string) {
        links += 1
        if (links > maxLinks) return yield* fail("link_loop", `more than ${maxLinks} symbolic links`)
        if (!target.startsWith("/")) {
          queue.unshift(...splitTarget(target))
          return
        }
        // An absolute target counts only when it is under the root, by its real path or as configured.
        const base = [root.real, rootPath].find((candidate) => isUnder(candidate, target))
        if (base === undefined) return yield* fail("outside_root", `a link leads to ${target}, outside the root`)
        yield* moveTo(root.directory)
        queue.unshift(...splitTarget(target.slice(base.length)))
      })
      for (let name = queue.shift(); ; name = queue.shift()) {
        if (name === undefined) return yield* final.onDirectory(root, directory)
        if (name === "..") {
          if (directory.names.length === 0) return yield* fail("outside_root", "a link's `..` climbs above the root")
          // The parent, reached again from the root by the canonical names.
          const parent = yield* walk(root, root.directory, directory.names.slice(0, -1), directoryFinal(false))
          yield* moveTo(parent)
          continue
        }
        if (queue.length > 0 || final.onName === undefined) {
          const step = yield* enter(root, directory, name, final.create)
          yield* step._tag === "Link" ? follow(step.target) : moveTo(step.value)
          continue
        }
        const step = yield* final.onName(root, directory, name)
        if (step._tag === "Done") return step.value
        yield* follow(step.target)
      }
    })

  const directoryFinal = (create: boolean): Final<Directory> => ({
    create,
    onName: undefined,
    onDirectory: (root, directory) => Effect.as(verify(root, directory.handle), directory)
  })

  const isDirectoryAt = (what: string) => (_root: Root, _directory: Directory) =>
    fail("is_a_directory", `${what} names a directory`)

  const fileFinal: Final<{ readonly handle: Fsp.FileHandle; readonly size: number }> = {
    create: false,
    onName: Effect.fnUntraced(function* (root, directory, name) {
      const at = childOf(root, directory, name)
      const where = shownAt(root, directory, name)
      // Judged before opening, so a FIFO or a device is never even opened in the common case.
      const info = yield* lstat(at, where)
      if (info === undefined) return yield* fail("not_found", `${where} does not exist`)
      if (info.isSymbolicLink()) {
        const target = yield* readLink(at)
        if (target !== undefined) return link(target)
      }
      if (info.isDirectory()) return yield* fail("is_a_directory", `${where} is a directory`)
      if (!info.isFile()) return yield* fail("not_a_regular_file", `${where} is not a regular file`)
      // Non-blocking, and judged again on the descriptor: the name may have changed since.
      const handle = yield* open(at, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY).pipe(
        Effect.mapError(fromErrno(where))
      )
      const opened = yield* call(() => handle.stat()).pipe(Effect.mapError(fromErrno(where)))
      if (opened.isDirectory()) return yield* fail("is_a_directory", `${where} is a directory`)
      if (!opened.isFile()) return yield* fail("not_a_regular_file", `${where} is not a regular file`)
      yield* verify(root, handle)
      return done({ handle, size: opened.size })
    }),
    onDirectory: isDirectoryAt("the path")
  }

  interface Target {
    readonly directory: Directory
    readonly name: string
    /** The permission bits of the file being replaced, if there is one. */
    readonly mode: number | undefined
  }

  // The last name of a path as it is, without following it: what it is, or the link to follow.
  const lastName = Effect.fnUntraced(function* (root: Root, directory: Directory, name: string) {
    const at = childOf(root, directory, name)
    const where = shownAt(root, directory, name)
    const info = yield* lstat(at, where)
    const target = info?.isSymbolicLink() ? yield* readLink(at) : undefined
    return { where, info, target }
  })

  const targetFinal: Final<Target> = {
    create: true,
    onName: Effect.fnUntraced(function* (root, directory, name) {
      const { where, info, target } = yield* lastName(root, directory, name)
      if (target !== undefined) return link(target)
      if (info?.isDirectory()) return yield* fail("is_a_directory", `${where} is a directory`)
      if (info !== undefined && !info.isFile())
        return yield* fail("not_a_regular_file", `${where} is not a regular file`)
      yield* verify(root, directory.handle)
      return done({ directory, name, mode: info === undefined ? undefined : info.mode & 0o777 })
    }),
    onDirectory: isDirectoryAt("the path")
  }

  // What an entry of a listing is, judged without opening it; `undefined` for anything
  // that is not a file or a directory inside the root.
  const kindFinal: Final<Kind | undefined> = {
    create: false,
    onName: Effect.fnUntraced(function* (root, directory, name) {
      const { info, target } = yield* lastName(root, directory, name)
      if (target !== undefined) return link(target)
      return done(info?.isDirectory() ? "directory" : info?.isFile() ? "file" : undefined)
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
  // million files costs one `readdir`, never a million `lstat`s or a million-entry output.
  const list = (names: ReadonlyArray<string>, maxEntries: number) =>
    Effect.scoped(
      Effect.gen(function* () {
        const root = yield* openRoot(false)
        const directory = yield* walk(root, root.directory, names, directoryFinal(false))
        const entries = yield* call(() => Fsp.readdir(pathOf(root, directory), { withFileTypes: true })).pipe(
          Effect.mapError(fromErrno(shownAt(root, directory)))
        )
        entries.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))
        const listed: Array<{ readonly name: string; readonly kind: Kind }> = []
        let seen = 0
        for (const entry of entries) {
          if (listed.length >= maxEntries) break
          seen++
          const kind: Kind | undefined = entry.isFile()
            ? "file"
            : entry.isDirectory()
              ? "directory"
              : entry.isSymbolicLink() ||
                  !(entry.isFIFO() || entry.isSocket() || entry.isCharacterDevice() || entry.isBlockDevice())
                ? yield* walk(root, directory, [entry.name], kindFinal).pipe(Effect.orElseSucceed(() => undefined))
                : undefined
          if (kind !== undefined) listed.push({ name: entry.name, kind })
        }
        return { entries: listed, more: entries.length - seen }
      })
    )

  const write = (names: ReadonlyArray<string>, data: Uint8Array) =>
    Effect.scoped(
      Effect.gen(function* () {
        const root = yield* openRoot(true)
        const target = yield* walk(root, root.directory, names, targetFinal)
        // A fresh name in the checked directory: O_EXCL | O_NOFOLLOW create a new file or fail,
        // and the rename replaces the name itself, never what a link there points to. So a
        // hard link to a file elsewhere is replaced, not written through.
        const temporary = childOf(root, target.directory, `.${randomBytes(8).toString("hex")}.tmp`)
        const onError = Effect.mapError(fromErrno(shownAt(root, target.directory, target.name)))
        const handle = yield* open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0o666).pipe(onError)
        yield* Effect.addFinalizer((exit) =>
          Exit.isSuccess(exit) ? Effect.void : Effect.ignore(call(() => Fsp.unlink(temporary)))
        )
        const { mode } = target
        if (mode !== undefined) yield* call(() => handle.chmod(mode)).pipe(onError)
        yield* call(() => handle.writeFile(data)).pipe(onError)
        yield* call(() => handle.close()).pipe(onError)
        yield* verify(root, target.directory.handle)
        yield* call(() => Fsp.rename(temporary, childOf(root, target.directory, target.name))).pipe(onError)
      })
    )

  return { read, list, write }
})
