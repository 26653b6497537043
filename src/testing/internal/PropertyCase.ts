/**
 * The generated input of the property tests: the `Schema`s of a case (`ModelFault`,
 * `ToolOutcome`, `Step`, `Case`) and the weighted `arbitrary` that generates it.
 * Private to the testing kit; `Properties` is the public face.
 */
import { Arbitrary, Array as Arr, Schema } from "effect"

const between = (minimum: number, maximum: number) => Schema.Int.check(Schema.isBetween({ minimum, maximum }))

/**
 * A provider fault the model plays instead of answering. `Unfinished` is an answer the
 * provider stopped part way and billed (`FaultyModel.unfinished`): a retryable failure
 * that used `tokens` (R2.1).
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
  Schema.TaggedStruct("Hang", {}),
  Schema.TaggedStruct("Unfinished", { tokens: between(1, 400) })
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
 * - `NeedsApproval`: a call of a tool that needs approval (R7): idempotent (`transfer`)
 *   or not (`wire`). The approval gate of the scenario decides it `afterMillis` after
 *   the request (`approve` or `reject`), or never (`never`: it waits until the approval
 *   timeout, the step or the run deadline ends the wait). Once approved, its handler
 *   takes `millis`, then fails retryably its first `failures` invocations.
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
  Schema.TaggedStruct("Slow", { millis: between(0, 5_000) }),
  Schema.TaggedStruct("NeedsApproval", {
    decision: Schema.Literals(["approve", "reject", "never"]),
    afterMillis: between(0, 10_000),
    idempotent: Schema.Boolean,
    millis: between(0, 3_000),
    failures: between(0, 2)
  })
])

/**
 * @category models
 * @since 0.1.0
 */
export type ToolOutcome = typeof ToolOutcome.Type

/**
 * One model call of the script: a fault, or a response calling one to three tools.
 *
 * @category models
 * @since 0.1.0
 */
export const Step = Schema.Union([
  ModelFault,
  Schema.TaggedStruct("CallTools", { calls: Schema.Array(ToolOutcome).check(Schema.isBetweenLength(1, 3)) })
])

/**
 * @category models
 * @since 0.1.0
 */
export type Step = typeof Step.Type

/**
 * A generated case: the model's script, how it ends (a final answer, or the script runs
 * out and every further call fails permanently), and the run's budgets. The time layers
 * below the run deadline (R4.1) and the batch concurrency are optional: absent, the run
 * has no such layer and runs its batches one call at a time.
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
  seed: between(0, 2_147_483_647),
  /** `time.step`: one iteration (model call and tool batch, with retries) gets this long. */
  stepTimeoutMillis: Schema.optionalKey(between(1, 30_000)),
  /** `time.attempt`: one model call gets this long. */
  attemptTimeoutMillis: Schema.optionalKey(between(1, 30_000)),
  /** `time.approval`: how long a call waits for a decision. */
  approvalTimeoutMillis: Schema.optionalKey(between(1, 30_000)),
  /** The own `timeout` of the tools whose handlers take time (`lookup`, `transfer`, `wire`). */
  toolTimeoutMillis: Schema.optionalKey(between(1, 10_000)),
  /** How many calls of one batch run at once. Default 1. */
  concurrency: Schema.optionalKey(between(1, 3)),
  /** The run's token budget, `limits.maxTokens` (R2.1). Default: none. */
  maxTokens: Schema.optionalKey(between(0, 3_000)),
  /** The tokens each answer of the script uses (a response's `usage`). Default 0. */
  answerTokens: Schema.optionalKey(between(0, 400))
})

/**
 * @category models
 * @since 0.1.0
 */
export type Case = typeof Case.Type

/** Picks one of `choices` by weight; shrinks toward the first. */
const weighted = <A>(choices: Arr.NonEmptyReadonlyArray<readonly [weight: number, value: Arbitrary.Arbitrary<A>]>) => {
  const total = choices.reduce((sum, [w]) => sum + w, 0)
  return Arbitrary.flatMap(Arbitrary.schema(between(0, total - 1)), (n) => {
    let left = n
    for (const [w, value] of choices) {
      if (left < w) return value
      left -= w
    }
    return Arr.lastNonEmpty(choices)[1]
  })
}

const member = <S extends Schema.Top>(schema: S) => Arbitrary.schema(schema)

