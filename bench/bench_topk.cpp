// bench_topk.cpp: the time one query takes to find its top k landmarks among N cached blocks, for
// N from 10^3 up, with the two exact searches of inference (docs/infer.md section 9.2):
//   scan     what `--search scan` runs on the CPU: a chunk's queries against every landmark key in
//            one GEMM (cpu::gemm_single, the scale as its alpha) into a score buffer kept between
//            calls, then select_blocks; the time is per query (its share of the batch);
//   bounded  LandmarkKeyIndex::top_k (landmark/key_index.h): tiles of 64 keys with bounds;
// and the approximate search of `--search approx` (LandmarkKeyIndex::approx_top_k): every tile's
// bound for the batch of queries by GEMM, only the --search-tiles tiles of highest bound scored
// (default 16); its time per query and its recall@k against the scan (the share of the scan's
// blocks it also found).
// Two kinds of keys, one head of 32 features (the demo model's): "passkey", 4 needle blocks among
// near-identical filler keys (noise 1e-3), the query looking for the needles, with k 4 (the k-th
// place is clear of the filler) and k 5 (it is a near-tie among the filler); "random", keys and
// queries all N(0, 1). The bounded search is checked to choose the same blocks as the scan.
// Built with -DLANDMARK_FAISS=ON (Debian libfaiss-dev), a third column: an approximate top k from
// a FAISS HNSW index over the same keys (inner product, 16 links per node, efSearch 64), its
// time per query, the time to add a key, and its recall@k against the scan (the share of the
// scan's blocks it also found). Prints the CPU and thread count first, a table, and writes a TSV
// and a PNG when --out is given. Last line: "topk bounded_speedup_passkey_k4_at_max=X".
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "bench/bench_main.h"
#ifdef LANDMARK_HAVE_FAISS
#include <faiss/IndexHNSW.h>
#endif
#include "landmark/key_index.h"
#include "landmark/retrieval.h"
#include "plot/plot.h"
#include "tensor/cpu/cache_info.h"
#include "tensor/cpu/gemm.h"
#include "tensor/cpu/parallel.h"
#include "tensor/files.h"
#include "tensor/create.h"
#include "tensor/ops.h"

namespace {

const char* kUsage =
    "usage: bench_topk [--max-blocks N] [--search-tiles T] [--out PREFIX]\n"
    "  --max-blocks N  largest number of cached blocks (default 1000000; sizes 10^3, 10^4, ... up to N)\n"
    "  --search-tiles T  the approximate search's budget of tiles per query (default 16)\n"
    "  --out PREFIX    also write PREFIX.tsv and PREFIX.png (time per query against blocks)\n";

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

struct Row {
  std::string keys;
  int64_t k = 0, blocks = 0;
  double scan_us = 0, bounded_us = 0, scored_pct = 0;
  double approx_us = 0, approx_recall = 0;  // approx_top_k with a budget of g_search_tiles tiles
  double faiss_us = -1, faiss_add_us = -1, faiss_recall = -1;  // -1: built without FAISS
};

int64_t g_search_tiles = 16;  // --search-tiles

// The share of the scan's chosen blocks that `got` also chose, over all queries.
double recall_against(const std::vector<std::vector<int32_t>>& scan, const std::vector<std::vector<int32_t>>& got) {
  int64_t found = 0, wanted = 0;
  for (size_t i = 0; i < scan.size(); ++i)
    for (int32_t b : scan[i]) {
      ++wanted;
      found += std::find(got[i].begin(), got[i].end(), b) != got[i].end();
    }
  return wanted == 0 ? 1.0 : static_cast<double>(found) / static_cast<double>(wanted);
}

Row measure(const std::string& kind, int64_t nb, int64_t k, std::mt19937_64& gen) {
  using namespace lm;
  constexpr int64_t HS = 32, n = 64;  // features; queries per measurement (a chunk's worth)
  std::normal_distribution<double> nd;
  std::vector<float> base(HS), target(HS), keys(static_cast<size_t>(nb * HS));
  for (int64_t d = 0; d < HS; ++d) {
    base[d] = static_cast<float>(nd(gen));
    target[d] = static_cast<float>(nd(gen));
  }
  const bool passkey = kind == "passkey";
  const std::vector<int64_t> needles{nb / 7, nb / 3, nb / 2, nb - 1};
  for (int64_t b = 0; b < nb; ++b) {
    const bool needle = passkey && std::find(needles.begin(), needles.end(), b) != needles.end();
    for (int64_t d = 0; d < HS; ++d)
      keys[b * HS + d] = !passkey ? static_cast<float>(nd(gen))
                         : needle ? target[d] + static_cast<float>(0.1 * nd(gen))
                                  : base[d] + static_cast<float>(1e-3 * nd(gen));
  }
  LandmarkKeyIndex<float> index(HS);
  for (int64_t b = 0; b < nb; ++b) index.append(keys.data() + b * HS);
  Tensor q = zeros({n, HS}, DType::F32), kt = zeros({HS, nb}, DType::F32);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t d = 0; d < HS; ++d)
      q.data<float>()[i * HS + d] = passkey ? 2 * target[d] + static_cast<float>(0.1 * nd(gen)) : static_cast<float>(nd(gen));
  for (int64_t b = 0; b < nb; ++b)
    for (int64_t d = 0; d < HS; ++d) kt.data<float>()[d * nb + b] = keys[b * HS + d];
  const float scale = 1.0f / std::sqrt(static_cast<float>(HS));

