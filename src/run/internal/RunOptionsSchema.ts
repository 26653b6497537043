/**
 * The one Schema the run's options are checked and read by (R12). Decoding them gives
 * what the run keeps: each field read once, so that code changing an object later (a
 * getter, an assignment) cannot put into the log a value that was never checked; the
 * tools, policies, criteria and stop hooks of the user as copies of what was checked
 * (their functions still called on the object they came from); durations in
 * milliseconds. What fails names the field by its path. Private to the runtime.
 */
import { type Duration, Effect, Predicate, Schedule, Schema, type SchemaAST, SchemaIssue, SchemaParser } from "effect"
import type * as Model from "../../model/Model.ts"
import type { Backoff } from "../../recovery/Recovery.ts"
import * as Termination from "../../termination/Termination.ts"
import * as Durations from "../../time/Durations.ts"
import * as Tool from "../../tools/Tool.ts"
import * as ToolArguments from "../../tools/ToolArguments.ts"
import type * as ToolCodec from "../../tools/ToolCodec.ts"
import type * as Validation from "../../validation/Validation.ts"
import { RunId } from "../RunOptions.ts"

/** A value of type `T`, checked by `is` alone: functions, schemas and services of the user. */
const opaque = <T>(is: (u: unknown) => boolean, expected: string) =>
  Schema.declare((u: unknown): u is T => is(u), { expected })

const fn = <F>(expected = "a function") => opaque<F>(Predicate.isFunction, expected)

/**
 * A list whose items' `field` (a name, an id) is unique: the second item that repeats one
 * is refused at its field's path, so the message names where (`tools[2].name`).
 */
const uniqueBy = <K extends string>(field: K, repeated: (value: string) => string) =>
  Schema.makeFilter((items: ReadonlyArray<{ readonly [F in K]: string }>) => {
    const seen = new Set<string>()
    for (let i = 0; i < items.length; i++) {
      const value = items[i]?.[field] ?? ""
      if (seen.has(value)) return { path: [i, field], issue: repeated(value) }
      seen.add(value)
    }
    return undefined
  })

/**
 * The options' own objects refuse a key they do not have (a misspelt or moved option);
 * the objects of user code inside them (a tool, a policy, a criterion) may carry more.
 */
const lenient = (options: SchemaAST.ParseOptions): SchemaAST.ParseOptions => ({
  ...options,
  onExcessProperty: "ignore"
})

/**
 * A user object read once through `shape`, then made into what the run keeps by
 * `build`, which also gets the object it was read from (to call its methods on).
 */
const readOnce = <S extends Schema.Constraint, T>(shape: S, build: (read: S["Type"], from: unknown) => T) =>
  Schema.declareConstructor<T, unknown>()(
    [shape],
    ([codec]) =>
      (input, _ast, options) =>
        Effect.map(SchemaParser.decodeUnknownEffect(codec)(input, lenient(options)), (read) => build(read, input))
  )

/** An integer of at least `minimum`. */
const Count = (minimum: number) => Schema.Int.check(Schema.isGreaterThanOrEqualTo(minimum))

/** The milliseconds of a positive, finite duration, or `undefined`. */
const positiveMillisOf = (input: unknown): number | undefined => {
  const millis = Durations.millisOf(input)
  return millis !== undefined && millis > 0 && Number.isFinite(millis) ? millis : undefined
}

const aDuration = 'a positive, finite duration ("30 seconds", or milliseconds)'

/** A positive, finite `Duration.Input`, kept as it was given (a tool's own timeout). */
const DurationInput = opaque<Duration.Input>((u) => positiveMillisOf(u) !== undefined, aDuration)

/** A positive, finite `Duration.Input`, read as milliseconds. */
const Millis = Schema.declareConstructor<number, unknown>()([], () => (input) => {
  const millis = positiveMillisOf(input)
  return millis === undefined
    ? Effect.fail(new SchemaIssue.InvalidValue({ expected: aDuration }))
    : Effect.succeed(millis)
})

/** The stop grace is a real-time timer: at most 2^31 - 1 ms (24.8 days), what one can wait. */
const Grace = Millis.check(
  Schema.isLessThanOrEqualTo(2_147_483_647, { expected: "a positive duration of at most 24 days" })
)

const namePattern = /^[a-zA-Z0-9_-]{1,64}$/

