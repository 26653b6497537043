/**
 * A case made runnable: the `Scenario` of a case, `toScenario` that builds it (its
 * tools from `PropertyScenarioTools`, its approval gate from `PropertyGate`, whose
 * `Tools`, `Gated` and `Approvals` are re-exported here), and `drive` and
 * `runScenario` that run one on `TestClock`.
 * Private to the testing kit; `Properties` is the public face.
 */
import { Duration, Effect, type FileSystem, Layer, type Path, Random, Result, Schema } from "effect"
import type * as Journal from "../../journal/Journal.ts"
import type * as Model from "../../model/Model.ts"
import * as Recovery from "../../recovery/Recovery.ts"
import * as Run from "../../run/Run.ts"
import type * as RunResult from "../../run/RunResult.ts"
import * as Approval from "../../tools/Approval.ts"
import * as Permission from "../../tools/Permission.ts"
import * as Tool from "../../tools/Tool.ts"
import * as FaultyModel from "../FaultyModel.ts"
import * as ScriptedModel from "../ScriptedModel.ts"
import * as TestClockDriver from "../TestClockDriver.ts"
import type { Budget } from "./PropertyBudget.ts"
import { Case, type ModelFault, type ToolOutcome } from "./PropertyCase.ts"
import { type Approvals, makeApprovals } from "./PropertyGate.ts"
import { makeTools, type Tools, toolFor } from "./PropertyScenarioTools.ts"

export type { Approvals } from "./PropertyGate.ts"
export type { Gated, Tools } from "./PropertyScenarioTools.ts"

/**
 * A case made runnable.
 *
 * @category models
 * @since 0.1.0
 */
export interface Scenario {
  readonly case: Case
  /** The scripted model, keyed by the request (`keyedBy: "iteration"`), so a restarted one answers alike. */
  readonly model: FaultyModel.FaultyModel
  /** What the model plays. */
  readonly script: ReadonlyArray<FaultyModel.Step>
  readonly tools: Tools
  readonly approvals: Approvals
  /**
   * The calls approved so far: the world's record, shared by the tools (which check it)
   * and every approval gate of the scenario (a restarted one adds to it).
   */
  readonly approved: Set<string>
  readonly options: Run.Options<Tool.Any<never>>
  readonly permission: Permission.Options
  readonly budget: Budget
  /** What each tool call id was scripted to do. */
  readonly plan: ReadonlyMap<string, ToolOutcome>
  /**
   * Of a scenario {@link restart} made: at each restart, how many calls of the idempotent
   * tools the processes before it had sent. An attempt a dead process had not committed runs
   * again (R9), so `checkScenario` holds each process to the retry limits (review 175; each
   * of several restarts, review 176).
   */
  readonly restartedAfter?: ReadonlyArray<{ readonly lookup: number; readonly transfer: number }> | undefined
}

const faultStep = (fault: ModelFault): FaultyModel.Step => {
  switch (fault._tag) {
    case "RateLimited":
      return FaultyModel.rateLimited(fault.retryAfterSeconds === null ? undefined : String(fault.retryAfterSeconds))
    case "ServerError":
      return FaultyModel.httpError(500)
    case "Timeout":
      return FaultyModel.timeout
    case "ConnectionReset":
      return FaultyModel.connectionReset
    case "CorruptJson":
      return FaultyModel.corruptJson
    case "BadRequest":
      return FaultyModel.httpError(400)
    case "Unauthorized":
      return FaultyModel.httpError(401)
    case "Hang":
      return FaultyModel.hang
    case "Unfinished":
      return FaultyModel.unfinished(usageOf(fault.tokens))
  }
}

/** `tokens`, three quarters of them (rounded down) the prompt's, the rest the answer's. */
const usageOf = (tokens: number): Model.Usage => {
  const inputTokens = Math.floor((tokens * 3) / 4)
  return { inputTokens, outputTokens: tokens - inputTokens }
}

