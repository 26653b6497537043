/**
 * Run ids: random (version 4) UUIDs from the system's CSPRNG. Private to the runtime.
 */

/**
 * A fresh run id, in the UUID's canonical lowercase form. `toLowerCase` also makes it
 * one flat string: Node builds `randomUUID`'s result by concatenating twenty pieces, a
 * rope of 480 bytes against 56 flat, and every event of the run keeps its id.
 */
export const randomRunId = (): string => crypto.randomUUID().toLowerCase()
