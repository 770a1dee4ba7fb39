#!/usr/bin/env bash
# Fetch the charting library of the admin and "My usage" pages (Chart.js, MIT) into
# tacc_hub/service/admin_ui/vendor/: the pinned release's tarball from the npm registry, checked
# against its sha256 before anything is unpacked. The pages load it from the service itself (no CDN);
# the files are committed, so a build needs no network: run this only to change the version.
set -euo pipefail

VERSION=4.5.0
SHA256=e383a54911233cd8d5f9365a7407cb4b936507316d7e2977ebb126f266d6b47d  # chart.js-4.5.0.tgz
JS_SHA256=b7929ad4d5323b8244f85d79bba0b3d1495e66f79a2f0023be7f4de5ba4fbac8  # its dist/chart.umd.js
URL="https://registry.npmjs.org/chart.js/-/chart.js-${VERSION}.tgz"

root="$(cd "$(dirname "$0")/.." && pwd)"
dest="$root/tacc_hub/service/admin_ui/vendor"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

curl -fsSL --retry 3 -o "$tmp/chart.tgz" "$URL"
echo "$SHA256  $tmp/chart.tgz" | sha256sum -c --quiet -
tar -xzf "$tmp/chart.tgz" -C "$tmp" package/dist/chart.umd.js package/LICENSE.md
echo "$JS_SHA256  $tmp/package/dist/chart.umd.js" | sha256sum -c --quiet -
mkdir -p "$dest"
install -m 0644 "$tmp/package/dist/chart.umd.js" "$dest/chart.umd.js"
install -m 0644 "$tmp/package/LICENSE.md" "$dest/LICENSE.md"
echo "Chart.js $VERSION -> $dest"
