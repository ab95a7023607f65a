#!/usr/bin/env bash
# exp_xl_passages.sh: why does Transformer-XL trail the standard model in make paper-tables?
# Controlled trainings at the paper-tables scale (the tiny GPT, 4 layers, d 256, 4 heads; lr 2e-3,
# seed 1, 600 steps of 4096 training tokens each, the tokens of scripts/get-tokens.sh), differing
# only in the flags below, then `eval` with a 2000-resample interval:
#   std512       window 512, 8 windows a step: Table 1's standard model, read at 512
#   xl_b2s2048   window 256 + an XL cache of 256, 2 segments of 2048 a step: make paper-tables' XL
#   xl_b8s512    the same XL, 8 segments of 512 a step: the same tokens, 4x the independent passages
#   std256_b16   window 256, 16 windows a step: the XL model's window without its cache
# XL models are read at 2048 tokens, pieces of 256 with the cache carried (as Table 1's XL row).
# (An XL run with segments but no cache cannot be asked for: --segment needs --xl-cache > 0.)
# Results: runs/xl_passages/NAME/{metrics.jsonl,train.log,eval.txt,eval.tsv,DONE}. A run stopped
# part-way resumes from its last checkpoint (every 50 steps); a finished one is skipped.
# Usage: bash scripts/exp_xl_passages.sh [NAME...]   (default: all four; env LANDMARK, DATA)
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
LANDMARK="${LANDMARK:-build/apps/landmark}"
DATA="${DATA:-data/tokens}"
OUT=runs/xl_passages
export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-PASSIVE}"
die() { echo "exp_xl_passages: $*" >&2; exit 1; }
[ -x "$LANDMARK" ] || die "$LANDMARK is missing; run 'make' first (or set LANDMARK=...)"
MODEL=(--layers 4 --embd 256 --heads 4)
COMMON=(--data "$DATA" --steps 600 --lr 2e-3 --seed 1 --eval-every 100 --eval-batches 8 --ckpt-every 50 --log-every 30)
flags() {
  case "$1" in
    std512) echo "--block-size 512 --batch 8 --attention standard" ;;
    xl_b2s2048) echo "--block-size 256 --xl-cache 256 --segment 2048 --batch 2 --attention standard" ;;
    xl_b8s512) echo "--block-size 256 --xl-cache 256 --segment 512 --batch 8 --attention standard" ;;
    std256_b16) echo "--block-size 256 --batch 16 --attention standard" ;;
    *) die "unknown run '$1' (std512, xl_b2s2048, xl_b8s512, std256_b16)" ;;
  esac
}
eval_length() {
  case "$1" in
    std512) echo 512 ;;
    std256_b16) echo 256 ;;
    *) echo 2048 ;;
  esac
}
[ $# -gt 0 ] || set -- xl_b8s512 xl_b2s2048 std512 std256_b16
for name in "$@"; do flags "$name" > /dev/null; done  # every name checked before anything runs
[ -s "$DATA/train.tokens" ] || LANDMARK="$LANDMARK" bash scripts/get-tokens.sh "$DATA" || die "no tokens in $DATA"
for name in "$@"; do
  dir="$OUT/$name"
  mkdir -p "$dir"
  if [ ! -f "$dir/DONE" ]; then
    resume=()
    [ -f "$dir/checkpoint.safetensors" ] && resume=(--resume "$dir/checkpoint.safetensors")
    echo "--- train $name ${resume[*]:+(resuming)}"
    # shellcheck disable=SC2046  # flags prints words meant to split
    "$LANDMARK" train "${MODEL[@]}" $(flags "$name") "${COMMON[@]}" --out "$dir" "${resume[@]}" >> "$dir/train.log" 2>&1
    grep -q '"step":600[,}]' "$dir/metrics.jsonl" || die "train $name stopped before step 600 (see $dir/train.log); run again to resume"
    date -u +%FT%TZ > "$dir/DONE"
  fi
  if [ ! -s "$dir/eval.txt" ]; then
    echo "--- eval $name at $(eval_length "$name") tokens"
    "$LANDMARK" eval --checkpoint "$dir/checkpoint.safetensors" --tokens "$DATA/val.tokens" \
      --length "$(eval_length "$name")" --label "$name" --bootstrap 2000 --tsv "$dir/eval.tsv" > "$dir/eval.txt.tmp" ||
      die "eval $name failed (see $dir/eval.txt.tmp)"
    mv "$dir/eval.txt.tmp" "$dir/eval.txt"
  fi
  echo "--- $name: $(grep -i perplexity "$dir/eval.txt" | tail -n 1)"
done
