/**
 * Every tool call gets an identity unique in its run (R3.8): the key of its idempotency
 * key, its approval, its result and every event about it, whatever ids the model sends.
 * Models reuse ids (a scripted or local model numbering `call_0` afresh each turn), send
 * the same id twice in one batch, or send none. The model's own id is kept in its
 * `model.responded`, and the conversation sends it back, but for a repeat in one answer
 * (see `RunLog`). Private to the runtime.
 */

/**
 * An id as providers make them (`call_abc123`, `toolu_01…`): kept as the call's identity
 * when unused. Never a `:` (the idempotency key is `<runId>:<callId>`, so a call id with
 * one could make two keys equal) and never a `#` (the suffix below).
 */
const usable = /^[A-Za-z0-9_.-]{1,64}$/

/**
 * The identities a run has given, in one map: each model id given as it is (its value
 * unused), and, under the key `<base>#` (never a usable id, so never one given as it is),
 * the next free suffix of each base.
 */
export type Identities = Map<string, number>

export const make = (): Identities => new Map()

/**
 * The identities a resumed run has given: the same assignments made again, in the log's
 * order, from the ids the model sent (`model.responded` keeps them in `toolCalls`).
 */
export const replay = (
  events: ReadonlyArray<{ readonly _tag: string; readonly toolCalls?: ReadonlyArray<{ readonly id: string }> }>
): Identities => {
  const identities = make()
  for (const e of events)
    if (e._tag === "model.responded") for (const call of e.toolCalls ?? []) assign(identities, call.id)
  return identities
}

/**
 * The identity of a call the model named `modelId`: the model's id when it is usable and
 * no call of this run has had it yet, else that id (or `call`) with the next `#n` suffix.
 * A suffixed identity is never a usable model id, so it cannot collide with a later one;
 * and each base counts its own suffixes, so a model that reuses one id ten thousand
 * times costs no more than one that does not.
 */
export const assign = (identities: Identities, modelId: string): string => {
  const base = usable.test(modelId) ? modelId : "call"
  if (base === modelId && !identities.has(base)) {
    identities.set(base, 0)
    return base
  }
  const suffixes = `${base}#`
  const n = identities.get(suffixes) ?? (base === modelId ? 2 : 1)
  identities.set(suffixes, n + 1)
  return `${base}#${n}`
}
