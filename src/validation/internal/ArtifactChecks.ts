/**
 * The artifact checks of a validation (see `Artifact`), with the `Path` service the caller
 * provided: without one, each contract is a failed check saying what to provide. Private
 * to `validation/`.
 */
import { Effect, Option, Path } from "effect"
import * as Artifact from "../Artifact.ts"
import { type Part, part } from "./Parts.ts"

/** The artifact checks, with the `Path` service the caller provided, when there is one. */
export const checkArtifacts = (
  contracts: ReadonlyArray<Artifact.Contract>,
  root: string
): Effect.Effect<ReadonlyArray<Part>> =>
  contracts.length === 0
    ? Effect.succeed([])
    : Effect.gen(function* () {
        const path = yield* Effect.serviceOption(Path.Path)
        if (Option.isNone(path)) {
          return contracts.map((contract) => {
            const clause = "cannot be checked: no Path service (provide NodeServices.layer from @effect/platform-node)"
            return { check: part(`artifact:${contract.path}`, "artifact", false, clause), blocking: true, evidence: [] }
          })
        }
        return yield* Effect.forEach(contracts, (contract) =>
          Artifact.check(contract, root).pipe(Effect.provideService(Path.Path, path.value))
        )
      })
