# The user's entry point. Each target installs missing Debian packages first
# (scripts/install-deps.sh), then drives CMake in ./build.
#   make          release build (CUDA kernels too when nvcc is found and a GPU is visible)
#   make test     build + run the whole test suite through CTest
#   make demo     build the program + the main job (scripts/demo.sh): pass-key retrieval up to 32k tokens
#   make demo-finetune  after make demo: its standard model fine-tuned with landmarks (scripts/demo_finetune.sh)
#   make demo-long  after make demo: its landmark model on pass-key prompts of a million tokens (scripts/demo_long.sh)
#   make demo-corpus  build the program + language modelling on Austen + KJV (scripts/demo_corpus.sh)
#   make paper-tables  the paper's Tables 1-3 and Appendices C and E on that corpus (scripts/paper_tables.sh)
#   make paper-side  after paper-tables' data: issue 11's side experiments, about 3 h (scripts/paper_side.sh)
#   make scorers  after make demo and make paper-tables: learned landmarks against training-free block
#                 scorers (beyond the paper; scripts/scorers.sh)
#   make sparse-study  after make demo: training with the cache (train --train-top-k) against dense
#                 training, about 75 min on 2 cores (beyond the paper; scripts/sparse_study.sh)
#   make long-tasks  six RULER-style tasks in real text (docs/tasks.md): a landmark and a standard model
#                 trained on them, scored by length x depth x task, about 90 min (scripts/long_tasks.sh)
#   make bench    build + run the benchmarks (prints ratios measured in one run; log in build/bench.log)
#   make bench-results  put the last make bench's summary into docs/results/bench.md
#   make fuzz     the libFuzzer harnesses of fuzz/, 60 s each (scripts/fuzz.sh; FUZZ_SECONDS=N for longer)
#   make clean    remove ./build
# Extra CMake options: make CMAKE_ARGS="-DLANDMARK_CUDA=ON" (kernels without a GPU, as CI builds them)
BUILD      ?= build
CMAKE_ARGS ?=
JOBS       ?= $(shell nproc 2>/dev/null || echo 2)

.PHONY: all deps configure build test bench bench-results fuzz demo demo-finetune demo-long demo-corpus paper-tables paper-side scorers sparse-study long-tasks clean

all: build

deps:
	@bash scripts/install-deps.sh

configure: deps
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release $(CMAKE_ARGS)

build: configure
	@cmake --build $(BUILD) -j $(JOBS)

test: build
	@cd $(BUILD) && OMP_WAIT_POLICY=PASSIVE ctest --output-on-failure -j $(JOBS)

bench: build
	@bash scripts/install-deps.sh bench || echo "make bench: python3-torch could not be installed; the PyTorch comparison will say unavailable"
	@bash scripts/bench.sh $(BUILD)

bench-results:
	@bash scripts/bench_results.sh $(BUILD)/bench-summary.md docs/results/bench.md

demo: configure
	@cmake --build $(BUILD) -j $(JOBS) --target landmark  # the program only: tests and benches wait for make test
	@bash scripts/demo.sh

fuzz:
	@bash scripts/install-deps.sh fuzz
	@bash scripts/fuzz.sh $(or $(FUZZ_SECONDS),60)

demo-finetune: configure
	@cmake --build $(BUILD) -j $(JOBS) --target landmark
	@bash scripts/demo_finetune.sh

demo-long: configure
	@cmake --build $(BUILD) -j $(JOBS) --target landmark
	@bash scripts/demo_long.sh

paper-tables: configure
	@cmake --build $(BUILD) -j $(JOBS) --target landmark
	@bash scripts/paper_tables.sh

paper-side: configure
	@cmake --build $(BUILD) -j $(JOBS) --target landmark
	@bash scripts/paper_side.sh

scorers: configure
	@cmake --build $(BUILD) -j $(JOBS) --target landmark
	@bash scripts/scorers.sh

sparse-study: configure
	@cmake --build $(BUILD) -j $(JOBS) --target landmark
	@bash scripts/sparse_study.sh

long-tasks: configure
	@cmake --build $(BUILD) -j $(JOBS) --target landmark
	@bash scripts/long_tasks.sh

demo-corpus: configure
	@cmake --build $(BUILD) -j $(JOBS) --target landmark
	@bash scripts/demo_corpus.sh

clean:
	rm -rf $(BUILD)
