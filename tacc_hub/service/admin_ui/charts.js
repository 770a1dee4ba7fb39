// tacc_hub pages: shared helpers for the Chart.js charts (vendor/chart.umd.js) and the DOM.
// Readable defaults (the page's font, 12 px ticks, horizontal date labels skipped to fit, at least
// three y ticks); an empty series is shown as a sentence, not as an empty frame.
// Text from the API is always inserted as text (textContent / text nodes), never as HTML.
"use strict";

const TACC = (() => {
  const css = getComputedStyle(document.body);
  const PALETTE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#7f7f7f"];
  Chart.defaults.font.family = css.fontFamily;
  Chart.defaults.font.size = 12;
  Chart.defaults.color = css.getPropertyValue("--bs-secondary-color").trim() || "#555";
  Chart.defaults.animation = false; // redrawn on refresh; no motion needed to read a number
  Chart.defaults.maintainAspectRatio = false;

  const xsrf = document.querySelector('meta[name="xsrf-token"]')?.content || "";

  async function api(method, path, body) {
    const opts = { method, credentials: "same-origin", headers: { "X-XSRFToken": xsrf } };
    if (body !== undefined) { opts.body = JSON.stringify(body); opts.headers["Content-Type"] = "application/json"; }
    const r = await fetch(path, opts);
    const data = await r.json().catch(() => ({}));
    if (!r.ok) { const e = new Error(data.message || `${r.status} ${r.statusText}`); e.status = r.status; throw e; }
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

  const num = new Intl.NumberFormat(undefined, { maximumSignificantDigits: 3 });
  const hours = (v) => (v >= 100 ? Math.round(v).toLocaleString() : num.format(v));
  const MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];
  // "2026-12-03" -> "Dec 3" (UTC days, as the API counts them)
  const shortDay = (d) => `${MONTHS[Number(d.slice(5, 7)) - 1]} ${Number(d.slice(8, 10))}`;
  const utcHour = (t) => { const d = new Date(t * 1000); return `${MONTHS[d.getUTCMonth()]} ${d.getUTCDate()} ${String(d.getUTCHours()).padStart(2, "0")}:00`; };
  function duration(s) {
    if (s == null) return "n/a";
    if (s < 90) return `${num.format(s)} s`;
    if (s < 5400) return `${num.format(s / 60)} min`;
    return `${num.format(s / 3600)} h`;
  }

  // Show the chart, or the sentence next to it when there is nothing to draw.
  function showEmpty(canvas, empty) {
    const box = canvas.parentElement;
    box.classList.toggle("is-empty", empty);
    const note = box.parentElement.querySelector(".empty");
    if (note) note.hidden = !empty;
    if (empty) Chart.getChart(canvas)?.destroy();
    return empty;
  }

  function draw(canvas, config) {
    Chart.getChart(canvas)?.destroy();
    return new Chart(canvas, config);
  }

  const xAxis = (extra) => ({ grid: { display: false }, ticks: { maxRotation: 0, autoSkip: true, autoSkipPadding: 12 }, ...extra });
  const yAxis = (title, fmt, extra) => ({
    beginAtZero: true, grace: "5%", title: { display: true, text: title },
    ticks: { maxTicksLimit: 6, callback: (v) => fmt(v) }, ...extra,
  });

  // Stacked bars of GPU-hours per day, one dataset per series (name -> values).
  // Leading days without any use are left out (at least `minDays` stay), so that a new cluster's few days
  // of use are not one bar at the right edge of an empty month.
  function dayBars(canvas, days, series, { limit = 0, minDays = 7 } = {}) {
    const used = days.map((_, i) => Object.values(series).some((v) => v[i] > 0));
    const from = Math.max(0, Math.min(used.indexOf(true) < 0 ? days.length : used.indexOf(true), days.length - minDays));
    if (from > 0) {
      days = days.slice(from);
      series = Object.fromEntries(Object.entries(series).map(([k, v]) => [k, v.slice(from)]));
    }
    let names = Object.keys(series).filter((n) => series[n].some((v) => v > 0));
    const total = (n) => series[n].reduce((a, b) => a + b, 0);
    names.sort((a, b) => total(b) - total(a) || a.localeCompare(b));
    let data = names.map((n) => ({ name: n, values: series[n] }));
    if (limit && names.length > limit) {
      const rest = names.slice(limit);
      data = data.slice(0, limit);
      data.push({ name: `others (${rest.length})`, values: days.map((_, i) => rest.reduce((s, n) => s + series[n][i], 0)) });
    }
    if (showEmpty(canvas, data.length === 0)) return null;
    return draw(canvas, {
      type: "bar",
      data: { labels: days.map(shortDay), datasets: data.map((d, k) => ({
        label: d.name, data: d.values, backgroundColor: PALETTE[k % PALETTE.length], borderWidth: 0, maxBarThickness: 28 })) },
      options: {
        scales: { x: xAxis({ stacked: true }), y: yAxis("GPU-hours", hours, { stacked: true }) },
        plugins: { legend: { display: data.length > 1, position: "bottom", labels: { boxWidth: 12 } },
          tooltip: { callbacks: { title: (items) => days[items[0].dataIndex],
            label: (c) => `${c.dataset.label}: ${hours(c.parsed.y)} GPU-h` } } },
      },
    });
  }

  return { api, el, draw, showEmpty, dayBars, xAxis, yAxis, hours, duration, shortDay, utcHour, PALETTE, num };
})();
