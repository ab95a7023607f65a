#!/usr/bin/env bash
# scorers.sh: `make scorers`, beyond the paper: is landmark training needed? Learned landmarks
# against training-free block scorers (beyond/block_scorers.h) on the same cache, prompts and text.
# Two model pairs, each a landmark model and a standard model trained alike:
#   demo    `make demo`'s pair (pass-key documents): pass-key accuracy by prompt length
#   paper   `make paper-tables`' standard and landmark models (Austen + KJV): perplexity on the
#           held-out book, with intervals, each row's ratio to the landmark model's own retrieval
#           over the same windows (a paired interval: eval --paired-with), and mass recall
#           against the oracle
# Each landmark model is read with --scorer landmark (the paper), mean, quest, reps and oracle; each
# standard model in blocks of 50 with mean, quest, reps and oracle (it has no landmarks).
#
# Two stages, each resumable: run the script again and it goes on where it stopped.
#   rows    one `landmark passkey` or `landmark eval` per row into $OUT/rows/NAME.txt (through a
#           temporary name; a row that is there is skipped)
#   tables  docs/results/scorers.tsv, scorers.md and scorers_passkey.png from those rows (nothing
#           typed by hand)
# Usage: bash scripts/scorers.sh [rows] [tables]     (default: both)
# Environment:
#   SCORERS_QUICK=1  a small version (short prompts and windows, few of them) for tests; it
#                    writes to runs/scorers_quick, never to docs/
#   SCORERS_DEMO     the demo's run directory (default runs/demo: landmark/ and standard/)
#   SCORERS_PAPER    paper-tables' training directory (default runs/paper/train)
#   SCORERS_DATA     the token directory paper-tables evaluated (default data/tokens: val.tokens)
#   SCORERS_OUT, SCORERS_DOCS   where rows and tables go
#   SCORERS_K        blocks retrieved per query (default 4)
#   SCORERS_LONG_SCAN=1  also the standard model's million-token prompt by the mean scorer's
#                    scan (not by default: it reads every block's summary for every query)
#   LANDMARK         the program (default build/apps/landmark)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
LANDMARK="${LANDMARK:-build/apps/landmark}"
QUICK="${SCORERS_QUICK:-0}"
export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-PASSIVE}"
die() { echo "scorers: $*" >&2; exit 1; }
[ -x "$LANDMARK" ] || die "$LANDMARK is missing; run 'make' first (or set LANDMARK=...)"
case "$QUICK" in 0|1) ;; *) die "SCORERS_QUICK must be 0 or 1, got '$QUICK'" ;; esac
K="${SCORERS_K:-4}"
[[ "$K" =~ ^[1-9][0-9]*$ ]] || die "SCORERS_K must be a positive integer, got '$K'"

DEMO="${SCORERS_DEMO:-runs/demo}"
PAPER="${SCORERS_PAPER:-runs/paper/train}"
DATA="${SCORERS_DATA:-data/tokens}"
if [ "$QUICK" = 1 ]; then
  OUT="${SCORERS_OUT:-runs/scorers_quick}"
  DOCS="${SCORERS_DOCS:-$OUT/docs}"
  PK_LENGTHS=(300 900)  # with the prompts per length below
  PK_TRIALS=(3 2)
  LONG=""               # no million-token row
  PPL_LENGTHS=(200 400)
  WINDOWS=(--windows 2 --bootstrap 200)
  CHUNK_PK=50
  CHUNK_PPL=50
else
  OUT="${SCORERS_OUT:-runs/scorers}"
  DOCS="${SCORERS_DOCS:-docs}"
  # Sized to the 45-minute budget on a 2-core machine where a 32k prompt reads in 6-8 s (an AMD
  # EPYC without AVX-512: docs/results/scorers.tsv gives each row's seconds).
  PK_LENGTHS=(512 2048 8192 32768)
  PK_TRIALS=(20 20 10 5)  # the oracle reads 2 prompts past 8k: its dense scan takes 45-90 s a prompt at 32k
  LONG=1048576  # one prompt: the landmark model by its keys (approximate search); SCORERS_LONG_SCAN adds mean
  PPL_LENGTHS=(2048 4096)
  WINDOWS=(--windows 16)  # of 2048 and 4096 tokens (the book has 33 of 4096); the paired ratios carry the
                          # comparison, their windows matched
  CHUNK_PK=200   # the demo's chunk
  CHUNK_PPL=250  # Table 1's
