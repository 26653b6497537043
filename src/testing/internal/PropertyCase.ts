/**
 * The generated input of the property tests: the `Schema`s of a case (`ModelFault`,
 * `ToolOutcome`, `Step`, `Case`) and the weighted `arbitrary` that generates it.
 * Private to the testing kit; `Properties` is the public face.
 */
import { Arbitrary, Schema } from "effect"

const between = (minimum: number, maximum: number) => Schema.Int.check(Schema.isBetween({ minimum, maximum }))

/**
 * A provider fault the model plays instead of answering.
 *
 * @category models
 * @since 0.1.0
 */
export const ModelFault = Schema.Union([
  Schema.TaggedStruct("RateLimited", { retryAfterSeconds: Schema.NullOr(between(0, 3)) }),
  Schema.TaggedStruct("ServerError", {}),
  Schema.TaggedStruct("Timeout", {}),
  Schema.TaggedStruct("ConnectionReset", {}),
  Schema.TaggedStruct("CorruptJson", {}),
  Schema.TaggedStruct("BadRequest", {}),
  Schema.TaggedStruct("Unauthorized", {}),
  Schema.TaggedStruct("Hang", {})
])

/**
 * @category models
 * @since 0.1.0
 */
export type ModelFault = typeof ModelFault.Type

/**
 * What one tool call the model asks for will do.
 *
 * - `Succeeds`: an idempotent read answers at once.
 * - `Retryable`: fails `failures` times with a retryable failure, then succeeds; on an
 *   idempotent tool (the runtime may retry it) or a non-idempotent one (it may not).
 * - `Permanent`: an idempotent tool fails permanently (code `rejected`).
 * - `UnknownOutcome`: a payment whose answer is lost; `reconcile` says what its status
 *   query answers (`none`: it has none).
 * - `PermissionDenied`: a tool the permission policy refuses.
 * - `InvalidArgument`: arguments that fail the tool's input schema.
 * - `Slow`: an idempotent read that answers after `millis`.
 *
 * @category models
 * @since 0.1.0
 */
export const ToolOutcome = Schema.Union([
  Schema.TaggedStruct("Succeeds", {}),
  Schema.TaggedStruct("Retryable", { failures: between(1, 5), idempotent: Schema.Boolean }),
  Schema.TaggedStruct("Permanent", {}),
  Schema.TaggedStruct("UnknownOutcome", {
    reconcile: Schema.Literals(["none", "applied", "not_applied", "undecidable"])
  }),
  Schema.TaggedStruct("PermissionDenied", {}),
  Schema.TaggedStruct("InvalidArgument", {}),
  Schema.TaggedStruct("Slow", { millis: between(0, 5_000) })
])

/**
 * @category models
 * @since 0.1.0
 */
export type ToolOutcome = typeof ToolOutcome.Type

/**
 * One model call of the script: a fault, or a response calling one or two tools.
 *
 * @category models
 * @since 0.1.0
 */
export const Step = Schema.Union([
  ModelFault,
  Schema.TaggedStruct("CallTools", { calls: Schema.Array(ToolOutcome).check(Schema.isBetweenLength(1, 2)) })
])

/**
 * @category models
 * @since 0.1.0
 */
export type Step = typeof Step.Type

/**
 * A generated case: the model's script, how it ends (a final answer, or the script runs
 * out and every further call fails permanently), and the run's budgets.
 *
 * @category models
 * @since 0.1.0
 */
export const Case = Schema.Struct({
  steps: Schema.Array(Step).check(Schema.isMaxLength(8)),
  ending: Schema.Literals(["final_answer", "script_exhausted"]),
  runTimeoutSeconds: between(1, 120),
  maxRecoveries: between(0, 10),
  /** Retries one recovery episode's schedule allows. */
  scheduleRetries: between(0, 4),
  /** `maxRetries` of every tool in the case. */
  toolMaxRetries: between(0, 4),
  correctionBudget: between(0, 3),
  maxIterations: between(1, 10),
  maxToolCalls: between(1, 10),
  /** Whether the tools opt in to recovering their errors as observations. */
  recoverErrors: Schema.Boolean,
  jitter: Schema.Boolean,
  /** Seeds `Random`, so the jittered delays are the same every time a case is replayed. */
  seed: between(0, 2_147_483_647)
})

