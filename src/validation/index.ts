/**
 * Artifact contracts, for `effect-agent-runtime/validation`: the types and checks of a file
 * a run must deliver (`Validation.artifact` builds one; its checks need effect's `Path`).
 * `Validation` and `Criterion` themselves are in the root.
 *
 * @module effect-agent-runtime/validation
 * @since 0.3.0
 */

/** @since 0.1.0 */
export * as Artifact from "./Artifact.ts"
