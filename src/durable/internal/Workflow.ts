/**
 * The workflow of a run, keyed by its run id, and how the operations reach it. Private to
 * `durable/`; `DurableRun` exports `RunWorkflow`.
 */
import { Effect, Option, Schema } from "effect"
import { Workflow } from "effect/workflow"
import * as Run from "../../run/Run.ts"
import type * as DurableRuns from "../DurableRuns.ts"
import type * as Body from "./Body.ts"

/**
 * The workflow of a run: keyed by the run id, so that starting a run twice under one id
 * starts it once. Its payload is the data of the run's options; its success, the status the
 * run ended in (the result itself is in the journal).
 *
 * @category workflows
 * @since 0.3.0
 */
export const RunWorkflow = Workflow.make("effect-agent-runtime/Run", {
  payload: {
    runId: Schema.String,
    goal: Schema.String,
    system: Schema.optional(Schema.String),
    limits: Schema.optional(Schema.Record(Schema.String, Schema.Number)),
    tools: Schema.optional(Schema.Array(Schema.String)),
    time: Schema.optional(Schema.Record(Schema.String, Schema.Union([Schema.Number, Schema.String]))),
    startedAt: Schema.optional(Schema.Finite)
  },
  success: Schema.String,
  error: Run.ResumeError,
  idempotencyKey: ({ runId }) => runId
}).annotate(Workflow.SuspendOnFailure, true)

/** The workflow's payload of a start. */
export const payloadOf = (options: DurableRuns.StartOptions, runId: string, startedAt: number): Body.Payload => ({
  runId,
  startedAt,
  goal: options.goal,
  ...(options.system === undefined ? {} : { system: options.system }),
  ...(options.limits === undefined ? {} : { limits: options.limits }),
  ...(options.tools === undefined ? {} : { tools: options.tools }),
  ...(options.time === undefined ? {} : { time: options.time })
})

/** The run's execution id: its workflow's, which depends only on the run id. */
export const executionOf = (runId: string) => RunWorkflow.executionId({ runId, goal: "" })

/** Whether the run's workflow is suspended on a failure (a runner that could not go on with its journal). */
export const suspendedOnFailure = (executionId: string) =>
  Effect.map(
    RunWorkflow.poll(executionId),
    (polled) => Option.isSome(polled) && polled.value._tag === "Suspended" && polled.value.failed === true
  )
