/**
 * A tool the model may call: an effect `Schema` for its input and its output, a
 * handler, and the metadata the runtime needs to run it safely (R3.7): whether it is
 * idempotent, how often it may be retried, its timeout, the class of side effect it
 * has, whether a person must approve it, and whether its execution errors go back to
 * the model as observations (opt-in; the default is to fail fast).
 *
 * @since 0.1.0
 */
import type { Effect } from "effect"
import { Duration, Schema } from "effect"
import type * as Failure from "../failure/Failure.ts"
import type * as OptionKeys from "../failure/OptionKeys.ts"
import type * as Model from "../model/Model.ts"
import * as ToolDefinition from "./internal/ToolDefinition.ts"
import * as ToolCodec from "./ToolCodec.ts"
import * as ToolJsonSchema from "./ToolJsonSchema.ts"

/**
 * What a successful call may change in the world.
 *
 * - `none`: pure computation.
 * - `read`: reads state, changes nothing.
 * - `write`: changes local state (files, a database row).
 * - `external`: changes something outside the process (a payment, an e-mail, a deploy).
 *
 * @category models
 * @since 0.1.0
 */
export const SideEffect = Schema.Literals(["none", "read", "write", "external"])

/**
 * @category models
 * @since 0.1.0
 */
export type SideEffect = typeof SideEffect.Type

/**
 * Whether a call of a tool of this class may change the world: `write` and `external`.
 *
 * @category predicates
 * @since 0.3.0
 */
export const mayChangeWorld = (sideEffect: SideEffect | undefined): sideEffect is "write" | "external" =>
  sideEffect === "write" || sideEffect === "external"

/**
 * What a handler learns about the call it serves.
 *
 * @category models
 * @since 0.1.0
 */
export interface CallContext {
  readonly runId: string
  readonly callId: string
  /** Stable for this call across every retry of it (R3.8). */
  readonly idempotencyKey: string
  /**
   * Says what became of the action when the call is interrupted (cancel, deadline,
   * timeout): a handler that knows (a supervised subprocess that exited on SIGTERM, or
   * had to be killed) reports it here, and the run records it (R5.2).
   */
  readonly settle: (settlement: Settlement, detail: string) => void
  /**
   * The side-effect class of the call's tool, as the run sets it. Work that stopped on the
   * cancel signal has left nothing running, but a `write` or `external` action it had begun
   * may have taken effect (a request the server had already taken): `Abortable` and
   * `Subprocess` record such a call `outcome_unknown`, unless its handler says otherwise.
   * Absent (a context made by hand), they assume the action may have taken effect.
   */
  readonly sideEffect?: SideEffect | undefined
}

/**
 * What became of an action whose call was interrupted (R5.2):
 *
 * - `completed`: it had finished anyway.
 * - `cancelled`: it stopped on the cancel signal before it had an effect (or it has none
 *   to have); nothing is left running.
 * - `outcome_unknown`: it may have had its effect (killed, or stopped part way through a
 *   write or an external request), or it ignored the signal and may still be running: it
 *   must be reclaimed or reconciled, and the run lists it in `pendingActions`.
 *
 * @category models
 * @since 0.1.0
 */
export const Settlement = Schema.Literals(["completed", "cancelled", "outcome_unknown"])

/**
 * @category models
 * @since 0.1.0
 */
export type Settlement = typeof Settlement.Type

/**
 * @category models
 * @since 0.1.0
 */
export interface Metadata {
  readonly idempotent: boolean
  readonly maxRetries: number
  readonly timeout: Duration.Input | undefined
  readonly sideEffect: SideEffect
  /**
   * Whether a call may destroy or overwrite what exists, rather than only add to it (the
   * MCP `destructiveHint`). The runtime decides by `sideEffect` and `idempotent`; this is
   * for your permission policy (its `Request` holds the tool) and approval UI.
   */
  readonly destructive: boolean
  readonly needsApproval: boolean
  /** Execution errors become observations for the model instead of ending the run. */
  readonly recoverErrors: boolean
  /** Top-level argument fields holding file-system paths, checked by the permission policy. */
  readonly pathFields: ReadonlyArray<string>
  /** Top-level argument fields holding content to write, checked against the size limit. */
  readonly contentFields: ReadonlyArray<string>
}

