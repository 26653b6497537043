/**
 * An HTTP-date (RFC 9110, 5.6.7) read by its parts, for `Retry-After`. Private to `failure/`.
 */

const day = "(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun)"
const dayName = "(?:Monday|Tuesday|Wednesday|Thursday|Friday|Saturday|Sunday)"
const month = "(Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)"
const clock = "(\\d{2}):(\\d{2}):(\\d{2})"
/** GMT, and what servers write for it (Go's `UTC`, PHP's `+0000`, Python's `-0000`). */
const zone = "(?:GMT|UTC|[+-]0000)"

/**
 * The three forms of an HTTP-date (RFC 9110, 5.6.7), whatever their letter case, with the zone as
 * servers write GMT, each read into its parts: IMF-fixdate, then the obsolete RFC 850 (a
 * two-digit year) and asctime forms.
 */
const httpDates: ReadonlyArray<{
  readonly form: RegExp
  readonly parts: (m: RegExpExecArray) => ReadonlyArray<string>
}> = [
  {
    form: new RegExp(`^${day}, (\\d{1,2}) ${month} (\\d{4}) ${clock} ${zone}$`, "i"),
    parts: ([, d = "", mon = "", y = "", ...hms]) => [y, mon, d, ...hms]
  },
  {
    form: new RegExp(`^${dayName}, (\\d{2})-${month}-(\\d{2}) ${clock} ${zone}$`, "i"),
    parts: ([, d = "", mon = "", y = "", ...hms]) => [y, mon, d, ...hms]
  },
  {
    form: new RegExp(`^${day} ${month} ([ \\d]\\d) ${clock} (\\d{4})$`, "i"),
    parts: ([, mon = "", d = "", h = "", min = "", sec = "", y = ""]) => [y, mon, d, h, min, sec]
  }
]

const months = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"]

/**
 * The instant an HTTP-date names, or `undefined` for none: read by its parts, not by
 * `Date.parse` (review 177: it rolled 31 Feb into March; review 178: it read `60` as 1960
 * and the year `0049` as 2049). A two-digit year is of `now`'s century, unless that puts its
 * timestamp more than 50 years ahead of `now`: then of the century before (RFC 9110, 5.6.7).
 */
export const httpDateMillis = (text: string, now: number): number | undefined => {
  for (const { form, parts } of httpDates) {
    const found = form.exec(text)
    if (found === null) continue
    const [y = "", mon = "", d = "", h = "", min = "", sec = ""] = parts(found)
    const twoDigits = y.length === 2
    const thisCentury = new Date(now).getUTCFullYear() - (new Date(now).getUTCFullYear() % 100)
    const at = instant(twoDigits ? thisCentury + Number(y) : Number(y), mon, d, h, min, sec)
    // A two-digit year's timestamp more than 50 years ahead is of the century before (RFC 9110, 5.6.7; review 179).
    if (twoDigits && at !== undefined && at - now > fiftyYears) {
      return instant(thisCentury - 100 + Number(y), mon, d, h, min, sec)
    }
    return at
  }
  return undefined
}

/** Fifty years of 365.2425 days, in milliseconds. */
const fiftyYears = 50 * 365.2425 * 86_400_000

/**
 * The instant of a date's parts, or `undefined` for a day its month does not have or an hour
 * past 23, which `Date` rolls on. A leap second (`23:59:60`, which RFC 9110 allows) is the
 * second after `23:59:59` (review 179: refused).
 */
const instant = (year: number, mon: string, d: string, h: string, min: string, sec: string): number | undefined => {
  const monthIndex = months.indexOf(mon.toLowerCase())
  const leap = sec === "60"
  const second = leap ? 59 : Number(sec)
  const date = new Date(0)
  date.setUTCFullYear(year, monthIndex, Number(d.trim()))
  date.setUTCHours(Number(h), Number(min), second)
  const exact =
    date.getUTCFullYear() === year &&
    date.getUTCMonth() === monthIndex &&
    date.getUTCDate() === Number(d.trim()) &&
    date.getUTCHours() === Number(h) &&
    date.getUTCMinutes() === Number(min) &&
    date.getUTCSeconds() === second
  return exact ? date.getTime() + (leap ? 1000 : 0) : undefined
}