  Row row{kind, k, nb};
  // Best of 3 for each (the 2 vCPUs are shared): the scan, then the bounded search.
  std::vector<std::vector<int32_t>> by_scan, by_bound(static_cast<size_t>(n));
  row.scan_us = row.bounded_us = 1e30;
  std::vector<float> scores(static_cast<size_t>(n * nb));  // kept between calls, as inference keeps it
  for (int rep = 0; rep < 3; ++rep) {
    const Clock::time_point t0 = Clock::now();
    cpu::gemm_single<float>(false, false, n, nb, HS, static_cast<double>(scale), q.data<float>(), HS, kt.data<float>(), nb, 0.0,
                            scores.data(), nb);
    by_scan = select_blocks<float>(scores.data(), 1, n, nb, k, Granularity::TokenHead);
    row.scan_us = std::min(row.scan_us, seconds_since(t0) * 1e6 / n);
    const Clock::time_point t1 = Clock::now();
    cpu::parallel_for(n, nb * HS, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) by_bound[i] = index.top_k(q.data<float>() + i * HS, scale, nb, k, {});
    });
    row.bounded_us = std::min(row.bounded_us, seconds_since(t1) * 1e6 / n);
  }
  KeySearchStats st;  // what the search scored, counted once, outside the timed runs
  for (int64_t i = 0; i < n; ++i) index.top_k(q.data<float>() + i * HS, scale, nb, k, {}, &st);
  row.scored_pct = 100.0 * static_cast<double>(st.keys_scored) / static_cast<double>(n * nb);
  // The scan scores with a GEMM, the index with its own loop: the same blocks unless two scores
  // differ in their last bits, which these keys (no exact ties, needles far apart) do not produce.
  for (int64_t i = 0; i < n; ++i)
    if (by_scan[i] != by_bound[i]) throw std::runtime_error("bench_topk: the bounded search chose other blocks than the scan");
  std::vector<std::vector<int32_t>> by_approx(static_cast<size_t>(n));
  row.approx_us = 1e30;
  for (int rep = 0; rep < 3; ++rep) {
    const Clock::time_point t0 = Clock::now();
    // As inference calls it: a batch of queries at once (the threads' shares of the 64).
    cpu::parallel_for(n, nb * 2 + g_search_tiles * 64 * HS, [&](int64_t i0, int64_t i1) {
      index.approx_top_k(q.data<float>() + i0 * HS, i1 - i0, scale, nb, k, g_search_tiles, nullptr, by_approx.data() + i0);
    });
    row.approx_us = std::min(row.approx_us, seconds_since(t0) * 1e6 / n);
  }
  row.approx_recall = recall_against(by_scan, by_approx);
