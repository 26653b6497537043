// An Effect backend over durable runs, runnable: `npm run serve` (see server/Main.ts for its
// settings). The routes are in server/Api.ts, their handlers in server/Handlers.ts.
import { NodeRuntime } from "@effect/platform-node"
import { Layer } from "effect"
import { ServerLive } from "./server/Main.ts"

Layer.launch(ServerLive).pipe(NodeRuntime.runMain)