/** The relative weights of a mix of cases: of tool outcomes, of steps, and of batch concurrency. */
interface Weights {
  readonly succeeds: number
  readonly retryableIdempotent: number
  readonly retryableOnce: number
  readonly permanent: number
  readonly unknownOutcome: number
  readonly permissionDenied: number
  readonly invalidArgument: number
  readonly slow: number
  readonly needsApproval: number
  readonly callTools: number
  /** The fewest calls in one batch (the most is 3). */
  readonly minCalls: number
  readonly retryableFault: number
  readonly permanentFault: number
  readonly hang: number
  /** Weights of concurrency 1 (the default, left absent), 2 and 3. */
  readonly concurrency: readonly [number, number, number]
  /** Weights of `recoverErrors` false and true. */
  readonly recoverErrors: readonly [number, number]
}

const needsApproval: Arbitrary.Arbitrary<ToolOutcome> = Arbitrary.all({
  _tag: Arbitrary.Constant("NeedsApproval" as const),
  decision: weighted<"approve" | "reject" | "never">([
    [3, Arbitrary.Constant("approve" as const)],
    [1, Arbitrary.Constant("reject" as const)],
    [1, Arbitrary.Constant("never" as const)]
  ]),
  afterMillis: weighted<number>([
    [3, member(between(0, 1_500))],
    [1, member(between(1_500, 10_000))]
  ]),
  idempotent: member(Schema.Boolean),
  millis: weighted<number>([
    [2, Arbitrary.Constant(0)],
    [1, member(between(0, 3_000))]
  ]),
  failures: member(between(0, 2))
})

const toolOutcome = (w: Weights): Arbitrary.Arbitrary<ToolOutcome> =>
  weighted<ToolOutcome>([
    [w.succeeds, Arbitrary.Constant({ _tag: "Succeeds" })],
    [w.retryableIdempotent, member(ToolOutcome.members[1]).pipe(Arbitrary.map((o) => ({ ...o, idempotent: true })))],
    [w.retryableOnce, member(ToolOutcome.members[1]).pipe(Arbitrary.map((o) => ({ ...o, idempotent: false })))],
    [w.permanent, Arbitrary.Constant({ _tag: "Permanent" })],
    [w.unknownOutcome, member(ToolOutcome.members[3])],
    [w.permissionDenied, Arbitrary.Constant({ _tag: "PermissionDenied" })],
    [w.invalidArgument, Arbitrary.Constant({ _tag: "InvalidArgument" })],
    [w.slow, member(ToolOutcome.members[6])],
    [w.needsApproval, needsApproval]
  ])

const retryableFault: Arbitrary.Arbitrary<ModelFault> = weighted<ModelFault>([
  [2, member(ModelFault.members[0])],
  [1, Arbitrary.Constant({ _tag: "ServerError" })],
  [1, Arbitrary.Constant({ _tag: "Timeout" })],
  [1, Arbitrary.Constant({ _tag: "ConnectionReset" })],
  [1, Arbitrary.Constant({ _tag: "CorruptJson" })],
  [1, member(ModelFault.members[8])]
])

const permanentFault: Arbitrary.Arbitrary<ModelFault> = weighted<ModelFault>([
  [1, Arbitrary.Constant({ _tag: "BadRequest" })],
  [1, Arbitrary.Constant({ _tag: "Unauthorized" })]
])

const step = (w: Weights): Arbitrary.Arbitrary<Step> =>
  weighted<Step>([
    [
      w.callTools,
      Arbitrary.all({
        _tag: Arbitrary.Constant("CallTools" as const),
        calls: Arbitrary.array(toolOutcome(w), { minLength: w.minCalls, maxLength: 3 })
      })
    ],
    [w.retryableFault, retryableFault],
    [w.permanentFault, permanentFault],
    [w.hang, Arbitrary.Constant({ _tag: "Hang" })]
  ])

/**
 * An optional time layer: absent half the time; otherwise tight (at most 1.5 s, below
 * most fault delays and retry waits), middling (1.5–6 s) or loose (6 s up to `loose`,
 * often past the run deadline) in the ratio 2 : 1 : 1.
 */
const timeLayer = (loose: number): Arbitrary.Arbitrary<number | undefined> =>
  weighted<number | undefined>([
    [4, Arbitrary.Constant(undefined)],
    [2, member(between(1, 1_500))],
    [1, member(between(1_500, 6_000))],
    [1, member(between(6_000, loose))]
  ])

/**
 * An optional token budget: absent two cases in three; otherwise mostly within a few
 * answers (50–1,500 tokens), sometimes none at all (0: the first answer that costs spends it).
 */
