#!/usr/bin/env bash
# make_seeds.sh: writes the seed corpora of fuzz/corpus/ (committed; run again only when a file
# format changes). Small valid inputs of every kind, made by the project's own writers where it
# has them (build/apps/landmark: checkpoints, token files, tokenizers) and by
# fuzz/make_seeds.py where it only reads the format (R lazy-load databases, GPT-2 files).
# Usage: bash fuzz/make_seeds.sh [path/to/landmark]   (default build/apps/landmark)
set -euo pipefail
cd "$(dirname "$0")/.."
L=${1:-build/apps/landmark}
[ -x "$L" ] || { echo "make_seeds: $L not found; build the project first (make build)" >&2; exit 1; }
C=fuzz/corpus
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
rm -rf "$C"
mkdir -p "$C"/{checkpoint,token_file,tokenizer_json,gpt2_files,rdata,cli,bpe_train}

"$L" passkey-data --out "$work/text" --docs 40 --max-fillers 2 --filler-only 0.1 > /dev/null
export OMP_NUM_THREADS=1
for kind in bytes bpe; do
  if [ "$kind" = bpe ]; then extra=(--vocab 300); else extra=(); fi
  "$L" prepare --train "$work/text/train.txt" --val "$work/text/val.txt" --out "$work/$kind" --tokenizer "$kind" "${extra[@]}" > /dev/null
  cp "$work/$kind/tokenizer.json" "$C/tokenizer_json/$kind.json"
  cp "$work/$kind/val.tokens" "$C/token_file/$kind.tokens"
done
# Two tiny models (one layer, d 16): standard with the byte tokenizer, landmark with the BPE one.
"$L" train --data "$work/bytes" --out "$work/m1" --layers 1 --embd 16 --heads 2 --block-size 32 --batch 2 \
  --steps 2 --quiet > /dev/null
"$L" train --data "$work/bpe" --out "$work/m2" --layers 1 --embd 16 --heads 2 --block-size 32 --batch 2 \
  --steps 2 --attention landmark --landmark-every 7 --quiet > /dev/null
cp "$work/m1/checkpoint.safetensors" "$C/checkpoint/standard_bytes.safetensors"
cp "$work/m2/checkpoint.safetensors" "$C/checkpoint/landmark_bpe.safetensors"
head -c 2000 "$work/text/train.txt" > "$C/bpe_train/passkey.txt"
printf 'aaaaaaaaaaaaaaaabababab 1234 1234 12 34\n' > "$C/bpe_train/repeats.txt"
/usr/bin/python3 fuzz/make_seeds.py "$C"
echo "make_seeds: wrote $(find "$C" -type f | wc -l) files under $C"
