/**
 * The abort signal user code is handed, its listeners guarded (R12, R5.1). Node's `EventTarget`
 * dispatches `abort` synchronously and reports a listener's throw by throwing it again on
 * `process.nextTick`: an uncaught exception no `try` around `abort()` can catch, which takes
 * the whole process down, every run in it (review 167: an `onabort` whose cleanup threw). Each
 * listener added to this signal, and its `onabort`, runs inside a `try`, and what it throws,
 * or the promise it gives rejects with, goes to `caught`. Set on the signal instance itself: its class is the platform's, and the
 * platform's code (`fetch`) must take it as a signal. A listener of a signal made from it
 * (a combined one) belongs to that signal and is not guarded. Private to `cancellation/`.
 */
import { Predicate } from "effect"

type Listener = NonNullable<Parameters<EventTarget["addEventListener"]>[1]>
type Handler = (event: Event) => void

const addListener = EventTarget.prototype.addEventListener
const removeListener = EventTarget.prototype.removeEventListener
const onabort = Object.getOwnPropertyDescriptor(AbortSignal.prototype, "onabort")

/** A listener the platform would call: a function, or an object (its `handleEvent`). */
const isListener = (u: unknown): u is Listener => typeof u === "function" || (typeof u === "object" && u !== null)

/** How many thenables deep {@link settle} follows a listener's answer: a `then` that gives itself stops there. */
const deepestThenable = 8

/**
 * A listener's answer, its rejection caught: an `async` listener's (review 169: unhandled, it
 * ended the process as well); a thenable's own `then` may give a promise that rejects, or
 * another thenable, and so on (reviews 171, 172): each is followed to a native promise,
 * eight thenables deep at most.
 */
const settle = (returned: unknown, caught: (error: unknown) => void): void => {
  let answer = returned
  for (let depth = 0; Predicate.isPromiseLike(answer); depth++) {
    // A native promise is handled whatever its depth; a thenable only so many deep.
    if (answer instanceof Promise) {
      answer.then(undefined, caught)
      return
    }
    if (depth === deepestThenable) return
    answer = answer.then(undefined, caught)
  }
}

/** `signal`, its listeners from now on run inside a `try` (see the module's comment). */
export const guarded = (signal: AbortSignal, caught: (error: unknown) => void): AbortSignal => {
  const wrappers = new WeakMap<Listener, Handler>()
  const wrap = (listener: Listener): Handler => {
    const known = wrappers.get(listener)
    if (known !== undefined) return known
    const wrapper: Handler = function (this: unknown, event) {
      try {
        const returned: unknown =
          typeof listener === "function" ? listener.call(this, event) : listener.handleEvent(event)
        settle(returned, caught)
      } catch (error) {
        caught(error)
      }
    }
    wrappers.set(listener, wrapper)
    return wrapper
  }
  let handler: ((this: AbortSignal, event: Event) => unknown) | null = null
  Object.defineProperties(signal, {
    addEventListener: {
      configurable: true,
      // A listener that is none (`null`, `undefined`, no object) goes to the platform as it is (it adds nothing).
      value: (type: string, listener: unknown, options?: Parameters<EventTarget["addEventListener"]>[2]) =>
        addListener.call(signal, type, isListener(listener) ? wrap(listener) : (listener as Listener), options)
    },
    removeEventListener: {
      configurable: true,
      value: (type: string, listener: unknown, options?: Parameters<EventTarget["removeEventListener"]>[2]) =>
        removeListener.call(
          signal,
          type,
          isListener(listener) ? (wrappers.get(listener) ?? listener) : (listener as Listener),
          options
        )
    },
    onabort: {
      configurable: true,
      get: () => handler,
      set: (given: unknown) => {
        handler = typeof given === "function" ? (given as typeof handler) : null
        onabort?.set?.call(signal, handler === null ? null : wrap(handler))
      }
    }
  })
  return signal
}
