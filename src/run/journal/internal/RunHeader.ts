/**
 * What the journal keeps of a run beside its log, written with its first commit: its goal,
 * system prompt and model, its tools' fingerprints (what a resumed run checks the code
 * against) and its `run.started`. Private to the runtime.
 */
import { Exit, Hash, Schema } from "effect"
import * as Event from "../../../events/Event.ts"
import * as Signature from "../../../tools/Signature.ts"
import type * as Tool from "../../../tools/Tool.ts"

/** What the journal keeps of a run beside its log: enough to tell whether the code still fits it. */
export const Header = Schema.Struct({
  goal: Schema.String,
  system: Schema.optional(Schema.String),
  model: Schema.String,
  /** Each tool's fingerprint: its input's JSON Schema and its side-effect class, digested. */
  tools: Schema.Record(Schema.String, Schema.String),
  /**
   * The run's `run.started`, JSON, its goal and system prompt left to the fields above:
   * what a run whose process died between creating its row and its first commit goes on
   * under (its deadline, limits and order of policies), as its log would say. Read only
   * then, and left out when it does not decode.
   */
  started: Schema.optional(Schema.Unknown),
  /**
   * The key the run signs a sensitive tool's calls under (see `Registry.secretKey`), so that a
   * resumed run signs them as before and counts a call repeated across a restart (R2.3, review
   * 193). Kept beside the log, never in it: the journal holds the model's arguments already.
   * Read as it comes: a header whose key is no key (another version's) still decodes, and its run signs under a new one.
   */
  secretKey: Schema.optional(Schema.Unknown)
})

/** A stored header, decoded. */
export const decode = Schema.decodeUnknownExit(Header)
const encodeStarted = Schema.encodeUnknownExit(Schema.toCodecJson(Event.RunStarted))
const decodeStarted = Schema.decodeUnknownExit(Schema.toCodecJson(Event.RunStarted))
const isJson = Schema.is(Schema.Json)

/**
 * The digest of a tool's fingerprint, as journals have recorded it since format 1 (a 32-bit
 * hash and the length): a new digest would make every recorded run's tools look changed.
 * Tools whose schemas differ and still collide are a risk of 2^-32 per pair.
 */
const fingerprintDigest = (text: string): string => `${(Hash.string(text) >>> 0).toString(16)}:${text.length}`

/**
 * A tool's fingerprint: what a resumed run's log depends on (its arguments' shape, whether
 * it may act twice, whether its calls wait for approval: a call the log has waiting must
 * not run unapproved). `needsApproval` is in it only when set, so the fingerprints of
 * tools without approval are those runs recorded before it was.
 */
const fingerprint = (tool: Tool.Any<unknown>): string =>
  fingerprintDigest(
    Signature.canonicalJson({
      parameters: tool.definition.parameters,
      sideEffect: tool.metadata.sideEffect,
      idempotent: tool.metadata.idempotent,
      ...(tool.metadata.needsApproval ? { needsApproval: true } : {})
    })
  )

/** The fingerprints by tool name: a `Map`, as a tool may be named `__proto__` or `toString`. */
export const fingerprints = (tools: Iterable<Tool.Any<unknown>>): ReadonlyMap<string, string> =>
  new Map(Array.from(tools, (tool) => [tool.name, fingerprint(tool)]))

/** A `run.started` without its goal and system prompt, which the header keeps once. */
const withoutPrompt = ({ system: _system, ...started }: Event.Of<"run.started">): Event.Of<"run.started"> => ({
  ...started,
  goal: ""
})

/** The `run.started` a header kept, its goal and system prompt put back; `undefined` when it has none that decodes. */
export const startedIn = (header: typeof Header.Type): Event.Of<"run.started"> | undefined => {
  if (header.started === undefined) return undefined
  const decoded = decodeStarted(header.started)
  if (Exit.isFailure(decoded)) return undefined
  return { ...decoded.value, goal: header.goal, ...(header.system === undefined ? {} : { system: header.system }) }
}

/** The header of a run, from its `run.started` and its tools' fingerprints. */
export const make = (
  started: Event.Event | undefined,
  tools: ReadonlyMap<string, string>,
  secretKey: string
): Schema.Json => {
  const encoded = started?._tag === "run.started" ? encodeStarted(withoutPrompt(started)) : undefined
  return {
    goal: started?._tag === "run.started" ? started.goal : "",
    ...(started?._tag === "run.started" && started.system !== undefined ? { system: started.system } : {}),
    model: started?._tag === "run.started" ? started.model : "",
    // `fromEntries` defines each key as data: a tool named `__proto__` is kept.
    tools: Object.fromEntries(tools),
    ...(encoded !== undefined && Exit.isSuccess(encoded) && isJson(encoded.value) ? { started: encoded.value } : {}),
    secretKey
  }
}

/** The key a header kept, if it is one a run makes (256 bits, hex); a run whose header has none signs under a new one. */
export const secretKeyIn = (header: typeof Header.Type): string | undefined =>
  typeof header.secretKey === "string" && /^[0-9a-f]{64}$/.test(header.secretKey) ? header.secretKey : undefined
