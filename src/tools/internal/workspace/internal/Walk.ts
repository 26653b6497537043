/**
 * The walk under a workspace root (see `Workspace.ts`): a path resolved one name at a
 * time from a descriptor of the root, each step opening `<directory>/<name>` with
 * `O_NOFOLLOW`, links read and resolved here against the root, `..` taken physically,
 * and the descriptor finally used checked once more against the root. What the walk
 * does with the last name is the caller's {@link Final}.
 *
 * @internal
 */
import type { Stats } from "node:fs"
import { constants } from "node:fs"
import * as Fsp from "node:fs/promises"
import * as NodePath from "node:path"
import { Effect, type Scope } from "effect"
import { call, close, fail, fromErrno, open, type WorkspaceError } from "./syscalls.ts"

const { O_RDONLY, O_DIRECTORY, O_NOFOLLOW, O_NONBLOCK } = constants

// Links followed in one resolution before giving up; the kernel's own limit.
const maxLinks = 40

/** A directory reached from the root: its descriptor and its canonical names below the root. */
export interface Directory {
  readonly handle: Fsp.FileHandle
  readonly names: ReadonlyArray<string>
}

export interface Root {
  readonly directory: Directory
  /** The root's real path, as the kernel reports it. */
  readonly real: string
}

/** What a step of the walk found: the value it was after, or a link to follow. */
export type Step<A> = { readonly _tag: "Done"; readonly value: A } | { readonly _tag: "Link"; readonly target: string }

export const done = <A>(value: A): Step<A> => ({ _tag: "Done", value })
export const link = (target: string): Step<never> => ({ _tag: "Link", target })

/** What a walk does with the last name of a path, and with a path that names a directory. */
export interface Final<A> {
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

/** The walk of one root, by descriptor paths (`/proc/self/fd/<n>`) or by plain paths. */
export interface Walker {
  /** Opens the root (creating it when asked and missing). */
  readonly openRoot: (create: boolean) => Effect.Effect<Root, WorkspaceError, Scope.Scope>
  /** Resolves `names` from `start` and hands the end of the path to `final`. */
  readonly walk: <A>(
    root: Root,
    start: Directory,
    names: ReadonlyArray<string>,
    final: Final<A>
  ) => Effect.Effect<A, WorkspaceError, Scope.Scope>
  /** The end of a walk to a directory, creating missing ones when asked. */
  readonly directoryFinal: (create: boolean) => Final<Directory>
  /** Fails `outside_root` unless the descriptor is (still) under the root. */
  readonly verify: (root: Root, handle: Fsp.FileHandle) => Effect.Effect<void, WorkspaceError>
  /** The last name of a path as it is, without following it: what it is, or the link to follow. */
  readonly lastName: (
    root: Root,
    directory: Directory,
    name: string
  ) => Effect.Effect<
    { readonly where: string; readonly info: Stats | undefined; readonly target: string | undefined },
    WorkspaceError
  >
  readonly lstat: (at: string, where: string) => Effect.Effect<Stats | undefined, WorkspaceError>
  /** The target of the link at `at`, or `undefined` when `at` is not a link. */
  readonly readLink: (at: string) => Effect.Effect<string | undefined>
  /** The path the kernel is given for a directory. */
  readonly pathOf: (root: Root, directory: Directory) => string
  /** The path the kernel is given for a name in a directory. */
  readonly childOf: (root: Root, directory: Directory, name: string) => string
  /** The path shown in a failure's detail. */
  readonly shownAt: (root: Root, directory: Directory, name?: string) => string
}

export const makeWalker = (rootPath: string, descriptorPaths: boolean): Walker => {
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
    if (opened._tag === "Failure") {
      const error = fromErrno(`the workspace root ${rootPath}`)(opened.failure)
      // No path the model gives can mend a root that is not there or not a directory.
      return yield* error.reason === "not_found" || error.reason === "not_a_directory"
        ? fail("root_unavailable", error.detail)
        : Effect.fail(error)
    }
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
    let created = false
    for (let attempt = 0; ; attempt++) {
      const opened = yield* Effect.result(open(at, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK))
      if (opened._tag === "Success") {
        // A directory this walk made is checked at once: made in a directory another process
        // moved out of the root meanwhile, it is removed again (review 188).
        if (created)
          yield* verify(root, opened.success).pipe(Effect.tapError(() => Effect.ignore(call(() => Fsp.rmdir(at)))))
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
        created = made._tag === "Success"
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

  // The last name of a path as it is, without following it: what it is, or the link to follow.
  const lastName = Effect.fnUntraced(function* (root: Root, directory: Directory, name: string) {
    const at = childOf(root, directory, name)
    const where = shownAt(root, directory, name)
    const info = yield* lstat(at, where)
    const target = info?.isSymbolicLink() ? yield* readLink(at) : undefined
    return { where, info, target }
  })

  return { openRoot, walk, directoryFinal, verify, lastName, lstat, readLink, pathOf, childOf, shownAt }
}
