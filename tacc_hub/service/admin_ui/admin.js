// tacc_hub admin pages: quotas (view, edit), usage charts, the queue, cluster occupancy.
// The queue shows an array's waiting elements as one row (expandable to them).
// Everything comes from the service's JSON API (relative to this page); changes send the hub's
// XSRF token. Text from the API is always inserted as text, never as HTML.
"use strict";
const XSRF = document.querySelector('meta[name="xsrf-token"]').content;
const COLORS = ["#1976d2", "#e65100", "#2e7d32", "#6a1b9a", "#c62828", "#00838f", "#827717", "#4e342e"];

async function api(method, path, body) {
  const opts = { method, credentials: "same-origin", headers: { "X-XSRFToken": XSRF } };
  if (body !== undefined) { opts.body = JSON.stringify(body); opts.headers["Content-Type"] = "application/json"; }
  const r = await fetch(path, opts);
  const data = await r.json().catch(() => ({}));
  if (!r.ok) { throw new Error(data.message || `${r.status} ${r.statusText}`); }
  return data;
}

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") e.className = v; else if (k.startsWith("on")) e.addEventListener(k.slice(2), v); else e.setAttribute(k, v);
  }
  for (const c of children) e.append(c instanceof Node ? c : document.createTextNode(c == null ? "" : String(c)));
  return e;
}
const fmt = (v) => (v === null || v === undefined ? "none" : String(v));
const when = (t) => (t ? new Date(t * 1000).toLocaleString() : "unknown");

function say(id, text, ok) { const p = document.getElementById(id); p.textContent = text; p.className = ok ? "done" : "error"; }

function numberOrNull(raw, field) {
  const s = raw.trim();
  if (s === "" || s.toLowerCase() === "none") return null;
  const n = Number(s);
  if (!Number.isFinite(n) || n < 0) throw new Error(`${field}: a number >= 0, or empty for no limit`);
  return n;
}

