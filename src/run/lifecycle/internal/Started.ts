/** The `run.started` record of a run. Private to the lifecycle. */
import * as Termination from "../../../termination/Termination.ts"
import * as Tool from "../../../tools/Tool.ts"
import * as RunContext from "../../internal/RunContext.ts"
import { recordedLimits } from "../../internal/resolve/RecordedLimits.ts"
import type { Resolved } from "../../internal/resolve/Resolve.ts"

/** The `run.started` record: what the run starts with, and what guards its tools. */
export const started = <RV, R>(ctx: RunContext.RunContext, valid: Resolved<RV, R> | undefined, allowAll: boolean) => {
  const tools = valid === undefined ? [] : Array.from(valid.registry.tools.values())
  const unguarded = tools.flatMap((tool) =>
    allowAll && !tool.metadata.needsApproval && Tool.mayChangeWorld(tool.metadata.sideEffect) ? [tool.name] : []
  )
  const own = valid === undefined ? [] : valid.loop.policies.flatMap((p) => (Termination.isBuiltIn(p) ? [] : [p.name]))
  RunContext.emit(ctx, ({ runId, seq, at }) => ({
    _tag: "run.started",
    // Invalid options are not repeated into the log: the run ends at once, saying why.
    goal: valid?.goal ?? "",
    model: valid?.modelName ?? "model",
    tools: tools.map((tool) => tool.name),
    deadlineAt: ctx.deadlineAt,
    ...(valid?.system === undefined ? {} : { system: valid.system }),
    ...(valid === undefined ? {} : { policies: Termination.names(valid.loop.policies) }),
    ...(own.length === 0 ? {} : { ownPolicies: own }),
    permission: allowAll ? "allow_all" : "policy",
    ...(unguarded.length > 0 ? { unguardedTools: unguarded } : {}),
    ...(valid === undefined ? {} : { limits: recordedLimits(valid) }),
    runId,
    seq,
    at
  }))
}
