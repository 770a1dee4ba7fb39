// tacc_hub admin pages: usage charts, utilization / waits / top users, the queue, cluster occupancy,
// quotas and groups (view, edit), the audit log. Everything comes from the service's JSON API
// (relative to this page; each endpoint checks the caller is an admin); changes send the hub's XSRF
// token. Text from the API is always inserted as text, never as HTML. The queue shows an array's
// waiting elements as one row (expandable to them).
"use strict";
const { api, el, draw, showEmpty, dayBars, xAxis, yAxis, hours, duration, utcHour, PALETTE } = TACC;

const fmt = (v) => (v === null || v === undefined ? "none" : String(v));
const when = (t) => (t ? new Date(t * 1000).toLocaleString(undefined, { dateStyle: "short", timeStyle: "short" }) : "unknown");
const utc = (t) => new Date(t * 1000).toISOString().slice(0, 19).replace("T", " ");

function say(id, text, ok) {
  const p = document.getElementById(id);
  p.textContent = text;
  p.className = `${p.className.replace(/\b(done|error|text-success|text-danger)\b/g, "").trim()} ${ok ? "done text-success" : "error text-danger"}`;
}

function numberOrNull(raw, field) {
  const s = raw.trim();
  if (s === "" || s.toLowerCase() === "none") return null;
  const n = Number(s);
  if (!Number.isFinite(n) || n < 0) throw new Error(`${field}: a number >= 0, or empty for no limit`);
  return n;
}

// --- quotas and groups -------------------------------------------------------------------------

async function loadQuotas() {
  const [{ quotas }, { memberships }] = await Promise.all([api("GET", "api/admin/quotas"), api("GET", "api/admin/groups")]);
  const body = document.querySelector("#quota-table tbody");
  if (!quotas.length) body.replaceChildren(el("tr", {}, el("td", { colspan: "6", class: "text-body-secondary" }, "No quotas set: nobody is limited.")));
  else body.replaceChildren(...quotas.map((q) => el("tr", { "data-kind": q.kind, "data-name": q.name },
    el("td", {}, q.kind), el("td", {}, q.name), el("td", { class: "text-end" }, fmt(q.max_gpus)),
    el("td", { class: "text-end" }, fmt(q.guaranteed_gpus)), el("td", { class: "text-end" }, fmt(q.gpu_hours)),
    el("td", { class: "text-nowrap" },
      el("button", { type: "button", class: "btn btn-sm btn-outline-primary", "aria-label": `edit ${q.kind} ${q.name}`, onclick: () => editQuota(q) }, "Edit"), " ",
      el("button", { type: "button", class: "btn btn-sm btn-outline-danger", "aria-label": `delete ${q.kind} ${q.name}`, onclick: () => deleteQuota(q) }, "Delete")))));
  const groups = document.querySelector("#group-table tbody");
  const rows = Object.entries(memberships).sort();
  groups.replaceChildren(...(rows.length ? rows.map(([user, group]) => el("tr", {}, el("td", {}, user), el("td", {}, group)))
    : [el("tr", {}, el("td", { colspan: "2", class: "text-body-secondary" }, "Everyone is in the default group."))]));
}

function editQuota(q) {
  const f = document.getElementById("quota-form");
  f.kind.value = q.kind; f.name.value = q.name;
  f.max_gpus.value = q.max_gpus ?? ""; f.guaranteed_gpus.value = q.guaranteed_gpus ?? ""; f.gpu_hours.value = q.gpu_hours ?? "";
  f.max_gpus.focus();
}

async function deleteQuota(q) {
  if (!confirm(`Delete the quota of ${q.kind} ${q.name}?`)) return;
  try { await api("DELETE", `api/admin/quotas/${q.kind}/${encodeURIComponent(q.name)}`); say("quota-msg", `deleted ${q.kind} ${q.name}`, true); }
  catch (e) { say("quota-msg", e.message, false); }
  await loadQuotas();
}

document.getElementById("quota-form").addEventListener("submit", async (ev) => {
  ev.preventDefault();
  const f = ev.target;
  try {
    const body = { max_gpus: numberOrNull(f.max_gpus.value, "cap"), guaranteed_gpus: numberOrNull(f.guaranteed_gpus.value, "guarantee") ?? 0,
                   gpu_hours: numberOrNull(f.gpu_hours.value, "budget") };
    await api("PUT", `api/admin/quotas/${f.kind.value}/${encodeURIComponent(f.name.value.trim())}`, body);
    say("quota-msg", `saved ${f.kind.value} ${f.name.value.trim()}`, true);
    await loadQuotas();
  } catch (e) { say("quota-msg", e.message, false); }
});