/**
 * @category models
 * @since 0.1.0
 */
export type Case = typeof Case.Type

/** Picks one of `choices` by weight; shrinks toward the first. */
const weighted = <A>(choices: ReadonlyArray<readonly [weight: number, value: Arbitrary.Arbitrary<A>]>) => {
  const total = choices.reduce((sum, [w]) => sum + w, 0)
  return Arbitrary.flatMap(Arbitrary.schema(between(0, total - 1)), (n) => {
    let left = n
    for (const [w, value] of choices) {
      if (left < w) return value
      left -= w
    }
    return (choices[choices.length - 1] as readonly [number, Arbitrary.Arbitrary<A>])[1]
  })
}

const member = <S extends Schema.Top>(schema: S) => Arbitrary.schema(schema)

const toolOutcome: Arbitrary.Arbitrary<ToolOutcome> = weighted<ToolOutcome>([
  [2, Arbitrary.Constant({ _tag: "Succeeds" })],
  [2, member(ToolOutcome.members[1]).pipe(Arbitrary.map((o) => ({ ...o, idempotent: true })))],
  [1, member(ToolOutcome.members[1]).pipe(Arbitrary.map((o) => ({ ...o, idempotent: false })))],
  [1, Arbitrary.Constant({ _tag: "Permanent" })],
  [2, member(ToolOutcome.members[3])],
  [1, Arbitrary.Constant({ _tag: "PermissionDenied" })],
  [1, Arbitrary.Constant({ _tag: "InvalidArgument" })],
  [1, member(ToolOutcome.members[6])]
])

const retryableFault: Arbitrary.Arbitrary<ModelFault> = weighted<ModelFault>([
  [2, member(ModelFault.members[0])],
  [1, Arbitrary.Constant({ _tag: "ServerError" })],
  [1, Arbitrary.Constant({ _tag: "Timeout" })],
  [1, Arbitrary.Constant({ _tag: "ConnectionReset" })],
  [1, Arbitrary.Constant({ _tag: "CorruptJson" })]
])

const step: Arbitrary.Arbitrary<Step> = weighted<Step>([
  [
    9,
    Arbitrary.all({
      _tag: Arbitrary.Constant("CallTools" as const),
      calls: Arbitrary.array(toolOutcome, { minLength: 1, maxLength: 2 })
    })
  ],
  [7, retryableFault],
  [1, Arbitrary.Constant({ _tag: "BadRequest" })],
  [1, Arbitrary.Constant({ _tag: "Unauthorized" })],
  [1, Arbitrary.Constant({ _tag: "Hang" })]
])

/**
 * Generated cases, for `it.effect.prop` or `Arbitrary.checkEffect`. Every value is a
 * valid {@link Case}; the mix is weighted so that most runs get far enough to retry:
 * about half the steps call tools, a third are retryable provider faults, and a tenth
 * are permanent faults or hangs; nine cases in ten end with a final answer.
 * `Arbitrary.schema(Case)` gives the unweighted mix.
 *
 * @category constructors
 * @since 0.1.0
 */
export const arbitrary: Arbitrary.Arbitrary<Case> = Arbitrary.all({
  steps: Arbitrary.array(step, { minLength: 1, maxLength: 8 }),
  ending: weighted<Case["ending"]>([
    [9, Arbitrary.Constant("final_answer" as const)],
    [1, Arbitrary.Constant("script_exhausted" as const)]
  ]),
  runTimeoutSeconds: member(Case.fields.runTimeoutSeconds),
  maxRecoveries: member(Case.fields.maxRecoveries),
  scheduleRetries: member(Case.fields.scheduleRetries),
  toolMaxRetries: member(Case.fields.toolMaxRetries),
  correctionBudget: member(Case.fields.correctionBudget),
  maxIterations: member(Case.fields.maxIterations),
  maxToolCalls: member(Case.fields.maxToolCalls),
  recoverErrors: member(Case.fields.recoverErrors),
  jitter: member(Case.fields.jitter),
  seed: member(Case.fields.seed)
})