/**
 * @category models
 * @since 0.1.0
 */
export interface Tool<in out I, in out O, out R = never> {
  readonly _tag: "Tool"
  readonly name: string
  readonly description: string
  readonly input: Schema.Codec<I, unknown>
  readonly output: Schema.Codec<O, unknown>
  readonly metadata: Metadata
  /** What the model is told about the tool (see {@link make}): made once, when the tool is. */
  readonly definition: Model.ToolDefinition
  /** The input and output schemas compiled once, for the tool pipeline. */
  readonly codec: ToolCodec.Compiled
  readonly handler: (input: I, context: CallContext) => Effect.Effect<O, Failure.Failure, R>
  /**
   * A follow-up query that confirms a success (R6.4). When it answers `false` the
   * call's result is `inconsistent` and the run does not build on it.
   */
  readonly postcondition:
    | ((input: I, output: O, context: CallContext) => Effect.Effect<boolean, Failure.Failure, R>)
    | undefined
  /** Renders a success for the model; the default is the JSON of the encoded output. */
  readonly observe: ((output: O) => string) | undefined
  /**
   * A status query for an action whose outcome is unknown (R3.8): did the call with this
   * `idempotencyKey` take effect? The runtime asks it instead of retrying blindly.
   */
  readonly reconcile:
    | ((input: I, context: CallContext) => Effect.Effect<Reconciliation<O>, Failure.Failure, R>)
    | undefined
}

/**
 * What a status query found out about an action of unknown outcome (R3.8).
 *
 * - `Applied`: it took effect; `output` is its real result.
 * - `NotApplied`: it did not take effect; sending it again (same idempotency key) is safe.
 * - `Undecidable`: nobody can tell yet; the run ends `unknown_outcome` with the action pending.
 *
 * @category models
 * @since 0.1.0
 */
export type Reconciliation<O> =
  | { readonly _tag: "Applied"; readonly output: O }
  | { readonly _tag: "NotApplied" }
  | { readonly _tag: "Undecidable"; readonly detail: string }

/**
 * A tool of any input and output type, as the registry holds it.
 *
 * @category models
 * @since 0.1.0
 */
export interface Any<out R = unknown> {
  readonly _tag: "Tool"
  readonly name: string
  readonly description: string
  readonly input: Schema.Codec<unknown, unknown>
  readonly output: Schema.Codec<unknown, unknown>
  readonly metadata: Metadata
  readonly definition: Model.ToolDefinition
  readonly codec: ToolCodec.Compiled
  readonly handler: (input: never, context: CallContext) => Effect.Effect<unknown, Failure.Failure, R>
  readonly postcondition:
    | ((input: never, output: never, context: CallContext) => Effect.Effect<boolean, Failure.Failure, R>)
    | undefined
  readonly observe: ((output: never) => string) | undefined
  readonly reconcile:
    | ((input: never, context: CallContext) => Effect.Effect<Reconciliation<unknown>, Failure.Failure, R>)
    | undefined
}

/**
 * The services a list of tools needs.
 *
 * @category models
 * @since 0.1.0
 */
export type Requirements<T> = T extends Any<infer R> ? R : never

/**
 * Raised when a tool is defined with options that cannot work.
 *
 * @category errors
 * @since 0.1.0
 */
export class InvalidToolDefinition extends Schema.TaggedError<InvalidToolDefinition>()("InvalidToolDefinition", {
  tool: Schema.String,
  reason: Schema.String
}) {
  override get message(): string {
    return `Invalid tool definition "${this.tool}": ${this.reason}`
  }
}

/**
 * The retry limit of a tool that does not set one, and of calls to tools that do not
 * exist (so a model that misspells a name a few times is stopped like any repeated failure).
 *
 * @category constructors
 * @since 0.1.0
 */
export const defaultMaxRetries = 2

/**
 * What `Tool.make` takes. `R` is what the handler requires; `RP` and `RC`, what the
 * postcondition and `reconcile` require (each its own: a payment's handler may need one
 * service and its status query another). The tool requires all of them.
 *
 * @category models
 * @since 0.1.0
 */
