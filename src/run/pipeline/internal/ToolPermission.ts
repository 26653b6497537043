/**
 * The permission step of the tool pipeline (R3.6) at the user-code boundary (R12): the
 * run's policy is user code, and a policy that cannot decide denies. Private to the runtime.
 */
import { Cause, Effect, Exit, Result } from "effect"
import * as Failure from "../../../failure/Failure.ts"
import * as UserCode from "../../../failure/UserCode.ts"
import * as Permission from "../../../tools/Permission.ts"

const finished = <A, E, R>(effect: Effect.Effect<A, E, R>): Exit.Exit<A, E> | undefined =>
  Exit.isExit(effect) ? (effect as Exit.Exit<A, E>) : undefined

const checkDecision = UserCode.check(Permission.Decision, "the permission policy's decision")

/**
 * The permission policy through the user-code boundary (R3.6, R12): a policy that
 * cannot decide denies. A throw, a defect, a return that is not an Effect, or a value
 * that is not a `Decision` is a denial (`policy_failed`) saying so; only interruption
 * passes through.
 */
export const checkPermission = (
  permission: Permission.PermissionService,
  request: Permission.Request
): Effect.Effect<Permission.Decision> => {
  const denied = (why: string) =>
    Exit.succeed(Permission.deny("policy_failed", `the permission policy failed (${why}); the call is refused`))
  const decided = (value: unknown): Effect.Effect<Permission.Decision> => {
    // Nearly every answer is the shared `Permission.allow`; the schema judges the rest.
    if (value === Permission.allow) return Exit.succeed(Permission.allow)
    const checked = checkDecision(value)
    return Result.isSuccess(checked) ? Exit.succeed(checked.success) : denied(checked.failure)
  }
  let out: unknown
  try {
    out = permission.check(request)
  } catch (defect) {
    return denied(`it threw ${Failure.safeDescription(defect)}`)
  }
  if (!UserCode.isEffect(out)) return denied(`it returned ${UserCode.kindOf(out)}, not an Effect`)
  const done = finished(out)
  if (done !== undefined) {
    if (Exit.isSuccess(done)) return decided(done.value)
    if (Cause.hasInterruptsOnly(done.cause)) return Exit.failCause(done.cause as Cause.Cause<never>)
    return denied(Failure.fromCause("runtime", done.cause).hint)
  }
  // The service's type has no requirements: `check` captured what it needs when built.
  return Effect.matchCauseEffect(out as Effect.Effect<unknown, unknown>, {
    onSuccess: decided,
    onFailure: (cause) =>
      Cause.hasInterruptsOnly(cause)
        ? Effect.failCause(cause as Cause.Cause<never>)
        : denied(Failure.fromCause("runtime", cause).hint)
  })
}
