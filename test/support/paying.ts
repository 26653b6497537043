/**
 * A model whose answer is coming, paid for, when the run cuts it off (a cancel, a timer): it
 * says when it was asked, and reports what the answer cost so far as it is interrupted (R2.1).
 */
import { Deferred, Effect, Layer } from "effect"
import * as Model from "../../src/model/Model.ts"

export const payingModel = (asked: Deferred.Deferred<void>, usage: Model.Usage) =>
  Layer.succeed(Model.Model, {
    generate: () =>
      Deferred.succeed(asked, undefined).pipe(
        Effect.andThen(Effect.never),
        Effect.onInterrupt(() => Model.reportCutOff(usage))
      )
  })