const ToolName = Schema.String.check(
  Schema.isPattern(namePattern, { expected: "1 to 64 characters of letters, digits, '_' or '-'" })
)

// Every effect Schema carries its AST.
const isSchema = (value: unknown): boolean => Predicate.hasProperty(value, "ast") && Predicate.isObject(value.ast)

const AnySchema = opaque<Schema.Codec<unknown, unknown>>(isSchema, "a Schema")

const Metadata = Schema.Struct({
  idempotent: Schema.Boolean,
  maxRetries: Count(0),
  timeout: Schema.optional(DurationInput),
  sideEffect: Tool.SideEffect,
  destructive: Schema.Boolean,
  needsApproval: Schema.Boolean,
  recoverErrors: Schema.Boolean,
  pathFields: Schema.Array(Schema.String),
  contentFields: Schema.Array(Schema.String)
})

const isTool = (u: unknown): boolean => Predicate.isTagged(u, "Tool")

/** Frozen, with data properties only: what was read from it is what it holds, now and later. */
const isFrozenData = (value: unknown): boolean =>
  Predicate.isObjectOrArray(value) &&
  Object.isFrozen(value) &&
  Object.values(Object.getOwnPropertyDescriptors(value)).every((property) => "value" in property)

/**
 * A tool as `Tool.make` made it, once the Schema has read it: frozen all through, so it is
 * its own snapshot (a run keeps it as it is, with nothing copied).
 */
const isFrozenTool = (from: unknown): from is Tool.Any => {
  if (!isFrozenData(from) || !Predicate.hasProperty(from, "metadata")) return false
  const metadata = from.metadata
  return (
    isFrozenData(metadata) &&
    Predicate.hasProperty(metadata, "pathFields") &&
    isFrozenData(metadata.pathFields) &&
    Predicate.hasProperty(metadata, "contentFields") &&
    isFrozenData(metadata.contentFields)
  )
}

/** A tool of the run, as `Tool.make` builds it: itself when frozen, else a copy of what was checked. */
const ToolSchema = readOnce(
  Schema.Struct({
    _tag: Schema.Literal("Tool"),
    name: ToolName,
    description: Schema.String,
    input: AnySchema,
    output: AnySchema,
    definition: opaque<Model.ToolDefinition>(
      (u) => Predicate.hasProperty(u, "name") && Predicate.isString(u.name),
      "the tool's definition (build tools with Tool.make)"
    ),
    codec: opaque<ToolCodec.Compiled>(
      (u) => Predicate.hasProperty(u, "decode") && Predicate.isFunction(u.decode),
      "the tool's compiled schemas (build tools with Tool.make)"
    ),
    metadata: Metadata,
    handler: fn<Tool.Any["handler"]>(),
    postcondition: Schema.optional(fn<NonNullable<Tool.Any["postcondition"]>>()),
    observe: Schema.optional(fn<NonNullable<Tool.Any["observe"]>>()),
    reconcile: Schema.optional(fn<NonNullable<Tool.Any["reconcile"]>>())
  }).check(
    Schema.makeFilter((tool) =>
      tool.definition.name === tool.name
        ? undefined
        : {
            path: ["definition"],
            issue: new SchemaIssue.InvalidValue({ expected: "the definition Tool.make made for this tool's name" })
          }
    )
  ),
  (tool, from): Tool.Any =>
    isFrozenTool(from)
      ? from
      : {
          _tag: "Tool",
          name: tool.name,
          description: tool.description,
          input: tool.input,
          output: tool.output,
          definition: tool.definition,
          codec: tool.codec,
          handler: tool.handler,
          postcondition: tool.postcondition,
          observe: tool.observe,
          reconcile: tool.reconcile,
          metadata: { ...tool.metadata, timeout: tool.metadata.timeout }
        }
)

const Tools = Schema.Array(
  Schema.Unknown.check(
    Schema.makeFilter(isTool, {
      expected: "a tool (build tools with Tool.make, or AiTools.fromTool for an effect/ai tool)"
    })
  ).pipe(Schema.decodeTo(ToolSchema))
).check(uniqueBy("name", (name) => `two tools are named "${name}"; tool names must be unique`))

