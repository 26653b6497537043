/**
 * The viewer's page: one HTML document with its CSS and script inline, no network and no
 * framework. The chart and the tables are rendered here; the script only shows an event's
 * details when a bar or a line is clicked (the events are embedded as JSON). Private to
 * `observability/`.
 */
import type * as Event from "../../events/Event.ts"
import * as Timeline from "../../events/Timeline.ts"
import type { Bar, Budget, Layout, Mark, Row } from "./Layout.ts"

/** What the page shows: the picture, the events (encoded, for the details), and the header's facts. */
export interface Page {
  readonly title: string
  readonly layout: Layout
  readonly events: ReadonlyArray<Event.Event>
  /** The events as JSON (the `Event` codec's encoding), for the details of each. */
  readonly encoded: ReadonlyArray<unknown>
  readonly facts: ReadonlyArray<readonly [string, string]>
  readonly notices: ReadonlyArray<string>
  /** Why the run stopped, in words, when there is an explanation of it. */
  readonly explanation: string | undefined
}

const bidi = new RegExp(`[${Timeline.bidiClass}]`, "g")

export const escapeHtml = (text: string): string =>
  text
    .replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c] ?? c)
    // What reorders the text around it (a right-to-left override) is shown, as the terminal shows it.
    .replace(bidi, Timeline.visible)

/** Milliseconds, as people read them. */
export const duration = (millis: number): string =>
  Math.abs(millis) < 1000 ? `${Math.round(millis)} ms` : `${(millis / 1000).toFixed(millis < 10_000 ? 2 : 1)} s`

const amount = (value: number, unit: Budget["unit"]): string =>
  unit === "usd" ? `$${value.toFixed(4)}` : unit === "ms" ? duration(value) : String(value)

/** Where a time is on the chart, in percent of its width (clamped to it). */
const scale = (layout: Layout) => {
  const span = Math.max(1, layout.chartEndAt - layout.startedAt)
  return (at: number) => Math.min(100, Math.max(0, ((at - layout.startedAt) / span) * 100))
}

const bar = (b: Bar, x: (at: number) => number, startedAt: number): string => {
  const left = x(b.from)
  const width = Math.max(0.4, x(b.to) - left)
  const title = `${b.label}: +${duration(b.from - startedAt)} for ${duration(b.to - b.from)}${b.open ? " (still going)" : ""}`
  return `<div class="bar ${b.kind}${b.open ? " open" : ""}" data-seq="${b.seq}" data-kind="${b.kind}" style="left:${left.toFixed(3)}%;width:${width.toFixed(3)}%" title="${escapeHtml(title)}"><span>${escapeHtml(b.label)}</span></div>`
}

const mark = (m: Mark, x: (at: number) => number, layout: Layout): string => {
  const beyond = m.at > layout.chartEndAt
  const title = `${m.layer} deadline at +${duration(m.at - layout.startedAt)}${beyond ? " (off the chart)" : ""}`
  return `<div class="mark ${escapeHtml(m.layer)}${beyond ? " beyond" : ""}" data-seq="${m.seq}" data-layer="${escapeHtml(m.layer)}" style="left:${x(m.at).toFixed(3)}%" title="${escapeHtml(title)}"></div>`
}

const rowHtml = (r: Row, x: (at: number) => number, layout: Layout): string =>
  `<div class="row"><div class="label" title="${escapeHtml(r.label)}">${escapeHtml(r.label)}</div><div class="track">${r.bars
    .map((b) => bar(b, x, layout.startedAt))
    .join("")}${r.marks.map((m) => mark(m, x, layout)).join("")}</div></div>`

const chart = (layout: Layout): string => {
  const x = scale(layout)
  const groups = layout.groups
    .map(
      (g) =>
        `<div class="group" data-iteration="${g.iteration}"><div class="group-title">${
          g.iteration === 0 ? "run" : `iteration ${g.iteration}`
        }</div>${g.rows.map((r) => rowHtml(r, x, layout)).join("")}</div>`
    )
    .join("")
  const deadline = layout.runDeadline
  const runLine =
    deadline === undefined
      ? ""
      : deadline.at <= layout.chartEndAt
        ? `<div class="run-deadline" data-seq="${deadline.seq}" style="left:calc(var(--label) + (100% - var(--label) - 12px) * ${(x(deadline.at) / 100).toFixed(5)})" title="run deadline"></div>`
        : ""
  const ticks = [0, 0.25, 0.5, 0.75, 1]
    .map(
      (t) =>
        `<span style="left:${(t * 100).toFixed(0)}%">+${duration(t * (layout.chartEndAt - layout.startedAt))}</span>`
    )
    .join("")
  const deadlineNote =
    deadline === undefined
      ? ""
      : `<p class="note">run deadline at +${duration(deadline.at - layout.startedAt)}${
          deadline.at > layout.chartEndAt ? " (off the chart)" : " (the red line)"
        }</p>`
  return `<section id="chart"><h2>Timeline</h2><div class="legend">${[
    "model",
    "model_failed",
    "tool",
    "tool_failed",
    "tool_blocked",
    "interrupted",
    "backoff",
    "approval"
  ]
    .map((k) => `<span class="key ${k}"></span>${k.replace("_", " ")}`)
    .join(
      " "
    )} <span class="key deadline"></span>deadline</div><div class="gantt"><div class="axis"><div class="label"></div><div class="ticks">${ticks}</div></div>${groups}${runLine}</div>${deadlineNote}</section>`
}

