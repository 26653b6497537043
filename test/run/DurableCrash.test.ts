/**
 * Real crashes on the SQLite journal (R9, R3.8, R7): a child process is `kill -9`ed at each
 * barrier that matters and at random moments, and a new process recovers its runs. The suite
 * is in test/support/crash/suite.ts; CRASH_SEED=<n> replays a sequence of random kills.
 */
import * as path from "node:path"
import { crashSuite } from "../support/crash/suite.ts"

crashSuite({
  name: "SQLite",
  where: (dir, test) => ({ sqlite: path.join(dir, `${test}-journal.db`) }),
  randomKills: 50
})
