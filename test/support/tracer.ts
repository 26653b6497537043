/** An in-memory tracer for span tests: every span it makes, in the order they started. */
import { Tracer } from "effect"

export const memoryTracer = () => {
  const spans: Array<Tracer.NativeSpan> = []
  const tracer = Tracer.make({
    span: (options) => {
      const made = new Tracer.NativeSpan(options)
      spans.push(made)
      return made
    }
  })
  return { tracer, spans }
}
