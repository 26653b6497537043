import { assert, describe, it } from "@effect/vitest"
import { Deferred, Duration, Effect, Exit, Fiber, Queue, Stream } from "effect"
import { CircuitBreaker } from "effect/persistence"
import { TestClock } from "effect/testing"
import * as Failure from "../../src/failure/Failure.ts"
import * as FailureBoundary from "../../src/failure/FailureBoundary.ts"
import * as Breakers from "../../src/recovery/Breakers.ts"

const policy = (failures: number, openDuration: Duration.Input = "10 seconds"): Breakers.Policy => ({
  tripPolicy: CircuitBreaker.consecutive(failures),
  openDuration
})

const retryable = (extra: { readonly retryAfterMillis?: number; readonly code?: string } = {}) =>
  new Failure.Retryable({
    source: "provider",
    category: "transient_http",
    code: extra.code ?? "http_503",
    attempts: 1,
    hint: "unavailable",
    ...(extra.retryAfterMillis === undefined ? {} : { retryAfterMillis: extra.retryAfterMillis })
  })

const permanent = (category: Failure.Category) =>
  new Failure.Permanent({ source: "provider", category, code: category, attempts: 1, hint: category })

/** Runs `body` with the application's breakers built from `options` (in memory). */
const withBreakers =
  (options: Breakers.Options = {}) =>
  <A, E>(body: (breakers: Breakers.Service) => Effect.Effect<A, E>) =>
    Effect.gen(function* () {
      const breakers = yield* Breakers.Breakers
      if (breakers === undefined) return yield* Effect.die("no breakers")
      return yield* body(breakers)
    }).pipe(Effect.provide(Breakers.layerMemory(options)))

/** A dependency that counts how often it really ran. */
const counted = () => {
  let runs = 0
  return {
    runs: () => runs,
    call: <A>(effect: Effect.Effect<A, Failure.Failure>): Effect.Effect<A, Failure.Failure> =>
      Effect.suspend(() => {
        runs++
        return effect
      })
  }
}

const rejected = <A>(effect: Effect.Effect<A, Failure.Failure>) =>
  Effect.flatMap(Effect.flip(effect), (failure) =>
    failure._tag === "Retryable" ? Effect.succeed(failure) : Effect.die(`expected Retryable, got ${failure._tag}`)
  )

const edge = (transition: Breakers.Transition) => `${transition.from}->${transition.to}`

/** A fiber with its own Observer, running the jobs it is sent one at a time. */
const worker = Effect.fnUntraced(function* (seen: Array<string>) {
  const inbox = yield* Queue.unbounded<readonly [Effect.Effect<unknown, unknown>, Deferred.Deferred<void>]>()
  yield* Effect.forkChild(
    Effect.forever(
      Effect.gen(function* () {
        const [job, done] = yield* Queue.take(inbox)
        yield* Effect.exit(job)
        yield* Deferred.succeed(done, undefined)
      })
    ).pipe(Effect.provideService(Breakers.Observer, (transition) => seen.push(edge(transition))))
  )
  return {
    /** Sends a job; the returned effect waits for it to finish. */
    send: (job: Effect.Effect<unknown, unknown>) =>
      Effect.gen(function* () {
        const done = yield* Deferred.make<void>()
        yield* Queue.offer(inbox, [job, done] as const)
        return Deferred.await(done)
      }),
    run: (job: Effect.Effect<unknown, unknown>) =>
      Effect.gen(function* () {
        const done = yield* Deferred.make<void>()
        yield* Queue.offer(inbox, [job, done] as const)
        yield* Deferred.await(done)
      })
  }
})

