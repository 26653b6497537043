import { defineConfig } from "vitest/config"

const jsonReport = process.env.VITEST_JSON_REPORT

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    reporters: jsonReport ? ["default", "json"] : ["default"],
    ...(jsonReport ? { outputFile: { json: jsonReport } } : {})
  }
})
