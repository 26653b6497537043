/**
 * Durable runs on effect's `workflow` and `cluster`, for `effect-agent-runtime/durable`:
 * `DurableRun` (the run's workflow, its operations from any process, an embedded layer on
 * one SQLite file and a cluster layer on sockets and PostgreSQL). Only `layerCluster` needs
 * `@effect/platform-node`, and loads it when it is built.
 *
 * @module effect-agent-runtime/durable
 * @since 0.3.0
 */

/** @since 0.3.0 */
export * as RunHost from "../run/RunHost.ts"
/** @since 0.3.0 */
export * as DurableRun from "./DurableRun.ts"
