/**
 * The run lifecycle as an explicit state machine (R1).
 *
 * A run is always in exactly one {@link State}: one of the active phases while it
 * works, or one of the terminal {@link Status}es once it has ended. Every move goes
 * through {@link transition}, which consults the single {@link table}; an illegal
 * move is an {@link IllegalTransition} error, never silently ignored.
 *
 * @since 0.1.0
 */
import { Result, Schema } from "effect"

/**
 * The phases a run passes through while it is still working.
 *
 * @category models
 * @since 0.1.0
 */
export const Phase = Schema.Literals([
  "created",
  "initializing",
  "planning",
  "model_thinking",
  "tool_executing",
  "recovering",
  "awaiting_approval",
  "validating"
])

/**
 * @category models
 * @since 0.1.0
 */
export type Phase = typeof Phase.Type

/**
 * The terminal statuses: once a run holds one of these it never moves again.
 *
 * @category models
 * @since 0.1.0
 */
export const Status = Schema.Literals(["completed", "partial", "failed", "cancelled", "unknown_outcome"])

/**
 * @category models
 * @since 0.1.0
 */
export type Status = typeof Status.Type

/**
 * Any state a run can be in.
 *
 * @category models
 * @since 0.1.0
 */
export const State = Schema.Union([Phase, Status])

/**
 * @category models
 * @since 0.1.0
 */
export type State = typeof State.Type

const terminal: ReadonlySet<State> = new Set<State>(Status.literals)

/**
 * @category guards
 * @since 0.1.0
 */
export const isTerminal = (state: State): state is Status => terminal.has(state)

/** Every active phase may fail, be cancelled or end with an unknown outcome. */
const anyActiveMayEnd: ReadonlyArray<State> = ["failed", "cancelled", "unknown_outcome"]

/** A table frozen with each of its rows. */
const frozenRows = <T extends Record<string, ReadonlyArray<unknown>>>(rows: T): T => {
  for (const row of Object.values(rows)) Object.freeze(row)
  return Object.freeze(rows)
}

/**
 * The single table of legal moves. Read it as "from → allowed targets".
 *
 * Happy path: created → initializing → planning → model_thinking ⇄ tool_executing →
 * model_thinking → validating → completed. Recovery leaves model_thinking or
 * tool_executing for recovering and returns to either. In a concurrent batch, one call
 * may wait for approval while another's retry sleeps: the run is `awaiting_approval`
 * while any call waits for a person, else `recovering` while any retry sleeps, and
 * moves directly between the two. A budget stop also passes
 * through validating, which decides between partial and failed (R6.3). Frozen, its rows
 * too: the run checks every move against it, and no user code may add an edge (R12).
 *
 * @category models
 * @since 0.1.0
 */
export const table: { readonly [K in State]: ReadonlyArray<State> } = frozenRows({
  created: ["initializing", ...anyActiveMayEnd],
  initializing: ["planning", ...anyActiveMayEnd],
  planning: ["model_thinking", ...anyActiveMayEnd],
  model_thinking: ["tool_executing", "recovering", "validating", ...anyActiveMayEnd],
  tool_executing: ["model_thinking", "recovering", "awaiting_approval", "validating", ...anyActiveMayEnd],
  recovering: ["model_thinking", "tool_executing", "awaiting_approval", "validating", ...anyActiveMayEnd],
  awaiting_approval: ["tool_executing", "recovering", ...anyActiveMayEnd],
  // A run stopped on an unknown outcome (or a cancel) with a plan has its plan checked first (R6.3).
  validating: ["completed", "partial", "failed", "cancelled", "unknown_outcome"],
  completed: [],
  partial: [],
  failed: [],
  cancelled: [],
  unknown_outcome: []
})

/**
 * Raised when code asks the run to move along an edge the table does not have.
 *
 * @category errors
 * @since 0.1.0
 */
export class IllegalTransition extends Schema.TaggedError<IllegalTransition>()("IllegalTransition", {
  from: State,
  to: State
}) {
  override get message(): string {
    return `Illegal run transition ${this.from} → ${this.to}; allowed from ${this.from}: ${
      table[this.from].join(", ") || "nothing (terminal)"
    }`
  }
  /** The runtime's own words, safe to show (see `Failure.safeDescription`). */
  get safeMessage(): string {
    return this.message
  }
}

/**
 * @category guards
 * @since 0.1.0
 */
export const canTransition = (from: State, to: State): boolean => table[from].includes(to)

/**
 * @category guards
 * @since 0.3.0
 */
export const isIllegalTransition = (u: unknown): u is IllegalTransition => u instanceof IllegalTransition

/**
 * Checks one move against the table and returns the new state, or the typed error.
 *
 * @category combinators
 * @since 0.1.0
 */
export const transition = (from: State, to: State): Result.Result<State, IllegalTransition> =>
  canTransition(from, to) ? Result.succeed(to) : Result.fail(new IllegalTransition({ from, to }))
