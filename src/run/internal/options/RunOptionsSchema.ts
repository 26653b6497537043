/**
 * The one Schema the run's options are checked and read by (R12). Decoding them gives
 * what the run keeps: each field read once, so that code changing an object later (a
 * getter, an assignment) cannot put into the log a value that was never checked; the
 * tools, policies, criteria and stop hooks of the user as copies of what was checked
 * (their functions still called on the object they came from); durations in
 * milliseconds. What fails names the field by its path. Private to the runtime.
 */
import { Predicate, Schedule, Schema, Struct } from "effect"
import type * as Model from "../../../model/Model.ts"
import type { Backoff } from "../../../recovery/Recovery.ts"
import { RunId } from "../../RunOptions.ts"
import * as LimitSchemas from "./internal/LimitSchemas.ts"
import { PoliciesOption } from "./internal/PolicySchema.ts"
import { Count, Grace, Millis, NotBlank, opaque, SchemaValue } from "./internal/Readers.ts"
import { Tools } from "./internal/ToolSchema.ts"
import { ValidationSpec } from "./internal/ValidationSchema.ts"

export { Policies } from "./internal/PolicySchema.ts"

const Fallback = Schema.Struct({
  name: NotBlank,
  model: opaque<Model.Model["Service"]>(
    (u) => Predicate.hasProperty(u, "generate") && Predicate.isFunction(u.generate),
    "a model service (build a fallback with Model.fallback(name, layer))"
  )
})

/** The limits of the termination policies (the defaults are built from them) and of the tool pipeline. */
const PolicyLimits = Struct.map(LimitSchemas.policyLimits, Schema.optional)
const PipelineLimits = Struct.map(LimitSchemas.pipelineLimits, Schema.optional)

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
  output: Schema.optional(SchemaValue),
  runId: Schema.optional(RunId),
  modelName: Schema.optional(NotBlank)
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
