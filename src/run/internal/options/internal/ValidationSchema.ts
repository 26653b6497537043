/**
 * The validation spec of the options: plan steps with their criteria (ids unique, one
 * criterion at least), stop hooks, artifact contracts; the user's functions read once.
 * Private to `options/`.
 */
import { Schema } from "effect"
import * as Text from "../../../../failure/Text.ts"
import type * as Validation from "../../../../validation/Validation.ts"
import { Count, fn, NotBlank, readOnce, SchemaValue, uniqueBy } from "./Readers.ts"

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
  Schema.Struct({ name: NotBlank, check: fn<Validation.StopHook<unknown>["check"]>() }),
  (read, from): Validation.StopHook<unknown> => ({
    name: read.name,
    check: (context) => read.check.call(from, context)
  })
)

export const ValidationSpec = Schema.Struct({
  plan: Schema.optional(
    Schema.Array(
      Schema.Struct({
        id: NotBlank,
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
  // Each check is named by its hook's name or its artifact's path: two of one name could not be told apart.
  stopHooks: Schema.optional(
    Schema.Array(StopHook).check(
      uniqueBy("name", (name) => `two stop hooks have the name "${name}"; hook names must be unique`)
    )
  ),
  artifacts: Schema.optional(
    Schema.Array(
      Schema.Struct({
        path: NotBlank,
        format: Schema.Literals(["text", "markdown", "json"]),
        schema: Schema.optional(SchemaValue),
        nonEmpty: Schema.Boolean,
        maxBytes: Schema.optional(Count(0))
      }).check(
        // A schema the check would never apply (it reads only JSON) would pass whatever the file holds.
        Schema.makeFilter((contract) =>
          contract.schema === undefined || contract.format === "json"
            ? undefined
            : { path: ["schema"], issue: `format ${contract.format} takes no schema; only json does` }
        )
      )
    ).check(uniqueBy("path", (path) => `two artifact contracts have the path "${path}"; one contract a file`))
  ),
  // Checked as the artifact reads check it, before the run rather than after its work (R12).
  root: Schema.optional(
    Schema.String.check(
      Schema.makeFilter((root) => root !== "" && !root.includes("\0") && Text.wellFormed(root), {
        expected: "a directory's path, neither empty nor with a NUL byte or a lone surrogate"
      })
    )
  )
})
