#!/usr/bin/env bash
# Vendor the browser libraries Thalamus uses into static/vendor/.
#
# Packages are installed from the npm registry into a throw-away directory
# (never into the repo) and only the browser builds + licences are copied.
# No CDN is ever referenced by the product: everything is served from
# /static/vendor/. Bump a version here and re-run (`make vendor`).
set -euo pipefail

HTMX_VERSION="2.0.11"
HTMX_EXT_WS_VERSION="2.0.4"
MARKED_VERSION="18.2.1"
DOMPURIFY_VERSION="3.4.18"
HLJS_VERSION="11.12.0"          # @highlightjs/cdn-assets
KATEX_VERSION="0.19.1"
VIS_NETWORK_VERSION="10.1.5"

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DEST="$ROOT/static/vendor"

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

echo "Installing pinned packages into $tmp ..."
# --legacy-peer-deps: we only need prebuilt browser bundles, not peer deps
# (vis-network's standalone build bundles its own).
# --ignore-scripts: never run install scripts of vendored packages.
npm install --no-save --prefix "$tmp" \
  --legacy-peer-deps --ignore-scripts --no-audit --no-fund --loglevel=error \
  "htmx.org@$HTMX_VERSION" \
  "htmx-ext-ws@$HTMX_EXT_WS_VERSION" \
  "marked@$MARKED_VERSION" \
  "dompurify@$DOMPURIFY_VERSION" \
  "@highlightjs/cdn-assets@$HLJS_VERSION" \
  "katex@$KATEX_VERSION" \
  "vis-network@$VIS_NETWORK_VERSION"

NM="$tmp/node_modules"

# copy SRC DST: copy one file, failing loudly if the package layout changed.
copy() {
  if [[ ! -f "$1" ]]; then
    echo "error: expected file not found: $1" >&2
    exit 1
  fi
  mkdir -p "$(dirname "$2")"
  cp "$1" "$2"
}

# license PKGDIR DSTFILE: copy the package's licence file (name varies).
license() {
  local f
  for f in LICENSE LICENSE.md LICENSE.txt LICENCE license license.md LICENSE-MIT; do
    if [[ -f "$1/$f" ]]; then
      copy "$1/$f" "$2"
      return 0
    fi
  done
  echo "error: no licence file found in $1" >&2
  exit 1
}

echo "Refreshing $DEST ..."
rm -rf "$DEST/htmx" "$DEST/marked" "$DEST/dompurify" "$DEST/highlight" \
       "$DEST/katex" "$DEST/vis-network"

# htmx + websocket extension
copy "$NM/htmx.org/dist/htmx.min.js"      "$DEST/htmx/htmx.min.js"
license "$NM/htmx.org"                    "$DEST/htmx/LICENSE"
copy "$NM/htmx-ext-ws/dist/ws.js"         "$DEST/htmx/ws.js"
license "$NM/htmx-ext-ws"                 "$DEST/htmx/LICENSE.htmx-ext-ws"

# marked (UMD build, defines window.marked)
copy "$NM/marked/lib/marked.umd.js"       "$DEST/marked/marked.umd.js"
license "$NM/marked"                      "$DEST/marked/LICENSE"

# DOMPurify
copy "$NM/dompurify/dist/purify.min.js"   "$DEST/dompurify/purify.min.js"
license "$NM/dompurify"                   "$DEST/dompurify/LICENSE"

# highlight.js browser build (common languages, defines window.hljs) + themes
HL="$NM/@highlightjs/cdn-assets"
copy "$HL/highlight.min.js"               "$DEST/highlight/highlight.min.js"
copy "$HL/styles/github.min.css"          "$DEST/highlight/styles/github.min.css"
copy "$HL/styles/github-dark.min.css"     "$DEST/highlight/styles/github-dark.min.css"
license "$HL"                             "$DEST/highlight/LICENSE"

# KaTeX: js, css and woff2 fonts only (the css falls back gracefully
# to the first available format, and every modern browser has woff2)
copy "$NM/katex/dist/katex.min.js"        "$DEST/katex/katex.min.js"
copy "$NM/katex/dist/katex.min.css"       "$DEST/katex/katex.min.css"
mkdir -p "$DEST/katex/fonts"
cp "$NM"/katex/dist/fonts/*.woff2 "$DEST/katex/fonts/"
license "$NM/katex"                       "$DEST/katex/LICENSE"

# vis-network standalone UMD (bundles vis-data etc., defines window.vis)
copy "$NM/vis-network/standalone/umd/vis-network.min.js" \
     "$DEST/vis-network/vis-network.min.js"
# The same rules the standalone build injects as <style> elements, which the CSP blocks.
copy "$NM/vis-network/styles/vis-network.min.css" \
     "$DEST/vis-network/vis-network.min.css"
license "$NM/vis-network"                 "$DEST/vis-network/LICENSE"

# Post-processing, so Django's ManifestStaticFilesStorage (collectstatic)
# never meets a reference to a file we do not ship:
#  * KaTeX css: keep only the woff2 source of each @font-face;
#  * drop "sourceMappingURL" comments (the .map files are not vendored).
sed -i -E 's/,url\(fonts\/[A-Za-z0-9_-]+\.woff\) format\("woff"\)//g; s/,url\(fonts\/[A-Za-z0-9_-]+\.ttf\) format\("truetype"\)//g' \
  "$DEST/katex/katex.min.css"
if grep -oE 'url\([^)]*\)' "$DEST/katex/katex.min.css" | grep -vq '\.woff2)'; then
  echo "error: katex.min.css still references non-woff2 files" >&2
  exit 1
fi
while IFS= read -r -d '' f; do
  sed -i -E '/^\/[\/*][#@] sourceMappingURL=.*$/d; s#/[/*][#@] sourceMappingURL=[^ ]*( \*/)?$##' "$f"
done < <(find "$DEST" -type f \( -name '*.js' -o -name '*.css' \) -print0)

# Record what was vendored (read by humans; README.md is hand-written).
{
  echo "htmx.org $HTMX_VERSION"
  echo "htmx-ext-ws $HTMX_EXT_WS_VERSION"
  echo "marked $MARKED_VERSION"
  echo "dompurify $DOMPURIFY_VERSION"
  echo "@highlightjs/cdn-assets $HLJS_VERSION"
  echo "katex $KATEX_VERSION"
  echo "vis-network $VIS_NETWORK_VERSION"
} > "$DEST/VERSIONS"

echo "Done. Vendored files:"
(cd "$DEST" && find . -type f ! -name README.md | sort)