const budgets = (list: ReadonlyArray<Budget>): string =>
  `<section id="budgets"><h2>Budgets</h2><table><thead><tr><th>budget</th><th>used</th><th>limit</th><th></th></tr></thead><tbody>${list
    .map((b) => {
      const share = b.limit === undefined || b.limit <= 0 ? undefined : Math.min(1, b.used / b.limit)
      const over = b.limit !== undefined && b.used >= b.limit
      return `<tr class="budget${over ? " spent" : ""}" data-budget="${escapeHtml(b.name)}"><td>${escapeHtml(b.name)}</td><td class="num">${amount(b.used, b.unit)}</td><td class="num">${
        b.limit === undefined ? "—" : amount(b.limit, b.unit)
      }</td><td class="meter">${
        share === undefined ? "" : `<div class="fill" style="width:${(share * 100).toFixed(1)}%"></div>`
      }</td></tr>`
    })
    .join("")}</tbody></table></section>`

const stop = (page: Page): string => {
  const s = page.layout.stop
  const clickable = s.seq === undefined ? "" : ` data-seq="${s.seq}"`
  return `<section id="stop" class="${s.finished ? "finished" : "running"}"${clickable}><h2>Why it stopped</h2><p><span id="status" class="status">${escapeHtml(
    s.status
  )}</span> <span id="stop-reason" class="reason">${escapeHtml(s.stopReason ?? "not stopped yet")}</span>${
    s.policy === undefined ? "" : ` by <span id="policy">${escapeHtml(s.policy)}</span>`
  }</p>${s.detail === undefined ? "" : `<p id="stop-detail">${escapeHtml(s.detail)}</p>`}${
    // The explanation of the stop (issue 15, `Explain`) goes here when there is one.
    page.explanation === undefined ? "" : `<pre id="explanation">${escapeHtml(page.explanation)}</pre>`
  }</section>`
}

const eventList = (page: Page): string => {
  const t0 = page.layout.startedAt
  return `<section id="events"><h2>Events</h2><table><tbody>${page.events
    .map(
      (e) =>
        `<tr class="event" data-seq="${e.seq}"><td class="num">${e.seq}</td><td class="num">+${duration(e.at - t0)}</td><td class="tag">${escapeHtml(
          e._tag
        )}</td><td>${escapeHtml(Timeline.describe(e))}</td></tr>`
    )
    .join("")}</tbody></table></section>`
}

/** The events for the script, safe inside a `<script>` element. */
const data = (encoded: ReadonlyArray<unknown>): string =>
  JSON.stringify(encoded)
    .replace(/</g, "\\u003c")
    .replace(/\u2028/g, "\\u2028")
    .replace(/\u2029/g, "\\u2029")

