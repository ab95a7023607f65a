# demo_model.sh: what `make demo` (scripts/demo.sh) and `make demo-finetune`
# (scripts/demo_finetune.sh) share, sourced by both: the program, the model, the data and the
# pass-key settings. Not a program of its own.
LANDMARK=build/apps/landmark
# 3 layers, d 128, 4 heads of 32, a 512-token window, batch 8, peak learning rate 2e-3.
MODEL=(--layers 3 --embd 128 --heads 4 --block-size 512 --batch 8 --lr 2e-3)
# The landmark model's attention: a landmark after every 50 tokens (the paper's F).
LM_FLAGS=(--attention landmark --landmark-every 50)
# Pass-key documents (0..12 filler sentences, 5% plain filler) and a BPE tokenizer of 512 tokens.
DATA="${DEMO_DATA:-data/passkey}"
DATA_FLAGS=(--docs 50000 --max-fillers 12 --filler-only 0.05)
TOKENIZER_FLAGS=(--tokenizer bpe --vocab 512)
# Reading a prompt: chunks of 200 tokens, the top 4 blocks retrieved per query.
EVAL_FLAGS=(--chunk 200 --k 4)
OUT="${DEMO_OUT:-runs/demo}"
