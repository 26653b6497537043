/**
 * Run ids: random (version 4) UUIDs from the system's CSPRNG. Private to the runtime.
 */
export const randomRunId = (): string => crypto.randomUUID()
