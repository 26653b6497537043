/**
 * Every tool call gets an identity unique in its run (R3.8): the key of its idempotency
 * key, its approval, its result and every event about it, whatever ids the model sends.
 * Models reuse ids (a scripted or local model numbering `call_0` afresh each turn), send
 * the same id twice in one batch, or send none. The model's own id is kept for the
 * conversation only. Private to the runtime.
 */

/** An id as providers make them (`call_abc123`, `toolu_01…`): kept as the call's identity when unused. */
const usable = /^[A-Za-z0-9_.:-]{1,64}$/

/**
 * The identity of a call the model named `modelId`: the model's id when it is usable and
 * no call of this run has had it yet, else that id (or `call`) with the first free
 * `#n` suffix. `used` holds the identities given so far and is updated. A suffix is never
 * part of a usable model id, so an identity given here cannot collide with a later one.
 */
export const assign = (used: Set<string>, modelId: string): string => {
  const base = usable.test(modelId) ? modelId : "call"
  let id = base === modelId ? base : `${base}#1`
  for (let n = 2; used.has(id); n++) id = `${base}#${n}`
  used.add(id)
  return id
}
