#!/usr/bin/env bash
# same-bits.sh OLD_LANDMARK NEW_LANDMARK [WORKDIR]: two builds of `landmark` (for example the tree
# before a refactor of infer/, built in its own clone, and the tree after it) must print the same
# numbers. With OLD it makes small deterministic inputs once: pass-key text (passkey-data, seed 3)
# as byte-level tokens, a pass-key prompt of 1,145 tokens, and three tiny models trained for 300
# steps with seed 1 (2 layers, d 32, 2 heads, T 128, F 10, batch 4, lr 3e-3; a few seconds each):
# landmark, landmark with --cmt, and standard; then eval's --windows-tsv of the landmark model (for
# --paired-with). Then it runs OLD and NEW, one after the other, on each combination listed below
# (the `combo` lines: 177, three of them refused by design to show the dropped list), each in a
# directory of its own with outputs named relative to it, and compares stdout, stderr and every
# file written there (block files included: --block-dir must leave none). About 2.5 minutes on 2
# cores. The combinations, on eval, passkey, generate and explore (and attn-map):
#   every --scorer (landmark, mean, quest, reps, oracle) on the landmark model, and mean, quest,
#   reps, oracle on the standard model (also the standard model read by its window, and --local);
#   --mass-recall; --certify; --left-out E; the CMT model at --cmt-cutoff 0, 0.3 and 1 with the skip
#   on and off (--no-cmt-skip); --positions stingy/exact; --granularity token-head/token/head/all;
#   --capacity; --block-dir (a directory per run); --kv-dtype f16; --search scan/bounded/approx;
#   --k 0 and k past the cached blocks; --tsv, --windows-tsv, --paired-with, --hist, --answers,
#   --plot, --recall-plot, --dump-retrieval; sampling with a seed; explore's page. The decode step
#   runs in generate and in passkey's answers (there is no flag to turn it off).
# A combination OLD refuses is dropped (counted, with OLD's error line); one OLD runs and NEW
# refuses is a difference. Text is compared after this filter, which removes only what carries
# wall time, speed or memory (nothing else is changed):
#   sed -E -e 's/   \[[0-9.]+ s\]$/   [<s>]/'                             passkey's row time
#          -e 's/^(answers: )[0-9.e+-]+( ms per generated token)/\1<ms>\2/'  passkey's decode time
#          -e 's/(nats\/token, )[0-9.]+( s;)/\1<s>\2/'                      eval's summary line
#          -e 's/^(peak resident memory: )[0-9]+( MB)$/\1<MB>\2/'            passkey's memory
#          -e '/ tokens read, [0-9]+ tok\/s, ETA [0-9]+:[0-9][0-9]/d'       progress lines (stderr)
#   and in a .tsv whose header has a column named `seconds` (eval --tsv), that column's values.
# PNG files are compared byte for byte, unfiltered; so are the HTML page and every other file.
# Prints each differing combination with the first differing lines and exits 1; all equal:
# "same bits: N combinations, M files compared" and the time taken, exit 0. Bad arguments: exit 2.
# Environment: KEEP=1 keeps the work directory (a fresh mktemp -d under WORKDIR, default $TMPDIR
# or /tmp; removed at the end otherwise). OMP_NUM_THREADS=2 and OMP_WAIT_POLICY=PASSIVE.
# It does not build either binary, compare speed (scripts/bench_ab.sh does), or run CUDA paths
# (--device cuda, --blocks-on-device): the models and inputs are tiny, CPU only.
# shellcheck disable=SC2086  # the flag strings ($EV, $EXACT, ...) are words meant to split
set -euo pipefail
usage() {
  echo "usage: scripts/same-bits.sh OLD_LANDMARK NEW_LANDMARK [WORKDIR]   (env KEEP=1 keeps the files)" >&2
  exit 2
}
if [ $# -lt 2 ] || [ $# -gt 3 ] || [ "$1" = --help ]; then usage; fi
abs() { (cd "$(dirname "$1")" && echo "$(pwd)/$(basename "$1")"); }
for b in "$1" "$2"; do
  if [ ! -f "$b" ] || [ ! -x "$b" ]; then echo "same-bits: $b is not an executable file" >&2; usage; fi
done
OLD="$(abs "$1")" NEW="$(abs "$2")"
PARENT="${3:-${TMPDIR:-/tmp}}"
[ -d "$PARENT" ] || { echo "same-bits: WORKDIR $PARENT is not a directory" >&2; usage; }
W="$(mktemp -d "$PARENT/same-bits.XXXXXX")"
case "$W" in
  *[[:space:]]*) echo "same-bits: the work directory '$W' has white space in its path" >&2; rm -rf "$W"; exit 2 ;;