/**
 * Builds the model script, the tools and the run options of a case. Every call makes
 * fresh tools and a fresh model, so build the scenario inside each property evaluation.
 *
 * Tool calls are numbered `c1`, `c2`, … in script order; each call's arguments name its
 * id, so no two calls share a signature. The run id is `"prop"`. The tools that need
 * approval (`transfer`, `wire`) are offered only when the case calls them; the scenario's
 * approval gate (`approvals`) decides each of their calls as its plan says. The case's
 * time layers become `time.step`, `time.attempt` and `time.approval`, its
 * tool timeout the own `timeout` of `lookup`, `transfer` and `wire`, and its concurrency
 * the run's `concurrency`.
 *
 * @category constructors
 * @since 0.1.0
 */
const checkCase = Schema.decodeUnknownResult(Case)

export const toScenario = (c: Case): Scenario => {
  // A case written by hand is checked as a generated one is made: out of its ranges is a defect naming the field.
  const checked = checkCase(c)
  if (Result.isFailure(checked)) throw new RangeError(`Properties.toScenario: ${checked.failure.message}`)
  const plan = new Map<string, ToolOutcome>()
  const script: Array<FaultyModel.Step> = []
  const costing = (response: Model.Response): Model.Response =>
    c.answerTokens === undefined ? response : { ...response, usage: usageOf(c.answerTokens) }
  let next = 0
  for (const step of c.steps) {
    if (step._tag !== "CallTools") {
      script.push(faultStep(step))
      continue
    }
    const calls = step.calls.map((outcome): readonly [string, unknown, string] => {
      const id = `c${++next}`
      plan.set(id, outcome)
      const args = outcome._tag === "InvalidArgument" ? { q: 42 } : { q: id }
      return [toolFor(outcome), args, id]
    })
    script.push(FaultyModel.respond(costing(ScriptedModel.toolCalls(...calls))))
  }
  if (c.ending === "final_answer") script.push(FaultyModel.respond(costing(ScriptedModel.finalAnswer("done"))))

  const approvals = makeApprovals(plan)
  const { handles, tools } = makeTools(c, plan, approvals.approved)
  const runTimeoutMillis = c.runTimeoutSeconds * 1000
  const { approved, ...approvalsHandle } = approvals
  return {
    case: c,
    model: FaultyModel.make(script, { keyedBy: "iteration" }),
    script,
    tools: handles,
    approvals: approvalsHandle,
    approved,
    options: {
      goal: "a generated case",
      runId: "prop",
      tools,
      limits: {
        maxIterations: c.maxIterations,
        maxToolCalls: c.maxToolCalls,
        ...(c.maxTokens !== undefined ? { maxTokens: c.maxTokens } : {})
      },
      time: {
        run: runTimeoutMillis,
        ...(c.stepTimeoutMillis !== undefined ? { step: c.stepTimeoutMillis } : {}),
        ...(c.attemptTimeoutMillis !== undefined ? { attempt: c.attemptTimeoutMillis } : {}),
        ...(c.approvalTimeoutMillis !== undefined ? { approval: c.approvalTimeoutMillis } : {})
      },
      recovery: {
        backoff: Recovery.backoff({ retries: c.scheduleRetries, jitter: c.jitter }),
        maxRecoveries: c.maxRecoveries,
        correctionBudget: c.correctionBudget
      },
      ...(c.concurrency !== undefined ? { concurrency: c.concurrency } : {})
    },
    permission: { allowTools: tools.filter((t) => t.name !== "forbidden").map((t) => t.name) },
    budget: {
      runTimeoutMillis,
      maxRecoveries: c.maxRecoveries,
      scheduleRetries: c.scheduleRetries,
      correctionBudget: c.correctionBudget,
      maxIterations: c.maxIterations,
      maxToolCalls: c.maxToolCalls,
      maxTokens: c.maxTokens,
      toolMaxRetries: Object.fromEntries(tools.map((t) => [t.name, t.metadata.maxRetries])),
      stepTimeoutMillis: c.stepTimeoutMillis,
      attemptTimeoutMillis: c.attemptTimeoutMillis,
      approvalTimeoutMillis: c.approvalTimeoutMillis,
      toolTimeoutMillis: Object.fromEntries(
        tools.flatMap((t) =>
          t.metadata.timeout === undefined
            ? []
            : [[t.name, Duration.toMillis(Duration.fromInputUnsafe(t.metadata.timeout))]]
        )
      ),
      mayActTwice: tools
        .filter((t) => Tool.mayChangeWorld(t.metadata.sideEffect) && !t.metadata.idempotent)
        .map((t) => t.name)
    },
    plan
  }
}

