/**
 * What the run's options are checked against when they are resolved (R12): the tools,
 * the termination policies and the validation spec a user may have built by hand, so
 * that nothing of theirs reaches the log in a shape its schema refuses. Each check says
 * which value is wrong, or `undefined`. Private to the runtime.
 */
import { Predicate, Schema } from "effect"
import * as UserCode from "../../failure/UserCode.ts"
import * as Termination from "../../termination/Termination.ts"
import * as Tool from "../../tools/Tool.ts"
import type { Criterion } from "../../validation/Criterion.ts"
import type * as Validation from "../../validation/Validation.ts"

const name = /^[a-zA-Z0-9_-]{1,64}$/

const NonNegativeInt = Schema.Int.check(Schema.isGreaterThanOrEqualTo(0))

/** The metadata of a tool, as `Tool.make` builds it. */
const checkMetadata = UserCode.check(
  Schema.Struct({
    idempotent: Schema.Boolean,
    maxRetries: NonNegativeInt,
    sideEffect: Tool.SideEffect,
    needsApproval: Schema.Boolean,
    recoverErrors: Schema.Boolean,
    pathFields: Schema.Array(Schema.String),
    contentFields: Schema.Array(Schema.String)
  }),
  "its metadata"
)

// Every effect Schema carries its AST.
const isSchema = (value: unknown): boolean => Predicate.hasProperty(value, "ast") && Predicate.isObject(value.ast)

const isFunctionOrUndefined = (value: unknown): boolean => value === undefined || Predicate.isFunction(value)

/** What is wrong with `value` as a tool of the run, or `undefined`. */
export const toolIssue = (value: unknown): string | undefined => {
  if (!Predicate.isTagged(value, "Tool")) return "it is not a tool (build tools with Tool.make)"
  const tool = value as Tool.Any
  if (!Predicate.isString(tool.name) || !name.test(tool.name)) {
    return "its name must be 1 to 64 characters of letters, digits, '_' or '-'"
  }
  if (!Predicate.isString(tool.description)) return "its description must be a string"
  if (!isSchema(tool.input) || !isSchema(tool.output)) return "its input and output must be Schemas"
  if (!Predicate.isFunction(tool.handler)) return "its handler must be a function"
  if (![tool.postcondition, tool.observe, tool.reconcile].every(isFunctionOrUndefined)) {
    return "its postcondition, observe and reconcile must be functions when set"
  }
  const metadata = checkMetadata(tool.metadata)
  return metadata._tag === "Failure" ? metadata.failure : undefined
}

/**
 * The policies as the run keeps them: each user policy's name read once, so that what
 * the log says decided is what was checked (a `name` getter cannot change it later).
 * Built-in policies are kept as they are. `undefined` when one is not a policy.
 */
export const policiesOf = (
  values: ReadonlyArray<unknown>
): { readonly policies: ReadonlyArray<Termination.Policy> } | { readonly issue: string } => {
  const policies: Array<Termination.Policy> = []
  for (let i = 0; i < values.length; i++) {
    const value = values[i]
    if (Predicate.isObject(value) && Termination.isBuiltIn(value)) {
      policies.push(value as unknown as Termination.Policy)
      continue
    }
    const policyName = Predicate.hasProperty(value, "name") ? value.name : undefined
    const decide = Predicate.hasProperty(value, "decide") ? value.decide : undefined
    if (!Predicate.isString(policyName) || !Predicate.isFunction(decide)) {
      return { issue: `policies[${i}] is not a policy (a name and a decide function)` }
    }
    const policy = value as Termination.Policy
    policies.push({ name: policyName, decide: (checkpoint) => policy.decide(checkpoint) })
  }
  return { policies }
}