const css = `
:root{--label:220px;font-family:system-ui,-apple-system,"Segoe UI",sans-serif;color:#1d2433;background:#f7f8fa}
body{margin:0;padding:16px 24px}h1{font-size:20px;margin:0 0 8px}h2{font-size:15px;margin:18px 0 8px}
.facts{display:flex;flex-wrap:wrap;gap:4px 18px;font-size:13px;margin:0}.facts dt{color:#667}.facts dd{margin:0 0 0 4px;font-weight:600}
.facts div{display:flex}.notice{background:#fff4d6;border:1px solid #e8c66b;padding:6px 10px;border-radius:4px;font-size:13px;margin:6px 0}
#stop{background:#fff;border:1px solid #d8dce3;border-left:6px solid #c0392b;border-radius:4px;padding:4px 14px;cursor:pointer}
#stop.finished .status{font-weight:700}#stop .reason{font-family:ui-monospace,monospace;background:#fdecea;padding:1px 6px;border-radius:3px}
#stop.running{border-left-color:#2d7dd2}#explanation{white-space:pre-wrap;font-size:13px}
.legend{font-size:12px;color:#445;margin-bottom:6px}.key{display:inline-block;width:12px;height:10px;margin:0 3px 0 8px;border-radius:2px;vertical-align:middle}
.gantt{position:relative;background:#fff;border:1px solid #d8dce3;border-radius:4px;padding:4px 0}
.axis,.row{display:flex;align-items:center}.axis{height:18px;font-size:11px;color:#778}
.label{flex:0 0 var(--label);width:var(--label);padding:0 8px;box-sizing:border-box;font-size:12px;white-space:nowrap;overflow:hidden;text-overflow:ellipsis}
.ticks,.track{position:relative;flex:1;margin-right:12px}.ticks{height:18px}.ticks span{position:absolute;transform:translateX(-50%);white-space:nowrap}
.ticks span:first-child{transform:none}.ticks span:last-child{transform:translateX(-100%)}
.track{height:22px;border-top:1px dashed #eef0f3}
.group-title{font-size:11px;font-weight:700;color:#556;padding:6px 8px 2px;border-top:1px solid #e3e6eb}
.bar{position:absolute;top:3px;height:16px;border-radius:3px;cursor:pointer;overflow:hidden;font-size:10px;line-height:16px;color:#fff;box-sizing:border-box;min-width:3px}
.bar span{padding:0 4px;white-space:nowrap}.bar.open{background-image:repeating-linear-gradient(45deg,transparent 0 6px,rgba(255,255,255,.35) 6px 12px)}
.bar.selected,.event.selected{outline:2px solid #111}
.phase{background:#8a94a6}.model,.key.model{background:#2d7dd2}.model_failed,.key.model_failed{background:#c0392b}
.tool,.key.tool{background:#27a35a}.tool_failed,.key.tool_failed{background:#e67e22}.tool_blocked,.key.tool_blocked{background:#7f1d1d}
.interrupted,.key.interrupted{background:#6c3483}.backoff,.key.backoff{background:repeating-linear-gradient(90deg,#f1c40f 0 4px,#f7dc6f 4px 8px);color:#5a4500}
.approval,.key.approval{background:#8e44ad}.key.deadline{background:#c0392b;width:3px}
.mark{position:absolute;top:0;height:22px;width:0;border-left:2px dashed #c0392b}.mark.step{border-left-color:#d35400}
.mark.approval{border-left-color:#8e44ad}.mark.beyond{display:none}
.run-deadline{position:absolute;top:0;bottom:0;width:0;border-left:2px solid #c0392b}
.note{font-size:12px;color:#667;margin:4px 0}
table{border-collapse:collapse;background:#fff;font-size:12px}td,th{padding:3px 8px;border-bottom:1px solid #eef0f3;text-align:left}
.num{text-align:right;font-variant-numeric:tabular-nums}.meter{width:160px}.fill{height:8px;background:#2d7dd2;border-radius:4px}
.spent .fill{background:#c0392b}.spent td{font-weight:700}
#events table{width:100%}.event{cursor:pointer}.event:hover{background:#f0f4fa}.tag{font-family:ui-monospace,monospace;white-space:nowrap}
.layout{display:grid;grid-template-columns:minmax(0,1fr) minmax(260px,32%);gap:18px;align-items:start}
#details{position:sticky;top:8px;background:#fff;border:1px solid #d8dce3;border-radius:4px;padding:8px 12px;max-height:90vh;overflow:auto}
#details pre{font-size:12px;white-space:pre-wrap;word-break:break-word;margin:0}
`

const script = `
(function(){
  var events = {};
  JSON.parse(document.getElementById("run-data").textContent).forEach(function(e){ events[e.seq] = e; });
  var title = document.getElementById("details-title");
  var body = document.getElementById("details-body");
  var selected = [];
  function show(i){
    var e = events[i];
    if (!e) return;
    selected.forEach(function(el){ el.classList.remove("selected"); });
    selected = Array.prototype.slice.call(document.querySelectorAll('[data-seq="' + i + '"]'))
      .filter(function(el){ return el.classList.contains("bar") || el.classList.contains("event"); });
    selected.forEach(function(el){ el.classList.add("selected"); });
    title.textContent = "#" + e.seq + " " + e._tag;
    // What reorders the text around it is shown as its escape, as in the page's own text.
    body.textContent = JSON.stringify(e, null, 2).replace(/[${Timeline.bidiClass}]/g, function(c){
      return "\\\\u" + ("000" + c.charCodeAt(0).toString(16)).slice(-4);
    });
  }
  document.addEventListener("click", function(ev){
    var el = ev.target.closest("[data-seq]");
    if (el) show(Number(el.getAttribute("data-seq")));
  });
})();
`

/** The whole document. */
export const render = (page: Page): string =>
  `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'">
<title>${escapeHtml(page.title)}</title><style>${css}</style></head>
<body><h1>${escapeHtml(page.title)}</h1><dl class="facts">${page.facts
    .map(([k, v]) => `<div><dt>${escapeHtml(k)}</dt><dd>${escapeHtml(v)}</dd></div>`)
    .join("")}</dl>${page.notices.map((n) => `<p class="notice">${escapeHtml(n)}</p>`).join("")}
<div class="layout"><main>${stop(page)}${chart(page.layout)}${budgets(page.layout.budgets)}${eventList(page)}</main>
<aside id="details"><h2 id="details-title">Details</h2><pre id="details-body">Click a bar, a deadline or an event to see its details.</pre></aside></div>
<script type="application/json" id="run-data">${data(page.encoded)}</script>
<script>${script}</script>
</body></html>
`
