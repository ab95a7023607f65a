#!/usr/bin/env bash
# get-corpus.sh: builds the real training corpus from three Debian packages, without installing
# them: data/corpus/train.txt (five Jane Austen novels + the King James Bible) and
# data/corpus/val.txt (Persuasion). Not a tokenizer or token-file step: `landmark prepare` does that.
# Needs: apt-get, dpkg-deb, and the landmark program (for the R data; see train/corpus.h).
#
# Usage: scripts/get-corpus.sh            (env: LANDMARK=path/to/landmark, OUT_DIR=data/corpus)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT="${OUT_DIR:-$ROOT/data/corpus}"
WORK="$OUT/work"
LANDMARK="${LANDMARK:-$ROOT/build/apps/landmark}"
PACKAGES=(r-cran-janeaustenr bible-kjv bible-kjv-text)
TRAIN_NOVELS=(prideprejudice sensesensibility mansfieldpark emma northangerabbey)
VAL_NOVEL=persuasion

die() { echo "get-corpus: $*" >&2; exit 1; }

case "$LANDMARK" in  # absolute, since we cd below
  /*) ;;
  */*) LANDMARK="$PWD/$LANDMARK" ;;
  *) LANDMARK="$(command -v "$LANDMARK" || echo "$LANDMARK")" ;;
esac
[ -x "$LANDMARK" ] || die "no landmark program at $LANDMARK (build it first: make, or set LANDMARK=...)"
command -v apt-get >/dev/null || die "apt-get not found: this script needs a Debian-like system"
command -v dpkg-deb >/dev/null || die "dpkg-deb not found"

# ---- 1. download the .debs (apt-get download needs no root once the package lists exist) ----
mkdir -p "$WORK/debs"
cd "$WORK/debs"
missing=()
for p in "${PACKAGES[@]}"; do
  compgen -G "${p}_*.deb" >/dev/null || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "downloading ${missing[*]}"
  if ! apt-get download "${missing[@]}"; then
    echo "apt-get download failed; refreshing the package lists (apt-get update) and retrying"
    if [ "$(id -u)" = 0 ]; then
      apt-get update
    elif command -v sudo >/dev/null; then
      sudo apt-get update
    else
      die "cannot run apt-get update without root or sudo; ask an admin to run it once"
    fi
    apt-get download "${missing[@]}" || die "apt-get download ${missing[*]} failed"
  fi
fi

# ---- 2. unpack them locally (no install: nothing of R is needed) ----
rm -rf "$WORK/root"
mkdir -p "$WORK/root"
for p in "${PACKAGES[@]}"; do
  deb=$(compgen -G "${p}_*.deb" | sort | tail -n 1)
  dpkg-deb -x "$deb" "$WORK/root"
done

# ---- 3. Jane Austen: R's lazy-load database -> one text file per novel ----
"$LANDMARK" extract-austen "$WORK/root/usr/lib/R/site-library/janeaustenr/data" "$WORK/austen" >/dev/null

# ---- 4. the King James Bible: the package's own program prints every verse ----
# It looks for bible.data in the directories given by -p; -l 79 fixes the line width (otherwise
# it follows $COLUMNS) so the dump is the same everywhere. Gen1:1-Rev22:21 is the whole text.
KJV="$WORK/kjv.txt"
if ! (cd "$WORK/root/usr/lib" && "$WORK/root/usr/bin/bible" -p . -l 79 Gen1:1-Rev22:21 </dev/null >"$KJV.tmp"); then
  die "the bible program failed (it needs libreadline8: apt-get install libreadline8)"
fi
lines=$(wc -l <"$KJV.tmp")
[ "$lines" -gt 50000 ] || die "the Bible dump has only $lines lines; expected about 74000"
mv "$KJV.tmp" "$KJV"

# ---- 5. assemble (temp file + rename, so a failed run never leaves half a corpus) ----
files=()
for n in "${TRAIN_NOVELS[@]}"; do files+=("$WORK/austen/$n.txt"); done
cat "${files[@]}" "$KJV" >"$OUT/train.txt.tmp"
mv "$OUT/train.txt.tmp" "$OUT/train.txt"
cp "$WORK/austen/$VAL_NOVEL.txt" "$OUT/val.txt.tmp"
mv "$OUT/val.txt.tmp" "$OUT/val.txt"

echo "sources (bytes, lines):"
for f in "${files[@]}" "$KJV" "$WORK/austen/$VAL_NOVEL.txt"; do
  printf '  %-22s %9d bytes %7d lines\n' "$(basename "$f")" "$(wc -c <"$f")" "$(wc -l <"$f")"
done
echo "corpus:"
for f in "$OUT/train.txt" "$OUT/val.txt"; do
  printf '  %-22s %9d bytes %7d lines\n' "${f#"$ROOT"/}" "$(wc -c <"$f")" "$(wc -l <"$f")"
done
