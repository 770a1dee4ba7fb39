"""Layout checks of the Lab side panel in a real browser (Playwright pages): what a person would call
wrapped or cut off, measured from the elements' boxes, and a way to give the panel a width."""

from __future__ import annotations

from typing import Any

PANEL = ".tacc-panel"

_BOXES = """(els) => els.filter(e => e.getClientRects().length).map(e => {
  const r = e.getBoundingClientRect();
  return {top: r.top, bottom: r.bottom, left: r.left, right: r.right, text: e.textContent.trim()};
})"""

_OUTSIDE = """(sel) => {
  const panel = document.querySelector(sel);
  const p = panel.getBoundingClientRect();
  const out = [];
  for (const e of panel.querySelectorAll('*')) {
    const r = e.getBoundingClientRect();
    if (r.width > 0 && (r.right > p.right + 0.5 || r.left < p.left - 0.5)) {
      out.push(`${e.tagName}.${e.className}: ${Math.round(r.left)}..${Math.round(r.right)} `
               + `(panel ${Math.round(p.left)}..${Math.round(p.right)}) ${e.textContent.trim().slice(0, 40)}`);
    }
  }
  if (panel.scrollWidth > panel.clientWidth + 1) {
    out.push(`panel scrolls sideways: ${panel.scrollWidth} > ${panel.clientWidth}`);
  }
  return out;
}"""


def boxes(page: Any, selector: str) -> list[dict[str, Any]]:
    """The bounding boxes (and texts) of the visible elements matching ``selector``."""
    return list(page.eval_on_selector_all(selector, _BOXES))


def wrapped(page: Any, selector: str) -> list[str]:
    """Buttons of one row (``selector``) that sit lower than the first: a row that wrapped. [] when on one line."""
    row = boxes(page, selector)
    assert row, f"nothing visible matches {selector}"
    return [f"{b['text']!r} at y={b['top']:.0f}, the first at y={row[0]['top']:.0f}" for b in row
            if b["top"] >= row[0]["bottom"] - 2]


def outside_panel(page: Any) -> list[str]:
    """Elements of the panel that reach past its left or right edge (cut off, or a sideways scroll)."""
    return list(page.evaluate(_OUTSIDE, PANEL))


def panel_width(page: Any) -> float:
    return float(page.eval_on_selector(PANEL, "e => e.getBoundingClientRect().width"))


def set_panel_width(page: Any, width: float) -> float:
    """Drag the handle between Lab's main area and the right side bar until the panel is about ``width`` px
    wide (Lab keeps it at or above the panel's min-width); returns the width it got."""
    right = page.locator("#jp-right-stack").bounding_box()
    assert right, "the right side bar is not shown"
    handles = page.eval_on_selector_all(
        "#jp-main-split-panel > .lm-SplitPanel-handle",
        "hs => hs.filter(h => !h.classList.contains('lm-mod-hidden')).map(h => {"
        " const r = h.getBoundingClientRect(); return [r.left + r.width / 2, r.top + r.height / 2]; })")
    x, y = min(handles, key=lambda h: abs(h[0] - right["x"]))
    page.mouse.move(x, y)
    page.mouse.down()
    page.mouse.move(x - (width - panel_width(page)), y, steps=8)
    page.mouse.up()
    page.wait_for_timeout(300)  # Lab lays the panels out on the next frames
    return panel_width(page)
