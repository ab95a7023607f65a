// bench_decode.cpp: the cost of one generated token at long contexts. Landmark retrieval (an
// InferenceSession with k = 4: score the cached landmarks, attend to 4 blocks + the tail) against
// a full KV cache of the same model (attend to every past token), at 2k, 8k, 32k and 128k tokens
// of context. Same weights, same thread count, one run. The landmark cache is built by really
// reading the context (prefill time printed); the full cache is filled with random keys/values of
// the right size, because an O(n^2) prefill of 128k tokens would take hours here and a decode
// step's cost does not depend on the values. Memory: "fast", "slow" and "full KV" are what each
// cache holds by its sizes (fast: landmark keys and tails; slow: block K/V, in RAM or in a file
// with --block-dir; full: every key and value); the RSS columns are measured, the growth of the
// process's resident set while the cache is alive (freed heap memory trimmed before each
// reading). With --device cuda the model, the landmark cache's fast memory and the full KV cache
// live on the GPU (the full cache then takes its tensor-op step, beyond/full_cache.h) while block
// K/V stay in host memory and only retrieved blocks are copied over: the paper's offload (with
// --blocks-on-device they stay in GPU memory instead; with --prefill-on-device they stay there while
// the context is read and move to host memory before the timed steps); every timed round ends
// with the device idle. Last line:
//   decode speedup_at_32k=<full-cache step time / landmark step time at 32k>
//          memory_vs_full_at_32k=<landmark RSS growth / full-cache RSS growth at 32k, when both ran>
#include <malloc.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include "bench/bench_main.h"
#include "beyond/full_cache.h"
#include "beyond/session.h"
#include "tensor/cpu/cache_info.h"
#include "tensor/cpu/parallel.h"
#include "tensor/create.h"
#include "tensor/rng.h"
#include "tensor/storage.h"

using namespace lm;

namespace {
double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

double rss_mb() {
  std::ifstream f("/proc/self/statm");
  long pages_total = 0, pages_rss = 0;
  f >> pages_total >> pages_rss;
  return static_cast<double>(pages_rss) * 4096.0 / (1024.0 * 1024.0);
}
constexpr double kMB = 1024.0 * 1024.0;

// Resident set now, after handing freed heap memory back to the OS (malloc_trim), so that the
// difference of two readings is the memory live in between, not what glibc kept for reuse.
double resident_mb() {
  malloc_trim(0);
  return rss_mb();
}

std::vector<int32_t> tokens(int64_t n, int64_t vocab, uint64_t seed) {
  manual_seed(seed);
  return rand({n}, DType::F64, Device::CPU, 0, static_cast<double>(vocab - 2)).to(DType::I32).to_vector<int32_t>();
}
}  // namespace

const char* kUsage =
    "usage: bench_decode [--quick] [--block-dir DIR] [--context N] [--steps N] [--landmark-only] [--device cpu|cuda]\n"
    "                    [--blocks-on-device | --prefill-on-device]\n"
    "  Decode-step time and memory: landmark retrieval (k 4) vs a full KV cache.\n"
    "  --context N      one context length instead of 2k, 8k, 32k and 128k\n"
    "  --steps N        generated tokens per timed round (default 128)\n"
    "  --landmark-only  skip the full cache (for profiling the landmark step: perf record ...)\n"
    "  --compare-paths  also time the landmark step with and without decode_step (beyond/decode_step.h),\n"
    "                   alternated in one session\n"
    "  --device D       cpu (default) or cuda: the model, the landmark cache's fast memory and the full KV\n"
    "                   cache on that device (block K/V stay in host memory: the paper's offload)\n"
    "  --blocks-on-device  with --device cuda: block K/V in GPU memory too (no offload)\n"
    "  --prefill-on-device  with --device cuda: the context is read with block K/V in GPU memory, which\n"
    "                   then move to host memory (InferenceSession::move_blocks_to_host) before the timed\n"
    "                   steps: the offloaded step at lengths whose offloaded prefill would take too long\n";

