#!/usr/bin/env bash
# vendor-deps.sh: gathers the header-only dependencies (Catch2, stb, nlohmann-json, CLI11) and
# zlib's headers and library into .deps/ (ignored by git), so the tree builds on a machine that
# has a compiler, CMake and CUDA but no Debian packages and no network, e.g. a GPU machine that
# receives a copy of this tree (scripts/gpu-check.sh). Run it on a machine with apt: it uses
# `apt-get download` and `dpkg -x` (no root needed, nothing is installed). CMakeLists.txt
# searches .deps/usr after the system's own directories, so a system copy still wins.
# Usage: scripts/vendor-deps.sh [DIR] (default .deps)
set -euo pipefail
cd "$(dirname "$0")/.."
case "${1:-}" in -h|--help) sed -n '2,8p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;; esac
DEST="${1:-.deps}"
PKGS=(catch2 libstb-dev nlohmann-json3-dev libcli11-dev zlib1g-dev zlib1g)
command -v apt-get >/dev/null && command -v dpkg >/dev/null ||
  { echo "vendor-deps: needs apt-get and dpkg (a Debian or Ubuntu machine)" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp" "$DEST.partial"' EXIT
if ! (cd "$tmp" && apt-get download "${PKGS[@]}" >/dev/null 2>"$tmp/err"); then
  echo "vendor-deps: apt-get download failed; the package lists may be missing (run 'apt-get update' as root):" >&2
  cat "$tmp/err" >&2
  exit 1
fi
rm -rf "$DEST.partial"
mkdir -p "$DEST.partial"
for deb in "$tmp"/*.deb; do dpkg -x "$deb" "$DEST.partial"; done
rm -rf "$DEST.partial/usr/share/doc" "$DEST.partial/usr/share/man"  # only the headers, CMake files and libraries
rm -rf "$DEST"
mv "$DEST.partial" "$DEST"  # whole or not at all
ls "$tmp"/*.deb | xargs -n1 basename > "$DEST/PACKAGES"
echo "vendor-deps: $(wc -l < "$DEST/PACKAGES") packages in $DEST ($(du -sh "$DEST" | cut -f1)): $(tr '\n' ' ' < "$DEST/PACKAGES")"
