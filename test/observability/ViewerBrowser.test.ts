/**
 * The viewer's page in a real headless browser: Debian's Chromium (`apt-get install -y
 * chromium`, which `.ci/run` does), driven by playwright-core. The test opens the file the
 * CLI would write, finds the bars and the stop reason in the DOM, clicks a bar and an
 * event and reads their details, and keeps a screenshot (`test-results/viewer.png`;
 * `UPDATE_SCREENSHOT=1` also writes the README's, `docs/viewer.png`). Without Chromium it
 * is skipped, saying so, except where it is required (`VIEWER_BROWSER=required`, as
 * `.ci/run` sets after installing Chromium): there its absence fails the test.
 */
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { pathToFileURL } from "node:url"
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { chromium } from "playwright-core"
import * as Recording from "../../src/observability/Recording.ts"
import * as Viewer from "../../src/observability/Viewer.ts"
import * as Run from "../../src/run/Run.ts"
import * as ScriptedModel from "../../src/testing/ScriptedModel.ts"
import { nodeLayer, recordedRun, tempDirectory } from "./support.ts"

const executablePath = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium"
const present = Fs.existsSync(executablePath)
const required = process.env.VIEWER_BROWSER === "required"
if (!present && !required)
  console.warn(
    `ViewerBrowser: skipped, no Chromium at ${executablePath} (apt-get install -y chromium; .ci/run installs it)`
  )

const repo = Path.resolve(import.meta.dirname, "..", "..")

describe.skipIf(!present && !required)("Viewer in Chromium", () => {
  it("the page shows the bars and the stop reason, and a click shows an event's details", {
    timeout: 60_000
  }, async () => {
    assert.isTrue(present, `Chromium is not installed at ${executablePath} (apt-get install -y chromium)`)
    const { recording, result } = await Effect.runPromise(
      Effect.gen(function* () {
        const directory = yield* tempDirectory
        const { result, file } = yield* recordedRun(directory)
        return { result, recording: yield* Recording.read(file) }
      }).pipe(Effect.scoped, Effect.provide(nodeLayer))
    )
    const work = Fs.mkdtempSync(Path.join(Os.tmpdir(), "viewer-browser-"))
    const page = Path.join(work, "run.html")
    Fs.writeFileSync(page, Viewer.html(recording))
    const browser = await chromium.launch({ executablePath, args: ["--no-sandbox"] })
    try {
      const tab = await browser.newPage({ viewport: { width: 1400, height: 900 } })
      const requests: Array<string> = []
      tab.on("request", (request) => {
        if (!request.url().startsWith("file:")) requests.push(request.url())
      })
      const errors: Array<string> = []
      tab.on("pageerror", (error) => errors.push(error.message))
      await tab.goto(pathToFileURL(page).href)

      assert.strictEqual(await tab.locator("#stop-reason").textContent(), "max_iterations")
      assert.strictEqual(await tab.locator("#status").textContent(), result.status)
      assert.strictEqual(await tab.locator(".bar[data-kind=model]").count(), 3)
      assert.strictEqual(await tab.locator(".bar[data-kind=approval]").count(), 1)
      assert.strictEqual(await tab.locator(".bar[data-kind=backoff]").count(), 2)
      assert.isAbove(await tab.locator(".mark[data-layer=attempt]").count(), 0)
      // Each bar is drawn: it has a size on the screen.
      const box = await tab.locator(".bar[data-kind=approval]").boundingBox()
      assert.isAbove(box?.width ?? 0, 2)

      await tab.locator(".bar[data-kind=approval]").click()
      assert.include(await tab.locator("#details-title").textContent(), "approval.requested")
      const details = JSON.parse((await tab.locator("#details-body").textContent()) ?? "{}")
      assert.strictEqual(details.name, "deploy")
      assert.deepStrictEqual(details.arguments, { target: "staging" })

      const finished = recording.events.find((e) => e._tag === "run.finished")
      await tab.locator(`tr.event[data-seq="${finished?.seq}"]`).click()
      assert.include(await tab.locator("#details-title").textContent(), "run.finished")
      assert.strictEqual(await tab.locator("tr.event.selected").count(), 1)

      await tab.locator(".bar[data-kind=approval]").click()
      const shot = await tab.screenshot({ fullPage: true })
      Fs.mkdirSync(Path.join(repo, "test-results"), { recursive: true })
      Fs.writeFileSync(Path.join(repo, "test-results", "viewer.png"), shot)
      if (process.env.UPDATE_SCREENSHOT === "1") Fs.writeFileSync(Path.join(repo, "docs", "viewer.png"), shot)
      assert.isAbove(shot.length, 10_000)
      assert.deepStrictEqual(requests, [])
      assert.deepStrictEqual(errors, [])
    } finally {
      await browser.close()
      Fs.rmSync(work, { recursive: true, force: true })
    }
  })

  it("R13 an event's details show what reorders text as its escape, as the page does", {
    timeout: 60_000
  }, async () => {
    assert.isTrue(present, `Chromium is not installed at ${executablePath} (apt-get install -y chromium)`)
    const result = await Effect.runPromise(
      Run.run({ goal: "pay \u202eoleh\u202c now \u061c", tools: [] }).pipe(
        Effect.provide(ScriptedModel.layer([ScriptedModel.finalAnswer("done")]))
      )
    )
    const work = Fs.mkdtempSync(Path.join(Os.tmpdir(), "viewer-browser-"))
    const page = Path.join(work, "run.html")
    Fs.writeFileSync(page, Viewer.html(result))
    const browser = await chromium.launch({ executablePath, args: ["--no-sandbox"] })
    try {
      const tab = await browser.newPage()
      await tab.goto(pathToFileURL(page).href)
      await tab.locator('tr.event[data-seq="0"]').click()
      const details = (await tab.locator("#details-body").textContent()) ?? ""
      assert.include(details, "pay \\u202eoleh\\u202c now \\u061c")
      assert.notInclude(details, "\u202e")
      assert.notInclude(details, "\u061c")
    } finally {
      await browser.close()
      Fs.rmSync(work, { recursive: true, force: true })
    }
  })
})
