// CommonJS users: `require` of an ES module (Node >= 22.12) reaches every entry point.
const { Run } = require("effect-agent-runtime")
const { OpenAiCompatible } = require("effect-agent-runtime/providers")
const { NodeTransport } = require("effect-agent-runtime/providers/node")
const { ScriptedModel } = require("effect-agent-runtime/testing")
// The journal without PostgreSQL: this project has no @effect/sql-pg installed.
const { Journal } = require("effect-agent-runtime/journal")
const { DurableRun } = require("effect-agent-runtime/durable")
const { Recorder, Viewer } = require("effect-agent-runtime/observability")
const { version } = require("effect-agent-runtime/package.json")

const loaded = [
  Run.run,
  OpenAiCompatible.layer,
  NodeTransport.layer,
  ScriptedModel.layer,
  Journal.layerSqlite,
  DurableRun.layerEmbedded,
  Recorder.layer,
  Viewer.html
].every((f) => typeof f === "function")
console.log(loaded ? `required ${version}` : "an entry point is missing its functions")
