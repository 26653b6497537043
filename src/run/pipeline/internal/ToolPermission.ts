/**
 * The permission step of the tool pipeline (R3.6) at the user-code boundary (R12): the
 * run's policy is user code, and a policy that cannot decide denies. Private to the runtime.
 */
import { Cause, Effect, Result } from "effect"
import * as Failure from "../../../failure/Failure.ts"
import * as UserCode from "../../../failure/UserCode.ts"
import * as Permission from "../../../tools/Permission.ts"

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
    Effect.succeed(Permission.deny("policy_failed", `the permission policy failed (${why}); the call is refused`))
  // Typed as declared; at run time it may be anything (user code), hence the checks.
  let out: ReturnType<Permission.PermissionService["check"]>
  try {
    out = permission.check(request)
  } catch (defect) {
    return denied(`it threw ${Failure.safeDescription(defect)}`)
  }
  if (!UserCode.isEffect(out)) return denied(`it returned ${UserCode.kindOf(out)}, not an Effect`)
  return Effect.matchCauseEffect(out, {
    // What the policy answers is checked here, whatever its type says.
    onSuccess: (value: unknown) => {
      // Nearly every answer is the shared `Permission.allow`; the schema judges the rest.
      if (value === Permission.allow) return Effect.succeed(Permission.allow)
      const checked = checkDecision(value)
      return Result.isSuccess(checked) ? Effect.succeed(checked.success) : denied(checked.failure)
    },
    onFailure: (cause) =>
      Cause.hasInterruptsOnly(cause) ? Effect.interrupt : denied(Failure.fromCause("runtime", cause).hint)
  })
}