async function loadQuotas() {
  const [{ quotas }, { memberships }] = await Promise.all([api("GET", "api/admin/quotas"), api("GET", "api/admin/groups")]);
  const body = document.querySelector("#quota-table tbody");
  body.replaceChildren(...quotas.map((q) => el("tr", { "data-kind": q.kind, "data-name": q.name },
    el("td", {}, q.kind), el("td", {}, q.name), el("td", { class: "num" }, fmt(q.max_gpus)),
    el("td", { class: "num" }, fmt(q.guaranteed_gpus)), el("td", { class: "num" }, fmt(q.gpu_hours)),
    el("td", {},
      el("button", { type: "button", "aria-label": `edit ${q.kind} ${q.name}`, onclick: () => editQuota(q) }, "Edit"), " ",
      el("button", { type: "button", "aria-label": `delete ${q.kind} ${q.name}`, onclick: () => deleteQuota(q) }, "Delete")))));
  const groups = document.querySelector("#group-table tbody");
  groups.replaceChildren(...Object.entries(memberships).sort().map(([user, group]) =>
    el("tr", {}, el("td", {}, user), el("td", {}, group))));
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

function stackedBars(target, days, series) {
  const names = Object.keys(series);
  const box = document.getElementById(target);
  if (!names.length) { box.replaceChildren(el("p", { class: "hint" }, "No GPU use in this period.")); return; }
  const totals = days.map((_, i) => names.reduce((s, n) => s + series[n][i], 0));
  const max = Math.max(...totals, 1e-9), W = 24, H = 160, pad = 30;
  const ns = "http://www.w3.org/2000/svg";
  const svg = document.createElementNS(ns, "svg");
  svg.setAttribute("viewBox", `0 0 ${pad + days.length * W} ${H + 40}`);
  svg.setAttribute("role", "img");
  svg.setAttribute("aria-label", `GPU-hours per day by ${target.replace("usage-", "")}, peak ${max.toFixed(1)}`);
  days.forEach((day, i) => {
    let y = H;
    names.forEach((n, k) => {
      const h = (series[n][i] / max) * (H - 10);
      if (h <= 0) return;
      y -= h;
      const r = document.createElementNS(ns, "rect");
      Object.entries({ x: pad + i * W + 2, y, width: W - 4, height: h, fill: COLORS[k % COLORS.length] }).forEach(([a, v]) => r.setAttribute(a, v));
      const t = document.createElementNS(ns, "title"); t.textContent = `${n} ${day}: ${series[n][i].toFixed(2)} GPU-h`; r.append(t);
      svg.append(r);
    });
    if (i % 5 === 0 || i === days.length - 1) {
      const lab = document.createElementNS(ns, "text");
      lab.setAttribute("x", pad + i * W); lab.setAttribute("y", H + 15); lab.textContent = day.slice(5); svg.append(lab);
    }
  });
  const top = document.createElementNS(ns, "text"); top.setAttribute("x", 0); top.setAttribute("y", 12); top.textContent = max.toFixed(1); svg.append(top);
  const legend = el("p", { class: "legend" }, ...names.map((n, k) => el("span", {},
    el("i", { style: `background:${COLORS[k % COLORS.length]}` }), `${n}: ${series[n].reduce((a, b) => a + b, 0).toFixed(2)} GPU-h`)));
  box.replaceChildren(svg, legend);
}

async function loadUsage() {
  const u = await api("GET", "api/admin/usage?days=30");
  stackedBars("usage-groups", u.days, u.groups);
  stackedBars("usage-users", u.days, u.users);
}

function gpusOf(t) {
  if (typeof t.gpus_requested === "number") return t.gpus_requested; // the list's answers carry no spec
  const r = t.spec && t.spec.resources;
  return r ? (r.nodes || 1) * (r.gpus_per_node || 0) : "";
}

// Arrays whose elements are shown (the queue is redrawn every 5 s; what is open stays open).
const openArrays = new Set();

function queueRow(t, element) {
  return el("tr", element ? { class: "element", "data-array-id": t.array_id, "data-task-id": t.id } : { "data-task-id": t.id },
    el("td", { class: "num" }, t.queue?.position ?? ""), el("td", { class: "num" }, element ? `[${t.array_index ?? "?"}] ${t.id}` : t.id),
    el("td", {}, t.owner), el("td", {}, t.name), el("td", { class: "num" }, gpusOf(t)), el("td", {}, t.queue?.reason ?? ""),
    el("td", {}, when(t.queue?.estimated_start)), el("td", {}, t.queue?.detail ?? t.reason ?? ""));
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
  const gpus = gpusOf(first);
  const toggle = el("button", { type: "button", class: "toggle", "aria-expanded": String(open),
    "aria-label": `${open ? "hide" : "show"} the ${elements.length} waiting elements of array ${id}`,
    onclick: () => { if (openArrays.has(id)) openArrays.delete(id); else openArrays.add(id); loadQueue().catch(() => {}); } },
    open ? "▾" : "▸", ` array ${id}`);
  const detail = countsOf(a, elements.length); // the array's reason repeats these counts: kept as the cell's tooltip
  const head = el("tr", { class: "array", "data-array-id": id, "data-size": size },
    el("td", { class: "num" }, first.queue?.position ?? ""), el("td", {}, toggle), el("td", {}, first.owner),
    el("td", {}, `${a ? a.name : first.name}[${size}]`), el("td", { class: "num" }, gpus === "" ? "" : `${gpus} each`),
    el("td", {}, first.queue?.reason ?? ""), el("td", {}, when(first.queue?.estimated_start)), el("td", { class: "counts", title: a?.reason ?? "" }, detail));
  return open ? [head, ...elements.map((t) => queueRow(t, true))] : [head];
}

async function loadQueue() {
  const { tasks } = await api("GET", "api/tasks?all=1&state=pending&limit=500");
  tasks.sort((a, b) => (a.queue?.position ?? 1e9) - (b.queue?.position ?? 1e9));
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
}

async function loadCluster() {
  const c = await api("GET", "api/cluster");
  document.getElementById("cluster-summary").textContent =
    `${c.executor}: ${c.gpus_used} of ${c.gpus} GPUs used, ${c.gpus_free} free; ${c.pending} waiting, ${c.running} running.`;
  const rows = [];
  for (const [sw, names] of Object.entries(c.switches)) {
    for (const name of names) {
      const n = c.nodes.find((x) => x.name === name);
      const frac = n.gpus ? n.gpus_used / n.gpus : 0;
      rows.push(el("tr", {}, el("td", {}, sw), el("td", {}, n.name), el("td", {}, n.schedulable ? "up" : (n.state || "down")),
        el("td", { class: "num" }, `${n.gpus_used} / ${n.gpus}`),
        el("td", {}, el("span", { class: "bar", style: `width:${Math.round(frac * 8)}rem`, role: "img", "aria-label": `${Math.round(frac * 100)}%` }),
          ` ${Math.round(frac * 100)}%`)));
    }
  }
  document.querySelector("#cluster-table tbody").replaceChildren(...rows);
}

async function refresh() {
  for (const [name, fn] of [["quotas", loadQuotas], ["usage", loadUsage], ["queue", loadQueue], ["cluster", loadCluster]]) {
    try { await fn(); } catch (e) { console.error(name, e); }
  }
}
refresh();
setInterval(() => { loadQueue().catch(() => {}); loadCluster().catch(() => {}); }, 5000);