document.getElementById("group-form").addEventListener("submit", async (ev) => {
  ev.preventDefault();
  const f = ev.target;
  const user = encodeURIComponent(f.user.value.trim());
  try {
    if (f.group.value.trim()) await api("PUT", `api/admin/users/${user}/group`, { group: f.group.value.trim() });
    else await api("DELETE", `api/admin/users/${user}/group`);
    say("group-msg", `saved ${f.user.value.trim()}`, true);
    await loadQuotas();
  } catch (e) { say("group-msg", e.message, false); }
});

// --- usage per day ------------------------------------------------------------------------------

async function loadUsage() {
  const days = document.getElementById("usage-days").value;
  document.getElementById("usage-csv").href = `api/admin/usage?days=${days}&format=csv`;
  const u = await api("GET", `api/admin/usage?days=${days}`);
  dayBars(document.getElementById("chart-groups"), u.days, u.groups);
  dayBars(document.getElementById("chart-users"), u.days, u.users, { limit: 8 });
}
document.getElementById("usage-days").addEventListener("change", () => loadUsage().catch((e) => console.error("usage", e)));

// --- utilization, waits, top users ---------------------------------------------------------------

async function loadStats() {
  const days = document.getElementById("stats-days").value;
  const s = await api("GET", `api/admin/stats?days=${days}`);
  const u = s.utilization;
  document.getElementById("util-note").textContent = `(${s.capacity} GPUs; mean per ${u.step >= 7200 ? `${u.step / 3600} hours` : "hour"}, UTC)`;
  const util = document.getElementById("chart-util");
  if (!showEmpty(util, !u.allocated.some((a) => a > 0) && !s.allocated_now)) {
    // the hourly means, then what is allocated right now (the last hour's mean lags behind a busy minute)
    const labels = [...u.times.map(utcHour), "now"];
    const allocated = [...u.allocated, s.allocated_now];
    const pct = allocated.map((a) => (s.capacity ? (a / s.capacity) * 100 : null));
    draw(util, {
      type: "line",
      data: { labels, datasets: [{
        label: "GPUs allocated / capacity", data: pct,
        borderColor: PALETTE[0], backgroundColor: "rgba(31,119,180,0.15)", fill: true, borderWidth: 1.5, stepped: true,
        pointRadius: (c) => (c.dataIndex === labels.length - 1 ? 3 : 0) }] },
      options: {
        interaction: { mode: "index", intersect: false },
        scales: { x: xAxis({ ticks: { maxRotation: 0, autoSkip: true, autoSkipPadding: 24, maxTicksLimit: 8 } }),
                  y: yAxis("% of GPUs", (v) => `${v}%`, { min: 0, max: 100, ticks: { stepSize: 25, callback: (v) => `${v}%` } }) },
        plugins: { legend: { display: false },
          tooltip: { callbacks: { label: (c) => `${c.parsed.y.toFixed(1)}% (${allocated[c.dataIndex]} of ${s.capacity} GPUs)` } } },
      },
    });
  }
  const classes = Object.keys(s.wait.qos);
  const wait = document.getElementById("chart-wait");
  if (!showEmpty(wait, !classes.some((q) => s.wait.qos[q].count > 0))) {
    const pct = [["p50", PALETTE[0]], ["p90", PALETTE[1]], ["p99", PALETTE[3]]];
    draw(wait, {
      type: "bar",
      data: { labels: classes.map((q) => `${q} (${s.wait.qos[q].count} tasks)`), datasets: pct.map(([p, color]) => ({
        label: p, data: classes.map((q) => s.wait.qos[q][p]), backgroundColor: color, maxBarThickness: 36 })) },
      options: {
        scales: { x: xAxis(), y: yAxis("wait (submit to start)", duration) },
        plugins: { legend: { position: "bottom", labels: { boxWidth: 12 } },
          tooltip: { callbacks: { label: (c) => `${c.dataset.label}: ${duration(c.parsed.y)}` } } },
      },
    });
  }
  const body = document.querySelector("#top-table tbody");
  body.replaceChildren(...s.top_users.map((t) => el("tr", { "data-user": t.user },
    el("td", {}, t.user), el("td", {}, t.group), el("td", { class: "text-end" }, hours(t.gpu_hours)),
    el("td", { class: "text-end" }, t.tasks),
    el("td", {}, el("div", { class: "d-flex align-items-center gap-2" },
      el("div", { class: "progress flex-grow-1 share-bar", role: "img", "aria-label": `${Math.round(t.share * 100)}%` },
        el("div", { class: "progress-bar", style: `width:${(t.share * 100).toFixed(1)}%` })),
      el("span", { class: "small text-nowrap" }, `${Math.round(t.share * 100)}%`))))));
  document.getElementById("top-empty").hidden = s.top_users.length > 0;
  document.getElementById("top-table").hidden = s.top_users.length === 0;
}
document.getElementById("stats-days").addEventListener("change", () => loadStats().catch((e) => console.error("stats", e)));