#ifdef LANDMARK_HAVE_FAISS
  // FAISS scores by the raw inner product: the scale changes no order. Keys are added 50 at a
  // time (inference would add a chunk's 4 blocks at a time; the batch size changes little here).
  faiss::IndexHNSWFlat hnsw(static_cast<int>(HS), 16, faiss::METRIC_INNER_PRODUCT);
  hnsw.hnsw.efSearch = 64;
  const Clock::time_point ta = Clock::now();
  for (int64_t b = 0; b < nb; b += 50) hnsw.add(std::min<int64_t>(50, nb - b), keys.data() + b * HS);
  row.faiss_add_us = seconds_since(ta) * 1e6 / static_cast<double>(nb);
  std::vector<float> dist(static_cast<size_t>(n * k));
  std::vector<faiss::Index::idx_t> ids(static_cast<size_t>(n * k));
  row.faiss_us = 1e30;
  for (int rep = 0; rep < 3; ++rep) {
    const Clock::time_point t0 = Clock::now();
    hnsw.search(n, q.data<float>(), k, dist.data(), ids.data());
    row.faiss_us = std::min(row.faiss_us, seconds_since(t0) * 1e6 / n);
  }
  std::vector<std::vector<int32_t>> by_faiss(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < k; ++j) by_faiss[i].push_back(static_cast<int32_t>(ids[i * k + j]));
  row.faiss_recall = recall_against(by_scan, by_faiss);
#endif
  return row;
}