const tokenBudget: Arbitrary.Arbitrary<number | undefined> = weighted<number | undefined>([
  [6, Arbitrary.Constant(undefined)],
  [1, Arbitrary.Constant(0)],
  [2, member(between(50, 1_500))]
])

/** The optional fields of a case, without the keys that are absent. */
const optional = <A extends Record<string, unknown>>(fields: A): { [K in keyof A]?: Exclude<A[K], undefined> } =>
  // Boundary: `Object.fromEntries` forgets the keys; they are those of `fields` that are present.
  Object.fromEntries(Object.entries(fields).filter(([, v]) => v !== undefined)) as {
    [K in keyof A]?: Exclude<A[K], undefined>
  }

/** Cases of the mix `w` (Weights are not edited during shrinking, so shrinking keeps the mix). */
const mix = (w: Weights): Arbitrary.Arbitrary<Case> =>
  Arbitrary.map(
    Arbitrary.all({
      base: Arbitrary.all({
        steps: Arbitrary.array(step(w), { minLength: 1, maxLength: 8 }),
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
        recoverErrors: weighted<boolean>([
          [w.recoverErrors[0], Arbitrary.Constant(false)],
          [w.recoverErrors[1], Arbitrary.Constant(true)]
        ]),
        jitter: member(Case.fields.jitter),
        seed: member(Case.fields.seed)
      }),
      layers: Arbitrary.all({
        stepTimeoutMillis: timeLayer(30_000),
        attemptTimeoutMillis: timeLayer(30_000),
        approvalTimeoutMillis: timeLayer(30_000),
        toolTimeoutMillis: timeLayer(10_000),
        concurrency: weighted<number | undefined>([
          [w.concurrency[0], Arbitrary.Constant(undefined)],
          [w.concurrency[1], Arbitrary.Constant(2)],
          [w.concurrency[2], Arbitrary.Constant(3)]
        ]),
        maxTokens: tokenBudget,
        answerTokens: weighted<number | undefined>([
          [1, Arbitrary.Constant(undefined)],
          [1, member(between(1, 400))]
        ])
      })
    }),
    ({ base, layers }): Case => ({ ...base, ...optional(layers) })
  )

/**
 * Generated cases, for `it.effect.prop` or `Arbitrary.checkEffect`. Every value is a
 * valid {@link Case}; the mix is weighted so that most runs get far enough to retry:
 * about half the steps call tools, a third are retryable provider faults, and one in six
 * are permanent faults or hangs; nine cases in ten end with a final answer. About one
 * tool call in five needs approval (decided after a delay: approved three times in
 * five, rejected or never decided once each), so about half the cases have one. Each
 * time layer (step, attempt, approval, tool timeout) is set in half the cases,
 * independently, tight more often than loose; half the cases run their batches two or
 * three calls at a time. A third of the cases have a token budget, and half give each
 * answer a usage; one retryable provider fault in seven is an answer stopped unfinished
 * and billed. `Arbitrary.schema(Case)` gives the unweighted mix.
 *
 * @category constructors
 * @since 0.1.0
 */
export const arbitrary: Arbitrary.Arbitrary<Case> = mix({
  succeeds: 2,
  retryableIdempotent: 2,
  retryableOnce: 1,
  permanent: 1,
  unknownOutcome: 2,
  permissionDenied: 1,
  invalidArgument: 1,
  slow: 1,
  needsApproval: 3,
  callTools: 9,
  minCalls: 1,
  retryableFault: 7,
  permanentFault: 2,
  hang: 1,
  concurrency: [2, 1, 1],
  recoverErrors: [1, 1]
})

/**
 * Generated cases weighted toward the riskiest corner: batches of two or three calls
 * run two or three at a time, where calls that need approval wait next to calls that
 * retry, are slow, or fail; with the same time layers as {@link arbitrary}. Two steps in
 * three call tools, a third of the calls need approval and a quarter fail retryably;
 * there are no permanent provider faults, and three cases in four hand tool errors back
 * to the model, so most runs reach several batches.
 *
 * @category constructors
 * @since 0.1.0
 */
export const arbitraryConcurrent: Arbitrary.Arbitrary<Case> = mix({
  succeeds: 1,
  retryableIdempotent: 3,
  retryableOnce: 1,
  permanent: 1,
  unknownOutcome: 1,
  permissionDenied: 1,
  invalidArgument: 1,
  slow: 2,
  needsApproval: 5,
  callTools: 10,
  minCalls: 2,
  retryableFault: 4,
  permanentFault: 0,
  hang: 1,
  concurrency: [0, 1, 1],
  recoverErrors: [1, 3]
})