// --- the queue -----------------------------------------------------------------------------------

const gpusOf = (t) => (typeof t.gpus_requested === "number" ? t.gpus_requested : 0);
const nodesOf = (t) => (typeof t.nodes_requested === "number" ? t.nodes_requested : 1);

// Arrays whose elements are shown (the queue is redrawn every 5 s; what is open stays open).
const openArrays = new Set();

function queueRow(t, element) {
  return el("tr", element ? { class: "element", "data-array-id": t.array_id, "data-task-id": t.id } : { "data-task-id": t.id },
    el("td", { class: "text-end" }, t.queue?.position ?? ""), el("td", { class: "font-monospace" }, element ? `[${t.array_index ?? "?"}] ${t.id}` : t.id),
    el("td", {}, t.owner), el("td", {}, t.group ?? ""), el("td", {}, t.name), el("td", { class: "text-end gpus" }, gpusOf(t)),
    el("td", { class: "text-end nodes" }, nodesOf(t)), el("td", {}, t.queue?.reason ?? ""),
    el("td", { class: "text-nowrap" }, when(t.queue?.estimated_start)), el("td", { class: "small" }, t.queue?.detail ?? t.reason ?? ""));
}

function countsOf(a, waitingHere) {
  if (!a) return `${waitingHere} waiting`;
  const parts = [`${a.running} running`, `${a.waiting} waiting`, `${a.done} done`, `${a.failed} failed`];
  if (a.counts?.cancelled) parts.push(`${a.counts.cancelled} cancelled`);
  return parts.join(", ");
}

// One row per array (owner, name[size], counts, GPUs of each element), its waiting elements below it when opened.
function arrayRows(id, a, elements) {
  const first = elements[0]; // the array's place in the queue: its element nearest the head (the list is in queue order)
  elements = [...elements].sort((x, y) => (x.array_index ?? x.id) - (y.array_index ?? y.id)); // shown in index order
  const open = openArrays.has(id);
  const size = a ? a.size : elements.length;
  const toggle = el("button", { type: "button", class: "toggle btn btn-sm btn-link p-0 text-nowrap", "aria-expanded": String(open),
    "aria-label": `${open ? "hide" : "show"} the ${elements.length} waiting elements of array ${id}`,
    onclick: () => { if (openArrays.has(id)) openArrays.delete(id); else openArrays.add(id); loadQueue().catch(() => {}); } },
    open ? "▾" : "▸", ` array ${id}`);
  const head = el("tr", { class: "array", "data-array-id": id, "data-size": size },
    el("td", { class: "text-end" }, first.queue?.position ?? ""), el("td", {}, toggle), el("td", {}, first.owner),
    el("td", {}, first.group ?? ""), el("td", {}, `${a ? a.name : first.name}[${size}]`),
    el("td", { class: "text-end gpus" }, `${gpusOf(first)} each`), el("td", { class: "text-end nodes" }, nodesOf(first)),
    el("td", {}, first.queue?.reason ?? ""), el("td", { class: "text-nowrap" }, when(first.queue?.estimated_start)),
    el("td", { class: "counts", title: a?.reason ?? "" }, countsOf(a, elements.length)));
  return open ? [head, ...elements.map((t) => queueRow(t, true))] : [head];
}

async function loadQueue() {
  const { tasks, total } = await api("GET", "api/admin/queue?limit=500");
  const arrays = new Map();
  if (tasks.some((t) => t.array_id != null)) {
    try {
      for (const a of (await api("GET", "api/arrays?all=1&limit=200")).arrays) arrays.set(a.id, a);
    } catch (e) { console.warn("arrays", e); } // counts then of the waiting elements only
  }
  const byArray = new Map();
  for (const t of tasks) {
    if (t.array_id == null) continue;
    if (!byArray.has(t.array_id)) byArray.set(t.array_id, []);
    byArray.get(t.array_id).push(t);
  }
  const rows = [];
  for (const t of tasks) {
    if (t.array_id == null) rows.push(queueRow(t, false));
    else if (byArray.get(t.array_id)[0] === t) rows.push(...arrayRows(t.array_id, arrays.get(t.array_id), byArray.get(t.array_id)));
  }
  document.querySelector("#queue-table tbody").replaceChildren(...rows);
  document.getElementById("queue-empty").hidden = rows.length > 0;
  document.getElementById("queue-table").hidden = rows.length === 0;
  document.getElementById("queue-count").textContent = total ? `${total} waiting` : "";
}

// --- the cluster ----------------------------------------------------------------------------------

