#!/usr/bin/env bash
# test_sparse_train.sh: `train --train-top-k` (training with the cache, beyond the paper) as a user
# runs it, on tiny landmark models (what they learn does not matter, only what the command does):
#   - both gate variants train; under `all` every step's metrics line lists the left-out share of
#     each layer and the progress line shows its mean; under `chosen` there is none;
#   - the checkpoint records K and the variant (`info`), --resume keeps them and refuses another K
#     (naming the key and both values), --init-from may change them (a dense parent trained sparse);
#   - a run stopped at step 4 and resumed ends with the same losses, bit for bit, as one run
#     straight through, and two runs of one seed write the same losses;
#   - K at or above the blocks of a window trains the dense model: its losses equal dense
#     training's to 1e-5 (the two ops sum in different orders, so not bit for bit);
#   - the bad combinations are errors naming the flags: with --attention standard, --xl-cache,
#     --cmt, --train-top-k-gates without --train-top-k, a negative K, an unknown variant.
# Usage: test_sparse_train.sh path/to/landmark
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"  # LANDMARK, WORK, fail, expect, exits_with, small_tokens

small_tokens "$WORK/tok"
# T 128, F 10: windows of about 11 blocks; K 2 leaves most of them out.
TINY=(--data "$WORK/tok" --layers 2 --embd 32 --heads 2 --block-size 128 --batch 2 --eval-every 4 --seed 5
  --attention landmark --landmark-every 10)
losses() { grep -o '"loss":[^,]*' "$1"; }

"$LANDMARK" train "${TINY[@]}" --steps 8 --out "$WORK/all" --train-top-k 2 --train-top-k-gates all > "$WORK/all.log"
expect "$WORK/all.log" "| left out "
[ "$(grep -c '"left_out_mass":\[[0-9.e-]*,[0-9.e-]*\]' "$WORK/all/metrics.jsonl")" -eq 8 ] ||
  { cat "$WORK/all/metrics.jsonl" >&2; fail "expected 8 left_out_mass lines of 2 layers each"; }
grep -q '"left_out_mass":\[0,0\]' "$WORK/all/metrics.jsonl" && fail "the left-out share should not be 0 at K 2"
"$LANDMARK" info "$WORK/all/checkpoint.safetensors" > "$WORK/all.info"
expect "$WORK/all.info" '"train_top_k": 2'
expect "$WORK/all.info" '"train_top_k_gates": "all"'

"$LANDMARK" train "${TINY[@]}" --steps 8 --out "$WORK/chosen" --train-top-k 2 > "$WORK/chosen.log"
grep -q "left out" "$WORK/chosen.log" && fail "chosen gates have no left-out share to show"
grep -q "left_out_mass" "$WORK/chosen/metrics.jsonl" && fail "chosen gates have no left-out share to log"
"$LANDMARK" info "$WORK/chosen/checkpoint.safetensors" > "$WORK/chosen.info"
expect "$WORK/chosen.info" '"train_top_k_gates": "chosen"'
# The two variants train different models.
[ "$(losses "$WORK/all/metrics.jsonl")" != "$(losses "$WORK/chosen/metrics.jsonl")" ] || fail "the variants gave the same losses"

# Same seed, same losses; stop at 4 and resume: the same losses as straight through.
"$LANDMARK" train "${TINY[@]}" --steps 8 --out "$WORK/again" --train-top-k 2 > /dev/null
[ "$(losses "$WORK/again/metrics.jsonl")" = "$(losses "$WORK/chosen/metrics.jsonl")" ] || fail "a fixed seed did not reproduce"
"$LANDMARK" train "${TINY[@]}" --steps 8 --out "$WORK/cut" --train-top-k 2 --stop-at 4 > /dev/null
"$LANDMARK" train --resume "$WORK/cut/checkpoint.safetensors" --data "$WORK/tok" --out "$WORK/cut" > "$WORK/resume.log"
[ "$(losses "$WORK/cut/metrics.jsonl")" = "$(losses "$WORK/chosen/metrics.jsonl")" ] ||
  { diff <(losses "$WORK/cut/metrics.jsonl") <(losses "$WORK/chosen/metrics.jsonl") >&2; fail "the resumed run differs"; }
exits_with 1 "$WORK/other_k.log" "$LANDMARK" train --resume "$WORK/cut/checkpoint.safetensors" --data "$WORK/tok" \
  --out "$WORK/cut" --train-top-k 3
expect "$WORK/other_k.log" "train_top_k"

# K 64 is at or above every window's blocks: dense training, to rounding.
"$LANDMARK" train "${TINY[@]}" --steps 4 --out "$WORK/dense" > /dev/null
"$LANDMARK" train "${TINY[@]}" --steps 4 --out "$WORK/k64" --train-top-k 64 > /dev/null
python3 - "$WORK/dense/metrics.jsonl" "$WORK/k64/metrics.jsonl" << 'EOF' || fail "K 64 did not train the dense model"
import json, sys
def losses(p):
    return [json.loads(l)["loss"] for l in open(p) if '"loss"' in l]
a, b = losses(sys.argv[1]), losses(sys.argv[2])
assert len(a) == len(b) == 4, (a, b)
assert all(abs(x - y) < 1e-5 for x, y in zip(a, b)), (a, b)
EOF

# --init-from a dense parent may train sparse (the checkpoint then records K).
"$LANDMARK" train "${TINY[@]}" --steps 3 --out "$WORK/child" --init-from "$WORK/dense/checkpoint.safetensors" \
  --train-top-k 1 > /dev/null
"$LANDMARK" info "$WORK/child/checkpoint.safetensors" > "$WORK/child.info"
expect "$WORK/child.info" '"train_top_k": 1'

# Bad combinations, each naming its flags.
BASE=(--data "$WORK/tok" --layers 1 --embd 32 --heads 2 --block-size 128 --batch 2 --steps 2 --out "$WORK/bad")
exits_with 1 "$WORK/bad1" "$LANDMARK" train "${BASE[@]}" --attention standard --train-top-k 2
expect "$WORK/bad1" "--train-top-k needs --attention landmark"
exits_with 1 "$WORK/bad2" "$LANDMARK" train "${BASE[@]}" --train-top-k 2
expect "$WORK/bad2" "--train-top-k 2 needs a landmark model"
exits_with 2 "$WORK/bad3" "$LANDMARK" train "${BASE[@]}" --train-top-k 2 --xl-cache 128 --segment 256
expect "$WORK/bad3" "--xl-cache excludes --train-top-k"
exits_with 1 "$WORK/bad4" "$LANDMARK" train "${BASE[@]}" --attention landmark --cmt --train-top-k 2
expect "$WORK/bad4" "--train-top-k does not support --cmt"
exits_with 2 "$WORK/bad5" "$LANDMARK" train "${BASE[@]}" --attention landmark --train-top-k-gates all
expect "$WORK/bad5" "--train-top-k-gates requires --train-top-k"
exits_with 2 "$WORK/bad6" "$LANDMARK" train "${BASE[@]}" --attention landmark --train-top-k -1
expect "$WORK/bad6" "--train-top-k"
exits_with 2 "$WORK/bad7" "$LANDMARK" train "${BASE[@]}" --attention landmark --train-top-k 2 --train-top-k-gates some
expect "$WORK/bad7" "--train-top-k-gates"
echo "cli_sparse_train: ok"