int bench_main(int argc, char** argv) {
  using namespace lm;
  int64_t max_blocks = 1000000;
  std::string out;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      std::printf("%s", kUsage);
      return 0;
    } else if (a == "--max-blocks" && i + 1 < argc) {
      max_blocks = bench::parse_int_flag("--max-blocks", argv[++i], 1000, 10000000);
    } else if (a == "--search-tiles" && i + 1 < argc) {
      g_search_tiles = bench::parse_int_flag("--search-tiles", argv[++i], 1, 1 << 20);
    } else if (a == "--out" && i + 1 < argc) {
      out = argv[++i];
    } else {
      throw bench::UsageError{"unknown or incomplete flag '" + a + "'"};
    }
  }
  const cpu::CacheSizes& caches = cpu::cache_sizes();
  bench::print_machine_line(cpu::num_threads(), caches.l1d, caches.l2, caches.l3_per_core, caches.source.c_str());
  std::printf("top-k benchmark: %s, %d thread(s); one head of 32 features, f32, time per query (best of 3); approx: "
              "a budget of %lld tiles\n",
              bench::cpu_model().c_str(), cpu::num_threads(), static_cast<long long>(g_search_tiles));
  std::printf("%-8s %2s %9s | %12s %12s %9s | %8s | %10s %7s | %10s %10s %7s\n", "keys", "k", "blocks", "scan us", "bounded us",
              "scored", "speedup", "approx us", "recall", "faiss us", "add us", "recall");
  {  // One measurement thrown away: the process's first one paid for its page faults and thread
     // start-up (a run on 2026-11-27 timed the scan of the first row at 367 us, then 1.2 us for
     // the same size). Its own generator, so the rows below see the same keys either way.
    std::mt19937_64 warm(1);
    measure("passkey", 1000, 4, warm);
  }
  std::mt19937_64 gen(11);
  std::vector<Row> rows;
  for (const char* kind : {"passkey", "random"})
    for (int64_t k : {4, 5}) {
      if (std::string(kind) == "random" && k == 5) continue;
      for (int64_t nb = 1000; nb <= max_blocks; nb *= 10) {
        rows.push_back(measure(kind, nb, k, gen));
        const Row& r = rows.back();
        std::printf("%-8s %2lld %9lld | %12.2f %12.2f %8.1f%% | %7.2fx | %10.2f %6.1f%%", kind, (long long)k, (long long)nb,
                    r.scan_us, r.bounded_us, r.scored_pct, r.scan_us / r.bounded_us, r.approx_us, 100 * r.approx_recall);
        if (r.faiss_us >= 0) std::printf(" | %10.2f %10.2f %6.1f%%\n", r.faiss_us, r.faiss_add_us, 100 * r.faiss_recall);
        else std::printf(" | %10s %10s %7s\n", "-", "-", "-");
        std::fflush(stdout);
      }
    }
  if (!out.empty()) {
    const std::string tsv = out + ".tsv";
    std::string text =
        "keys\tk\tblocks\tscan_us\tbounded_us\tscored_pct\tapprox_us\tapprox_recall\tfaiss_us\tfaiss_add_us\tfaiss_recall\n";
    for (const Row& r : rows) {
      char line[512];
      std::snprintf(line, sizeof line, "%s\t%lld\t%lld\t%.3f\t%.3f\t%.2f\t%.3f\t%.4f\t%.3f\t%.3f\t%.4f\n", r.keys.c_str(),
                    (long long)r.k, (long long)r.blocks, r.scan_us, r.bounded_us, r.scored_pct, r.approx_us,
                    r.approx_recall, r.faiss_us, r.faiss_add_us, r.faiss_recall);
      text += line;
    }
    write_file_atomic(tsv, text, "bench_topk");  // the checked writer (tensor/files.h)
    std::vector<plot::Series> series;
    for (const char* kind : {"passkey", "random"})
      for (int64_t k : {4, 5})
        for (int method = 0; method < 4; ++method) {
          plot::Series s;
          static const char* names[] = {"scan, ", "bounded, ", "faiss hnsw, ", "approx, "};
          s.label = std::string(names[method]) + kind + " k " + std::to_string(k);
          // One hue per method; pass-key k 5 a lighter shade of it, random keys a darker one.
          const plot::Rgb c = plot::palette_color(method);
          auto shade = [&](uint8_t v) -> uint8_t {
            if (std::string(kind) == "random") return static_cast<uint8_t>(0.55 * v);  // darker
            if (k == 5) return static_cast<uint8_t>((v + 255) / 2);                    // lighter
            return v;
          };
          s.color = plot::Rgb{shade(c.r), shade(c.g), shade(c.b)};
          for (const Row& r : rows)
            if (r.keys == kind && r.k == k && (method != 2 || r.faiss_us >= 0)) {
              s.x.push_back(static_cast<double>(r.blocks));
              s.y.push_back(method == 0 ? r.scan_us : method == 1 ? r.bounded_us : method == 2 ? r.faiss_us : r.approx_us);
            }
          if (!s.x.empty()) series.push_back(s);
        }
    plot::LineChartOptions o;
    o.title = "top-k time per query (" + bench::cpu_model() + ", " + std::to_string(cpu::num_threads()) + " threads)";
    o.x_label = "cached blocks";
    o.y_label = "microseconds per query";
    o.log_x = o.log_y = true;
    o.markers = true;
    plot::line_chart(out + ".png", series, o);
    std::printf("wrote %s and %s.png\n", tsv.c_str(), out.c_str());
  }
  double last = 0;
  for (const Row& r : rows)
    if (r.keys == "passkey" && r.k == 4) last = r.scan_us / r.bounded_us;
  std::printf("topk bounded_speedup_passkey_k4_at_max=%.2f\n", last);
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return lm::bench::run_bench_main("bench_topk", kUsage, argc, argv, bench_main); }
