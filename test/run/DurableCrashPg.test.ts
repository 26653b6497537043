/**
 * Real crashes on the PostgreSQL journal (R9, R3.8, R7): the suite of DurableCrash.test.ts on
 * a throwaway server (test/support/postgres.ts), each test on tables of its own prefix, with
 * fewer random kills. Without a server it fails, unless `SKIP_PG=1` opts out.
 */
import { afterAll, it } from "vitest"
import { crashSuite } from "../support/crash/suite.ts"
import { postgres, required } from "../support/postgres.ts"

const found = await postgres()

if (found._tag === "Server") {
  const { url, stop } = found.server
  afterAll(stop)
  crashSuite({
    name: "PostgreSQL",
    where: (_dir, test) => ({ pg: url, tablePrefix: `crash_${test.replaceAll("-", "_")}_` }),
    randomKills: 10
  })
} else if (required) {
  it("R9 PostgreSQL is there for the crash suite", () => {
    throw new Error(`no PostgreSQL: ${found.why} (set PG_URL, install postgresql, or opt out with SKIP_PG=1)`)
  })
} else {
  console.warn(`SKIP_PG=1: the PostgreSQL crash suite is not run (${found.why})`)
}
