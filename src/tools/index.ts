/**
 * Ready-made tools, for `effect-agent-runtime/tools`: `FileTools` (read, write and list files
 * under a root, with path checks and atomic writes), `WorkspaceFiles` (one file under a root,
 * read as the file tools read it) and `AiTools` (effect/ai `Tool`s and `Toolkit`s as the
 * run's tools, their annotations mapped onto the tool metadata).
 *
 * @module effect-agent-runtime/tools
 * @since 0.3.0
 */

/** @since 0.2.0 */
export * as AiTools from "./AiTools.ts"
/** @since 0.1.0 */
export * as FileTools from "./FileTools.ts"
/** @since 0.3.0 */
export * as WorkspaceFiles from "./WorkspaceFiles.ts"
