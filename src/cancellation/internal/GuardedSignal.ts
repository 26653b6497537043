/**
 * The abort signal user code is handed, its listeners guarded (R12, R5.1). Node's `EventTarget`
 * dispatches `abort` synchronously and reports a listener's throw by throwing it again on
 * `process.nextTick`: an uncaught exception no `try` around `abort()` can catch, which takes
 * the whole process down, every run in it (review 167: an `onabort` whose cleanup threw). Each
 * listener added to this signal, and its `onabort`, runs inside a `try`, and what it throws
 * goes to `caught`. Set on the signal instance itself: its class is the platform's, and the
 * platform's code (`fetch`) must take it as a signal. A listener of a signal made from it
 * (a combined one) belongs to that signal and is not guarded. Private to `cancellation/`.
 */

type Listener = NonNullable<Parameters<EventTarget["addEventListener"]>[1]>
type Handler = (event: Event) => void

const addListener = EventTarget.prototype.addEventListener
const removeListener = EventTarget.prototype.removeEventListener
const onabort = Object.getOwnPropertyDescriptor(AbortSignal.prototype, "onabort")

/** `signal`, its listeners from now on run inside a `try` (see the module's comment). */
export const guarded = (signal: AbortSignal, caught: (error: unknown) => void): AbortSignal => {
  const wrappers = new WeakMap<Listener, Handler>()
  const wrap = (listener: Listener): Handler => {
    const known = wrappers.get(listener)
    if (known !== undefined) return known
    const wrapper: Handler = function (this: unknown, event) {
      try {
        if (typeof listener === "function") listener.call(this, event)
        else listener.handleEvent(event)
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
      // A listener that is none (`null`) adds nothing, as the platform's does.
      value: (type: string, listener: Listener | null, options?: Parameters<EventTarget["addEventListener"]>[2]) => {
        if (listener !== null) addListener.call(signal, type, wrap(listener), options)
      }
    },
    removeEventListener: {
      configurable: true,
      value: (type: string, listener: Listener | null, options?: Parameters<EventTarget["removeEventListener"]>[2]) => {
        if (listener !== null) removeListener.call(signal, type, wrappers.get(listener) ?? listener, options)
      }
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
