/**
 * effect/ai tools as the run's tools (R3.7): an effect/ai `Tool` with its handler
 * ({@link fromTool}), or every tool of a `Toolkit` with the handlers its layer provides
 * ({@link fromToolkit}). What the effect/ai tool declares (its schemas, its
 * `Readonly`, `Destructive`, `Idempotent` and `OpenWorld` annotations, `needsApproval`,
 * `failureMode`) becomes the runtime's {@link Tool.Tool}; what it cannot say (a timeout,
 * a retry limit, a postcondition, a status query) comes in the options.
 *
 * The tools then run through the tool pipeline as every other tool does: arguments
 * decoded with the `parameters` schema (bad ones are the model's to correct), output
 * checked with the `success` schema, the handler's failures in the failure algebra.
 * Nothing of effect/ai's own tool execution (`Toolkit.handle`) runs.
 *
 * @since 0.2.0
 */
import { Context, Effect, Predicate, type Schema } from "effect"
import type * as AiError from "effect/ai/AiError"
import * as AiTool from "effect/ai/Tool"
import type * as Toolkit from "effect/ai/Toolkit"
import type * as Failure from "../failure/Failure.ts"
import * as OptionKeys from "../failure/OptionKeys.ts"
import * as UserCode from "../failure/UserCode.ts"
import * as AiToolInternal from "./internal/AiTool.ts"
import * as Tool from "./Tool.ts"

/**
 * What an effect/ai tool's handler is given: effect/ai's handler context (`toolCallId`,
 * and `preliminary`, whose results are dropped: a call's observation is its final result)
 * and the runtime's own ({@link Tool.CallContext}).
 *
 * @category models
 * @since 0.2.0
 */
export type CallContext<T extends AiTool.Any> = Tool.CallContext & Toolkit.HandlerContext<T>

/**
 * What the runtime needs of an effect/ai tool beyond what it declares; each as in {@link Tool.Options}.
 * `classify` turns what the handler fails with into the failure algebra; the default is
 * described at {@link fromTool}.
 *
 * @category models
 * @since 0.2.0
 */
export type Options<I, O, R, RP = R, RC = R> = Pick<
  Tool.Options<I, O, R, RP, RC>,
  "maxRetries" | "timeout" | "pathFields" | "contentFields" | "postcondition" | "observe" | "reconcile"
> & { readonly classify?: ((error: unknown) => Failure.Failure) | undefined }

/**
 * An effect/ai tool whose schemas need no services: the tool pipeline decodes arguments
 * and encodes outputs synchronously, as for every tool.
 *
 * @category models
 * @since 0.2.0
 */
export interface ServiceFreeTool
  extends AiTool.Tool<
    string,
    {
      readonly parameters: WithoutServices
      readonly success: WithoutServices
      readonly failure: WithoutServices
      readonly failureMode: AiTool.FailureMode
    },
    unknown
  > {}

type WithoutServices = Schema.Top & { readonly DecodingServices: never; readonly EncodingServices: never }

/**
 * The tool {@link fromTool} makes of an effect/ai tool `T` whose handler needs `R`.
 *
 * @category models
 * @since 0.2.0
 */
export type FromTool<T extends AiTool.Any, R = never> = Tool.Tool<AiTool.Parameters<T>, AiTool.Success<T>, R>

/** Every option of {@link fromTool}: one it does not know is refused (review 173). */
const knownOptions: OptionKeys.Known<Options<unknown, unknown, never> & { readonly handler: unknown }> = {
  maxRetries: true,
  timeout: true,
  pathFields: true,
  contentFields: true,
  postcondition: true,
  observe: true,
  reconcile: true,
  classify: true,
  handler: true
}

/**
 * A tool from an effect/ai `Tool` and its handler, written as for a `Toolkit`. What the
 * effect/ai tool declares becomes the metadata: `Readonly` → `sideEffect: "read"`, else
 * `OpenWorld` → `"external"`, else `"write"` (effect/ai's defaults: open world, so
 * `"external"`); `Destructive` → `destructive`; `Idempotent` → `idempotent`;
 * `needsApproval` → `needsApproval` (a function asks for every call: it reads the
 * conversation, which the runtime does not have at that point); `failureMode: "return"`
 * → `recoverErrors`; `toModelOutput` → the observation (its text parts).
 *
 * The arguments are decoded with its `parameters` schema (bad ones are the model's to
 * correct: `input_validation_failed`, naming each field), the output checked with its
 * `success` schema. A
 * handler's failure is, unless `classify` says otherwise: a `Failure` as it
 * is; an `AiError` retryable as its `isRetryable` says, except that for a tool that may
 * act and is not idempotent, a retryable one other than a rate limit (a broken connection,
 * a provider's internal error) is an `UnknownOutcome`, reconciled by `reconcile` when
 * given (R3.8); a value of its `failure` schema a
 * `Permanent` whose hint is that value's JSON; anything else a defect.
 *
 * Throws {@link Tool.InvalidToolDefinition}, as {@link Tool.make} does, and for a provider-defined
 * tool or one whose parameters are a JSON Schema.
 *
 * @example
 * ```ts
 * import { Tool as AiTool } from "effect/ai"
 *
 * const GetWeather = AiTool.make("get_weather", {
 *   description: "The weather in a city",
 *   parameters: Schema.Struct({ city: Schema.String }),
 *   success: Schema.Struct({ celsius: Schema.Number })
 * }).annotate(AiTool.Readonly, true)
 *
 * const weather = AiTools.fromTool(GetWeather, { handler: ({ city }) => Effect.succeed({ celsius: 21 }) })
 * ```
 *
 * @category constructors
 * @since 0.2.0
 */