/** A value that is either passed on as it is (`keep`) or decoded by `codec`, or refused as not `expected`. */
const dispatch = <S extends Schema.Constraint, K>(
  schema: S,
  keep: (u: unknown) => u is K,
  isCandidate: (u: unknown) => boolean,
  expected: string
) =>
  Schema.declareConstructor<S["Type"] | K, unknown>()([schema], ([codec]) => (input, _ast, options) => {
    if (keep(input)) return Effect.succeed(input)
    if (!isCandidate(input)) return Effect.fail(new SchemaIssue.InvalidValue({ expected }))
    return SchemaParser.decodeUnknownEffect(codec)(input, options)
  })

/** The name the log records as the policy that decided: not blank. */
const PolicyName = Schema.String.check(
  Schema.makeFilter((name) => name.trim() !== "", { expected: "a name that is not blank" })
)

const isBuiltInPolicy = (u: unknown): u is Termination.Policy => Predicate.isObject(u) && Termination.isBuiltIn(u)

/**
 * A termination policy: a built-in one as it is; a user's with its name read once, so
 * that what the log says decided is what was checked.
 */
/** A limit's name, as the `limits` options name them (`maxRefunds`): `run.started` records it. */
const limitName = /^[A-Za-z][A-Za-z0-9_]{0,63}$/

/** A policy's limits by name: a key that is no limit's name is refused, never dropped (as a record's key schema would). */
const UserPolicyLimits = Schema.Record(Schema.String, Schema.Finite).check(
  Schema.makeFilter((limits) => {
    const bad = Object.keys(limits).find((key) => !limitName.test(key))
    return bad === undefined
      ? undefined
      : { path: [bad], issue: "Expected a limit's name (a letter, then letters, digits or _; 64 at most)" }
  })
)

const PolicySchema = dispatch(
  readOnce(
    Schema.Struct({
      name: PolicyName,
      decide: fn<Termination.Policy["decide"]>(),
      // The limits a policy of the user's enforces: recorded in `run.started`, and they make a
      // limit of the same name given in `limits` one the run enforces.
      limits: Schema.optional(UserPolicyLimits)
    }),
    (read, from): Termination.Policy => ({
      name: read.name,
      decide: (checkpoint) => read.decide.call(from, checkpoint),
      ...(read.limits === undefined ? {} : { limits: Object.freeze({ ...read.limits }) })
    })
  ),
  isBuiltInPolicy,
  Predicate.isObject,
  "a policy (a name and a decide function)"
)

/** The policies, or what a `policies` function returned. */
export const Policies = dispatch(
  Schema.Array(PolicySchema).check(
    uniqueBy("name", (name) => `two policies are named "${name}"; the log names the policy that decided`)
  ),
  (_u): _u is never => false,
  Array.isArray,
  "an array of policies"
)

type PoliciesFunction = (defaults: ReadonlyArray<Termination.Policy>) => ReadonlyArray<Termination.Policy>

const isPoliciesFunction = (u: unknown): u is PoliciesFunction => Predicate.isFunction(u)

/** The `policies` option: a list, or a function of the defaults (called once the limits are known). */
const PoliciesOption = dispatch(
  Policies,
  isPoliciesFunction,
  Array.isArray,
  "an array of policies, or a function of the defaults"
)

const Criterion = readOnce(
  Schema.Struct({
    description: Schema.String,
    observe: fn<Validation.PlanStep["criteria"][number]["observe"]>()
  }),
  (read, from): Validation.PlanStep["criteria"][number] => ({
    description: read.description,
    observe: (timeline) => read.observe.call(from, timeline)
  })
)

const StopHook = readOnce(
  Schema.Struct({ name: Schema.NonEmptyString, check: fn<Validation.StopHook<unknown>["check"]>() }),
  (read, from): Validation.StopHook<unknown> => ({
    name: read.name,
    check: (context) => read.check.call(from, context)
  })
)

const ValidationSpec = Schema.Struct({
  plan: Schema.optional(
    Schema.Array(
      Schema.Struct({
        id: Schema.NonEmptyString,
        description: Schema.String,
        required: Schema.Boolean,
        // A step with nothing to check would count as done without evidence (R6.2).
        criteria: Schema.Array(Criterion).check(
          Schema.makeFilter((criteria) =>
            criteria.length > 0
              ? undefined
              : { path: [], issue: "a step needs at least one criterion (it is done when they all hold); got none" }
          )
        )
      })
    ).check(uniqueBy("id", (id) => `two plan steps have the id "${id}"; step ids must be unique`))
  ),
  stopHooks: Schema.optional(Schema.Array(StopHook)),
  artifacts: Schema.optional(
    Schema.Array(
      Schema.Struct({
        path: Schema.NonEmptyString,
        format: Schema.Literals(["text", "markdown", "json"]),
        schema: Schema.optional(AnySchema),
        nonEmpty: Schema.Boolean,
        maxBytes: Schema.optional(Count(0))
      })
    )
  ),
  root: Schema.optional(Schema.String)
})

