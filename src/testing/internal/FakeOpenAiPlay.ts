/**
 * Playing one step of a `FakeOpenAiServer` script on one response: an answer, a status, or a
 * fault on cue (a stream error, a stall, a reset, corrupt or truncated bodies, raw and
 * endless bodies). Private to `FakeOpenAiServer`.
 */
import type * as Http from "node:http"
import * as Answers from "./FakeOpenAiAnswers.ts"
import type { RecordedRequest, Step } from "./FakeOpenAiSteps.ts"
import * as Steps from "./FakeOpenAiSteps.ts"

type Reply = Extract<Step, { _tag: "Reply" }>

/** What playing a step needs: the response, the server's timers, the record, and the request's particulars. */
export interface Playback {
  readonly res: Http.ServerResponse
  /** Schedules on the server's timers, cleared when it closes. */
  readonly later: (ms: number, f: () => void) => void
  /** Destroys the connection from the server's side. */
  readonly destroy: () => void
  readonly record: RecordedRequest
  readonly answering: Answers.Answering
}

const filler = (text: string): Reply => ({ _tag: "Reply", text, toolCalls: [], usage: { input: 1, output: 1 } })

/** Plays one step on one response. */
export const play = (step: Step, playback: Playback): void => {
  const { res, later, destroy, record, answering } = playback
  const streamed = answering.streamed
  if (res.destroyed) return
  // A step the script made by hand (or a function returned) that is none: a 500 naming it, never a hang.
  const problem = Steps.stepProblem(step)
  if (problem !== undefined) {
    play(Steps.scriptBroke(record.index, `the script gave no step: ${problem}`), playback)
    return
  }
  const write = (text: string): boolean => {
    record.bytesSent += Buffer.byteLength(text)
    return res.write(text)
  }
  /** The last bytes and the end of the body, in one write (as a server that has the whole answer sends them). */
  const end = (text: string) => {
    record.bytesSent += Buffer.byteLength(text)
    res.end(text)
  }
  const contentType = { "content-type": streamed ? "text/event-stream" : "application/json" }
  const headers = (code: number, extra: Record<string, string> = {}) =>
    res.writeHead(code, { ...contentType, ...extra })
  const parts = (reply: Reply) => Answers.replyParts(reply, answering)
  const cut = (afterChunks: number) => (streamed ? afterChunks : 1)
  switch (step._tag) {
    case "Reply":
      headers(200)
      end(parts(step).join(""))
      return
    case "Status":
      res.writeHead(step.status, {
        "content-type": "application/json",
        ...(step.retryAfter === undefined ? {} : { "retry-after": step.retryAfter })
      })
      end(Answers.errorBody(step.status, step.message, step.error))
      return
    case "StreamError": {
      const error = JSON.stringify({ error: { type: null, code: null, param: null, ...step.error } })
      headers(200)
      if (!streamed) {
        end(error)
        return
      }
      end(
        [
          ...parts(filler("this answer fails partway")).slice(0, step.afterChunks),
          `data: ${error}

`
        ].join("")
      )
      return
    }
    case "FromRequest": {
      let chosen: Step
      try {
        chosen = step.choose(record)
      } catch (error) {
        chosen = Steps.scriptBroke(record.index, "fromRequest's choice", error)
      }
      play(chosen, playback)
      return
    }
    case "Delay":
      later(step.millis, () => play(step.next, playback))
      return
    case "Stall": {
      const next = step.next
      // The answer fromRequest chooses is cut as one given: checked first (another step is a 500
      // naming it, never played at once, which would pass a stall test for nothing: review 146).
      if (next._tag === "FromRequest") {
        let chosen: Step
        try {
          chosen = { ...step, next: next.choose(record) }
        } catch (error) {
          chosen = Steps.scriptBroke(record.index, "fromRequest's choice", error)
        }
        play(chosen, playback)
        return
      }
      // Checked: only an answer is cut.
      if (next._tag !== "Reply") return
      const all = parts(next)
      headers(200)
      write(all.slice(0, cut(step.afterChunks)).join(""))
      later(step.millis, () => {
        if (!res.destroyed) end(all.slice(cut(step.afterChunks)).join(""))
      })
      return
    }
    case "Reset": {
      if (step.afterChunks === undefined) {
        destroy()
        return
      }
      const all = parts(filler("this answer is cut by a reset"))
      headers(200)
      write(all.slice(0, cut(step.afterChunks)).join(""))
      // Let the written bytes leave before the reset.
      later(20, destroy)
      return
    }
    case "Corrupt":
      headers(200)
      end(streamed ? `data: {"choices": [{"delta": {"content": "hel\n\ndata: [DONE]\n\n` : `{"choices": [{"message": `)
      return
    case "Truncated": {
      const all = parts(filler("an answer that stops short"))
      headers(200)
      end((streamed ? all.slice(0, -1) : all.slice(0, 1)).join(""))
      return
    }
    case "Raw":
      headers(step.status, step.headers)
      end(step.body)
      return
    case "Endless": {
      headers(step.status, step.headers)
      write(step.prefix)
      // As fast as the client reads: write until the socket pushes back, then wait for it to drain.
      const pump = () => {
        while (!res.destroyed) {
          if (!write(step.chunk)) {
            res.once("drain", pump)
            return
          }
        }
      }
      pump()
      return
    }
  }
}
