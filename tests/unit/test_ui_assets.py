"""The pages' assets: the vendored Chart.js is the pinned release, with its licence; every file the templates
load is one the static route serves; the pages never load anything from another site."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

from tacc_hub.service.hubpages import STATIC_FILES, TEMPLATES, UI

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "vendor-ui.sh"


def test_the_vendored_chart_js_is_the_pinned_release_with_its_license():
    pinned = re.search(r"^JS_SHA256=([0-9a-f]{64})", SCRIPT.read_text(), re.M)
    assert pinned, "scripts/vendor-ui.sh pins the sha256 of chart.umd.js"
    assert hashlib.sha256((UI / "vendor" / "chart.umd.js").read_bytes()).hexdigest() == pinned.group(1)
    assert "MIT" in (UI / "vendor" / "LICENSE.md").read_text()


def test_every_asset_the_templates_load_is_served_and_local():
    served = re.compile(STATIC_FILES)
    for name in ("base.html", "admin.html", "usage.html", "home.html", "error.html"):
        text = (Path(TEMPLATES.loader.searchpath[0]) / name).read_text()  # type: ignore[union-attr]
        assert "http://" not in text and "https://" not in text and "//cdn" not in text, name
        for asset in re.findall(r'\{\{ static \}\}([^"]+)"', text):
            assert served.fullmatch(asset), (name, asset)
            assert (UI / asset).is_file(), (name, asset)