const ModelName = Schema.String.check(
  Schema.makeFilter((name) => name.trim() !== "", { expected: "a name that is not blank" })
)

const Fallback = Schema.Struct({
  name: ModelName,
  model: opaque<Model.Model["Service"]>(
    (u) => Predicate.hasProperty(u, "generate") && Predicate.isFunction(u.generate),
    "a model service (build a fallback with Model.fallback(name, layer))"
  )
})

/** The limits of the termination policies: the defaults are built from them. */
const PolicyLimits = {
  maxIterations: Schema.optional(Count(1)),
  maxToolCalls: Schema.optional(Count(1)),
  repeatedToolCall: Schema.optional(Count(1)),
  maxToolErrors: Schema.optional(Count(0)),
  maxEmptyOutputs: Schema.optional(Count(0)),
  loopThreshold: Schema.optional(Count(1)),
  sameClassErrors: Schema.optional(Count(1)),
  maxTokens: Schema.optional(Count(0)),
  maxCostUsd: Schema.optional(Schema.Finite.check(Schema.isGreaterThanOrEqualTo(0)))
}

/** The limits the tool pipeline enforces itself. */
const PipelineLimits = {
  maxArgumentChars: Schema.optional(Count(1)),
  maxArgumentDepth: Schema.optional(Count(1).check(Schema.isLessThanOrEqualTo(ToolArguments.deepestArguments))),
  maxObservationChars: Schema.optional(Count(1))
}

const Limits = Schema.Struct({ ...PolicyLimits, ...PipelineLimits })

/** The names of the `limits` option's fields (what a resumed run takes back from its `run.started`). */
export const limitNames: ReadonlyArray<string> = Object.keys(Limits.fields)

/** The names of the limits the tool pipeline enforces, not a policy. */
export const pipelineLimitNames: ReadonlyArray<string> = Object.keys(PipelineLimits)

const Time = Schema.Struct({
  run: Schema.optional(Millis),
  step: Schema.optional(Millis),
  attempt: Schema.optional(Millis),
  approval: Schema.optional(Millis),
  stopGrace: Schema.optional(Grace)
})

const Recovery = Schema.Struct({
  backoff: Schema.optional(opaque<Backoff>(Schedule.isSchedule, "a Schedule (build one with Recovery.backoff)")),
  maxRecoveries: Schema.optional(Count(0)),
  correctionBudget: Schema.optional(Count(0)),
  fallbackModels: Schema.optional(Schema.Array(Fallback))
})

/** The run's options, checked and read (see the module doc). */
export const RunOptions = Schema.Struct({
  goal: Schema.String,
  system: Schema.optional(Schema.String),
  tools: Tools,
  limits: Schema.optional(Limits),
  time: Schema.optional(Time),
  recovery: Schema.optional(Recovery),
  policies: Schema.optional(PoliciesOption),
  concurrency: Schema.optional(Count(1)),
  validation: Schema.optional(ValidationSpec),
  output: Schema.optional(AnySchema),
  runId: Schema.optional(RunId),
  modelName: Schema.optional(ModelName)
}).check(
  Schema.makeFilter((options) => {
    // The model in use and its fallbacks are told apart by name: their breakers and the result's `fallbacks`.
    const seen = new Set<string>([options.modelName ?? "model"])
    const fallbacks = options.recovery?.fallbackModels ?? []
    for (let i = 0; i < fallbacks.length; i++) {
      const name = fallbacks[i]?.name ?? ""
      if (seen.has(name)) {
        return {
          path: ["recovery", "fallbackModels", i, "name"],
          issue: `the name "${name}" is used twice; model names must be unique`
        }
      }
      seen.add(name)
    }
    return undefined
  })
)

/** The options as decoded. */
export type Checked = typeof RunOptions.Type