export const fromTool = <T extends ServiceFreeTool, R = never, RP = R, RC = R>(
  tool: T,
  options: Options<AiTool.Parameters<T>, AiTool.Success<T>, R, RP, RC> & {
    readonly handler: (
      params: AiTool.Parameters<T>,
      context: CallContext<T>
    ) => Effect.Effect<
      AiTool.Success<T>,
      AiTool.Failure<T> | AiError.AiError | AiError.AiErrorReason | Failure.Failure,
      R
    >
  }
): FromTool<T, R | RP | RC> => {
  const reason =
    AiToolInternal.unsupported(tool) ??
    OptionKeys.unknownOption(options, knownOptions) ??
    (Predicate.isFunction(options?.handler) ? undefined : `handler must be a function, got ${typeof options?.handler}`)
  if (reason !== undefined) throw new Tool.InvalidToolDefinition({ tool: tool.name, reason })
  // effect/ai types its schemas as `Schema.Top`; `T` has none that needs services.
  const schemas = AiToolInternal.schemasOf<AiTool.Parameters<T>, AiTool.Success<T>>(tool)
  const declared = AiToolInternal.declared(tool)
  const classify = AiToolInternal.classifier(schemas.failure, options.classify, declared)
  const { handler, classify: _classified, ...rest } = options
  return Tool.make({
    ...declared,
    // effect/ai's `Strict` annotation: `false` asks for the plain schema.
    strict: Context.get(tool.annotations, AiTool.Strict) !== false,
    observe: AiToolInternal.observer(tool),
    ...rest,
    name: tool.name,
    description: AiTool.getDescription(tool) ?? "",
    input: schemas.parameters,
    output: schemas.success,
    handler: (params, context) => {
      const out = handler(params, { ...context, toolCallId: context.callId, preliminary: () => Effect.void })
      // Not an Effect (the Promise of an `async` handler): handed on as it is, whatever its
      // declared type says, for the tool pipeline to report (`not_an_effect`).
      if (!UserCode.isEffect(out)) return out as never
      return Effect.mapError(out, classify)
    }
  })
}

/**
 * A tool {@link fromToolkit} makes of a toolkit of `Tools`: one of any of its names.
 *
 * @category models
 * @since 0.2.0
 */
export type FromToolkit<Tools extends Record<string, AiTool.Any>> = {
  readonly [Name in keyof Tools]: FromTool<Tools[Name], AiTool.Requirements<Tools[Name]>>
}[keyof Tools]

/**
 * The tools of an effect/ai `Toolkit`, each with the handler the toolkit's layer
 * (`toolkit.toLayer`) provides, as {@link fromTool} makes them: provide that layer, and
 * pass the tools to `Run.run`. `options` gives, per tool name, what {@link fromTool}'s
 * options give. A tool's own request-level dependencies (`addDependency`) remain the
 * run's requirements.
 *
 * An Effect that reads the handlers from the context, as the toolkit itself does: the
 * handlers' services are the layer's business, and a test swaps the layer, not the
 * tools. It dies with {@link Tool.InvalidToolDefinition} for a tool it cannot run (see
 * {@link fromTool}) or without a handler in the context (a layer built by hand).
 *
 * @example
 * ```ts
 * const WeatherKit = Toolkit.make(GetWeather)
 * const handlers = WeatherKit.toLayer({ get_weather: ({ city }) => Effect.succeed({ celsius: 21 }) })
 *
 * const program = Effect.gen(function* () {
 *   const tools = yield* AiTools.fromToolkit(WeatherKit)
 *   return yield* Run.run({ goal: "How warm is Lisbon?", tools })
 * }).pipe(Effect.provide(handlers))
 * ```
 *
 * @category constructors
 * @since 0.2.0
 */
export const fromToolkit = <Tools extends Record<string, ServiceFreeTool>>(
  toolkit: Toolkit.Toolkit<Tools>,
  options?: {
    readonly [Name in keyof Tools]?: Options<AiTool.Parameters<Tools[Name]>, AiTool.Success<Tools[Name]>, never>
  }
): Effect.Effect<ReadonlyArray<FromToolkit<Tools>>, never, AiTool.HandlersFor<Tools>> =>
  Effect.flatMap(Effect.context<AiTool.HandlersFor<Tools>>(), (context) =>
    Effect.sync(() => {
      // Each tool's options are typed for it by name; here the tools are one list.
      const byName = (options ?? {}) as Readonly<Record<string, Options<unknown, unknown, never> | undefined>>
      const tools: ReadonlyArray<ServiceFreeTool> = Object.values(toolkit.tools)
      // Options for a tool the toolkit does not have are a misspelt name (review 173: let go, unsaid).
      const names = new Set(tools.map((tool) => tool.name))
      const stray = Object.keys(byName).find((name) => !names.has(name))
      if (stray !== undefined) {
        throw new Tool.InvalidToolDefinition({
          tool: stray,
          reason: `options are given for it, but the toolkit has no tool of this name (its tools: ${[...names].join(", ")})`
        })
      }
      const made = tools.map((tool) => {
        const handler = AiToolInternal.handlerIn(context, tool)
        if (handler === undefined) {
          throw new Tool.InvalidToolDefinition({
            tool: tool.name,
            reason: "the context holds no handler for it: provide the toolkit's layer (toolkit.toLayer)"
          })
        }
        // Own keys only: a tool may be named `toString` or `__proto__`.
        return fromTool(tool, { ...(Object.hasOwn(byName, tool.name) ? byName[tool.name] : {}), handler })
      })
      // The list of the tools of every name, as the signature says (`tools` lost the names' types).
      return made as ReadonlyArray<Tool.Any<unknown>> as ReadonlyArray<FromToolkit<Tools>>
    })
  )
