/**
 * Test support for agents built on the runtime: scripted models and fault layers.
 *
 * @module effect-agent-runtime/testing
 * @since 0.1.0
 */

/** @since 0.1.0 */
export * as FakeOpenAiServer from "./FakeOpenAiServer.ts"
/** @since 0.1.0 */
export * as FaultyJournal from "./FaultyJournal.ts"
export * as FaultyModel from "./FaultyModel.ts"
/** @since 0.1.0 */
export * as FaultyTools from "./FaultyTools.ts"
/** @since 0.1.0 */
export * as Properties from "./Properties.ts"
/** @since 0.3.0 */
export * as Replay from "./Replay.ts"
/** @since 0.1.0 */
export * as ScriptedModel from "./ScriptedModel.ts"
/** @since 0.2.0 */
export * as TestClockDriver from "./TestClockDriver.ts"
