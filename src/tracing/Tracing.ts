/**
 * The runtime's spans, through Effect's tracer: a span is made only when a tracer is
 * installed (`Effect.withTracer`, `@effect/opentelemetry`'s `NodeSdk`, effect's
 * `OtlpTracer`). Without one, effect's default `Tracer.nativeTracer` is in place and
 * {@link span} runs its effect bare: no span object, no attributes computed.
 *
 * Message and argument content is off by default: {@link RecordContent} (or
 * {@link layerRecordContent}) turns it on.
 *
 * @since 0.1.0
 */
import { Cause, Clock, Context, Effect, Exit, Layer, Predicate, References, Tracer } from "effect"
import * as StopReason from "../events/StopReason.ts"
import * as Failure from "../failure/Failure.ts"
import { errorType, nameShown } from "./Attributes.ts"

/**
 * Attributes of a span: values OpenTelemetry accepts.
 *
 * @category models
 * @since 0.1.0
 */
export type Attributes = Readonly<
  Record<string, string | number | boolean | ReadonlyArray<string> | ReadonlyArray<number> | undefined>
>

/**
 * Whether spans carry message and argument content (`gen_ai.input.messages`,
 * `gen_ai.tool.call.arguments`, ...). Off by default; secrets are masked either way.
 *
 * @category references
 * @since 0.1.0
 */
export const RecordContent = Context.Reference<boolean>("effect-agent-runtime/Tracing/RecordContent", {
  defaultValue: () => false
})

/**
 * Turns content on (or off) in spans.
 *
 * @category layers
 * @since 0.1.0
 */
export const layerRecordContent = (record = true): Layer.Layer<never> => Layer.succeed(RecordContent, record)

/** Whether a tracer other than the native one is installed and enabled. */
const tracing = (fiber: { getRef<S>(ref: Context.Reference<S>): S }): boolean =>
  fiber.getRef(Tracer.Tracer) !== Tracer.nativeTracer && fiber.getRef(References.TracerEnabled)

const defined = (attributes: Attributes): Record<string, unknown> => {
  const out: Record<string, unknown> = {}
  for (const key in attributes) if (attributes[key] !== undefined) out[key] = attributes[key]
  return out
}

/**
 * The attributes `f` gives, or none when it throws: a span only watches, and what it
 * reads of a value it was handed (a model's answer outside its type) never fails the
 * operation it stands for.
 */
const attributesOf = (f: () => Attributes): Record<string, unknown> => {
  try {
    return defined(f())
  } catch {
    return {}
  }
}

/**
 * A value as JSON text for a content attribute, or what kept it from being JSON (a
 * `BigInt`, a cycle): a span's content never throws.
 *
 * @category combinators
 * @since 0.3.0
 */
export const contentJson = (value: unknown): string => {
  try {
    return JSON.stringify(value) ?? "null"
  } catch (error) {
    return `(not JSON: ${error instanceof Error ? error.message : "a value that cannot be written"})`
  }
}

/** A stop reason of the runtime's, the one free-form field of a tagged error a span may show. */
const stopReasons: ReadonlySet<unknown> = new Set(StopReason.all)

/**
 * What a failure is called on a span (`error.type`): a runtime `Failure`'s code, a tagged
 * error's `reason` when it is a stop reason (`approval_rejected`), else its tag,
 * `interrupted`, or `defect`; `failure` or `error` when the code or tag is not an
 * identifier. Never free text (a message, any other `reason`): failures and defects may
 * quote what a tool was given or a provider said, a key included.
 *
 * @category attributes
 * @since 0.3.0
 */
export const errorTypeOf = (cause: Cause.Cause<unknown>): string => {
  if (Cause.hasInterruptsOnly(cause)) return "interrupted"
  try {
    const error = Cause.squash(cause)
    if (Failure.isFailure(error)) return nameShown(error.code, "failure")
    if (Predicate.hasProperty(error, "_tag")) {
      if (Predicate.hasProperty(error, "reason") && stopReasons.has(error.reason)) return String(error.reason)
      return typeof error._tag === "string" ? nameShown(error._tag, "error") : "error"
    }
    return "defect"
  } catch {
    // A value whose properties throw when read (a hostile Proxy) is a defect, named as one.
    return "defect"
  }
}

/**
 * What a span ends with in place of a failure: its `error.type` alone, so that an exporter
 * that writes the failure out (an `exception` event) writes no message of it (R3.1).
 */
class SpanFailure extends Error {
  override readonly name = "AgentRuntimeFailure"
}

/**
 * Runs `self` in a span named `name` when a tracer is installed, else bare. `start` gives
 * the attributes known at the start (`content` says whether content is recorded), `end`
 * those its exit adds. The span ends failed when `self` fails, with only the failure's
 * type (see {@link errorTypeOf}); `self`'s own exit is returned as it was.
 *
 * @category combinators
 * @since 0.1.0
 */