describe("Breakers", () => {
  it.effect("R3.9 consecutive failures open the provider circuit; the next call is rejected without running", () =>
    withBreakers({ provider: policy(3) })((breakers) =>
      Effect.gen(function* () {
        const model = counted()
        const call = breakers.guard("provider", "openai", model.call(Effect.fail(retryable())))
        for (let i = 0; i < 3; i++) assert.strictEqual((yield* rejected(call)).code, "http_503")
        assert.strictEqual(yield* breakers.state("provider", "openai"), "open")

        const rejection = yield* rejected(call)
        assert.strictEqual(model.runs(), 3)
        assert.strictEqual(rejection.source, "provider")
        assert.strictEqual(rejection.category, "circuit_open")
        assert.strictEqual(rejection.code, "circuit_open")
        assert.strictEqual(rejection.attempts, 1)
        assert.strictEqual(rejection.retryAfterMillis, 10_000)
        assert.strictEqual(rejection.hint, "the provider circuit for openai is open; calls resume in 10000 ms")

        yield* TestClock.adjust("4 seconds")
        assert.strictEqual((yield* rejected(call)).retryAfterMillis, 6_000)
        assert.strictEqual(model.runs(), 3)
        assert.strictEqual(yield* breakers.state("provider", "other"), "closed")
      })
    )
  )

  it.effect("R3.9 R12 a circuit open for ever refuses as circuit_open, with no time to resume (review 76)", () =>
    withBreakers({ provider: policy(1, Duration.infinity) })((breakers) =>
      Effect.gen(function* () {
        const model = counted()
        const call = breakers.guard("provider", "openai", model.call(Effect.fail(retryable())))
        yield* rejected(call)
        // Before, the refusal's wait of Infinity ms made it a defect, blamed on the model.
        const rejection = yield* rejected(call)
        assert.deepStrictEqual(
          [rejection.category, rejection.retryAfterMillis, model.runs()],
          ["circuit_open", undefined, 1]
        )
        assert.strictEqual(rejection.hint, "the provider circuit for openai is open, and stays open")
      })
    )
  )

  it.effect("R3.9 after the open duration one probe runs (half_open): success closes, failure reopens", () =>
    withBreakers({ provider: policy(1) })((breakers) =>
      Effect.gen(function* () {
        const model = counted()
        const guard = (effect: Effect.Effect<string, Failure.Failure>) =>
          breakers.guard("provider", "p", model.call(effect))
        yield* rejected(guard(Effect.fail(retryable())))
        yield* TestClock.adjust("10 seconds")

        // The probe holds the half-open slot until it is released.
        const started = yield* Deferred.make<void>()
        const release = yield* Deferred.make<void, Failure.Failure>()
        const probe = yield* Effect.forkChild(
          guard(Effect.andThen(Deferred.succeed(started, undefined), Deferred.await(release)).pipe(Effect.as("ok")))
        )
        yield* Deferred.await(started)
        assert.strictEqual(yield* breakers.state("provider", "p"), "half_open")
        const busy = yield* rejected(guard(Effect.succeed("never")))
        assert.strictEqual(busy.code, "circuit_half_open")
        assert.strictEqual(busy.category, "circuit_half_open")
        // A short poll: the run's recovery asks again then, spending no retry (review 121).
        assert.strictEqual(busy.retryAfterMillis, 250)
        assert.strictEqual(model.runs(), 2)

        // A failed probe reopens the circuit for another open duration.
        yield* Deferred.fail(release, retryable())
        assert.isTrue(Exit.isFailure(yield* Fiber.await(probe)))
        assert.strictEqual(yield* breakers.state("provider", "p"), "open")
        assert.strictEqual((yield* rejected(guard(Effect.succeed("never")))).retryAfterMillis, 10_000)

        // A successful probe closes it, and calls run again.
        yield* TestClock.adjust("10 seconds")
        assert.strictEqual(yield* guard(Effect.succeed("probe")), "probe")
        assert.strictEqual(yield* breakers.state("provider", "p"), "closed")
        assert.strictEqual(yield* guard(Effect.succeed("next")), "next")
        assert.strictEqual(model.runs(), 4)
      })
    )
  )

  it.effect("R3.9 tool circuits are per tool name, and false disables a breaker", () =>
    withBreakers({ provider: false, tool: policy(1), tools: { shell: false } })((breakers) =>
      Effect.gen(function* () {
        const tools = counted()
        yield* rejected(breakers.guard("tool", "flaky", tools.call(Effect.fail(retryable()))))
        assert.strictEqual(yield* breakers.state("tool", "flaky"), "open")
        assert.strictEqual(yield* breakers.guard("tool", "other", tools.call(Effect.succeed(1))), 1)
        assert.strictEqual(yield* breakers.state("tool", "other"), "closed")
        assert.strictEqual(
          (yield* rejected(breakers.guard("tool", "flaky", tools.call(Effect.succeed(2))))).code,
          "circuit_open"
        )

        // No breaker for the shell tool, nor for providers: every call runs.
        for (let i = 0; i < 5; i++)
          yield* rejected(breakers.guard("tool", "shell", tools.call(Effect.fail(retryable()))))
        for (let i = 0; i < 5; i++)
          yield* rejected(breakers.guard("provider", "p", tools.call(Effect.fail(retryable()))))
        assert.strictEqual(yield* breakers.state("tool", "shell"), "closed")
        assert.strictEqual(yield* breakers.state("provider", "p"), "closed")
        assert.strictEqual(tools.runs(), 12)
      })
    )
  )

  it.effect("R3.9 Permanent failures and run deadlines do not open the circuit; a broken dependency does", () =>
    withBreakers({ provider: policy(2) })((breakers) =>
      Effect.gen(function* () {
        const guard = (effect: Effect.Effect<never, Failure.Failure>) => breakers.guard("provider", "p", effect)
        for (let i = 0; i < 5; i++) yield* Effect.flip(guard(Effect.fail(permanent("permanent_http"))))
        for (let i = 0; i < 5; i++)
          yield* Effect.flip(
            guard(Effect.fail(FailureBoundary.timeout({ source: "provider", layer: "run", afterMillis: 100 })))
          )
        assert.strictEqual(yield* breakers.state("provider", "p"), "closed")

        yield* Effect.flip(guard(Effect.fail(permanent("corrupt_response"))))
        yield* Effect.exit(guard(Effect.die("the client threw")))
        assert.strictEqual(yield* breakers.state("provider", "p"), "open")

        const unknown = new Failure.UnknownOutcome({
          source: "tool",
          category: "other",
          code: "c",
          attempts: 1,
          hint: "h"
        })
        assert.deepStrictEqual(Breakers.classify(Exit.fail(unknown)), CircuitBreaker.failure())
        assert.deepStrictEqual(Breakers.classify(Exit.fail(permanent("defect"))), CircuitBreaker.failure())
        assert.deepStrictEqual(Breakers.classify(Exit.fail(permanent("exit"))), CircuitBreaker.ignored)
        assert.deepStrictEqual(Breakers.classify(Exit.succeed(1)), CircuitBreaker.success)
      })
    )
  )

  it.effect(
    "R3.10 R3.9 a business conflict (never retried, handed to the model) does not count against the circuit",
    () =>
      withBreakers({ tool: policy(2) })((breakers) =>
        Effect.gen(function* () {
          const seen: Array<string> = []
          const conflict = (failure: Failure.Failure) =>
            breakers.guard("tool", "save", Effect.fail(failure)).pipe(
              Effect.flip,
              Effect.provideService(Breakers.Observer, (transition) => seen.push(edge(transition)))
            )
          const moved = (tag: "Retryable" | "Permanent") =>
            new (tag === "Retryable" ? Failure.Retryable : Failure.Permanent)({
              source: "tool",
              category: "conflict",
              code: "version_changed",
              attempts: 1,
              hint: "the version moved; re-read"
            })
          for (let i = 0; i < 5; i++) assert.strictEqual((yield* conflict(moved("Retryable"))).code, "version_changed")
          yield* conflict(moved("Permanent"))
          assert.strictEqual(yield* breakers.state("tool", "save"), "closed")
          assert.deepStrictEqual(seen, [])
          assert.deepStrictEqual(Breakers.classify(Exit.fail(moved("Retryable"))), CircuitBreaker.ignored)
          // The dependency itself failing still counts.
          for (let i = 0; i < 2; i++) yield* conflict(retryable())
          assert.strictEqual(yield* breakers.state("tool", "save"), "open")
        })
      )
  )

  it.effect("R3.9 Retry-After on a Retryable lengthens the opening, capped by maxOpenDuration", () =>
    withBreakers({ provider: { ...policy(1, "1 second"), maxOpenDuration: "30 seconds" } })((breakers) =>
      Effect.gen(function* () {
        const fail = (name: string, retryAfterMillis: number) =>
          rejected(breakers.guard("provider", name, Effect.fail(retryable({ retryAfterMillis }))))
        const rejection = (name: string) => rejected(breakers.guard("provider", name, Effect.succeed(1)))

        yield* fail("a", 5_000)
        assert.strictEqual((yield* rejection("a")).retryAfterMillis, 5_000)
        yield* fail("b", 120_000)
        assert.strictEqual((yield* rejection("b")).retryAfterMillis, 30_000)
        yield* fail("c", 200)
        assert.strictEqual((yield* rejection("c")).retryAfterMillis, 1_000)
      })
    )
  )

  it.effect("R3.9 the default policy opens after 5 failures, for 1 s doubling up to 1 minute", () =>
    withBreakers()((breakers) =>
      Effect.gen(function* () {
        const fail = breakers.guard("provider", "p", Effect.fail(retryable()))
        for (let i = 0; i < 4; i++) yield* rejected(fail)
        assert.strictEqual(yield* breakers.state("provider", "p"), "closed")
        const openings: Array<number | undefined> = []
        yield* rejected(fail)
        for (let i = 0; i < 8; i++) {
          const rejection = yield* rejected(fail)
          openings.push(rejection.retryAfterMillis)
          yield* TestClock.adjust(rejection.retryAfterMillis ?? 0)
          yield* rejected(fail) // the probe fails and reopens the circuit
        }
        assert.deepStrictEqual(openings, [1_000, 2_000, 4_000, 8_000, 16_000, 32_000, 60_000, 60_000])
      })
    )
  )

  it.effect(
    "R3.9 each fiber's Observer receives exactly the transitions its own calls caused; transitions shows all",
    () =>
      withBreakers({ provider: policy(3) })((breakers) =>
        Effect.gen(function* () {
          const collected = yield* Effect.forkChild(Stream.runCollect(Stream.take(breakers.transitions, 6)), {
            startImmediately: true
          })
          yield* Effect.yieldNow
          const seenA: Array<string> = []
          const seenB: Array<string> = []
          const a = yield* worker(seenA)
          const b = yield* worker(seenB)
          const fail = breakers.guard("provider", "p", Effect.fail(retryable()))
          const succeed = breakers.guard("provider", "p", Effect.succeed(1))

          yield* a.run(fail)
          yield* b.run(fail)
          // A's third failure is admitted first, but B's completes first and trips the circuit.
          const admitted = yield* Deferred.make<void>()
          const gate = yield* Deferred.make<void>()
          const slowFailure = breakers.guard(
            "provider",
            "p",
            Effect.andThen(Deferred.succeed(admitted, undefined), Deferred.await(gate)).pipe(
              Effect.andThen(Effect.fail(retryable()))
            )
          )
          const slow = yield* a.send(slowFailure)
          yield* Deferred.await(admitted)
          yield* b.run(fail)
          yield* Deferred.succeed(gate, undefined)
          yield* slow
          assert.deepStrictEqual(seenA, [])
          assert.deepStrictEqual(seenB, ["closed->open"])

          yield* TestClock.adjust("10 seconds")
          yield* b.run(succeed)
          for (let i = 0; i < 3; i++) yield* a.run(fail)
          yield* TestClock.adjust("10 seconds")
          yield* a.run(fail)

          assert.deepStrictEqual(seenB, ["closed->open", "open->half_open", "half_open->closed"])
          assert.deepStrictEqual(seenA, ["closed->open", "open->half_open", "half_open->open"])

          const all = yield* Fiber.join(collected)
          assert.deepStrictEqual(all.map(edge), [
            "closed->open",
            "open->half_open",
            "half_open->closed",
            "closed->open",
            "open->half_open",
            "half_open->open"
          ])
          assert.deepStrictEqual(all[0], {
            kind: "provider",
            name: "p",
            key: "provider:p",
            from: "closed",
            to: "open",
            retryAfterMillis: 10_000
          })
          assert.deepStrictEqual(all[1], {
            kind: "provider",
            name: "p",
            key: "provider:p",
            from: "open",
            to: "half_open"
          })
        })
      )
  )

  it.effect("R3.9 without a Breakers layer there are no breakers and no Observer", () =>
    Effect.gen(function* () {
      assert.isUndefined(yield* Breakers.Breakers)
      assert.isUndefined(yield* Breakers.Observer)
    })
  )
})