fi

# The models first, with one message naming what to run.
missing=()
[ -s "$DEMO/landmark/checkpoint.safetensors" ] && [ -s "$DEMO/standard/checkpoint.safetensors" ] ||
  missing+=("'make demo' (for $DEMO/landmark and $DEMO/standard)")
[ -s "$PAPER/landmark/checkpoint.safetensors" ] && [ -s "$PAPER/standard/checkpoint.safetensors" ] &&
  [ -s "$DATA/val.tokens" ] || missing+=("'make paper-tables' (for $PAPER/landmark, $PAPER/standard and $DATA/val.tokens)")
[ ${#missing[@]} -eq 0 ] || die "the models are missing: run $(printf '%s and ' "${missing[@]}" | sed 's/ and $//') first"

STAGES=("$@")
[ ${#STAGES[@]} -gt 0 ] || STAGES=(rows tables)
for s in "${STAGES[@]}"; do case "$s" in rows|tables) ;; *) die "unknown stage '$s' (rows, tables)" ;; esac; done
ROWS="$OUT/rows"
mkdir -p "$ROWS"

scorers_of() {  # the scorers a model kind is read with
  if [ "$1" = landmark ]; then echo "landmark mean quest reps oracle"; else echo "mean quest reps oracle"; fi
}

row() {  # NAME COMMAND...: one row, skipped when its output is there
  local name="$1"; shift
  [ -s "$ROWS/$name.txt" ] && return 0
  echo "row $name: landmark $*"
  local t0=$SECONDS
  if ! "$LANDMARK" "$@" > "$ROWS/$name.tmp" 2> "$ROWS/$name.err"; then
    cat "$ROWS/$name.err" >&2
    die "row $name failed (its log: $ROWS/$name.err)"
  fi
  echo "wall_seconds $((SECONDS - t0))" >> "$ROWS/$name.tmp"
  mv "$ROWS/$name.tmp" "$ROWS/$name.txt"
}

stage_rows() {
  local kind sc len i
  # Perplexity on the held-out book: first the landmark model with its landmarks at each length,
  # whose per-window sums every other row is paired with (the same windows: eval --paired-with).
  local order=("landmark landmark") pair
  for kind in landmark standard; do
    for sc in none $(scorers_of $kind); do [ "$kind $sc" = "landmark landmark" ] || order+=("$kind $sc"); done
  done
  for pair in "${order[@]}"; do
    read -r kind sc <<< "$pair"
    for len in "${PPL_LENGTHS[@]}"; do
      local name="ppl_${kind}_${sc}_$len" ref="$ROWS/ppl_landmark_landmark_$len.windows.tsv" how=()
      if [ "$sc" = none ]; then  # no retrieval (k 0): what retrieval adds to each model
        how=(--k 0)
        [ "$kind" = landmark ] || how+=(--scorer mean)
      else
        how=(--k "$K" --scorer "$sc")
        # mass recall (it scores every key too) at the longest length only
        [ "$len" != "${PPL_LENGTHS[-1]}" ] || how+=(--mass-recall)
      fi
      if [ "$name" = "ppl_landmark_landmark_$len" ]; then how+=(--windows-tsv "$ref"); else how+=(--paired-with "$ref"); fi
      row "$name" eval --checkpoint "$PAPER/$kind/checkpoint.safetensors" --tokens "$DATA/val.tokens" \
        --length "$len" --chunk "$CHUNK_PPL" "${how[@]}" --tsv "$ROWS/$name.tsv" "${WINDOWS[@]}"
    done
  done
  for kind in landmark standard; do  # pass key by prompt length
    for sc in $(scorers_of $kind); do
      for i in "${!PK_LENGTHS[@]}"; do
        len="${PK_LENGTHS[$i]}"
        local trials="${PK_TRIALS[$i]}"
        [ "$sc" != oracle ] || [ "$len" -le 8192 ] || [ "$trials" -le 2 ] || trials=2
        row "pk_${kind}_${sc}_$len" passkey --checkpoint "$DEMO/$kind/checkpoint.safetensors" --lengths "$len" \
          --trials "$trials" --chunk "$CHUNK_PK" --k "$K" --scorer "$sc"
      done
    done
  done
  if [ -n "$LONG" ]; then  # a million tokens: the landmark keys with the approximate search; mean by the scan
    row "pk_landmark_landmark_$LONG" passkey --checkpoint "$DEMO/landmark/checkpoint.safetensors" --lengths "$LONG" \
      --trials 1 --chunk "$CHUNK_PK" --k "$K" --search approx
    [ "${SCORERS_LONG_SCAN:-0}" = 1 ] || return 0
    row "pk_standard_mean_$LONG" passkey --checkpoint "$DEMO/standard/checkpoint.safetensors" --lengths "$LONG" \
      --trials 1 --chunk "$CHUNK_PK" --k "$K" --scorer mean
  fi
}

# --- tables ---------------------------------------------------------------------------------------
# One line per row: model kind scorer k length trials passkey_pct ppl ci_low ci_high mass_recall iou
# keys_per_query bytes_per_block ms_per_token seconds ratio ratio_low ratio_high (the perplexity's
# ratio to the landmark model's with its landmarks on the same windows, and its paired interval)
HEADER="model	kind	scorer	k	length	trials	passkey_pct	ppl	ci_low	ci_high	mass_recall	iou	keys_per_query	bytes_per_block	ms_per_token	seconds	ratio	ratio_low	ratio_high"

cost_of() {  # FILE: keys per query and bytes per block from the 'block scorer' line
  sed -n 's/^block scorer [a-z]*[^:]*: \([0-9.]*\) [a-z ]* scored per .*; \([0-9]*\) bytes per block.*/\1\t\2/p' "$1" | tail -1
}

tsv_line() {  # NAME KIND SCORER LENGTH: one scorers.tsv line from a row's output
  local name="$1" kind="$2" sc="$3" len="$4" f="$ROWS/$1.txt" cost wall ratio
  cost="$(cost_of "$f")"
  [ -n "$cost" ] || cost="-	-"
  wall="$(sed -n 's/^wall_seconds //p' "$f")"
  # eval --paired-with's line (the landmark model's own row has none: its ratio is 1 by definition)
  ratio="$(sed -n 's/^paired ratio=\([0-9.]*\) ci_low=\([0-9.]*\) ci_high=\([0-9.]*\) .*/\1\t\2\t\3/p' "$f" | tail -1)"
  [ -n "$ratio" ] || ratio="-	-	-"
  if [[ "$name" == ppl_*_none_* ]]; then  # k 0: nothing scored, nothing to recall
    tail -1 "$ROWS/$name.tsv" | awk -F'\t' -v kind="$kind" -v len="$len" -v w="$wall" -v r="$ratio" \
      'BEGIN { OFS = "\t" } { print "paper-" kind, kind, "none", 0, len, "-", "-", $5, $6, $7, "-", "-", 0, 0, "-", w, r }'
  elif [[ "$name" == ppl_* ]]; then
    # eval --tsv: ppl, ci_low, ci_high are columns 5-7; mass_recall and iou 22 and 23.
    tail -1 "$ROWS/$name.tsv" | awk -F'\t' -v kind="$kind" -v sc="$sc" -v len="$len" -v cost="$cost" -v w="$wall" \
      -v k="$K" -v r="$ratio" 'BEGIN { OFS = "\t" } { print "paper-" kind, kind, sc, k, len, "-", "-", $5, $6, $7, $22, $23, cost, "-", w, r }'
  else
    local pk ms
    pk="$(sed -n "s/^ *$len  *\([0-9.]*\)% ( *\([0-9]*\)\/ *\([0-9]*\)).*/\1\t\3/p" "$f" | head -1)"
    [ -n "$pk" ] || die "row $name: no accuracy line for length $len"
    ms="$(sed -n 's/^answers: \([0-9.]*\) ms per generated token.*/\1/p' "$f" | tail -1)"
    printf 'demo-%s\t%s\t%s\t%s\t%s\t%s\t%s\t-\t-\t-\t-\t-\t%s\t%s\t%s\t-\t-\t-\n' "$kind" "$kind" "$sc" "$K" "$len" \
      "$(cut -f2 <<< "$pk")" "$(cut -f1 <<< "$pk")" "$cost" "${ms:--}" "$wall"
  fi
}

stage_tables() {
  local kind sc len tsv="$DOCS/results/scorers.tsv" md="$DOCS/results/scorers.md"
  mkdir -p "$DOCS/results"
  {
    echo "$HEADER"
    for kind in landmark standard; do
      for len in "${PPL_LENGTHS[@]}"; do
        [ -s "$ROWS/ppl_${kind}_none_$len.txt" ] || die "row ppl_${kind}_none_$len is missing: run the rows stage"
        tsv_line "ppl_${kind}_none_$len" "$kind" none "$len"
      done
    done
    for kind in landmark standard; do
      for sc in $(scorers_of $kind); do
        for len in "${PPL_LENGTHS[@]}"; do
          [ -s "$ROWS/ppl_${kind}_${sc}_$len.txt" ] || die "row ppl_${kind}_${sc}_$len is missing: run the rows stage"
          tsv_line "ppl_${kind}_${sc}_$len" "$kind" "$sc" "$len"
        done
        for len in "${PK_LENGTHS[@]}" $LONG; do
          if [ -s "$ROWS/pk_${kind}_${sc}_$len.txt" ]; then
            tsv_line "pk_${kind}_${sc}_$len" "$kind" "$sc" "$len"
          elif [ "$len" != "$LONG" ]; then
            die "row pk_${kind}_${sc}_$len is missing: run the rows stage"
          fi
        done
      done
    done
  } > "$tsv.tmp"
  mv "$tsv.tmp" "$tsv"
  echo "wrote $tsv"
  # The picture: pass-key accuracy against length, one column per model kind and scorer.
  local pk="$OUT/passkey_by_length.tsv" png="$DOCS/results/scorers_passkey.png"
  awk -F'\t' 'NR > 1 && $7 != "-" { col = $2 " " $3; if (!(col in seen)) { seen[col] = 1; cols[++nc] = col }
                if (!($5 in lseen)) { lseen[$5] = 1; lens[++nl] = $5 }; v[$5, col] = $7 }
              END { printf "length"; for (c = 1; c <= nc; ++c) printf "\t%s", cols[c]; printf "\n"
                    for (l = 1; l <= nl; ++l) { printf "%s", lens[l]
                      for (c = 1; c <= nc; ++c) printf "\t%s", ((lens[l], cols[c]) in v) ? v[lens[l], cols[c]] : "-"
                      printf "\n" } }' "$tsv" | sort -t$'\t' -k1,1n > "$pk"
  "$LANDMARK" plot-table "$pk" --out "$png" --log-x --y-range 0,100 --x-label "prompt length (tokens)" \
    --y-label "pass key found (%)" --title "pass key by model and block scorer (k $K)" > /dev/null
  echo "wrote $png"
  write_md "$tsv" > "$md.tmp"
  mv "$md.tmp" "$md"
  echo "wrote $md"
}

# scorers.md from scorers.tsv: the answer in three sentences (computed from the rows), then the
# tables. $1: the tsv.
write_md() {
  local tsv="$1" cpu date_now long_len="${LONG:-none}" top="${PPL_LENGTHS[-1]}" mid="${PK_LENGTHS[-1]}"
  cpu="$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)"
  date_now="$(date -u +%Y-%m-%d)"
  echo "# Learned landmarks against training-free block scorers"
  echo
  awk -F'\t' -v top="$top" -v mid="$mid" '
    NR == 1 { next }
    $8 != "-" && $5 == top { ppl[$2, $3] = $8; lo[$2, $3] = $9; hi[$2, $3] = $10; r[$2, $3] = $17; rl[$2, $3] = $18; rh[$2, $3] = $19 }
    $7 != "-" && $5 == mid { pk[$2, $3] = $7 }
    function best_of(kind,   k, a, b) {  # the training-free scorer of lowest perplexity (the oracle aside)
      b = ""
      for (k in ppl) { split(k, a, SUBSEP)
        if (a[1] == kind && a[2] != "oracle" && a[2] != "landmark" && a[2] != "none" && (b == "" || ppl[k] < ppl[kind, b])) b = a[2] }
      return b
    }
    END {
      s = best_of("standard"); l = best_of("landmark")
      L = ppl["landmark", "landmark"]; S = ppl["standard", s]; T = ppl["landmark", l]
      # Measurably apart when the paired interval of the ratio (the same windows) excludes 1.
      verdict = (rl["standard", s] > 1) ? "win" : (rh["standard", s] < 1) ? "lose" : "do not win measurably"
      printf "**The answer.** On text, learned landmarks %s: at %d tokens the landmark model retrieving by its landmarks scores perplexity %.2f [%.2f, %.2f], the standard model read in blocks with its best training-free scorer (%s) %.2f [%.2f, %.2f], %.1f%% %s (the ratio over the same windows %.3f, paired 95%% interval [%.3f, %.3f]). ", \
        verdict, top, L, lo["landmark", "landmark"], hi["landmark", "landmark"], s, S, \
        lo["standard", s], hi["standard", s], 100 * ((S > L) ? S / L - 1 : 1 - S / L), ((S > L) ? "higher" : "lower"), \
        r["standard", s], rl["standard", s], rh["standard", s]
      N = ppl["landmark", "none"]; M = ppl["standard", "none"]
      printf "The scorer is %s of it: the landmark model retrieving by %s instead of its landmarks scores %.2f (%+.1f%%, paired [%.3f, %.3f]), %.0f%% of the way from no retrieval (k 0: %.2f) to its landmarks, while the standard model goes from %.2f at k 0 to %.2f. ", \
        (((T - L) * 2 < S - L) ? "the smaller part" : "most"), l, T, 100 * (T / L - 1), rl["landmark", l], rh["landmark", l], \
        100 * (N - T) / (N - L), N, M, S
      n = 0; list = ""; bs = ""
      for (k in pk) { split(k, a, SUBSEP)
        if (a[1] != "standard" || a[2] == "oracle") continue
        if (bs == "" || pk[k] + 0 > pk["standard", bs] + 0) bs = a[2]
        if (pk[k] + 0 >= pk["landmark", "landmark"] + 0) list = list (n++ ? ", " : "") a[2] }
      if (n) printf "On the pass key at %d tokens the training is not needed: the landmark model finds %s%% of keys with its landmarks, the standard model as many with %s.\n", mid, pk["landmark", "landmark"], list
      else printf "On the pass key at %d tokens learned landmarks win too: the landmark model finds %s%% of keys with its landmarks, the standard model at most %s%% (%s).\n", mid, pk["landmark", "landmark"], pk["standard", bs], bs
    }' "$tsv"
  echo
  echo "Beyond the paper. What this shows: on one cache, the same chunks (${CHUNK_PPL} tokens for text, ${CHUNK_PK} for"
  echo "prompts), k $K and stingy positions, how well each way of scoring a block chooses blocks, for two"
  echo "pairs of models trained alike except for landmarks. What it does not show: other model sizes,"
  echo "training budgets or tasks; one seed per model; the oracle's choices are exact block masses, an"
  echo "upper reference, not a practical scorer (it keeps every key in fast memory). Measured by"
  echo "\`make scorers\` (scripts/scorers.sh) on $date_now, $cpu, $(nproc) threads; the rows took"
  echo "$(awk -F'\t' 'NR > 1 { s += $16 } END { printf "%.0f", s / 60 }' "$tsv") minutes in all (their wall times summed)."
  echo
  echo "How a scorer summarises a block, and how a standard model is read in blocks:"
  echo "[infer.md](../infer.md) section 9.8. Every row: [scorers.tsv](scorers.tsv)."
  echo
  echo "## Perplexity on the held-out book (paper-tables' pair)"
  echo
  echo "\`landmark eval --tokens DATA/val.tokens --length L --chunk $CHUNK_PPL --k $K --scorer S ${WINDOWS[*]}\`, with"
  echo "\`--mass-recall\` where the table gives it (the script asks for it at $top only). Ratio: the row's perplexity"
  echo "over the landmark model's with its landmarks on the same windows, with the paired bootstrap interval"
  echo "(\`--paired-with\` that row's \`--windows-tsv\`): narrower than the two intervals side by side, since"
  echo "a window hard for one model is hard for the other."
  echo "Mass recall: the share of the cached blocks' attention mass (the oracle's) in the chosen blocks,"
  echo "averaged over queries, layers and heads; IoU: the chosen blocks against the oracle's top k."
  echo
  echo "| model | scorer | length | perplexity [95% interval] | ratio [paired 95%] | mass recall | IoU | keys scored per query | bytes per block |"
  echo "| --- | --- | ---: | --- | --- | ---: | ---: | ---: | ---: |"
  awk -F'\t' 'NR > 1 && $8 != "-" { printf "| %s | %s | %s | %.2f [%.2f, %.2f] | %s | %s | %s | %s | %s |\n", $2,
                ($3 == "none") ? "none (k 0)" : $3, $5, $8, $9, $10,
                ($17 == "-") ? "1 (the reference)" : sprintf("%.3f [%.3f, %.3f]", $17, $18, $19), $11, $12, $13, $14 }' "$tsv"
  echo
  # What mass recall says about each scorer at the longest length, from the rows.
  awk -F'\t' -v top="$top" 'NR > 1 && $8 != "-" && $5 == top && $11 != "-" {
      if ($2 == "landmark" && $3 == "landmark") { lr = $11; lp = $8 }
      else if ($3 != "oracle") { if (lo == "" || $11 < lo) lo = $11; if (hi == "" || $11 > hi) hi = $11 }
      if ($2 == "landmark" && $3 == "oracle") op = $8 }
    END { printf "At %d tokens the landmark model'"'"'s own retrieval holds %.3f of the oracle'"'"'s block mass, the training-free scorers %.3f to %.3f, and the oracle'"'"'s top k by that mass scores %.2f on that model against %.2f for its landmarks: the mass a block would take under a plain softmax is not what the landmark model'"'"'s gates weigh it by.\n", top, lr, lo, hi, op, lp }' "$tsv"
  echo
  echo "## The pass key (the demo's pair)"
  echo
  echo "\`landmark passkey --lengths L --trials N --chunk $CHUNK_PK --k $K --scorer S\`; found, of how many prompts."
  if [ "${SCORERS_LONG_SCAN:-0}" = 1 ]; then
    echo "The million-token rows ($long_len) read one prompt each: landmark keys with the approximate search,"
    echo "the mean scorer with the scan (the other scans, and the oracle past 32,768 tokens, are not run)."
  else
    echo "The million-token row ($long_len) reads one prompt: landmark keys with the approximate search. The"
    echo "summary scorers' scans at that length are not run (SCORERS_LONG_SCAN=1 adds the standard model's"
    echo "mean), nor the oracle past 32,768 tokens."
  fi
  echo
  echo "![pass key by length and scorer](scorers_passkey.png)"
  echo
  awk -F'\t' 'NR > 1 && $7 != "-" { key = $2 " | " $3; if (!(key in seen)) { seen[key] = 1; keys[++n] = key }
                if (!($5 in ls)) { ls[$5] = 1; lens[++m] = $5 }; v[key, $5] = sprintf("%s%% of %s", $7, $6) }
              END { printf "| model | scorer |"; for (j = 1; j <= m; ++j) printf " %s |", lens[j]; printf "\n| --- | --- |"
                    for (j = 1; j <= m; ++j) printf " ---: |"; printf "\n"
                    for (i = 1; i <= n; ++i) { printf "| %s |", keys[i]
                      for (j = 1; j <= m; ++j) printf " %s |", ((keys[i], lens[j]) in v) ? v[keys[i], lens[j]] : "not run"
                      printf "\n" } }' "$tsv"
  echo
  echo "## Cost at $mid tokens"
  echo
  echo "Keys (or summary rows) scored per (query, head) row, bytes per block kept in fast memory to score"
  echo "it (all layers), and ms per generated answer token after the prompt was read (a summary scorer"
  echo "generates through the chunk path; the landmark scorer through the one-token decode step)."
  echo
  echo "| model | scorer | keys scored per query | bytes per block | ms per generated token |"
  echo "| --- | --- | ---: | ---: | ---: |"
  awk -F'\t' -v mid="$mid" 'NR > 1 && $7 != "-" && $5 == mid { printf "| %s | %s | %s | %s | %s |\n", $2, $3, $13, $14, $15 }' "$tsv"
}

for s in "${STAGES[@]}"; do
  case "$s" in
    rows) stage_rows ;;
    tables) stage_tables ;;
  esac
done