export const span = <A, E, R>(
  self: Effect.Effect<A, E, R>,
  name: string,
  start: (content: boolean) => Attributes,
  end?: (exit: Exit.Exit<A, E>, content: boolean) => Attributes,
  options?: SpanOptions<A>
): Effect.Effect<A, E, R> =>
  Effect.withFiber((fiber) => {
    if (!tracing(fiber)) return self
    const content = fiber.getRef(RecordContent)
    const body =
      end === undefined
        ? self
        : // A tracer whose span throws as it is annotated changes nothing of the exit.
          Effect.onExit(self, (exit) =>
            Effect.asVoid(Effect.exit(Effect.annotateCurrentSpan(attributesOf(() => end(exit, content)))))
          )
    // The span sees a failure by its type only; the caller gets the exit as it was.
    let exited: Exit.Exit<A, E> | undefined
    const seen = Effect.flatMap(Effect.exit(body), (exit) => {
      exited = exit
      if (Exit.isFailure(exit))
        return Cause.hasInterruptsOnly(exit.cause) ? exit : Effect.die(new SpanFailure(errorTypeOf(exit.cause)))
      const failed = options?.failedAs?.(exit.value)
      return failed === undefined ? exit : Effect.die(new SpanFailure(failed))
    })
    // The span, known to its root's list of open ones while it runs (see `SpanOptions.root`).
    const tracked = Effect.withFiber((inner) => {
      const current = Context.getOrUndefined(inner.context, Tracer.ParentSpan)
      if (current?._tag !== "Span") return seen
      if (options?.root === true) return Effect.provideService(seen, OpenSpans, new Set())
      const open = inner.getRef(OpenSpans)
      if (open === undefined) return seen
      open.add(current)
      return Effect.ensuring(
        seen,
        Effect.sync(() => open.delete(current))
      )
    })
    return Effect.flatMap(
      Effect.exit(
        Effect.withSpan(tracked, name, {
          attributes: attributesOf(() => start(content)),
          ...(options?.kind === undefined ? {} : { kind: options.kind })
        })
      ),
      // A tracer that broke making the span (it threw) never started `self`: it runs bare, unwatched
      // (R13: a span only watches; review 130: the run's own span left it waiting for good).
      (exit) => exited ?? (Exit.isFailure(exit) && !Cause.hasInterruptsOnly(exit.cause) ? self : exit)
    )
  })

/**
 * How a {@link span} is made beyond its attributes: its kind (`client` for a call to a
 * remote service), and when a value it succeeds with is a failure of the operation it
 * stands for (a run that ended `run_timeout`), named by the `error.type` it gives.
 *
 * @category models
 * @since 0.3.0
 */
export interface SpanOptions<A> {
  readonly kind?: Tracer.SpanKind | undefined
  readonly failedAs?: ((value: A) => string | undefined) | undefined
  /**
   * The span of a whole operation (a run): the spans made inside it are known while open,
   * so that {@link endCurrent} ends those a fiber killed without its finalizers left open.
   */
  readonly root?: boolean | undefined
}

/** The spans made inside a root span and still open (see {@link SpanOptions.root}). */
const OpenSpans = Context.Reference<Set<Tracer.Span> | undefined>("effect-agent-runtime/Tracing/OpenSpans", {
  defaultValue: () => undefined
})

/**
 * Adds attributes to the current span, when there is one.
 *
 * @category combinators
 * @since 0.1.0
 */
export const annotate = (attributes: Attributes): Effect.Effect<void> =>
  // A tracer whose span throws as it is annotated changes nothing of what runs (R13).
  Effect.asVoid(Effect.exit(Effect.annotateCurrentSpan(defined(attributes))))

/** Calls a tracer's own method, which may throw: a span only watches, and its throw changes nothing (R13). */
const quietly = (f: () => void): void => {
  try {
    f()
  } catch {
    // The tracer broke; the run goes on as it would without it.
  }
}

/**
 * Ends the current span now, when a tracer is installed and the span is the one
 * {@link span} made under `name`, still open: for a run whose result is given while its
 * fiber cannot end yet (left behind past its stop grace, R12). The span's own ending,
 * once the fiber does end, finds it ended and changes nothing. A span of the caller's
 * (no tracer installed, so none of ours) is never ended here. With `failedAs`, it ends
 * failed, named so (see {@link SpanOptions}). Also for a run whose fiber ended without its
 * finalizers: with `openInside: "end"`, the spans made inside it and left open end too.
 *
 * @category combinators
 * @since 0.3.0
 */
export const endCurrent = (name: string, failedAs?: string, openInside: "end" | "keep" = "keep"): Effect.Effect<void> =>
  Effect.withFiber((fiber) => {
    if (!tracing(fiber)) return Effect.void
    const current = Context.getOrUndefined(fiber.context, Tracer.ParentSpan)
    if (current?._tag !== "Span" || current.name !== name || current.status._tag === "Ended") return Effect.void
    const at = fiber.getRef(References.TracerTimingEnabled) ? fiber.getRef(Clock.Clock).currentTimeNanosUnsafe() : 0n
    // With `end`, the spans inside it still open end with it: the fiber that made them ended
    // without its finalizers (a value that is no Effect, deep in user code). Code still
    // running (a run left behind) keeps its spans open until it ends.
    for (const left of openInside === "end" ? (fiber.getRef(OpenSpans) ?? []) : []) {
      if (left.status._tag === "Ended") continue
      quietly(() => left.attribute(errorType, failedAs ?? "interrupted"))
      quietly(() => left.end(at, Exit.die(new SpanFailure(failedAs ?? "interrupted"))))
    }
    quietly(() => current.end(at, failedAs === undefined ? Exit.void : Exit.die(new SpanFailure(failedAs))))
    return Effect.void
  })

/**
 * A span with nothing to wait for (a call refused before its handler): made and ended at
 * once, when a tracer is installed.
 *
 * @category combinators
 * @since 0.1.0
 */
export const instant = (name: string, attributes: (content: boolean) => Attributes): Effect.Effect<void> =>
  span(Effect.void, name, attributes)

/**
 * Whether content is recorded in spans (and a tracer installed).
 *
 * @category combinators
 * @since 0.1.0
 */
export const recordsContent: Effect.Effect<boolean> = Effect.withFiber((fiber) =>
  Effect.succeed(tracing(fiber) && fiber.getRef(RecordContent))
)
