#!/usr/bin/env bash
# install-deps.sh: install the Debian packages this project builds with, skipping those already
# present. Used by the Makefile (so `make` / `make test` on a fresh machine set themselves up),
# by .ci/run and by the README. Needs root or sudo only when something is missing.
#   catch2               tests (Catch2 v2)
#   libstb-dev           stb_image_write for loss curves and attention-map PNGs
#   nlohmann-json3-dev   checkpoint headers (safetensors JSON)
#   libcli11-dev         command-line parsing
#   zlib1g-dev           reading the R data files that hold the Austen corpus
#   libopenblas-dev      the comparison baseline in bench/ only (never linked into the library)
#   libreadline8         runtime library of the `bible` program that prints the KJV corpus
#   libopenmpi-dev openmpi-bin   data-parallel training under mpirun (train/distributed.h;
#                        the build trains on one rank without them)
#   chromium             a headless browser for the explorer page's test (tests/cli/test_explore_cli.sh,
#                        skipped without it)
#   cmake g++ make       the toolchain
# With the argument `fuzz` (scripts/fuzz.sh, CI), also:
#   clang-16 libclang-rt-16-dev libfuzzer-16-dev   libFuzzer and the sanitizer runtimes for Clang
# With the argument `lint` (.ci/run), also:
#   clang-format-16 universal-ctags   the format check (scripts/check-format.sh) and the function
#                        lengths (scripts/function-lengths.sh)
# With the argument `bench` (`make bench`), also:
#   python3-torch        PyTorch, the other side of the training-step comparison (scripts/bench_vs_pytorch.sh)
set -euo pipefail

packages=(cmake g++ make catch2 libstb-dev nlohmann-json3-dev libcli11-dev zlib1g-dev libopenblas-dev libreadline8
          libopenmpi-dev openmpi-bin chromium)
for group in "$@"; do
  case "$group" in
    fuzz) packages+=(clang-16 libclang-rt-16-dev libfuzzer-16-dev) ;;
    bench) packages+=(python3-torch) ;;
    lint) packages+=(clang-format-16 universal-ctags) ;;
    *) echo "install-deps: unknown group '$group' (known: fuzz, bench, lint)" >&2; exit 2 ;;
  esac
done
missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all dependencies present"
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
if [ "$(id -u)" -eq 0 ]; then
  SUDO=""
elif command -v sudo >/dev/null 2>&1; then
  SUDO="sudo"
else
  echo "install-deps: need root (or sudo) to apt-get install: ${missing[*]}" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
echo "install-deps: done"
