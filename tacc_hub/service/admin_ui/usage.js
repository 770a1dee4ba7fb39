// tacc_hub "My usage": GPU-hours this period against the budget, per day, and the efficiency of recent
// tasks (mean GPU utilization of their samples). Data: GET api/usage (the caller's own, nothing else).
// Text from the API is always inserted as text, never as HTML.
"use strict";
const { api, el, dayBars, hours } = TACC;

const day = (t) => new Date(t * 1000).toISOString().slice(0, 10);
const STATUS = { pending: "secondary", starting: "info", running: "primary", cancelling: "warning", succeeded: "success",
  failed: "danger", cancelled: "dark", lost: "danger" };

function budget(u) {
  const text = document.getElementById("budget-text");
  const bar = document.getElementById("budget-bar");
  document.getElementById("period-text").textContent =
    `Period ${day(u.period_start)} to ${day(u.period_end - 1)} (UTC); group ${u.group}.`;
  if (u.budget_gpu_hours == null) {
    text.textContent = `${hours(u.used_gpu_hours)} GPU-hours used this ${u.period}; your account has no GPU-hour budget.`;
    bar.hidden = true;
    return;
  }
  const pct = u.budget_gpu_hours > 0 ? Math.min(100, (u.used_gpu_hours / u.budget_gpu_hours) * 100) : 100;
  text.textContent = `${hours(u.used_gpu_hours)} of ${hours(u.budget_gpu_hours)} GPU-hours used this ${u.period} ` +
    `(${pct > 0 && pct < 0.1 ? "under 0.1" : pct.toFixed(pct < 10 ? 1 : 0)}%).`;
  bar.hidden = false;
  bar.setAttribute("aria-valuenow", pct.toFixed(1));
  const fill = bar.firstElementChild;
  fill.style.width = `${pct}%`;
  fill.className = `progress-bar ${pct >= 90 ? "bg-danger" : pct >= 70 ? "bg-warning" : ""}`;
}

function efficiency(t) {
  if (t.util_mean == null) return el("span", { class: "text-body-secondary small" }, "no samples");
  const pct = Math.round(t.util_mean);
  return el("div", { class: "d-flex align-items-center gap-2" },
    el("div", { class: "progress flex-grow-1 eff-bar", role: "img", "aria-label": `${pct}%` },
      el("div", { class: `progress-bar ${pct < 30 ? "bg-warning" : "bg-success"}`, style: `width:${pct}%` })),
    el("span", { class: "small text-nowrap" }, `${pct}% (${t.samples} samples)`));
}

async function load() {
  const u = await api("GET", "api/usage?days=30");
  budget(u);
  dayBars(document.getElementById("chart-mine"), u.days, { [u.user]: u.gpu_hours });
  const rows = u.recent.map((t) => el("tr", { "data-task-id": t.id },
    el("td", { class: "ps-3 font-monospace" }, t.id), el("td", {}, t.name),
    el("td", {}, el("span", { class: `badge text-bg-${STATUS[t.status] || "light"}` }, t.status)),
    el("td", { class: "text-end" }, t.gpus), el("td", { class: "text-end" }, t.gpus && t.started_at ? hours(t.gpu_hours) : "–"),
    el("td", { class: "eff" }, efficiency(t))));
  document.querySelector("#recent-table tbody").replaceChildren(...rows);
  document.getElementById("recent-empty").hidden = rows.length > 0;
  document.getElementById("recent-table").hidden = rows.length === 0;
  document.getElementById("recent-note").hidden = !u.recent.some((t) => t.util_mean == null);
  document.body.dataset.loaded = "1";
}
load().catch((e) => { document.getElementById("budget-text").textContent = `Could not load your usage: ${e.message}`; });
