/**
 * What a run is given: its goal, tools, policies and validation, and its limits, time
 * and recovery, and the typed error of options that cannot work. Re-exported from `Run`.
 *
 * @since 0.2.0
 */
import { type Duration, Schema } from "effect"
import * as Text from "../failure/Text.ts"
import type * as Model from "../model/Model.ts"
import type { Backoff } from "../recovery/Recovery.ts"
import type * as Termination from "../termination/Termination.ts"
import type * as Tool from "../tools/Tool.ts"
import type * as Validation from "../validation/Validation.ts"

/**
 * The options of a run. Besides what the run is about (goal, system prompt, tools,
 * policies, validation), they come in three groups, one per concern:
 *
 * - `limits`: counts and sizes, what the run may use up (iterations, tool calls,
 *   tokens, cost, argument and observation sizes);
 * - `time`: how long each layer may take (the run, a step, a model attempt, an
 *   approval), and the grace after a stop;
 * - `recovery`: what the run does about a failure (the retry schedule, its retry and
 *   correction budgets, the models to fall back to).
 *
 * The options are checked when the run starts, by one Schema: an invalid option ends
 * the run `failed` with stop reason `internal_error` and the detail of an
 * {@link InvalidRunOptions} (`invalid run options: limits.maxIterations: ...`); the
 * handler of no tool runs and the model is never asked. `Run.validateOptions` gives the
 * same check as a typed failure.
 *
 * @category models
 * @since 0.1.0
 */
export interface Options<T extends Tool.Any = Tool.Any, RV = never, O = never> {
  /** The task, sent to the model as the first user message. */
  readonly goal: string
  readonly system?: string | undefined
  readonly tools: ReadonlyArray<T>
  readonly limits?: Limits | undefined
  readonly time?: Time | undefined
  readonly recovery?: Recovery | undefined
  /**
   * The termination policies, in evaluation order. Default: `Termination.defaults(limits)`.
   * Pass a function to edit the defaults: `(defaults) => Termination.remove(defaults, "loop_detected")`.
   */
  readonly policies?:
    | ReadonlyArray<Termination.Policy>
    | ((defaults: ReadonlyArray<Termination.Policy>) => ReadonlyArray<Termination.Policy>)
    | undefined
  /** How many calls of one batch run at once. Default 1; results always keep call order. */
  readonly concurrency?: number | undefined
  readonly validation?: Validation.Spec<RV> | undefined
  /**
   * The schema of the run's final output. The final answer is read as JSON (a reply
   * wholly inside one code fence is unwrapped) and decoded with it, as a tool's output
   * is checked: `result.output` is the decoded value. An answer that does not decode
   * goes back to the model as a correction, within the correction budget; once the
   * budget is spent, validation refutes it (`validation_failed`).
   */
  readonly output?: Schema.Codec<O, unknown> | undefined
  /** Default: a random UUID. Any other is 1 to 256 characters, none of them a control character (see {@link RunId}). */
  readonly runId?: string | undefined
  /**
   * The name of the `Model` service the run uses: the key of its circuit breaker and
   * what the result's `model` says. Default `"model"`.
   */
  readonly modelName?: string | undefined
}

/**
 * What a run may use up: the limits of the default termination policies (R2.2) and the
 * sizes the tool pipeline enforces on what the model sends and sees (R3.5, R12).
 *
 * @category models
 * @since 0.1.0
 */
export interface Limits extends Termination.Limits {
  /** Arguments longer than this (JSON text, in characters) get `invalid_arguments`. Default 8 MiB. */
  readonly maxArgumentChars?: number | undefined
  /** Arguments nested deeper than this get `invalid_arguments` (R12). Default 64, at most 512. */
  readonly maxArgumentDepth?: number | undefined
  /** Observations longer than this are cut, saying how much was cut. Default 32 KiB. */
  readonly maxObservationChars?: number | undefined
}

/**
 * How long each layer of a run may take (R4.1), each a positive, finite
 * `Duration.Input` (`"30 seconds"`, or milliseconds). A wait is bounded by the tightest
 * layer it is in; a tool's own timeout is in its metadata (`Tool.make({ timeout })`).
 *
 * @category models
 * @since 0.3.0
 */
