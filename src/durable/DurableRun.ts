/**
 * Runs as durable workflows on effect's own `workflow` and `cluster` (R9): one owner per
 * run, failover to another process when one dies, approvals that wait for days at no cost.
 *
 * A run is an effect `Workflow` keyed by its run id, whose body drives the run from its
 * journal (see `RunHost`). Model and tool calls stay steps of the journal, not Activities:
 * the journal's intent records and reconciliation give each side effect exactly once or an
 * honest `unknown_outcome`, where an Activity would run again after a crash. The engine
 * gives what the journal cannot: the run's owner (a shard lock), a restart or a move of
 * every unfinished run to a live process, and durable wake-ups.
 *
 * - {@link layer} registers the runs' code (tools, policies, validation, the model through
 *   the context) on a runner and provides {@link DurableRuns}: start, poll, result, events,
 *   approve, reject, cancel, pending, from any process on the same storage.
 * - {@link layerEmbedded}: the engine on one runner over one SQLite file, the journal's
 *   (zero set-up; a restarted process resumes every unfinished run by itself). One live
 *   process hosts the file; `clientOnly` for a process beside it.
 * - {@link layerCluster}: runner processes over sockets on PostgreSQL (or any `SqlClient`
 *   effect's cluster supports); `clientOnly` for a process (an API server) that starts,
 *   approves and cancels runs without owning any.
 *
 * A run waiting for approval parks: its workflow suspends on a `DurableDeferred` per call,
 * raced with a `DurableClock` at the earliest expiry, and holds no fiber and no memory once
 * the engine lets it go (10 s after its last message). Approving it from any process wakes
 * it on its owner. A workflow that is suspended, moves to another runner or stops with its
 * runner never ends the run: only {@link Service.cancel} does. A run whose journal this
 * runner cannot go on with (a newer format, a tool gone or changed) suspends instead of
 * failing, for a newer runner to resume (`Workflow.SuspendOnFailure`).
 *
 * ```ts
 * const runtime = DurableRun.layer({ tools: [pay] }).pipe(
 *   Layer.provideMerge(DurableRun.layerEmbedded({ filename: "runs.db" })),
 *   Layer.provide(model)
 * )
 * const runs = yield* DurableRun.DurableRuns
 * const runId = yield* runs.start({ goal: "pay the invoice" })
 * yield* runs.approve(runId, (yield* runs.pending(runId))[0].callId)
 * const result = yield* runs.result(runId)
 * ```
 *
 * @since 0.3.0
 */

import { type Duration, Effect, Layer, Predicate } from "effect"
import * as UserCode from "../failure/UserCode.ts"
import * as Journal from "../journal/Journal.ts"
import * as Run from "../run/Run.ts"
import * as RunHost from "../run/RunHost.ts"
import * as RunOptions from "../run/RunOptions.ts"
import * as Durations from "../time/Durations.ts"
import type * as Tool from "../tools/Tool.ts"
import { DurableRuns, type StartOptions } from "./DurableRuns.ts"
import * as Body from "./internal/Body.ts"
import type { Requires } from "./internal/Engine.ts"
import * as Operations from "./internal/Operations.ts"
import { executionOf, payloadOf, RunWorkflow, suspendedOnFailure } from "./internal/Workflow.ts"
/**
 * The code of the runs a runner hosts: `Run.Options` less what each start gives.
 *
 * @category models
 * @since 0.3.0
 */
export type Definitions<T extends Tool.Any = Tool.Any, RV = never, O = never> = Omit<
  RunOptions.Options<T, RV, O>,
  "goal" | "system" | "runId"
>

/**
 * @category models
 * @since 0.3.0
 */
export interface Settings {
  /** How often a run waiting for approval in its process reads the table for a decision. Default 1 second. */
  readonly pollInterval?: Duration.Input | undefined
  /** An approval that expires sooner than this is waited for in the process instead of parking. Default 1 second. */
  readonly parkAfter?: Duration.Input | undefined
  /**
   * How long a run another process took over (this runner's commits were fenced off) may go
   * with no commit and no call waiting for a person before this runner drives it again: that
   * process is taken for gone. Until then, and while it commits, the run is left to it.
   * Default 2 minutes.
   */
  readonly takeBackAfter?: Duration.Input | undefined
  /**
   * How often a run parked on approvals reads the approvals table again: a decision recorded
   * there whose wake was lost (the process that recorded it died before it woke the run) is
   * found then, not at the approval's expiry. At least 1 second; default 5 minutes.
   */
  readonly recheckAfter?: Duration.Input | undefined
}

