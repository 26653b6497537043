/**
 * Collecting a child's stdout and stderr within the output limit (R5.2), private to
 * `Subprocess`: both streams are read into memory until, together, they would pass
 * `maxOutputBytes`; then reading fails with {@link OutputTooLarge} and the supervisor
 * stops the child.
 */
import { Effect, Stream } from "effect"
import type * as PlatformError from "effect/PlatformError"

/**
 * How long, after the child exited, the reader waits for the rest of its output. Only a
 * process the child started can hold the pipes open longer; it is stopped with the group.
 */
export const outputDrainMillis = 250

/** The output passed the limit. */
export interface OutputTooLarge {
  readonly _tag: "OutputTooLarge"
}

const outputTooLarge: OutputTooLarge = { _tag: "OutputTooLarge" }

/** What a child wrote so far: the chunks of each stream, and their bytes together. */
export interface Output {
  readonly stdout: Array<Uint8Array>
  readonly stderr: Array<Uint8Array>
  bytes: number
}

/** Nothing written yet. */
export const empty = (): Output => ({ stdout: [], stderr: [], bytes: 0 })

const read = (
  output: Output,
  maxOutputBytes: number,
  stream: Stream.Stream<Uint8Array, PlatformError.PlatformError>,
  into: Array<Uint8Array>
) =>
  Stream.runForEachArray(stream, (chunks) =>
    Effect.suspend(() => {
      for (const chunk of chunks) {
        const room = maxOutputBytes - output.bytes
        if (chunk.length > room) {
          into.push(chunk.subarray(0, room))
          output.bytes = maxOutputBytes
          return Effect.fail(outputTooLarge)
        }
        into.push(chunk)
        output.bytes += chunk.length
      }
      return Effect.void
    })
  )

/**
 * Reads stdout and stderr, concurrently, into `output` until both end; fails with
 * {@link OutputTooLarge} (keeping the output up to the limit) when together they pass
 * `maxOutputBytes`.
 */
export const collect = (
  output: Output,
  maxOutputBytes: number,
  stdout: Stream.Stream<Uint8Array, PlatformError.PlatformError>,
  stderr: Stream.Stream<Uint8Array, PlatformError.PlatformError>
): Effect.Effect<void, PlatformError.PlatformError | OutputTooLarge> =>
  Effect.all(
    [read(output, maxOutputBytes, stdout, output.stdout), read(output, maxOutputBytes, stderr, output.stderr)],
    {
      concurrency: 2,
      discard: true
    }
  )

const decoder = new TextDecoder()

/** The chunks of a stream as text (UTF-8). */
export const decode = (chunks: ReadonlyArray<Uint8Array>): string => decoder.decode(Buffer.concat(chunks))