const CriterionShape = Schema.Struct({ description: Schema.String, observe: Schema.Unknown })
const PlanStep = Schema.Struct({
  id: Schema.NonEmptyString,
  description: Schema.String,
  required: Schema.Boolean,
  criteria: Schema.Array(CriterionShape)
})
const StopHook = Schema.Struct({ name: Schema.NonEmptyString, check: Schema.Unknown })
const Contract = Schema.Struct({
  path: Schema.NonEmptyString,
  format: Schema.Literals(["text", "markdown", "json"]),
  nonEmpty: Schema.Boolean
})

const checkSpec = UserCode.check(
  Schema.Struct({
    plan: Schema.optional(Schema.Array(PlanStep)),
    stopHooks: Schema.optional(Schema.Array(StopHook)),
    artifacts: Schema.optional(Schema.Array(Contract)),
    root: Schema.optional(Schema.String)
  }),
  "validation"
)

/** What is wrong with the validation spec (built by hand, not by `Validation`'s constructors), or `undefined`. */
export const validationIssue = (spec: Validation.Spec<unknown>): string | undefined => {
  const checked = checkSpec(spec)
  if (checked._tag === "Failure") return checked.failure
  for (const step of spec.plan ?? []) {
    if (!step.criteria.every((c) => Predicate.isFunction(c.observe))) {
      return `validation: a criterion of plan step ${JSON.stringify(step.id)} has no observe function`
    }
  }
  if (!(spec.stopHooks ?? []).every((hook) => Predicate.isFunction(hook.check))) {
    return "validation: every stop hook needs a check function"
  }
  return undefined
}

/**
 * A tool as the run keeps it: its fields read once, when it was checked, so that code
 * changing the tool object later (a getter, an assignment) cannot put into the log a
 * value that was never checked.
 */
export const snapshotTool = (tool: Tool.Any): Tool.Any =>
  Object.freeze({
    _tag: "Tool",
    name: tool.name,
    description: tool.description,
    input: tool.input,
    output: tool.output,
    handler: tool.handler,
    postcondition: tool.postcondition,
    observe: tool.observe,
    reconcile: tool.reconcile,
    metadata: Predicate.isObject(tool.metadata)
      ? Object.freeze({
          ...tool.metadata,
          pathFields: Array.isArray(tool.metadata.pathFields)
            ? Object.freeze([...tool.metadata.pathFields])
            : tool.metadata.pathFields,
          contentFields: Array.isArray(tool.metadata.contentFields)
            ? Object.freeze([...tool.metadata.contentFields])
            : tool.metadata.contentFields
        })
      : tool.metadata
  })

/** The validation spec as the run keeps it, read once when it was checked (as {@link snapshotTool}). */
export const snapshotSpec = <R>(spec: Validation.Spec<R>): Validation.Spec<R> => ({
  ...(!Array.isArray(spec.plan)
    ? spec.plan === undefined
      ? {}
      : { plan: spec.plan }
    : {
        plan: spec.plan.map((step) => ({
          id: step.id,
          description: step.description,
          required: step.required,
          criteria: Array.isArray(step.criteria)
            ? step.criteria.map((criterion: Criterion) => {
                const observe = criterion.observe
                return {
                  description: criterion.description,
                  observe:
                    typeof observe === "function"
                      ? (timeline: Parameters<typeof observe>[0]) => observe.call(criterion, timeline)
                      : observe
                }
              })
            : step.criteria
        }))
      }),
  ...(!Array.isArray(spec.stopHooks)
    ? spec.stopHooks === undefined
      ? {}
      : { stopHooks: spec.stopHooks }
    : {
        stopHooks: spec.stopHooks.map((hook) => {
          const check = hook.check
          return {
            name: hook.name,
            check: typeof check === "function" ? (context: Validation.Context) => check.call(hook, context) : check
          }
        })
      }),
  ...(!Array.isArray(spec.artifacts)
    ? spec.artifacts === undefined
      ? {}
      : { artifacts: spec.artifacts }
    : { artifacts: spec.artifacts.map((artifact) => ({ ...artifact })) }),
  ...(spec.root === undefined ? {} : { root: spec.root })
})
