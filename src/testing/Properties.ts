/**
 * Property-test helpers (R10, R3, R4, R7): generate fault sequences, turn each into a
 * run, and check the invariants recovery, the time layers and approvals must keep
 * whatever happens.
 *
 * - {@link Case} is a `Schema` (a falsified case prints, shrinks and decodes back
 *   readably), and {@link arbitrary} generates it with a mix weighted toward runs that get
 *   far enough to retry; `it.effect.prop` takes either. A case is a script of model steps
 *   (retryable provider faults: 429 with `Retry-After` 0–3 s, 500, timeout, connection
 *   reset, corrupt JSON, an answer stopped unfinished and billed, a hang; permanent ones:
 *   400, 401; tool batches of one to three calls that succeed, fail retryably, permanently, with an unknown outcome, are refused
 *   by the permission policy, send invalid arguments, are slow, or need approval, which
 *   the scenario's gate gives or refuses after a delay, or never), and the budgets: run
 *   deadline 1–120 s, `maxRecoveries` 0–10, schedule retries per episode 0–4, a token
 *   budget in a third of the cases, the tokens each answer uses, and more;
 *   optionally a step timeout, an attempt timeout, an approval timeout and a tool
 *   timeout (each in half the cases, often tighter than the faults' delays), and a batch
 *   concurrency of 2 or 3. {@link arbitraryConcurrent} weights the mix toward concurrent
 *   batches where approvals wait next to retries.
 * - {@link toScenario} builds the `FaultyModel` (keyed by the request, so a model made
 *   anew answers a request asked again as the first did), the tools (with their
 *   inspection handles), the approval gate and the run options of a case;
 *   {@link runScenario} runs it on `TestClock` (committing to the `Journal` in the
 *   context, when there is one). {@link restart} is the scenario as a restarted process has it (the
 *   same world, a model and a gate made anew) and {@link resumeScenario} resumes its run
 *   from the journal (R9).
 * - {@link check} returns the invariants a `RunResult` violates against a {@link Budget}:
 *   retries within the run budget, the episode's schedule and the tool's `maxRetries`;
 *   no wait past the run deadline or its step's deadline; no run longer than the budget's
 *   run timeout, nor a recorded deadline later, whatever the run says; every timeout naming a layer
 *   the run has, within its limit; permanent, unknown-outcome and blocked results never
 *   retried; approvals before handlers, and rejections and expiries ending the run as
 *   R7 says; every state change an edge of `RunState.table`; exactly one terminal
 *   `run.finished`, last, with a `StopReason` of the enumeration; counters, and the
 *   result's elapsed time, equal to the fold of the timeline; no call of a tool of the
 *   budget's `mayActTwice` retried unless its status query found it not applied; every answer's tokens counted, and nothing asked or run once the
 *   token budget is spent; a stop reason witnessed by the log (a step measured under the
 *   limits in force, `RunLog.limitsOf`: a resume may lay a step timeout, or a longer one).
 *   {@link checkScenario} adds what only the tools and the gate
 *   saw (handler invocations, the ledger, the requests and decisions). A process fenced off
 *   at its last commit is given `failed`/`internal_error` (`unknown_outcome` with a call in
 *   doubt) with `unrecorded` set while its
 *   timeline keeps its own `run.finished`: its log is checked against that ending. Of a resumed run,
 *   the model and the gate are the restarted process's only, while its timeline holds both
 *   processes' answers and requests: `R2.1 paid` and `R7 approvals` compare the two, and
 *   flag what the process that died was given or asked (check them per process). The sends
 *   of idempotent calls are held to their retry limits process by process ({@link restart}
 *   marks where the restarted process began): an attempt the dead one had not committed
 *   runs again. A budget whose
 *   limit is missing, not a number or infinite (`NaN` and `Infinity` pass every comparison)
 *   is a `RangeError` naming the field.
 * - The checks judge a run made on a virtual clock (R10): `TestClock`, as {@link runScenario}
 *   and `TestClockDriver.drive` run it. They compare times exactly (to the rounding of the
 *   arithmetic); on the live clock the ending takes a few ms after the deadline fires, and
 *   a `run_timeout` is flagged `R3.3 deadline` for them.
 *
 * ```ts
 * it.effect.prop("R3 recovery invariants", [Properties.arbitrary], ([c]) =>
 *   Effect.gen(function* () {
 *     const scenario = Properties.toScenario(c)
 *     const result = yield* Properties.runScenario(scenario)
 *     assert.deepStrictEqual(Properties.checkScenario(scenario, result), [])
 *   }).pipe(Effect.provide(NodeServices.layer)),
 *   { arbitrary: { runs: 1000 } })
 * ```
 *
 * @since 0.1.0
 */
export { arbitrary, arbitraryConcurrent, Case, ModelFault, Step, ToolOutcome } from "./internal/PropertyCase.ts"
export {
  type Budget,
  check,
  correctionsSpendRetries,
  neverRetriedCodes,
  unknownOutcomeEndsRun,
  type Violation
} from "./internal/PropertyChecks.ts"
export {
  type Approvals,
  drive,
  type Gated,
  restart,
  resumeScenario,
  runScenario,
  type Scenario,
  type Tools,
  toScenario
} from "./internal/PropertyScenario.ts"
export { checkScenario } from "./internal/PropertyScenarioChecks.ts"