int bench_main(int argc, char** argv) {
  std::vector<int64_t> lengths = {2048, 8192, 32768, 131072};
  // Generated tokens per measurement: enough to include a few block completions (every F + 1 = 51
  // tokens a landmark is processed and a block joins the cache), so the time is the average a
  // user sees while generating. Each decoder runs kRounds such rounds back to back (the context
  // grows by those tokens) and keeps its fastest: on a shared 2-vCPU machine one round now and
  // then loses its second core to a neighbour, and both decoders get the same treatment.
  int steps = 128;
  constexpr int kRounds = 3;
  std::string block_dir;
  bool landmark_only = false, compare_paths = false, on_device = false, prefill_on_device = false;
  Device dev = Device::CPU;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--quick") {
      lengths = {2048, 8192, 32768};
      steps = 32;
    } else if (a == "--block-dir" && i + 1 < argc) {
      block_dir = argv[++i];
    } else if (a == "--context" && i + 1 < argc) {
      lengths = {bench::parse_int_flag("--context", argv[++i], 1, int64_t(1) << 24)};
    } else if (a == "--steps" && i + 1 < argc) {
      steps = static_cast<int>(bench::parse_int_flag("--steps", argv[++i], 1, 1000000));
    } else if (a == "--blocks-on-device") {
      on_device = true;
    } else if (a == "--prefill-on-device") {
      prefill_on_device = true;
    } else if (a == "--landmark-only") {
      landmark_only = true;
    } else if (a == "--compare-paths") {
      compare_paths = true;
    } else if (a == "--device" && i + 1 < argc) {
      const std::string d = argv[++i];
      if (d != "cpu" && d != "cuda") throw lm::bench::UsageError{"--device must be cpu or cuda, got '" + d + "'"};
      dev = d == "cuda" ? Device::CUDA : Device::CPU;
    } else if (a == "--help") {
      std::printf("%s", kUsage);
      return 0;
    } else {
      throw lm::bench::UsageError{"unknown or incomplete flag '" + a + "'"};
    }
  }
  // The demo's landmark model (scripts/demo.sh: 3 layers, d 128, 4 heads, BPE vocabulary 514),
  // with random weights: the speed of a step does not depend on their values.
  GPTConfig c;
  c.vocab_size = 514;
  c.n_layer = 3;
  c.n_head = 4;
  c.n_embd = 128;
  c.block_size = 512;
  c.attention = AttentionKind::Landmark;
  if (on_device && (dev != Device::CUDA || !block_dir.empty()))
    throw lm::bench::UsageError{"--blocks-on-device needs --device cuda and no --block-dir"};
  if (prefill_on_device && (dev != Device::CUDA || !block_dir.empty() || on_device))
    throw lm::bench::UsageError{"--prefill-on-device needs --device cuda, no --block-dir and no --blocks-on-device"};
  if (dev == Device::CUDA && cuda_device_count() == 0) {
    std::printf("bench_decode: skipped, no CUDA device: %s\n", cuda_unavailable_reason().c_str());
    return 77;
  }
  manual_seed(1);
  GPT model(c);
  model.eval();
  model.to(dev);
  // CUDA work runs after its launch returns: each timed round ends when the device is idle.
  const auto wait = [dev] {
    if (dev == Device::CUDA) cuda_synchronize();
  };
  const int32_t landmark_id = 512;
  InferConfig ic;
  ic.chunk_len = 250;
  ic.k = 4;
  ic.block_dir = block_dir;
  ic.blocks_on_device = on_device || prefill_on_device;
  const cpu::CacheSizes& caches = cpu::cache_sizes();
  bench::print_machine_line(cpu::num_threads(), caches.l1d, caches.l2, caches.l3_per_core, caches.source.c_str());
  std::printf("decode benchmark: the demo model (3 layers, d 128, 4 heads, vocab 514), f32, on %s, %d thread(s); landmark k %lld, "
              "chunk %lld, block K/V in %s\n", dev == Device::CUDA ? cuda_device_description().c_str() : "the CPU",
              cpu::num_threads(), (long long)ic.k, (long long)ic.chunk_len,
              on_device           ? "GPU memory"
              : prefill_on_device ? "GPU memory while the context is read, then host memory (offloaded) for the steps"
              : block_dir.empty() ? "RAM"
                                  : ("files in " + block_dir).c_str());
  // How idle OpenMP threads wait decides which small loops run on both cores (tensor/cpu/parallel.h).
  const char* policy = std::getenv("OMP_WAIT_POLICY");
  const char* spin = std::getenv("GOMP_SPINCOUNT");
  std::printf("OpenMP: OMP_WAIT_POLICY=%s GOMP_SPINCOUNT=%s; parallel grain %lld (both decoders run under the same settings)\n",
              policy ? policy : "(unset)", spin ? spin : "(unset)", (long long)cpu::parallel_grain());
  std::printf("%8s | %12s %11s %11s %11s %10s | %12s %11s %12s | %8s\n", "context", "lm prefill s", "lm step ms",
              "lm fast MB", "lm slow MB", "lm RSS MB", "full step ms", "full KV MB", "full RSS MB", "speedup");
  // Warm-up, before anything is measured: a short landmark reading with a few generated tokens,
  // and a few full-cache steps. What a process sets up once (OpenMP's threads, the GEMM's packing
  // buffers, the per-thread scratch of both decoders, glibc's per-thread arenas) then exists before
  // either cache's resident growth is read; otherwise it counted against whichever cache was
  // measured first, the landmark one (4.8 MB at 32k, 2 threads, 2026-11-29).
  {
    BeyondSession w(model, ic, landmark_id);
    w.read(tokens(2 * ic.chunk_len + 100, c.vocab_size, 5));
    for (int32_t i = 0; i < 8; ++i) w.feed_chunk({i});
    FullKVCache fw(model, 64);
    fw.fill_random(16, 9);
    for (int32_t i = 0; i < 8; ++i) fw.step(i);
    wait();
  }
  double speedup_32k = 0, lm_rss_32k = 0, full_rss_32k = 0;
  for (int64_t n : lengths) {
    std::vector<int32_t> ctx = tokens(n, c.vocab_size, 7), next = tokens(kRounds * steps, c.vocab_size, 8);
    double lm_prefill, lm_step, lm_fast, lm_slow, lm_rss;
    {
      const double r0 = resident_mb();
      const double t0 = now();
      BeyondSession s(model, ic, landmark_id);
      s.read(ctx);  // only the last logits: feed would keep n x V of them (67 MB at 32k)
      wait();
      lm_prefill = now() - t0;
      if (prefill_on_device) {
        const double t1 = now();
        s.move_blocks_to_host();
        std::printf("  at %lld tokens: %lld blocks per layer read with block K/V on the GPU in %.1f s, moved to host "
                    "memory in %.2f s\n", (long long)n, (long long)s.cached_blocks(), lm_prefill, now() - t1);
        lm_prefill = now() - t0;
      }
      lm_step = 1e30;
      if (compare_paths) {  // decode_step against the chunk path, alternated in this session
        std::vector<double> t[2];
        int tok = 0;
        for (int rep = 0; rep < 15; ++rep)
          for (int m = 0; m < 2; ++m) {
            s.set_decode_step(m == 0);
            const double t1 = now();
            for (int i = 0; i < steps; ++i) s.feed_chunk({next[(tok++) % next.size()]});
            t[m].push_back((now() - t1) / steps);
          }
        s.set_decode_step(true);
        for (auto& v : t) std::sort(v.begin(), v.end());
        std::printf("  at %lld tokens, 15 alternated batches of %d tokens each: decode_step median %.4f ms, chunk path "
                    "median %.4f ms per token (%.2fx)\n", (long long)n, steps, 1e3 * t[0][7], 1e3 * t[1][7], t[1][7] / t[0][7]);
      }
      for (int round = 0; round < kRounds; ++round) {
        wait();
        const double t1 = now();
        for (int i = 0; i < steps; ++i) s.feed_chunk({next[round * steps + i]});
        wait();
        lm_step = std::min(lm_step, (now() - t1) / steps);
      }
      // Per layer: a landmark key (NH x HS) per block + a tail of < F + 1 tokens in fast memory;
      // K and V of the F regular tokens of each block in slow memory (infer/layer_cache.h). f32.
      const double blocks = static_cast<double>(s.cached_blocks()), L = c.n_layer, HS = c.head_size(), NH = c.n_head;
      lm_fast = L * (blocks * NH * HS + 2 * NH * (c.landmark_every + 1) * HS) * 4 / kMB;
      lm_slow = L * blocks * 2 * NH * c.landmark_every * HS * 4 / kMB;
      lm_rss = resident_mb() - r0;
    }
    double full_step = 0, full_kv = 0, full_rss = 0;
    if (!landmark_only) {
      const double r0 = resident_mb();
      FullKVCache fc(model, n + kRounds * steps + 1);
      fc.fill_random(n, 9);
      fc.step(next[0]);  // warm-up
      full_step = 1e30;
      for (int round = 0; round < kRounds; ++round) {
        wait();
        const double t1 = now();
        for (int i = 0; i < steps; ++i) fc.step(next[round * steps + i]);
        wait();
        full_step = std::min(full_step, (now() - t1) / steps);
      }
      full_kv = static_cast<double>(fc.bytes()) / kMB;
      full_rss = resident_mb() - r0;
    }
    const double speedup = landmark_only ? 0.0 : full_step / lm_step;
    if (n == 32768) {
      speedup_32k = speedup;
      lm_rss_32k = lm_rss;
      full_rss_32k = full_rss;
    }
    std::printf("%8lld | %12.1f %11.2f %11.1f %11.1f %10.1f | %12.2f %11.1f %12.1f | %7.1fx\n", (long long)n, lm_prefill,
                1e3 * lm_step, lm_fast, lm_slow, lm_rss, 1e3 * full_step, full_kv, full_rss, speedup);
    std::fflush(stdout);
  }
  std::printf("process RSS at the end: %.0f MB\n", rss_mb());
  if (lm_rss_32k > 0 && full_rss_32k > 0)
    // The floor: a cache that can retrieve every block keeps every text token's K and V (what the
    // full cache keeps) plus at least one key per block of F tokens: 1 + 1/(2F) of the full cache.
    // A full cache of what the landmark model reads, text and landmark tokens, holds 1 + 1/F.
    std::printf("memory at 32k: landmark %.1f MB, full cache %.1f MB resident: %.3fx; by sizes a cache that can retrieve "
                "every block holds at least the text's K/V plus one key per block, %.3fx, and a full cache of the text "
                "and its landmark tokens %.3fx\n",
                lm_rss_32k, full_rss_32k, lm_rss_32k / full_rss_32k, 1.0 + 1.0 / (2.0 * c.landmark_every),
                1.0 + 1.0 / c.landmark_every);
  std::printf("decode speedup_at_32k=%.1f", speedup_32k);
  if (lm_rss_32k > 0 && full_rss_32k > 0) std::printf(" memory_vs_full_at_32k=%.3f", lm_rss_32k / full_rss_32k);
  std::printf("\n");
  return 0;
}

int main(int argc, char** argv) { return lm::bench::run_bench_main("bench_decode", kUsage, argc, argv, bench_main); }