esac
if [ "${KEEP:-0}" = 1 ]; then
  trap 'echo "same-bits: files kept in $W" >&2' EXIT
else
  trap 'rm -rf "$W"' EXIT
fi
export OMP_NUM_THREADS=2 OMP_WAIT_POLICY=PASSIVE
START=$SECONDS
die() { echo "same-bits: $*" >&2; exit 1; }

# ---- inputs, made once by OLD ----
D="$W/in"
mkdir -p "$D"
"$OLD" passkey-data --out "$D/text" --docs 200 --max-fillers 3 --seed 3 > /dev/null ||
  die "OLD: passkey-data failed"
"$OLD" prepare --train "$D/text/train.txt" --val "$D/text/val.txt" --out "$D/tok" --tokenizer bytes > /dev/null \
  2> "$D/prepare.log" || { cat "$D/prepare.log" >&2; die "OLD: prepare failed"; }
TRAIN=(--data "$D/tok" --layers 2 --embd 32 --heads 2 --block-size 128 --batch 4 --steps 300 --lr 3e-3
  --eval-every 0 --landmark-every 10 --seed 1 --quiet)
for m in lm:"--attention landmark" cmt:"--attention landmark --cmt" std:"--attention standard"; do
  "$OLD" train "${TRAIN[@]}" ${m#*:} --out "$D/${m%%:*}" > /dev/null || die "OLD: training $D/${m%%:*} failed"
done
LM="$D/lm/checkpoint.safetensors" CMT="$D/cmt/checkpoint.safetensors" STD="$D/std/checkpoint.safetensors"
FILL="The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again. "
{
  printf 'There is an important info hidden inside a lot of irrelevant text. Find it and memorize them. '
  printf 'I will quiz you about the important information there. '
  for _ in 1 2 3 4 5 6; do printf '%s' "$FILL"; done
  printf 'The pass key is 71432. Remember it. 71432 is the pass key. '
  for _ in 1 2 3 4; do printf '%s' "$FILL"; done
  printf 'What is the pass key? The pass key is'
} > "$D/prompt.txt"
VAL="$D/tok/val.tokens"
"$OLD" eval --checkpoint "$LM" --tokens "$VAL" --length 300 --windows 2 --chunk 50 --k 2 --windows-tsv "$D/w300.tsv" \
  > /dev/null 2>&1 || die "OLD: eval --windows-tsv for --paired-with failed"
echo "same-bits: inputs and models made by OLD in $((SECONDS - START)) s"

# ---- the combinations: NAME, then the command line (word-split; paths have no white space) ----
NAMES=() LINES=()
combo() { NAMES+=("$1"); LINES+=("${*:2}"); }
EV="eval --tokens $VAL --length 300 --windows 2 --chunk 50"       # 30 blocks of F 10
EVL="eval --tokens $VAL --length 1500 --windows 1 --chunk 100 --k 3"  # 150 blocks: 3 tiles of 64 keys
PK="passkey --lengths 400,900 --trials 2 --chunk 50"
GEN="generate --prompt-file $D/prompt.txt --max-new 24 --chunk 100"
EX="explore --text-file $D/prompt.txt --chunk 100 --k 2 --out page.html --dump-retrieval retrieval.tsv"
# The standard model read in blocks: k F + F - 1 + chunk positions must fit in its T of 128.
GENS="generate --prompt-file $D/prompt.txt --max-new 24 --chunk 50 --k 2 --checkpoint $STD"
EXS="explore --text-file $D/prompt.txt --chunk 50 --k 2 --out page.html --dump-retrieval retrieval.tsv"
EXS+=" --checkpoint $STD"
# Three combinations every build refuses, to show the dropped list: eval.lm.certify.stingy,
# eval.std.landmark, ex.lm.bounded.
EXACT="--positions exact"
CUT="--cmt-cutoff 0.3"

# eval, the landmark model
combo eval.lm                 $EV --k 2 --checkpoint "$LM" --tsv out.tsv --windows-tsv win.tsv
combo eval.lm.exact           $EV --k 2 --checkpoint "$LM" $EXACT --tsv out.tsv --windows-tsv win.tsv
for g in token head; do
  combo "eval.lm.$g"          $EV --k 2 --checkpoint "$LM" --granularity $g --tsv out.tsv
  combo "eval.lm.$g.exact"    $EV --k 2 --checkpoint "$LM" --granularity $g $EXACT --tsv out.tsv
done
combo eval.lm.all             $EV --k 2 --checkpoint "$LM" --granularity all --tsv out.tsv
combo eval.lm.all.exact       $EV --k 2 --checkpoint "$LM" --granularity all $EXACT --tsv out.tsv
combo eval.lm.capacity        $EV --k 2 --checkpoint "$LM" --capacity 4 --tsv out.tsv
combo eval.lm.capacity.exact  $EV --k 2 --checkpoint "$LM" --capacity 4 $EXACT
combo eval.lm.capacity.token  $EV --k 2 --checkpoint "$LM" --capacity 4 --granularity token
combo eval.lm.blockdir        $EV --k 2 --checkpoint "$LM" --block-dir blocks
combo eval.lm.blockdir.exact  $EV --k 2 --checkpoint "$LM" --block-dir blocks $EXACT
combo eval.lm.blockdir.head   $EV --k 2 --checkpoint "$LM" --block-dir blocks --granularity head
combo eval.lm.f16             $EV --k 2 --checkpoint "$LM" --kv-dtype f16
combo eval.lm.f16.blockdir.exact $EV --k 2 --checkpoint "$LM" --kv-dtype f16 --block-dir blocks $EXACT
combo eval.lm.k0              $EV --k 0 --checkpoint "$LM"
combo eval.lm.k40             $EV --k 40 --checkpoint "$LM" $EXACT
combo eval.lm.chunk37         eval --tokens "$VAL" --length 300 --windows 2 --chunk 37 --k 3 --checkpoint "$LM"
combo eval.lm.hist            $EV --k 2 --checkpoint "$LM" --hist hist.png
combo eval.lm.paired          $EV --k 2 --checkpoint "$LM" --paired-with "$D/w300.tsv" $EXACT
combo eval.lm.paired150       eval --tokens "$VAL" --length 150 --windows 4 --chunk 50 --k 2 --checkpoint "$LM" \
                              --paired-with "$D/w300.tsv"
combo eval.lm.certify         $EV --k 2 --checkpoint "$LM" $EXACT --certify --tsv out.tsv
combo eval.lm.certify.k40     $EV --k 40 --checkpoint "$LM" $EXACT --certify
combo eval.lm.certify.stingy  $EV --k 2 --checkpoint "$LM" --certify
combo eval.lm.leftout         $EV --k 2 --checkpoint "$LM" $EXACT --left-out 0.05
combo eval.lm.leftout.k4.certify $EV --k 4 --checkpoint "$LM" $EXACT --left-out 0.2 --certify
combo eval.lm.leftout.blockdir $EV --k 4 --checkpoint "$LM" $EXACT --left-out 0.05 --block-dir blocks --kv-dtype f16
combo eval.lm.scan.long       $EVL --checkpoint "$LM"
combo eval.lm.bounded         $EVL --checkpoint "$LM" --search bounded
combo eval.lm.bounded.exact   $EVL --checkpoint "$LM" --search bounded $EXACT
combo eval.lm.approx          $EVL --checkpoint "$LM" --search approx --search-tiles 1
combo eval.lm.approx.exact    $EVL --checkpoint "$LM" --search approx --search-tiles 1 $EXACT --tsv out.tsv
combo eval.lm.approx.blockdir $EVL --checkpoint "$LM" --search approx --search-tiles 2 --block-dir blocks
combo eval.lm.landmark.massrecall $EV --k 2 --checkpoint "$LM" --scorer landmark --mass-recall --tsv out.tsv
for s in mean quest reps oracle; do
  combo "eval.lm.$s"          $EV --k 2 --checkpoint "$LM" --scorer $s --tsv out.tsv
  combo "eval.lm.$s.massrecall.exact" $EV --k 2 --checkpoint "$LM" --scorer $s --mass-recall $EXACT
done
combo eval.lm.reps3           $EV --k 2 --checkpoint "$LM" --scorer reps --reps 3 --granularity token
combo eval.lm.quest.blockdir  $EV --k 2 --checkpoint "$LM" --scorer quest --block-dir blocks --capacity 5

# eval, the standard model: by its window, in pieces, and in blocks by each training-free scorer
combo eval.std                eval --tokens "$VAL" --length 128 --windows 4 --checkpoint "$STD" --tsv out.tsv \
                              --windows-tsv win.tsv
combo eval.std.local          $EV --checkpoint "$STD" --local 100 --tsv out.tsv
combo eval.std.landmark       $EV --k 2 --checkpoint "$STD" --scorer landmark
for s in mean quest reps oracle; do
  combo "eval.std.$s"         $EV --k 2 --checkpoint "$STD" --scorer $s --tsv out.tsv --windows-tsv win.tsv
  combo "eval.std.$s.massrecall" $EV --k 2 --checkpoint "$STD" --scorer $s --mass-recall
  combo "eval.std.$s.token"   $EV --k 2 --checkpoint "$STD" --scorer $s --granularity token
done
combo eval.std.mean.all       $EV --k 2 --checkpoint "$STD" --scorer mean --granularity all --tsv out.tsv
combo eval.std.quest.capacity $EV --k 2 --checkpoint "$STD" --scorer quest --capacity 4
combo eval.std.reps.head      $EV --k 2 --checkpoint "$STD" --scorer reps --reps 2 --granularity head
combo eval.std.mean.paired    $EV --k 2 --checkpoint "$STD" --scorer mean --paired-with "$D/w300.tsv"
combo eval.std.quest.long     eval --tokens "$VAL" --length 1500 --windows 1 --chunk 50 --k 2 --checkpoint "$STD" \
                              --scorer quest --mass-recall

# eval, the CMT model: the skip on and off
for s in on off; do
  skip=""
  [ $s = off ] && skip="--no-cmt-skip"
  combo "eval.cmt.skip$s"          $EV --k 2 --checkpoint "$CMT" $CUT $skip --tsv out.tsv
  combo "eval.cmt.skip$s.exact"    $EV --k 2 --checkpoint "$CMT" $CUT $skip $EXACT
  combo "eval.cmt.skip$s.blockdir" $EV --k 2 --checkpoint "$CMT" $CUT $skip --block-dir blocks
  combo "eval.cmt.skip$s.token"    $EV --k 2 --checkpoint "$CMT" $CUT $skip --granularity token
  combo "eval.cmt.skip$s.head"     $EV --k 2 --checkpoint "$CMT" $CUT $skip --granularity head
  combo "eval.cmt.skip$s.certify"  $EV --k 2 --checkpoint "$CMT" $CUT $skip $EXACT --certify
  combo "eval.cmt.skip$s.leftout"  $EV --k 4 --checkpoint "$CMT" $CUT $skip $EXACT --left-out 0.05
  combo "eval.cmt.skip$s.bounded"  $EVL --checkpoint "$CMT" $CUT $skip --search bounded
  combo "eval.cmt.skip$s.quest"    $EV --k 2 --checkpoint "$CMT" $CUT $skip --scorer quest --mass-recall
done
combo eval.cmt.cut0           $EV --k 2 --checkpoint "$CMT" --cmt-cutoff 0
combo eval.cmt.cut1           $EV --k 2 --checkpoint "$CMT" --cmt-cutoff 1 --tsv out.tsv
combo eval.cmt.all            $EV --k 2 --checkpoint "$CMT" $CUT --granularity all --tsv out.tsv
combo eval.cmt.default        $EV --k 2 --checkpoint "$CMT" --capacity 4 --kv-dtype f16

# passkey
combo pk.lm                   $PK --k 2 --checkpoint "$LM" --answers answers.tsv --tsv table.tsv --plot acc.png
combo pk.lm.exact             $PK --k 2 --checkpoint "$LM" $EXACT --answers answers.tsv
combo pk.lm.token             $PK --k 2 --checkpoint "$LM" --granularity token --answers answers.tsv
combo pk.lm.head              $PK --k 2 --checkpoint "$LM" --granularity head --answers answers.tsv
combo pk.lm.capacity          $PK --k 2 --checkpoint "$LM" --capacity 4 --answers answers.tsv
combo pk.lm.blockdir          $PK --k 2 --checkpoint "$LM" --block-dir blocks --answers answers.tsv
combo pk.lm.f16               $PK --k 2 --checkpoint "$LM" --kv-dtype f16 --answers answers.tsv
combo pk.lm.f16.blockdir.exact $PK --k 2 --checkpoint "$LM" --kv-dtype f16 --block-dir blocks $EXACT
combo pk.lm.bounded           $PK --k 2 --checkpoint "$LM" --search bounded --answers answers.tsv
combo pk.lm.approx            $PK --k 2 --checkpoint "$LM" --search approx --search-tiles 1 --answers answers.tsv
combo pk.lm.certify           $PK --k 2 --checkpoint "$LM" $EXACT --certify --answers answers.tsv
combo pk.lm.leftout           $PK --k 4 --checkpoint "$LM" $EXACT --left-out 0.05 --answers answers.tsv
combo pk.lm.recall            $PK --k 2 --checkpoint "$LM" --recall --recall-plot recall.png --scoring paper
combo pk.lm.baseline          $PK --k 2 --checkpoint "$LM" --baseline "$STD" --tsv table.tsv --plot acc.png
combo pk.lm.depth             $PK --k 3 --checkpoint "$LM" --depth 0.5 --seed 7 --answers answers.tsv
combo pk.lm.k0                $PK --k 0 --checkpoint "$LM"
combo pk.lm.landmark.massrecall $PK --k 2 --checkpoint "$LM" --scorer landmark --mass-recall
for s in mean quest reps oracle; do
  combo "pk.lm.$s"            $PK --k 2 --checkpoint "$LM" --scorer $s --mass-recall --answers answers.tsv
  combo "pk.std.$s"           $PK --k 2 --checkpoint "$STD" --scorer $s --answers answers.tsv --tsv table.tsv
done
combo pk.std.quest.massrecall.head $PK --k 2 --checkpoint "$STD" --scorer quest --mass-recall --granularity head
combo pk.std                  $PK --checkpoint "$STD" --answers answers.tsv --tsv table.tsv
for s in on off; do
  skip=""
  [ $s = off ] && skip="--no-cmt-skip"
  combo "pk.cmt.skip$s"          $PK --k 2 --checkpoint "$CMT" $CUT $skip --answers answers.tsv
  combo "pk.cmt.skip$s.exact"    $PK --k 2 --checkpoint "$CMT" $CUT $skip $EXACT --certify
  combo "pk.cmt.skip$s.blockdir" $PK --k 2 --checkpoint "$CMT" $CUT $skip --block-dir blocks --recall \
                                 --recall-plot recall.png
  combo "pk.cmt.skip$s.leftout"  $PK --k 4 --checkpoint "$CMT" $CUT $skip $EXACT --left-out 0.05
done

# generate (a prompt read in chunks, then the decode step: 24 new tokens)
combo gen.lm                  $GEN --k 2 --checkpoint "$LM"
combo gen.lm.echo.exact       $GEN --k 2 --checkpoint "$LM" $EXACT --echo
combo gen.lm.token            $GEN --k 2 --checkpoint "$LM" --granularity token
combo gen.lm.head             $GEN --k 2 --checkpoint "$LM" --granularity head $EXACT
combo gen.lm.capacity         $GEN --k 2 --checkpoint "$LM" --capacity 4
combo gen.lm.blockdir         $GEN --k 2 --checkpoint "$LM" --block-dir blocks
combo gen.lm.f16              $GEN --k 2 --checkpoint "$LM" --kv-dtype f16
combo gen.lm.f16.blockdir.exact $GEN --k 2 --checkpoint "$LM" --kv-dtype f16 --block-dir blocks $EXACT
combo gen.lm.bounded          $GEN --k 2 --checkpoint "$LM" --search bounded
combo gen.lm.approx           $GEN --k 2 --checkpoint "$LM" --search approx --search-tiles 1
combo gen.lm.leftout          $GEN --k 4 --checkpoint "$LM" $EXACT --left-out 0.05
combo gen.lm.k0               $GEN --k 0 --checkpoint "$LM"
combo gen.lm.sample           $GEN --k 2 --checkpoint "$LM" --temperature 0.8 --top-k 5 --seed 3
combo gen.lm.landmark.massrecall $GEN --k 2 --checkpoint "$LM" --scorer landmark --mass-recall
for s in mean quest reps oracle; do
  combo "gen.lm.$s"           $GEN --k 2 --checkpoint "$LM" --scorer $s
  combo "gen.std.$s"          $GENS --scorer $s
done
combo gen.std.quest.capacity  $GENS --scorer quest --capacity 6 --granularity token
combo gen.std.reps.sample     $GENS --scorer reps --reps 3 --temperature 0.8 --top-k 5 --seed 3
combo gen.std                 $GEN --checkpoint "$STD"
for s in on off; do
  skip=""
  [ $s = off ] && skip="--no-cmt-skip"
  combo "gen.cmt.skip$s"          $GEN --k 2 --checkpoint "$CMT" $CUT $skip
  combo "gen.cmt.skip$s.exact"    $GEN --k 2 --checkpoint "$CMT" $CUT $skip $EXACT
  combo "gen.cmt.skip$s.blockdir" $GEN --k 2 --checkpoint "$CMT" $CUT $skip --block-dir blocks --granularity token
done

# explore (the HTML page and the retrieval TSV)
combo ex.lm                   $EX --checkpoint "$LM"
combo ex.lm.exact             $EX --checkpoint "$LM" $EXACT --select 100 --top 3
combo ex.lm.token             $EX --checkpoint "$LM" --granularity token
combo ex.lm.head              $EX --checkpoint "$LM" --granularity head
combo ex.lm.capacity          $EX --checkpoint "$LM" --capacity 4
combo ex.lm.blockdir          $EX --checkpoint "$LM" --block-dir blocks --kv-dtype f16
combo ex.lm.leftout           $EX --checkpoint "$LM" $EXACT --left-out 0.05
combo ex.lm.maxtokens         $EX --checkpoint "$LM" --max-tokens 500 --passkey-key 71432
combo ex.lm.bounded           $EX --checkpoint "$LM" --search bounded
for s in mean quest reps oracle; do
  combo "ex.lm.$s"            $EX --checkpoint "$LM" --scorer $s
  combo "ex.std.$s"           $EXS --scorer $s
done
combo ex.std.quest.head       $EXS --scorer quest --granularity head --capacity 6
for s in on off; do
  skip=""
  [ $s = off ] && skip="--no-cmt-skip"
  combo "ex.cmt.skip$s"       $EX --checkpoint "$CMT" $CUT $skip
  combo "ex.cmt.skip$s.exact" $EX --checkpoint "$CMT" $CUT $skip $EXACT
done

# attn-map (one layer and head's attention, as the reading saw it)
combo map.lm                  attn-map --checkpoint "$LM" --text-file "$D/prompt.txt" --chunk 50 --k 2 \
                              --max-tokens 300 --out map.png
combo map.cmt.exact           attn-map --checkpoint "$CMT" --text-file "$D/prompt.txt" --chunk 50 --k 2 $CUT $EXACT \
                              --layer 1 --head 1 --max-tokens 300 --out map.png

# ---- running and comparing ----
# The filter above, for text: stdout, stderr and every file that is not a PNG (see the header).
TIMING_SED=(-e 's/   \[[0-9.]+ s\]$/   [<s>]/'
  -e 's/^(answers: )[0-9.e+-]+( ms per generated token)/\1<ms>\2/'
  -e 's/(nats\/token, )[0-9.]+( s;)/\1<s>\2/'
  -e 's/^(peak resident memory: )[0-9]+( MB)$/\1<MB>\2/'
  -e '/ tokens read, [0-9]+ tok\/s, ETA [0-9]+:[0-9][0-9]/d')
filtered() {  # file: its text with timing removed
  case "$1" in
    *.tsv) sed -E "${TIMING_SED[@]}" "$1" |
      awk -F'\t' -v OFS='\t' 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == "seconds") c = i }
                             c && NR > 1 { $c = "<s>" } { print }' ;;
    *) sed -E "${TIMING_SED[@]}" "$1" ;;
  esac
}
run_one() {  # which (old/new), binary, index: runs in $W/which/NAME; returns its exit status
  local dir="$W/$1/${NAMES[$3]}" args
  read -ra args <<< "${LINES[$3]}"
  mkdir -p "$dir/blocks"
  (cd "$dir" && "$2" "${args[@]}" > stdout 2> stderr)
}
FILES=0 SAME=0 DIFFERENT=0 DROPPED=() DIFF_NAMES=()
compare() {  # index: 0 when every file is the same
  local name="${NAMES[$1]}" o="$W/old/${NAMES[$1]}" n="$W/new/${NAMES[$1]}" f bad=0
  local lo ln
  lo="$(cd "$o" && find . -type f | sort)"
  ln="$(cd "$n" && find . -type f | sort)"
  if [ "$lo" != "$ln" ]; then
    echo "DIFFERENT $name: the files written differ (< old, > new):"
    diff <(echo "$lo") <(echo "$ln") | head -n 10
    bad=1
  fi
  while IFS= read -r f; do
    [ -f "$n/$f" ] || continue
    FILES=$((FILES + 1))
    case "$f" in
      *.png)
        cmp -s "$o/$f" "$n/$f" && continue
        echo "DIFFERENT $name: ${f#./} (PNG): $(cmp "$o/$f" "$n/$f" 2>&1 | head -n 1)"
        bad=1 ;;
      *)
        filtered "$o/$f" > "$W/cmp.old"
        filtered "$n/$f" > "$W/cmp.new"
        cmp -s "$W/cmp.old" "$W/cmp.new" && continue
        echo "DIFFERENT $name: ${f#./} (first differing lines, filtered; < old, > new):"
        diff "$W/cmp.old" "$W/cmp.new" | head -n 12 | cut -c1-300 || true
        bad=1 ;;
    esac
  done <<< "$lo"
  return $bad
}
N=${#NAMES[@]}
echo "same-bits: $N combinations; old $OLD, new $NEW"
for ((i = 0; i < N; i++)); do
  name="${NAMES[$i]}"
  if ! run_one old "$OLD" "$i"; then
    DROPPED+=("$name: $(grep -m 1 '^error' "$W/old/$name/stderr" || tail -n 1 "$W/old/$name/stderr")")
    continue
  fi
  if ! run_one new "$NEW" "$i"; then
    echo "DIFFERENT $name: OLD ran, NEW refused or failed:"
    tail -n 3 "$W/new/$name/stderr"
    DIFFERENT=$((DIFFERENT + 1))
    DIFF_NAMES+=("$name")
    continue
  fi
  if compare "$i"; then
    SAME=$((SAME + 1))
  else
    echo "  (the command: landmark ${LINES[$i]})"
    DIFFERENT=$((DIFFERENT + 1))
    DIFF_NAMES+=("$name")
  fi
done
echo "dropped: ${#DROPPED[@]} combinations OLD refused (not run with NEW):"
for d in "${DROPPED[@]+"${DROPPED[@]}"}"; do echo "  $d"; done
T=$((SECONDS - START))
if [ "$DIFFERENT" -gt 0 ]; then
  echo "NOT the same bits: $DIFFERENT of $((N - ${#DROPPED[@]})) combinations differ: ${DIFF_NAMES[*]}" \
    "($FILES files compared, ${T} s)"
  exit 1
fi
echo "same bits: $SAME combinations, $FILES files compared (${#DROPPED[@]} dropped; ${T} s)"
