/**
 * The server of scratchpad/server.ts as a child process on 127.0.0.1 (a free port), and a
 * reader of its server-sent events over `fetch`.
 */
import { type ChildProcess, spawn } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"

const repo = path.resolve(import.meta.dirname, "..", "..")

export interface Server {
  readonly url: string
  readonly child: ChildProcess
  /** Stops it: SIGTERM, or SIGKILL for a crash. */
  readonly stop: (signal?: NodeJS.Signals) => Promise<void>
}

/** A fresh directory for a runs file. */
export const tempDir = () => fs.mkdtempSync(path.join(os.tmpdir(), "server-test-"))

/** Starts the server on `runsFile` and waits until it says where it listens. */
export const startServer = (runsFile: string, env: Record<string, string> = {}): Promise<Server> =>
  new Promise((resolve, reject) => {
    const child = spawn(
      process.execPath,
      ["--conditions=@effect-agent-runtime/source", "--disable-warning=ExperimentalWarning", "scratchpad/server.ts"],
      { cwd: repo, env: { ...process.env, PORT: "0", HOST: "127.0.0.1", RUNS_DB: runsFile, ...env } }
    )
    let output = ""
    const exited = new Promise<void>((done) => child.once("exit", () => done()))
    const stop = async (signal: NodeJS.Signals = "SIGTERM") => {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal)
      await exited
    }
    child.stderr.on("data", (chunk) => {
      output += String(chunk)
    })
    child.stdout.on("data", (chunk) => {
      output += String(chunk)
      const found = /listening on (http:\/\/\S+)/.exec(output)
      if (found?.[1] !== undefined) resolve({ url: found[1], child, stop })
    })
    child.once("exit", (code) => reject(new Error(`server exited (${code}) before listening:\n${output}`)))
  })

export interface SseEvent {
  readonly id: string
  readonly event: string
  readonly data: { readonly _tag: string; readonly seq: number } & Record<string, unknown>
}

/**
 * Reads the run's event stream: to its end, or until `until` is true of an event (the
 * connection is then dropped), or until the server goes away.
 */
export const readEvents = async (
  url: string,
  options: { readonly lastEventId?: string; readonly until?: (event: SseEvent) => boolean } = {}
): Promise<Array<SseEvent>> => {
  const controller = new AbortController()
  const response = await fetch(url, {
    headers: options.lastEventId === undefined ? {} : { "last-event-id": options.lastEventId },
    signal: controller.signal
  })
  if (response.status !== 200 || response.body === null) throw new Error(`events: ${response.status}`)
  const events: Array<SseEvent> = []
  const decoder = new TextDecoder()
  let buffered = ""
  try {
    for await (const chunk of response.body) {
      buffered += decoder.decode(chunk as Uint8Array, { stream: true })
      let end = buffered.indexOf("\n\n")
      while (end !== -1) {
        const fields = Object.fromEntries(
          buffered
            .slice(0, end)
            .split("\n")
            .map((line) => [line.slice(0, line.indexOf(":")), line.slice(line.indexOf(":") + 1).trimStart()])
        )
        buffered = buffered.slice(end + 2)
        end = buffered.indexOf("\n\n")
        const event = { id: fields.id, event: fields.event, data: JSON.parse(fields.data ?? "null") } as SseEvent
        events.push(event)
        if (options.until?.(event) === true) {
          controller.abort()
          return events
        }
      }
    }
  } catch (error) {
    // The server went away mid-stream: what was read so far.
    if (!(error instanceof Error)) throw error
  }
  return events
}

/** A JSON request; its status and body. */
export const send = async (method: string, url: string, body?: unknown) => {
  const response = await fetch(url, {
    method,
    ...(body === undefined
      ? {}
      : {
          headers: { "content-type": "application/json" },
          body: typeof body === "string" ? body : JSON.stringify(body)
        })
  })
  const text = await response.text()
  return { status: response.status, body: text === "" ? undefined : JSON.parse(text) }
}

/** Polls until `get` gives a value. */
export const eventually = async <A>(get: () => Promise<A | undefined>, timeoutMillis = 20_000): Promise<A> => {
  const until = Date.now() + timeoutMillis
  while (Date.now() < until) {
    const value = await get()
    if (value !== undefined) return value
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
  throw new Error("timed out")
}
