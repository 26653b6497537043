import { assert, describe, it } from "@effect/vitest"
import * as Failure from "../../src/failure/Failure.ts"
import * as FailureBoundary from "../../src/failure/FailureBoundary.ts"

const now = Date.UTC(2026, 11, 1, 12, 0, 0)

describe("FailureBoundary", () => {
  it("R3.2 408, 409, 429 and every 5xx are retryable; other 4xx are permanent", () => {
    for (const status of [408, 409, 429, 500, 502, 503, 504, 599]) {
      const failure = FailureBoundary.http({ status, now })
      assert.strictEqual(failure._tag, "Retryable", String(status))
      assert.strictEqual(failure.category, "transient_http")
      assert.strictEqual(failure.code, `http_${status}`)
    }
    for (const status of [400, 401, 403, 404, 413, 422, 499]) {
      const failure = FailureBoundary.http({ status, now })
      assert.strictEqual(failure._tag, "Permanent", String(status))
      assert.strictEqual(failure.category, "permanent_http")
    }
  })

  it("R3.2 any other status is a permanent request failure, and a status past 599 is not called a server error", () => {
    for (const status of [0, 200, 302, 600, 999]) {
      const failure = FailureBoundary.http({ status, now })
      assert.strictEqual(failure._tag, "Permanent")
      assert.strictEqual(failure.code, "request_failed")
      if (status >= 600) assert.include(failure.hint, `HTTP ${status} (a status HTTP does not define)`)
    }
  })

  it("R3.2 Retry-After is read as seconds and as an HTTP date", () => {
    assert.strictEqual(FailureBoundary.retryAfterMillis("3", now), 3000)
    assert.strictEqual(FailureBoundary.retryAfterMillis("0.5", now), 500)
    assert.strictEqual(FailureBoundary.retryAfterMillis(new Date(now + 7000).toUTCString(), now), 7000)
    assert.strictEqual(FailureBoundary.retryAfterMillis(new Date(now - 7000).toUTCString(), now), 0)
    assert.isUndefined(FailureBoundary.retryAfterMillis("soon", now))
    // Read as dates by `Date.parse`, but no HTTP-date: `-5` is a year, `2, 30` two headers joined.
    assert.isUndefined(FailureBoundary.retryAfterMillis("-5", now))
    assert.isUndefined(FailureBoundary.retryAfterMillis("2, 30", now))
    // Only the three forms of an HTTP-date: `Date.parse` reads these as dates, a year or more away.
    for (const text of ["Dec 2026", "Tue 275760", "Sun 2 Jan", "Monday", "Sat, 05 Dec 2026"]) {
      assert.isUndefined(FailureBoundary.retryAfterMillis(text, now), text)
    }
    // A two-digit year is the one no more than 50 years ahead (RFC 9110); a four-digit one is that year (review 178).
    const year = new Date(now).getUTCFullYear()
    const ahead = String((year + 34) % 100).padStart(2, "0")
    const far = FailureBoundary.retryAfterMillis(`Sunday, 01-Jan-${ahead} 00:00:00 GMT`, now) ?? 0
    assert.isAbove(far, 33 * 365 * 86_400_000)
    assert.strictEqual(FailureBoundary.retryAfterMillis("Sun, 01 Jan 0049 00:00:00 GMT", now), 0)
    assert.isUndefined(FailureBoundary.retryAfterMillis("Mon, 01 Jan 2029 24:00:00 GMT", now))
    // A leap second, which RFC 9110 allows, is the second after 23:59:59 (review 179: refused).
    const leap = new Date(now + 86_400_000)
    const leapDay = leap.toUTCString().replace(/\d{2}:\d{2}:\d{2}/, "23:59:60")
    const beforeLeap = leap.toUTCString().replace(/\d{2}:\d{2}:\d{2}/, "23:59:59")
    assert.strictEqual(
      FailureBoundary.retryAfterMillis(leapDay, now),
      (FailureBoundary.retryAfterMillis(beforeLeap, now) ?? 0) + 1000
    )
    // A two-digit year whose timestamp is more than 50 years ahead, by days alone, is of the century before.
    const end = `Thursday, 31-Dec-${String((year + 50) % 100).padStart(2, "0")} 23:59:59 GMT`
    assert.strictEqual(FailureBoundary.retryAfterMillis(end, new Date(Date.UTC(year, 11, 7)).getTime()), 0)
    // A day its month does not have, which `Date.parse` rolls into the next month (review 177).
    for (const text of [
      "Tue, 31 Feb 2026 12:00:10 GMT",
      "Thu, 31 Apr 2026 12:00:10 GMT",
      "Sun, 00 Mar 2026 12:00:10 GMT"
    ]) {
      assert.isUndefined(FailureBoundary.retryAfterMillis(text, now), text)
    }
    const at = new Date(now + 9000)
    const [dayName = "", , month = ""] = at.toUTCString().split(/[ ,]+/)
    const longDay = ["Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"][at.getUTCDay()]
    const hms = at.toISOString().slice(11, 19)
    const dd = String(at.getUTCDate()).padStart(2, "0")
    const rfc850 = `${longDay}, ${dd}-${month}-${String(at.getUTCFullYear()).slice(2)} ${hms} GMT`
    const asctime = `${dayName} ${month} ${String(at.getUTCDate()).padStart(2, " ")} ${hms} ${at.getUTCFullYear()}`
    // GMT as servers write it: Go's UTC, PHP's +0000, Python's -0000, in lower case.
    const imf = at.toUTCString()
    const zones = ["UTC", "+0000", "-0000"].map((zone) => imf.replace("GMT", zone))
    for (const text of [imf, rfc850, asctime, ...zones, imf.toLowerCase()]) {
      assert.strictEqual(FailureBoundary.retryAfterMillis(text, now), 9000, text)
    }
    assert.isUndefined(FailureBoundary.retryAfterMillis(undefined, now))
    const failure = FailureBoundary.http({ status: 429, retryAfter: "2", now })
    assert.isTrue(failure._tag === "Retryable" && failure.retryAfterMillis === 2000)
  })

  it("R3.2 timeouts, connection errors and corrupt responses are retryable with their own codes", () => {
    assert.strictEqual(
      FailureBoundary.timeout({ source: "provider", layer: "first_byte", afterMillis: 50 }).code,
      "first_byte_timeout"
    )
    assert.strictEqual(FailureBoundary.connection({ source: "provider", detail: "ECONNRESET" }).category, "connection")
    assert.strictEqual(
      FailureBoundary.corruptResponse({ source: "provider", detail: "Unexpected end" }).code,
      "corrupt_response"
    )
  })

  it("R4.3 a timeout's hint names its limit, and the time the wait took as elapsed, never one for the other", () => {
    const hint = (options: Parameters<typeof FailureBoundary.timeout>[0]) => FailureBoundary.timeout(options).hint
    // Cut off on time: the limit, as before.
    assert.strictEqual(
      hint({ source: "provider", layer: "attempt", limitMillis: 1000, afterMillis: 1000 }),
      "no answer within the attempt timeout of 1000 ms"
    )
    // Held past it by code that could not be interrupted: the limit, and how long it took.
    const held = FailureBoundary.timeout({ source: "provider", layer: "attempt", limitMillis: 1000, afterMillis: 3000 })
    assert.strictEqual(held.hint, "no answer within the attempt timeout of 1000 ms (cut off after 3000 ms)")
    assert.strictEqual(held.timeout?.elapsedMillis, 3000)
    // A deadline's size is the run's or the step's, not the wait's: only how long the wait took.
    assert.strictEqual(
      hint({ source: "provider", layer: "run", afterMillis: 400 }),
      "no answer within the run deadline (cut off after 400 ms)"
    )
    assert.strictEqual(
      hint({ source: "provider", layer: "step", limitMillis: 700, afterMillis: 700 }),
      "no answer within the step deadline (cut off after 700 ms)"
    )
    // A limit that is not known (a client's own timeout): only how long the wait took.
    assert.strictEqual(
      hint({ source: "provider", layer: "attempt", afterMillis: 4873 }),
      "no answer within the attempt timeout (cut off after 4873 ms)"
    )
    // What was cut off, after how long: true as it was.
    assert.strictEqual(
      hint({ source: "tool", layer: "tool", limitMillis: 1000, afterMillis: 3000, what: "write" }),
      "write was cut off by the tool timeout after 3000 ms"
    )
  })

  it("R4.3 a request never made (nothing left of its step) is worded as a tool's status query is: not asked", () => {
    const hint = (options: Parameters<typeof FailureBoundary.timeout>[0]) => FailureBoundary.timeout(options).hint
    // Before, "the step deadline (cut off after 0 ms)": as if it had been asked and cut off.
    assert.strictEqual(
      hint({ source: "provider", layer: "step", limitMillis: 0, afterMillis: 0 }),
      "no answer within the step deadline, which had passed (it was not asked)"
    )
    assert.strictEqual(
      hint({ source: "provider", layer: "attempt", limitMillis: 0, afterMillis: 0 }),
      "no answer within the attempt timeout, which had passed (it was not asked)"
    )
    const failure = FailureBoundary.timeout({ source: "provider", layer: "step", limitMillis: 0, afterMillis: 0 })
    assert.deepStrictEqual(failure.timeout, { layer: "step", elapsedMillis: 0, mayHaveSideEffects: false })
  })

  it("R3.1 an unknown error is permanent, and its detail stays out of the hint", () => {
    const failure = FailureBoundary.unknown("provider", new Error("key sk-secret123 leaked"))
    assert.strictEqual(failure._tag, "Permanent")
    assert.notInclude(failure.hint, "sk-secret123")
    assert.include(failure.diagnostic ?? "", "sk-secret123")
    assert.notInclude(JSON.stringify(Failure.summarize(failure)), "sk-secret123")
  })

  it("R3.4 withAttempts keeps the class and every field but the attempt count", () => {
    const failure = FailureBoundary.http({ status: 429, retryAfter: "1", now })
    const carried = FailureBoundary.withAttempts(failure, 3)
    assert.strictEqual(carried._tag, "Retryable")
    assert.strictEqual(carried.attempts, 3)
    assert.strictEqual(carried.code, "http_429")
    assert.isTrue(carried._tag === "Retryable" && carried.retryAfterMillis === 1000)
  })
})
