/**
 * The termination policies of the options: a built-in one as it is, a user's read once
 * with its limits; the list (names unique), or a function of the defaults. Private to
 * `options/`.
 */
import { Predicate, Schema } from "effect"
import * as Termination from "../../../../termination/Termination.ts"
import { knownLimits } from "./LimitSchemas.ts"
import { dispatch, fn, NotBlank, readOnce, uniqueBy } from "./Readers.ts"

const isBuiltInPolicy = (u: unknown): u is Termination.Policy => Predicate.isObject(u) && Termination.isBuiltIn(u)

/** A limit's name, as the `limits` options name them (`maxRefunds`): `run.started` records it. */
const limitName = /^[A-Za-z][A-Za-z0-9_]{0,63}$/

/** Whether each known limit's value is one its schema takes. */
const takes: Readonly<Record<string, (u: unknown) => boolean>> = Object.fromEntries(
  Object.entries(knownLimits).map(([name, schema]) => [name, Schema.is(schema)])
)

/**
 * A policy's limits by name: a key that is no limit's name is refused, never dropped (as a
 * record's key schema would). A limit the run knows by name (`maxIterations`, `maxTokens`)
 * takes what the `limits` option takes: a resumed run reads it back as its `limits`.
 */
const UserPolicyLimits = Schema.Record(Schema.String, Schema.Finite).check(
  Schema.makeFilter((limits) => {
    for (const [key, value] of Object.entries(limits)) {
      if (!limitName.test(key)) {
        return { path: [key], issue: "Expected a limit's name (a letter, then letters, digits or _; 64 at most)" }
      }
      const known = Object.hasOwn(takes, key) ? takes[key] : undefined
      if (known !== undefined && !known(value)) {
        return {
          path: [key],
          issue: `Expected what limits.${key} takes (the run knows this limit by name), got ${value}`
        }
      }
    }
    return undefined
  })
)

/**
 * The names the runtime records as the policy of its own stops (a tool error, a step's
 * deadline, an approval's end, validation): a policy of the user's so named would be taken
 * for it, by the log's readers and by `Explain`.
 */
const runtimeNames: ReadonlySet<string> = new Set(["runtime", "step_timeout", "approval", "validation"])

const PolicyName = NotBlank.check(
  Schema.makeFilter((name) =>
    runtimeNames.has(name)
      ? `"${name}" is the name the runtime records for stops of its own; a policy so named would be taken for them`
      : undefined
  )
)

/**
 * A termination policy: a built-in one as it is; a user's with its name read once, so
 * that what the log says decided is what was checked.
 */
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
export const PoliciesOption = dispatch(
  Policies,
  isPoliciesFunction,
  Array.isArray,
  "an array of policies, or a function of the defaults"
)
