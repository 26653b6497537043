/**
 * The crash property of durable runs (issue 13, R9, R3.8): every generated scenario is
 * run once on a journal to see its commits, then killed at sampled commit barriers
 * (`FaultyJournal`, before or after the commit) and resumed from what the journal kept
 * (`Run.resume`, on `TestClock`, from the instant it died), with the model and the
 * approval gate made anew as a restarted process has them and the world (the tools and
 * their ledgers) as it was. See `test/support/resume.ts` for what is checked.
 */
import { NodeServices } from "@effect/platform-node"
import { afterAll, assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as Properties from "../../src/testing/Properties.ts"
import { barriersOf, crashAndResume, type Kind, observed, sample } from "../support/resume.ts"

const runs = Math.max(1_000, Number(process.env.PROPERTY_RUNS ?? 1_000))
/** Barriers tried per case: a sample (one of a kind the case has, the rest at random), to keep CI under ~40 s. */
const perCase = Number(process.env.RESUME_BARRIERS ?? 2)

/** What the crashes covered, over all cases: barriers by kind, and how the resumed runs ended. */
const coverage = new Map<string, number>()
const count = (key: string) => coverage.set(key, (coverage.get(key) ?? 0) + 1)

const crashEverywhere = ([c]: readonly [Properties.Case]) =>
  Effect.gen(function* () {
    count("cases")
    const { scenario, result, batches } = yield* observed(c)
    // The run on a journal keeps every invariant a run without one keeps.
    const violations = Properties.checkScenario(scenario, result)
    assert.deepStrictEqual(violations, [], `the uncrashed run: ${JSON.stringify(violations)}`)
    for (const barrier of sample(barriersOf(batches), c.seed, perCase)) {
      const outcome = yield* crashAndResume(c, barrier, result)
      count(`${barrier.kind}/${barrier.when}`)
      count(`ended ${outcome.status}`)
      if (outcome.inDoubt) count("in doubt at resume")
    }
  }).pipe(Effect.provide(NodeServices.layer))

describe("Run.resume (property)", () => {
  it.effect.prop(
    "R9 R3.8 killed at any commit barrier and resumed: it ends as it would have, each side effect once or pending, its counters and conversation the fold of its log",
    [Properties.arbitrary],
    crashEverywhere,
    { timeout: 120_000, arbitrary: { runs } }
  )

  it.effect.prop(
    "R9 R3.8 R7 the same for concurrent batches, approvals and retries side by side",
    [Properties.arbitraryConcurrent],
    crashEverywhere,
    { timeout: 120_000, arbitrary: { runs } }
  )

  afterAll(() => {
    const kinds: ReadonlyArray<Kind> = ["first", "response", "intent", "result", "approval", "iteration", "final"]
    const hit = kinds.filter((k) => (coverage.get(`${k}/before`) ?? 0) + (coverage.get(`${k}/after`) ?? 0) > 0)
    console.log(
      "crash coverage:",
      Object.fromEntries([...coverage.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)))
    )
    // Both properties ran in full: every kind of barrier was crashed at.
    if ((coverage.get("cases") ?? 0) >= 2 * runs) {
      assert.deepStrictEqual(hit, kinds)
    }
  })
})