export interface Options<I, O, R, RP = R, RC = R> {
  readonly name: string
  readonly description: string
  readonly input: Schema.Codec<I, unknown>
  readonly output: Schema.Codec<O, unknown>
  readonly handler: (input: I, context: CallContext) => Effect.Effect<O, Failure.Failure, R>
  /** Default `false`: only idempotent tools are ever retried automatically. */
  readonly idempotent?: boolean | undefined
  /** Default 2 (one call plus at most two retries). */
  readonly maxRetries?: number | undefined
  readonly timeout?: Duration.Input | undefined
  /** Default `"external"`, the most cautious class. */
  readonly sideEffect?: SideEffect | undefined
  /** Default: `true` for a `write` or `external` tool, `false` for a `none` or `read` one. */
  readonly destructive?: boolean | undefined
  readonly needsApproval?: boolean | undefined
  readonly recoverErrors?: boolean | undefined
  readonly pathFields?: ReadonlyArray<string> | undefined
  readonly contentFields?: ReadonlyArray<string> | undefined
  /**
   * Default `true`: the tool is handed to a provider in its strict form (OpenAI's structured
   * outputs) when its input has one; `false` hands over the plain JSON Schema only.
   */
  readonly strict?: boolean | undefined
  readonly postcondition?:
    | ((input: I, output: O, context: CallContext) => Effect.Effect<boolean, Failure.Failure, RP>)
    | undefined
  readonly observe?: ((output: O) => string) | undefined
  readonly reconcile?:
    | ((input: I, context: CallContext) => Effect.Effect<Reconciliation<O>, Failure.Failure, RC>)
    | undefined
}

/** Every option of {@link Options}, each one `Tool.make` checks (the compiler holds the two lists together). */
const knownOptions: OptionKeys.Known<Options<unknown, unknown, unknown>> = ToolDefinition.knownOptions

/**
 * Defines a tool, frozen. Throws {@link InvalidToolDefinition}, naming the option, for
 * a definition that cannot work: a name that chat APIs reject, an input schema that is
 * not of a JSON object, a handler that is not a function, a negative retry count, a
 * timeout that is not a positive finite duration, field lists that are not lists of
 * names, … A definition error is a programming error, found at start-up, not during a run.
 *
 * What the model is told about the tool, its `definition`, is made here, once: its name,
 * its description, the JSON Schema (draft 2020-12) of its input, generated from the
 * input `Schema` by effect/ai's `Tool.getJsonSchemaFromSchema`, with numbers described
 * as numbers, and its strict form (OpenAI's structured outputs) when it has one.
 *
 * @category constructors
 * @since 0.1.0
 */
export const make = <I, O, R = never, RP = R, RC = R>(options: Options<I, O, R, RP, RC>): Tool<I, O, R | RP | RC> => {
  const reason = ToolDefinition.problem(options, knownOptions)
  if (reason !== undefined) throw new InvalidToolDefinition({ tool: String(options.name), reason })
  const maxRetries = options.maxRetries ?? defaultMaxRetries
  const sideEffect = options.sideEffect ?? "external"
  const strict = options.strict === false ? undefined : ToolJsonSchema.strict(options.input)
  // Frozen, so that a run can keep the tool as it is: what it checked cannot change later.
  return Object.freeze({
    _tag: "Tool",
    name: options.name,
    description: options.description,
    input: options.input,
    output: options.output,
    definition: {
      name: options.name,
      description: options.description,
      parameters: ToolJsonSchema.plain(options.input),
      ...(strict === undefined ? {} : { strict })
    },
    codec: ToolCodec.compile(options.input, options.output),
    handler: options.handler,
    postcondition: options.postcondition,
    observe: options.observe,
    reconcile: options.reconcile,
    metadata: Object.freeze({
      idempotent: options.idempotent ?? false,
      maxRetries,
      // Read once, as checked: a mutable object the caller gave (`{ seconds: 1 }`) changes nothing later.
      timeout: options.timeout === undefined ? undefined : Duration.fromInputUnsafe(options.timeout),
      sideEffect,
      destructive: options.destructive ?? mayChangeWorld(sideEffect),
      needsApproval: options.needsApproval ?? false,
      recoverErrors: options.recoverErrors ?? false,
      pathFields: Object.freeze([...(options.pathFields ?? [])]),
      contentFields: Object.freeze([...(options.contentFields ?? [])])
    })
  })
}