/**
 * A start that is not an object, names its tools other than as a list of names, or gives a
 * time other than as milliseconds or a duration's text (a `Duration`, a tuple, a bigint,
 * which `Run.Options` takes but a start's data cannot carry): from JavaScript, or data that
 * came over the wire (R12).
 */
const shapeOf = (options: unknown): RunOptions.InvalidRunOptions | undefined => {
  if (typeof options !== "object" || options === null || Array.isArray(options)) {
    return new RunOptions.InvalidRunOptions({
      path: [],
      reason: `a start's options must be an object, got ${options === null ? "null" : typeof options}`
    })
  }
  const tools = Predicate.hasProperty(options, "tools") ? options.tools : undefined
  if (tools !== undefined && !(Array.isArray(tools) && tools.every((name) => typeof name === "string"))) {
    return new RunOptions.InvalidRunOptions({ path: ["tools"], reason: "tools must be a list of tool names" })
  }
  const time = Predicate.hasProperty(options, "time") ? options.time : undefined
  if (time === undefined) return undefined
  if (!Predicate.isObject(time)) {
    return new RunOptions.InvalidRunOptions({ path: ["time"], reason: "time must be an object of durations" })
  }
  for (const [name, value] of Object.entries(time)) {
    if (typeof value !== "number" && typeof value !== "string" && value !== undefined) {
      return new RunOptions.InvalidRunOptions({
        path: ["time", name],
        reason: `a start's time is milliseconds (a number) or a duration's text ("30 seconds"), not ${UserCode.kindOf(value)}`
      })
    }
  }
  return undefined
}

/** A tool the start names that the runner did not register (`definitions` without tools: a client, which cannot tell). */
const unknownTool = (tools: ReadonlyArray<Tool.Any>, options: StartOptions) => {
  const refused = shapeOf(options) ?? (tools.length === 0 ? undefined : Body.unregistered(tools, options.tools))
  return refused === undefined ? Effect.void : Effect.fail(refused)
}

/** Checks a start as `Run.run` checks its options: the start's data over `definitions`. */
const checkedAgainst =
  <T extends Tool.Any, RV, O>(definitions: Definitions<T, RV, O>) =>
  (options: StartOptions): Effect.Effect<void, RunOptions.InvalidRunOptions> =>
    Effect.andThen(unknownTool(definitions.tools, options), () =>
      Run.validateOptions<T, RV, O>({
        ...Body.optionsOf(definitions, payloadOf(options, options.runId ?? "", 0)),
        ...(options.runId === undefined ? {} : { runId: options.runId })
      })
    )

/**
 * A `takeBackAfter` or `recheckAfter` that is not a positive, finite duration (a take-back of
 * no time would fence a live owner off; a recheck of no time would wake a parked run at once, for ever).
 */
const checkDurations = (settings: Settings): RunOptions.InvalidRunOptions | undefined => {
  // A recheck reads the table and writes a durable timer: more often than each second would be a busy loop.
  for (const [key, least] of [
    ["takeBackAfter", 0],
    ["recheckAfter", 1_000]
  ] as const) {
    const given = settings[key]
    if (given === undefined) continue
    const millis = Durations.millisOf(given) ?? Number.NaN
    const fits = Number.isFinite(millis) && (least === 0 ? millis > 0 : millis >= least)
    if (!fits) {
      const expected = least === 0 ? "a positive, finite duration" : "a finite duration of at least 1 second"
      return new RunOptions.InvalidRunOptions({
        path: [key],
        reason: `Expected ${expected}, got ${UserCode.shown(given)}`
      })
    }
  }
  return undefined
}

/**
 * {@link DurableRuns} for a process that hosts no runs (an API server on a client-only
 * cluster layer): it starts, approves, cancels and reads runs that runners host. It checks
 * the data of what it starts (a bad limit is `InvalidRunOptions` here too); the runner
 * checks the rest against its code when the run begins.
 *
 * @category layers
 * @since 0.3.0
 */
export const layerClient: Layer.Layer<DurableRuns, never, Requires> = Layer.effect(
  DurableRuns,
  // The data of a start is checked here as a runner would; its tools are the runner's.
  Effect.map(Operations.services, (all) => Operations.make(all, checkedAgainst({ tools: [] })))
)

