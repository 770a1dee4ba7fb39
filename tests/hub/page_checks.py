"""Checks run inside a page of the service (Playwright): charts' axes and ticks, labels inside their boxes, styles.

Each helper evaluates JavaScript in the page and returns plain data, so that a failing assertion
shows what the browser measured.
"""

from __future__ import annotations

import itertools
from typing import Any

# Every scale of a Chart.js chart: its ticks, and each tick label's box (measured with the label's own font,
# placed by its alignment) against the canvas.
CHART_JS = """
(id) => {
  const canvas = document.getElementById(id);
  const chart = canvas && Chart.getChart(canvas);
  if (!chart) return null;
  const ctx = chart.ctx, out = {width: chart.width, height: chart.height, scales: {}};
  for (const [key, scale] of Object.entries(chart.scales)) {
    const boxes = [];
    for (const item of scale.getLabelItems()) {
      const o = item.options, lines = [].concat(item.label);
      ctx.save(); ctx.font = item.font.string;
      const w = Math.max(...lines.map((l) => ctx.measureText(String(l)).width));
      ctx.restore();
      const h = item.font.lineHeight * lines.length;
      const [x, y] = o.translation;
      const right = o.textAlign === "right" || o.textAlign === "end";
      const left = o.textAlign === "center" ? x - w / 2 : right ? x - w : x;
      const top = o.textBaseline === "middle" ? y - h / 2 : o.textBaseline === "bottom" ? y - h : y;
      boxes.push({label: lines.join(" "), left, right: left + w, top, bottom: top + h, rotation: o.rotation});
    }
    out.scales[key] = {ticks: scale.ticks.length, labels: scale.ticks.map((t) => t.label), boxes,
                       fontSize: scale.options.ticks.font?.size ?? Chart.defaults.font.size};
  }
  return out;
}
"""

# Text that does not fit its box: every element of `selector` whose content is wider than it (or hidden by it).
OVERFLOW_JS = """
(selector) => {
  const bad = [];
  for (const e of document.querySelectorAll(selector)) {
    if (!e.offsetParent && getComputedStyle(e).position !== "fixed") continue;  // not shown
    if (e.scrollWidth > e.clientWidth + 1) bad.push(`${e.tagName}.${e.className}: ${e.textContent.trim().slice(0, 60)}`
      + ` (${e.scrollWidth} > ${e.clientWidth})`);
  }
  if (document.documentElement.scrollWidth > window.innerWidth) bad.push(`page ${document.documentElement.scrollWidth}`
    + ` wider than the viewport ${window.innerWidth}`);
  return bad;
}
"""

TEXT_BOXES = "nav, nav *, h1, h2, h3, .card-header, th, td, .navbar-text, .btn, .badge, p"


def chart_axes(page: Any, canvas_id: str) -> dict[str, Any]:
    info = page.evaluate(CHART_JS, canvas_id)
    assert info is not None, f"no chart on #{canvas_id}"
    return info


def assert_readable_chart(page: Any, canvas_id: str, min_ticks: int = 3) -> dict[str, Any]:
    """Both axes have at least ``min_ticks`` ticks, fonts of 10 to 14 px, and every label inside the canvas."""
    info = chart_axes(page, canvas_id)
    for axis in ("x", "y"):
        scale = info["scales"][axis]
        assert scale["ticks"] >= min_ticks, (canvas_id, axis, scale["labels"])
        assert 10 <= scale["fontSize"] <= 14, (canvas_id, axis, scale["fontSize"])
        for box in scale["boxes"]:
            assert box["left"] >= -0.5 and box["right"] <= info["width"] + 0.5, (canvas_id, axis, box, info["width"])
            assert box["top"] >= -0.5 and box["bottom"] <= info["height"] + 0.5, (canvas_id, axis, box, info["height"])
        lefts = sorted((b["left"], b["right"]) for b in scale["boxes"])
        if axis == "x":  # horizontal labels side by side: none overlaps the next
            for (_, r1), (l2, _) in itertools.pairwise(lefts):
                assert l2 >= r1 - 0.5, (canvas_id, scale["boxes"])
    return info


def overflowing(page: Any, selector: str = TEXT_BOXES) -> list[str]:
    return page.evaluate(OVERFLOW_JS, selector)


def hub_css_applied(page: Any) -> dict[str, Any]:
    """Whether the hub's stylesheet is loaded and Bootstrap's rules apply (navbar flex, Bootstrap's body font)."""
    return page.evaluate("""() => ({
      sheet: [...document.styleSheets].some((s) => (s.href || "").endsWith("/static/css/style.min.css")
                                                 && s.cssRules.length > 100),
      navbar: getComputedStyle(document.querySelector(".navbar")).display,
      bodyFont: getComputedStyle(document.body).fontFamily,
      bsVar: getComputedStyle(document.documentElement).getPropertyValue("--bs-primary").trim(),
    })""")
