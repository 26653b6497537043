/**
 * `unreachable`: an address on 127.0.0.1 where TCP connects hang, to test connect
 * timeouts. Re-exported from `FakeOpenAiServer`.
 */
import * as Net from "node:net"
import { Worker } from "node:worker_threads"
import { Effect, type Scope } from "effect"

/**
 * An address on 127.0.0.1 where TCP connects hang (a listener that never accepts and
 * whose backlog is full), to test connect timeouts without leaving the machine.
 *
 * @category constructors
 * @since 0.1.0
 */
export const unreachable: Effect.Effect<{ readonly url: string }, never, Scope.Scope> = Effect.acquireRelease(
  Effect.callback<{ url: string; worker: Worker; gate: Int32Array; fillers: Array<Net.Socket> }>((resume) => {
    const gate = new Int32Array(new SharedArrayBuffer(4))
    // The listener lives on a worker thread that then blocks, so nothing ever accepts.
    const worker = new Worker(
      `const net = require("node:net"); const { parentPort, workerData } = require("node:worker_threads")
       const server = net.createServer(); server.listen({ host: "127.0.0.1", port: 0, backlog: 1 }, () => {
         parentPort.postMessage(server.address().port); Atomics.wait(workerData, 0, 0); server.close() })`,
      { eval: true, workerData: gate }
    )
    const fillers: Array<Net.Socket> = []
    worker.once("message", (port: number) => {
      let settled = false
      const done = () => {
        if (settled) return
        settled = true
        resume(Effect.succeed({ url: `http://127.0.0.1:${port}/v1`, worker, gate, fillers }))
      }
      // Fill the accept queue until a connect no longer completes (bounded).
      const fill = (tries: number) => {
        const socket = Net.connect({ host: "127.0.0.1", port })
        socket.on("error", () => {})
        fillers.push(socket)
        const timer = setTimeout(done, 50)
        socket.once("connect", () => {
          clearTimeout(timer)
          if (settled) return
          if (tries > 0) fill(tries - 1)
          else done()
        })
      }
      fill(8)
    })
  }),
  ({ worker, gate, fillers }) =>
    Effect.promise(() => {
      for (const socket of fillers) socket.destroy()
      Atomics.store(gate, 0, 1)
      Atomics.notify(gate, 0)
      return worker.terminate()
    }).pipe(Effect.asVoid)
).pipe(Effect.map(({ url }) => ({ url })))