/**
 * At a runner's start, the unfinished runs whose workflow suspended on a failure (a runner
 * that could not go on with their journal: a newer format, a tool it does not have) are
 * woken, so that a newer runner takes them up; a runner that still cannot suspends them
 * again. A store out of reach leaves them for the next start.
 */
const wakeSuspended = Effect.gen(function* () {
  const journal = yield* Journal.Journal
  const ids = yield* journal.unfinished
  // One run whose workflow cannot be read now does not keep the others waiting.
  yield* Effect.forEach(
    ids,
    (runId) =>
      Effect.gen(function* () {
        const executionId = yield* executionOf(runId)
        if (yield* suspendedOnFailure(executionId)) yield* RunWorkflow.resume(executionId)
      }).pipe(Effect.ignoreCause({ log: "Warn", message: `DurableRun: could not wake run ${runId}` })),
    { concurrency: 4, discard: true }
  )
}).pipe(Effect.ignore)

/**
 * Registers the runs' code on this runner (its runs are driven here while it owns them)
 * and provides {@link DurableRuns}. A start is checked against `definitions` as `Run.run`
 * checks its options. When the runner starts, it wakes the runs that a runner could not go
 * on with (a journal in a newer format, a tool changed): they wait for a runner with the
 * code they need instead of failing.
 *
 * @category layers
 * @since 0.3.0
 */
export const layer = <T extends Tool.Any, RV = never, O = never>(
  definitions: Definitions<T, RV, O>,
  settings: Settings = {}
): Layer.Layer<DurableRuns, RunOptions.InvalidRunOptions, Requires | RunOptions.Requirements<T, RV>> => {
  // Settings that cannot work fail the layer when it is built, not a run later.
  const invalid = RunHost.checkSettings(settings) ?? checkDurations(settings)
  if (invalid !== undefined) return Layer.effect(DurableRuns, Effect.fail(invalid))
  return Layer.effect(
    DurableRuns,
    Effect.map(Operations.services, (all) => Operations.make(all, checkedAgainst(definitions)))
  ).pipe(
    Layer.provideMerge(
      Layer.mergeAll(
        RunWorkflow.toLayer((payload) => Body.body(definitions, settings, payload)),
        Layer.effectDiscard(Effect.forkScoped(wakeSuspended))
      )
    )
  )
}

export {
  /**
   * Why an operation on a durable run could not be done.
   *
   * @category errors
   * @since 0.3.0
   */
  DurableRunError,
  /**
   * The operations on durable runs, as a service.
   *
   * @category services
   * @since 0.3.0
   */
  DurableRuns,
  /**
   * The operations on durable runs, from any process on the same storage.
   *
   * @category models
   * @since 0.3.0
   */
  type Service,
  /**
   * What a durable run is started with.
   *
   * @category models
   * @since 0.3.0
   */
  type StartOptions
} from "./DurableRuns.ts"
export {
  /**
   * Options of {@link layerCluster}.
   *
   * @category models
   * @since 0.3.0
   */
  type ClusterOptions,
  /**
   * What {@link layerCluster} uses of `NodeClusterSocket`: its layer of runners over sockets.
   *
   * @category models
   * @since 0.3.0
   */
  type ClusterSocket,
  /**
   * Options of {@link layerEmbedded}.
   *
   * @category models
   * @since 0.3.0
   */
  type EmbeddedOptions,
  /**
   * Runner processes over sockets, their messages, shard locks and the journal on one
   * database (PostgreSQL); a dead runner's runs move to the others once its shard locks expire.
   *
   * @category layers
   * @since 0.3.0
   */
  layerCluster,
  /**
   * The engine on one runner over one SQLite file, with the journal in the same file. One
   * live process hosts the file's runs (a second one to host is refused once the first has
   * had time to shut down); `clientOnly: true` opens it beside the host.
   *
   * @category layers
   * @since 0.3.0
   */
  layerEmbedded,
  /**
   * The services every layer of runs needs: the engine with its storage, and the journal.
   *
   * @category models
   * @since 0.3.0
   */
  type Requires
} from "./internal/Engine.ts"
export {
  /**
   * The workflow of a run, keyed by its run id.
   *
   * @category workflows
   * @since 0.3.0
   */
  RunWorkflow
} from "./internal/Workflow.ts"
