/**
 * The server's `GET /runs/:id/view` in headless Chromium (playwright-core, as
 * test/observability/ViewerBrowser.test.ts launches it): the page of a finished run shows
 * its bars and its stop reason. Skipped without Chromium unless `VIEWER_BROWSER=required`.
 */
import * as Fs from "node:fs"
import * as path from "node:path"
import { chromium } from "playwright-core"
import { assert, describe, it } from "vitest"
import { eventually, send, startServer, tempDir } from "./support.ts"

const executablePath = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium"
const present = Fs.existsSync(executablePath)
const required = process.env.VIEWER_BROWSER === "required"
if (!present && !required) console.warn(`ServerBrowser: skipped, no Chromium at ${executablePath}`)

describe.skipIf(!present && !required)("server view in Chromium", () => {
  it("GET /runs/:id/view shows the run's bars and its stop reason", { timeout: 60_000 }, async () => {
    assert.isTrue(present, `Chromium is not installed at ${executablePath}`)
    const server = await startServer(path.join(tempDir(), "runs.db"), { DEMO_WAIT_MILLIS: "200" })
    const browser = await chromium.launch({ executablePath, args: ["--no-sandbox"] })
    try {
      const { body } = await send("POST", `${server.url}/runs`, {
        goal: "Look up and wait",
        tools: ["lookup_invoice", "wait"]
      })
      const status = await eventually(async () => {
        const got = await send("GET", `${server.url}/runs/${body.runId}`)
        return got.body.state === "finished" ? got.body : undefined
      })
      const tab = await browser.newPage({ viewport: { width: 1400, height: 900 } })
      const errors: Array<string> = []
      tab.on("pageerror", (error) => errors.push(error.message))
      await tab.goto(`${server.url}/runs/${body.runId}/view`)
      assert.strictEqual(await tab.locator("#stop-reason").textContent(), status.result.stopReason)
      assert.strictEqual(await tab.locator("#status").textContent(), "completed")
      assert.strictEqual(await tab.locator(".bar[data-kind=model]").count(), status.counters.modelCalls)
      assert.strictEqual(await tab.locator(".bar[data-kind=tool]").count(), 2)
      const box = await tab.locator(".bar[data-kind=tool]").first().boundingBox()
      assert.isAbove(box?.width ?? 0, 0)
      assert.deepStrictEqual(errors, [])
    } finally {
      await browser.close()
      await server.stop()
    }
  })
})
