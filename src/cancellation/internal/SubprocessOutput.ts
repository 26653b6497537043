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

/**
 * The bytes of one stream so far, copied into one buffer that grows by doubling: a chunk
 * kept per write would cost a few hundred bytes of memory for each byte a child writes
 * one at a time (and may hold on to the larger buffer it was read into).
 */
export interface Bytes {
  buffer: Uint8Array
  length: number
}

/** What a child wrote so far: the bytes of each stream, and their count together. */
export interface Output {
  readonly stdout: Bytes
  readonly stderr: Bytes
  bytes: number
}

/** Nothing written yet. */
export const empty = (): Output => ({
  stdout: { buffer: new Uint8Array(0), length: 0 },
  stderr: { buffer: new Uint8Array(0), length: 0 },
  bytes: 0
})

/** Adds `chunk` to `into`, whose buffer grows to `cap` bytes at most. */
const append = (into: Bytes, chunk: Uint8Array, cap: number) => {
  const length = into.length + chunk.length
  if (length > into.buffer.length) {
    const grown = new Uint8Array(Math.min(cap, Math.max(length, 2 * into.buffer.length, 4096)))
    grown.set(into.buffer.subarray(0, into.length))
    into.buffer = grown
  }
  into.buffer.set(chunk, into.length)
  into.length = length
}

const read = (
  output: Output,
  maxOutputBytes: number,
  stream: Stream.Stream<Uint8Array, PlatformError.PlatformError>,
  into: Bytes
) =>
  Stream.runForEachArray(stream, (chunks) =>
    Effect.suspend(() => {
      for (const chunk of chunks) {
        const room = maxOutputBytes - output.bytes
        if (chunk.length > room) {
          append(into, chunk.subarray(0, room), maxOutputBytes)
          output.bytes = maxOutputBytes
          return Effect.fail(outputTooLarge)
        }
        append(into, chunk, maxOutputBytes)
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

/** The bytes of a stream as text (UTF-8). */
export const decode = (bytes: Bytes): string => decoder.decode(bytes.buffer.subarray(0, bytes.length))
