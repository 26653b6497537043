/**
 * The stop hooks of a validation: user code (R12), so a throw, a return that is not an
 * Effect, a verdict of the wrong shape or a death is a failed check, never a crashed
 * validation. Private to `validation/`.
 */
import { Cause, Effect, Result, Schema } from "effect"
import * as UserCode from "../../failure/UserCode.ts"
import { describeDefect, type Evidence, type Part, part } from "./Parts.ts"

/** A stop hook as this check runs it (`Validation.StopHook`). */
export interface Hook<C, R> {
  readonly name: string
  readonly check: (context: C) => Effect.Effect<{ readonly passed: boolean; readonly detail: string }, never, R>
}

const checkVerdict = UserCode.check(
  Schema.Struct({ passed: Schema.Boolean, detail: Schema.String }),
  "the stop hook's verdict"
)

/** Runs one hook: its verdict, or a failed check saying what went wrong. */
export const runHook = <C, R>(hook: Hook<C, R>, context: C): Effect.Effect<Part, never, R> =>
  Effect.suspend(() => {
    // A hook is user code (R12): a throw or a return that is not an Effect is a failed check.
    // Typed as declared; at run time it may be anything (JavaScript callers), hence the checks.
    let out: ReturnType<Hook<C, R>["check"]>
    try {
      out = hook.check(context)
    } catch (defect) {
      return Effect.succeed({ passed: false, detail: `threw ${describeDefect(defect)}` })
    }
    if (!UserCode.isEffect(out)) {
      return Effect.succeed({ passed: false, detail: `returned ${UserCode.kindOf(out)}, not an Effect` })
    }
    return out
  }).pipe(
    Effect.map((verdict) => {
      const checked = checkVerdict(verdict)
      return Result.isSuccess(checked) ? checked.success : { passed: false, detail: checked.failure }
    }),
    // Typed as infallible, but a cast may hide a failure: whatever is not an interruption from
    // outside becomes a failed check (one from outside is sticky: see `UserCode.catchSelfInterrupt`).
    Effect.catchCause((cause) =>
      Cause.hasInterruptsOnly(cause)
        ? Effect.succeed({ passed: false, detail: UserCode.interruptedItself("the hook") })
        : Effect.succeed({ passed: false, detail: `died: ${describeDefect(Cause.squash(cause))}` })
    ),
    Effect.map(({ passed, detail: given }): Part => {
      const name = `hook:${hook.name}`
      // Cut to what the run keeps: the detail is copied into the log and the result (R12, review 118).
      const detail = UserCode.cutWords(given)
      const evidence: ReadonlyArray<Evidence> = passed
        ? [{ item: name, kind: "stop_hook", ref: hook.name, detail }]
        : []
      return { check: part(name, "stop_hook", passed, detail), blocking: true, evidence }
    })
  )
