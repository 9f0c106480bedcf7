#!/usr/bin/env bash
# Builds the web UI's vendored files from their npm sources: `npm ci` of
# web/package-lock.json (exact versions, checked against their integrity
# hashes) in a temporary directory, then a copy of the few files the page
# loads into static/vendor/ (or into the directory given as $1). The copies
# are byte for byte what the packages ship; TestVendoredFilesMatchNPM runs
# this into a temporary directory and fails when static/vendor/ differs.
#
#   internal/ui/build.sh            # after changing web/package.json: npm install there first, then this
#   internal/ui/build.sh /tmp/out   # build elsewhere (the test does)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out="${1:-$here/static/vendor}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cp "$here/web/package.json" "$here/web/package-lock.json" "$work/"
# --ignore-scripts: no package runs code here; --no-audit/--no-fund: no
# requests beyond the packages themselves.
(cd "$work" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error >&2)
m="$work/node_modules/@xterm"
mkdir -p "$out"
# What the page loads (an ES module each, and the terminal's stylesheet),
# and the packages' licenses, which their MIT terms ask to keep with them.
cp "$m/xterm/lib/xterm.mjs" "$out/xterm.mjs"
cp "$m/xterm/css/xterm.css" "$out/xterm.css"
cp "$m/xterm/LICENSE" "$out/xterm.LICENSE"
cp "$m/addon-fit/lib/addon-fit.mjs" "$out/addon-fit.mjs"
cp "$m/addon-fit/LICENSE" "$out/addon-fit.LICENSE"