/**
 * The scenario as a process restarted after a crash has it (R9): the same world (the
 * tools, their ledgers and what their handlers saw, the calls approved so far) and the
 * same options and permission policy, with a model and an approval gate made anew: the
 * model answers each request as the first one did (it is keyed by the request), and the
 * gate decides each call its plan says, `afterMillis` after the call's request was made
 * (a request put back keeps its time).
 *
 * @category constructors
 * @since 0.3.0
 */
export const restart = (scenario: Scenario): Scenario => {
  const { approved: _, ...approvalsHandle } = makeApprovals(scenario.plan, scenario.approved)
  return {
    ...scenario,
    model: FaultyModel.make(scenario.script, { keyedBy: "iteration" }),
    approvals: approvalsHandle,
    restartedAfter: [
      ...(scenario.restartedAfter ?? []),
      { lookup: scenario.tools.lookup.all.length, transfer: scenario.tools.transfer.calls.all.length }
    ]
  }
}

/**
 * Runs `run` in the background on `TestClock` (which `it.effect` provides), moving the
 * clock in steps of `step` until it ends, at most `maxSteps` times; fails with a defect
 * if it has not ended by then (interrupted, the clock moving on for its finalizers, and
 * never waited for past that). Every sleep wakes at its own time, so the timeline's
 * times are exact whatever the step. `TestClockDriver.drive` with a defect for its
 * `StillRunning`.
 *
 * @category combinators
 * @since 0.1.0
 */
export const drive = <A, E, R>(
  run: Effect.Effect<A, E, R>,
  options: { readonly step: number; readonly maxSteps?: number | undefined }
): Effect.Effect<A, E, R> => {
  const maxSteps = options.maxSteps ?? 3
  return TestClockDriver.drive(run, { step: options.step, upTo: options.step * maxSteps }).pipe(
    Effect.catchIf(
      (e): e is TestClockDriver.StillRunning => e instanceof TestClockDriver.StillRunning,
      () => Effect.die(new Error(`the run did not end within ${maxSteps} clock steps of ${options.step} ms`))
    )
  )
}

/** `run` on `TestClock` as a scenario runs: its model, permission policy and gate, `Random` seeded from the case. */
const played = <A, E, R>(scenario: Scenario, run: Effect.Effect<A, E, R>) =>
  drive(run, { step: scenario.budget.runTimeoutMillis + 1000, maxSteps: 3 }).pipe(
    Random.withSeed(scenario.case.seed),
    Effect.provide(
      Layer.mergeAll(
        FaultyModel.layer(scenario.model),
        Permission.layer(scenario.permission),
        Layer.succeed(Approval.ApprovalGate, scenario.approvals.gate)
      )
    )
  )

/**
 * Runs a scenario on `TestClock` with its model, its permission policy, its approval
 * gate and `Random` seeded from the case. The clock moves by the run timeout plus a second at a time, so
 * a run that keeps going past its deadline fails the check with a defect. With a
 * `Journal` in the context, the run commits to it.
 *
 * @category combinators
 * @since 0.1.0
 */
export const runScenario = (
  scenario: Scenario
): Effect.Effect<RunResult.RunResult, never, FileSystem.FileSystem | Path.Path> =>
  played(scenario, Run.run(scenario.options))

/**
 * Resumes a scenario's run from the `Journal` in the context (`Run.resume`, reason
 * `restart`), as {@link runScenario} runs it; give it the scenario {@link restart} made.
 *
 * @category combinators
 * @since 0.3.0
 */
export const resumeScenario = (
  scenario: Scenario
): Effect.Effect<RunResult.RunResult, Run.ResumeError, FileSystem.FileSystem | Path.Path | Journal.Journal> =>
  played(scenario, Run.resume(scenario.options.runId ?? "prop", scenario.options, "restart"))