async function loadCluster() {
  const c = await api("GET", "api/cluster");
  document.getElementById("cluster-summary").textContent =
    `${c.executor}: ${c.gpus_used} of ${c.gpus} GPUs used, ${c.gpus_free} free; ${c.pending} waiting, ${c.running} running.`;
  const rows = [];
  for (const [sw, names] of Object.entries(c.switches)) {
    for (const name of names) {
      const n = c.nodes.find((x) => x.name === name);
      const pct = Math.round((n.gpus ? n.gpus_used / n.gpus : 0) * 100);
      const up = n.schedulable;
      rows.push(el("tr", {}, el("td", {}, sw), el("td", {}, n.name),
        el("td", {}, el("span", { class: `badge text-bg-${up ? "success" : "secondary"}` }, up ? "up" : (n.state || "down"))),
        el("td", { class: "text-end" }, `${n.gpus_used} / ${n.gpus}`),
        el("td", {}, el("div", { class: "d-flex align-items-center gap-2" },
          el("div", { class: "progress flex-grow-1 occ-bar", role: "img", "aria-label": `${pct}%` },
            el("div", { class: "progress-bar", style: `width:${pct}%` })),
          el("span", { class: "small text-nowrap" }, `${pct}%`)))));
    }
  }
  document.querySelector("#cluster-table tbody").replaceChildren(...rows);
}

// --- the audit log (GET api/admin/audit) ----------------------------------------------------------

let auditBefore = null;

function compact(v) {
  if (v === null || v === undefined) return "∅";
  const s = typeof v === "string" ? v : JSON.stringify(v);
  return s.length > 80 ? `${s.slice(0, 77)}…` : s;
}

// before -> after as lines "key: old → new" for what changed (objects), else the whole values; an event
// without either (an exec, a cancel) shows its detail.
function change(before, after, detail) {
  const box = el("pre", { class: "audit-change" });
  const isObj = (v) => v && typeof v === "object" && !Array.isArray(v);
  const line = (label, a, b) => box.append(label ? `${label}: ` : "", el("del", {}, compact(a)), " → ", el("ins", {}, compact(b)), "\n");
  if (before == null && after == null) {
    box.append(detail && Object.keys(detail).length ? compact(detail) : "–");
    return box;
  }
  if (isObj(before) && isObj(after)) {
    const keys = [...new Set([...Object.keys(before), ...Object.keys(after)])].sort();
    let shown = 0;
    for (const k of keys) {
      if (JSON.stringify(before[k]) !== JSON.stringify(after[k])) { line(k, before[k], after[k]); shown += 1; }
    }
    if (!shown) box.append("(no change)");
  } else line("", before, after);
  return box;
}

async function loadAudit(more) {
  const f = document.getElementById("audit-form");
  const q = new URLSearchParams({ limit: "50" });
  for (const k of ["actor", "action", "target"]) if (f[k].value.trim()) q.set(k, f[k].value.trim());
  if (f.since.value) q.set("since", String(Date.parse(`${f.since.value}T00:00:00Z`) / 1000));
  if (more && auditBefore != null) q.set("before", String(auditBefore));
  const body = document.querySelector("#audit-table tbody");
  const msg = document.getElementById("audit-msg");
  const older = document.getElementById("audit-older");
  const data = await api("GET", `api/admin/audit?${q}`);
  const rows = (data.events || []).map((ev) => el("tr", { "data-id": ev.id },
    el("td", { class: "text-nowrap" }, utc(ev.at)), el("td", {}, ev.actor), el("td", {}, el("code", {}, ev.action)),
    el("td", {}, ev.target ?? (ev.task_id != null ? `task:${ev.task_id}` : "")), el("td", {}, change(ev.before, ev.after, ev.detail))));
  if (more) body.append(...rows); else body.replaceChildren(...rows);
  auditBefore = data.next ?? null;
  older.hidden = auditBefore == null;
  const n = body.children.length;
  msg.textContent = n ? `${n} event${n === 1 ? "" : "s"} shown, newest first.` : "No audit events match.";
  document.getElementById("audit-table").hidden = n === 0;
}
document.getElementById("audit-form").addEventListener("submit", (ev) => { ev.preventDefault(); loadAudit(false).catch((e) => console.error("audit", e)); });
document.getElementById("audit-older").addEventListener("click", () => loadAudit(true).catch((e) => console.error("audit", e)));

async function refresh() {
  for (const [name, fn] of [["quotas", loadQuotas], ["usage", loadUsage], ["stats", loadStats], ["queue", loadQueue],
    ["cluster", loadCluster], ["audit", () => loadAudit(false)]]) {
    try { await fn(); } catch (e) { console.error(name, e); }
  }
  document.body.dataset.loaded = "1";
}
refresh();
setInterval(() => { loadQueue().catch(() => {}); loadCluster().catch(() => {}); }, 5000);