export interface Time {
  /** The run deadline, from the run's start by Effect's `Clock`. Default 10 minutes. */
  readonly run?: Duration.Input | undefined
  /**
   * The step deadline: one iteration (the model call and the tool batch it asks for,
   * with their retries) gets this long, counted from its start. Default: none (the run
   * deadline bounds it).
   */
  readonly step?: Duration.Input | undefined
  /** The attempt timeout: one model call gets this long; a call cut off is retried (R3.3). Default: none. */
  readonly attempt?: Duration.Input | undefined
  /**
   * How long a call that needs approval waits for a decision before the run ends
   * `approval_expired` (R7). Default: none (the step and run deadlines bound it).
   */
  readonly approval?: Duration.Input | undefined
  /**
   * How long, after the run deadline or a cancel, the run waits for the work it
   * interrupted to stop (real time) before it gives its result anyway: user code that
   * cannot be interrupted (an uninterruptible region, a finalizer that never ends) is
   * then left behind, and its calls recorded `outcome_unknown`. Longer than any
   * `Subprocess` or `Abortable` grace you use. Default 5 seconds; at most 24 days (a
   * real-time timer).
   */
  readonly stopGrace?: Duration.Input | undefined
}

/**
 * What a run does about failures: how it retries (R3.3, R3.4), how often the model may
 * correct its tool arguments (R3.5), and the models it falls back to (R3.9).
 *
 * @category models
 * @since 0.3.0
 */
export interface Recovery {
  /**
   * The delays of one recovery episode (R3.3). Default `Recovery.backoff()`: 50 ms then
   * 100 ms, jittered. Every retry also draws on `maxRecoveries`.
   */
  readonly backoff?: Backoff | undefined
  /** How many retries the run may make in all, provider and tools together (R3.4). Default 8. */
  readonly maxRecoveries?: number | undefined
  /** How many argument corrections the model gets in one run (R3.5). Default 3. */
  readonly correctionBudget?: number | undefined
  /**
   * Models to switch to, in order, when the model in use fails for good (recovery gave
   * up on it) or its circuit is open (R3.9). A switch lasts for the rest of the run and
   * is recorded (`model.fallback`, the result's `fallbacks`). Build one from a layer with
   * `Model.fallback(name, layer)`.
   */
  readonly fallbackModels?: ReadonlyArray<Model.Fallback> | undefined
}

/** A UTF-16 surrogate without its pair: text no store keeps as it is (SQLite and PostgreSQL write U+FFFD). */

/**
 * What a run id may be, in the words of the messages about one that is not.
 *
 * @category schemas
 * @since 0.3.0
 */
export const runIdRule =
  '1 to 256 characters of well-formed text, none of them a control character, other than "." and ".."'

/**
 * What a run id may be: 1 to 256 characters, none of them a control character (a NUL, a
 * line break) or half of a surrogate pair: every store keeps it as text, and logs and URLs
 * carry it. (A store replaces a lone surrogate, so two ids would share one run.) Not `.` or
 * `..`: as a segment of a URL path, clients resolve them away (review 182: a run of id `..`
 * could not be reached by `fetch`, a browser or curl, to decide its call or cancel it).
 *
 * @category schemas
 * @since 0.3.0
 */
export const RunId = Schema.String.check(
  Schema.makeFilter((id: string) => Text.isId(id) && id !== "." && id !== "..", { expected: runIdRule })
)

/**
 * Whether `u` is a run id (see {@link RunId}).
 *
 * @category guards
 * @since 0.3.0
 */
export const isRunId = Schema.is(RunId)

/**
 * Run options that cannot work: `path` names the field (`["limits", "maxIterations"]`,
 * `["tools", 1, "name"]`; empty for the options as a whole), `reason` says why. A run
 * given them ends `failed` (`internal_error`) with this error's message as its detail;
 * `Run.validateOptions` fails with it.
 *
 * @category errors
 * @since 0.3.0
 */
export class InvalidRunOptions extends Schema.TaggedError<InvalidRunOptions>()("InvalidRunOptions", {
  path: Schema.Array(Schema.Union([Schema.String, Schema.Int])),
  reason: Schema.String
}) {
  /** The field as a path expression: `limits.maxIterations`, `tools[1].name`, or `options`. */
  get field(): string {
    const text = this.path
      .map((key) => (typeof key === "number" ? `[${key}]` : `.${key}`))
      .join("")
      .replace(/^\./, "")
    return text === "" ? "options" : text
  }

  override get message(): string {
    return `invalid run options: ${this.field}: ${this.reason}`
  }
}

/**
 * The services a run needs: the model, and what its tools and validation hooks need.
 * Artifact contracts also read files through `FileSystem` and `Path` (`NodeServices.layer`
 * on Node); without them each artifact check fails saying so.
 *
 * @category models
 * @since 0.1.0
 */
export type Requirements<T extends Tool.Any, RV> = Model.Model | Tool.Requirements<T> | RV
