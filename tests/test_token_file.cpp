// test_token_file.cpp: token files (round trips at both widths, every rejection with its
// message, atomic writes, prepare_tokens = encoding whole files) and random-window batching
// (shifted targets, reproducibility from (seed, cursor), starts in range, Philox by hand).
#include <catch2/catch.hpp>

#include <zlib.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <unistd.h>
#include <vector>

#include "tensor/check.h"
#include "tests/helpers.h"
#include "tensor/rng.h"
#include "train/batch.h"
#include "train/file_io.h"
#include "train/token_file.h"
#include "train/tokenizer.h"

namespace fs = std::filesystem;

namespace {
std::string read_bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}
// Header bytes before the fingerprint: magic 8 + version 4 + width 4 + vocab 8 + count 8 + fp length 4;
// after the fingerprint, version 2's CRC-32 (4).
constexpr size_t kFixed = 36;
constexpr size_t kCrc = 4;
// A file's CRC-32 recomputed over its bytes (all but the CRC field, which sits before the tokens
// that start at `tokens_at`), written into that field: so a test can change a byte on purpose and
// still reach the checks after the CRC.
std::string with_fresh_crc(std::string bytes, size_t tokens_at) {
  const size_t field = tokens_at - kCrc;
  uLong crc = crc32(0L, Z_NULL, 0);
  crc = crc32(crc, reinterpret_cast<const Bytef*>(bytes.data()), static_cast<uInt>(field));
  crc = crc32(crc, reinterpret_cast<const Bytef*>(bytes.data() + tokens_at), static_cast<uInt>(bytes.size() - tokens_at));
  for (int i = 0; i < 4; ++i) bytes[field + static_cast<size_t>(i)] = static_cast<char>((crc >> (8 * i)) & 0xFF);
  return bytes;
}
}  // namespace

TEST_CASE("token file round trip with 2-byte tokens", "[token_file]") {
  fs::path dir = lm::test::fresh_temp_dir("tokfile_u16");
  const std::string path = (dir / "a.tok").string();
  const std::vector<int32_t> tokens = {0, 1, 299, 7, 255, 256, 42};
  lm::write_token_file(path, tokens, 300, "fnv1a64:abc");
  CHECK_FALSE(fs::exists(path + ".tmp"));
  const std::string raw = read_bytes(path);
  REQUIRE(raw.size() == kFixed + 11 + kCrc + 2 * tokens.size());
  CHECK(raw.substr(0, 8) == "LMTOKENS");
  CHECK(raw[8] == 2);   // version
  CHECK(raw[12] == 2);  // width
  // Token 299 = 0x012B, little-endian, is the third token.
  CHECK(static_cast<unsigned char>(raw[kFixed + 11 + kCrc + 4]) == 0x2B);
  CHECK(static_cast<unsigned char>(raw[kFixed + 11 + kCrc + 5]) == 0x01);
  // The CRC field holds zlib's CRC-32 of the other bytes (recomputing it changes nothing).
  CHECK(with_fresh_crc(raw, kFixed + 11 + kCrc) == raw);

  lm::TokenFile f(path);
  CHECK(f.checksummed());
  CHECK(f.size() == 7);
  CHECK(f.vocab() == 300);
  CHECK(f.fingerprint() == "fnv1a64:abc");
  CHECK(f.tokens() == tokens);
  CHECK(f[2] == 299);
  CHECK(f.data()[6] == 42);
  f.check_fingerprint("fnv1a64:abc");
  CHECK_THROWS_WITH(f.check_fingerprint("fnv1a64:other"), Catch::Contains("fnv1a64:other") &&
                    Catch::Contains("fnv1a64:abc"));

  // The largest vocab that still fits 2 bytes.
  lm::write_token_file(path, {65535, 0}, 65536, "");
  CHECK(read_bytes(path).size() == kFixed + kCrc + 2 * 2);
  CHECK(lm::TokenFile(path).tokens() == std::vector<int32_t>{65535, 0});
  fs::remove_all(dir);
}

TEST_CASE("token file round trip with 4-byte tokens", "[token_file]") {
  fs::path dir = lm::test::fresh_temp_dir("tokfile_u32");
  const std::string path = (dir / "b.tok").string();
  const std::vector<int32_t> tokens = {69999, 0, 65536, 123456 % 70000, 5};
  lm::write_token_file(path, tokens, 70000, "fp");
  CHECK(lm::token_width_for_vocab(70000) == 4);
  CHECK(read_bytes(path).size() == kFixed + 2 + kCrc + 4 * tokens.size());
  lm::TokenFile f(path);
  CHECK(f.vocab() == 70000);
  CHECK(f.tokens() == tokens);
  // Empty files are valid too.
  lm::write_token_file(path, {}, 70000, "fp");
  CHECK(lm::TokenFile(path).size() == 0);
  fs::remove_all(dir);
}

TEST_CASE("token file reader rejects bad files, naming the file and the problem", "[token_file]") {
  fs::path dir = lm::test::fresh_temp_dir("tokfile_bad");
  const std::string good = (dir / "good.tok").string();
  lm::write_token_file(good, {1, 2, 3, 4}, 300, "fp");
  const std::string bytes = read_bytes(good);
  auto variant = [&](const std::string& name, const std::string& content) {
    const std::string p = (dir / name).string();
    lm::test::write_text_file(p, content);
    return p;
  };

  const std::string missing = (dir / "missing.tok").string();
  CHECK_THROWS_WITH(lm::TokenFile(missing), Catch::Contains(missing) && Catch::Contains("cannot open"));

  std::string magic = bytes;
  magic[0] = 'X';
  const std::string p_magic = variant("magic.tok", magic);
  CHECK_THROWS_WITH(lm::TokenFile(p_magic), Catch::Contains(p_magic) && Catch::Contains("wrong magic"));

  std::string version = bytes;
  version[8] = 3;
  const std::string p_version = variant("version.tok", version);
  CHECK_THROWS_WITH(lm::TokenFile(p_version), Catch::Contains(p_version) && Catch::Contains("unsupported version 3"));

  // One flipped bit anywhere (header or tokens) no longer matches the CRC-32.
  for (size_t at : {size_t(17), kFixed + 1, bytes.size() - 1, bytes.size() - 8}) {
    std::string flipped = bytes;
    flipped[at] = static_cast<char>(flipped[at] ^ 0x04);
    const std::string p_flip = variant("flip.tok", flipped);
    INFO("byte " << at);
    CHECK_THROWS_WITH(lm::TokenFile(p_flip), Catch::Contains(p_flip) && Catch::Contains("corrupt"));
  }
  // A version-1 file (no CRC field) is still read, as unverified.
  std::string v1 = bytes.substr(0, kFixed + 2) + bytes.substr(kFixed + 2 + kCrc);
  v1[8] = 1;
  const std::string p_v1 = variant("v1.tok", v1);
  CHECK_FALSE(lm::TokenFile(p_v1).checksummed());
  CHECK(lm::TokenFile(p_v1).tokens() == std::vector<int32_t>{1, 2, 3, 4});

  const std::string p_short = variant("short.tok", bytes.substr(0, bytes.size() - 1));
  CHECK_THROWS_WITH(lm::TokenFile(p_short), Catch::Contains(p_short) && Catch::Contains("truncated") &&
                    Catch::Contains("4 tokens"));
  const std::string p_long = variant("long.tok", bytes + "xx");
  CHECK_THROWS_WITH(lm::TokenFile(p_long), Catch::Contains("4 tokens"));
  const std::string p_header = variant("header.tok", bytes.substr(0, 20));
  CHECK_THROWS_WITH(lm::TokenFile(p_header), Catch::Contains("truncated header"));

  std::string width = bytes;
  width[12] = 4;  // vocab 300 must use 2 bytes (checked before the CRC)
  const std::string p_width = variant("width.tok", width);
  CHECK_THROWS_WITH(lm::TokenFile(p_width), Catch::Contains("bad token width 4"));

  std::string range = bytes;
  range[kFixed + 2 + kCrc + 2 * 2] = 0x2C;  // third token := 300 = 0x012C, equal to the vocab
  range[kFixed + 2 + kCrc + 2 * 2 + 1] = 0x01;
  const std::string p_range = variant("range.tok", with_fresh_crc(range, kFixed + 2 + kCrc));
  CHECK_THROWS_WITH(lm::TokenFile(p_range), Catch::Contains(p_range) && Catch::Contains("token 300 at index 2") &&
                    Catch::Contains("out of range"));

  // The writer refuses too, and leaves nothing behind.
  const std::string p_w = (dir / "w.tok").string();
  CHECK_THROWS_WITH(lm::write_token_file(p_w, {1, 300}, 300, ""), Catch::Contains("out of range"));
  CHECK_THROWS_AS(lm::write_token_file(p_w, {-1}, 300, ""), lm::Error);
  CHECK_FALSE(fs::exists(p_w));
  CHECK_THROWS_AS(lm::TokenFile::from_tokens({0, 5}, 5), lm::Error);
  fs::remove_all(dir);
}

TEST_CASE("prepare_tokens equals encoding each file whole", "[token_file]") {
  fs::path dir = lm::test::fresh_temp_dir("tokfile_prepare");
  // A second file of ~2.2 MB so that it is encoded in several ~1 MB pieces.
  std::string small = "It is a truth universally acknowledged.\n\nCHAPTER 2\n";
  std::string big;
  const char* words[] = {"the", "quick", "brown", "fox's", "tale", "\n", "  ", "42", "caf\xC3\xA9", "--"};
  uint32_t x = 7;
  while (big.size() < 2200000) {
    x = x * 1664525u + 1013904223u;
    big += words[(x >> 16) % 10];
    big += ((x >> 8) % 5 == 0) ? "" : " ";
  }
  lm::test::write_text_file(dir / "a.txt", small);
  lm::test::write_text_file(dir / "b.txt", big);
  lm::BpeTokenizer tok = lm::BpeTokenizer::train(small + big.substr(0, 100000), 320);
  tok.add_special("<|landmark|>");

  int64_t last_done = -1, last_total = -1, calls = 0;
  const std::string out = (dir / "ab.tok").string();
  lm::PrepareStats stats = lm::prepare_tokens({(dir / "a.txt").string(), (dir / "b.txt").string()}, tok, out,
                                              [&](int64_t done, int64_t total) {
                                                CHECK(done > last_done);
                                                last_done = done;
                                                last_total = total;
                                                ++calls;
                                              });
  CHECK(calls >= 3);  // small file + at least two pieces of the big one
  CHECK(last_done == static_cast<int64_t>(small.size() + big.size()));
  CHECK(last_total == last_done);
  std::vector<int32_t> expected = tok.encode(small), b = tok.encode(big);
  expected.insert(expected.end(), b.begin(), b.end());
  lm::TokenFile f(out);
  CHECK(f.tokens() == expected);
  CHECK(stats.tokens == static_cast<int64_t>(expected.size()));
  CHECK(stats.files == 2);
  CHECK(f.vocab() == tok.vocab_size());
  CHECK(f.fingerprint() == tok.fingerprint());
  CHECK_THROWS_WITH(lm::prepare_tokens({(dir / "none.txt").string()}, tok, out), Catch::Contains("none.txt"));
  fs::remove_all(dir);
}

namespace {
// Tokens 0, 1, 2, ...: a window's first token is its start, which makes every check direct.
lm::TokenFile counting_file(int32_t n) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (int32_t i = 0; i < n; ++i) t[static_cast<size_t>(i)] = i;
  return lm::TokenFile::from_tokens(std::move(t), n);
}
}  // namespace

TEST_CASE("batches: y is x shifted by one, starts in range and drawn from Philox", "[batch]") {
  const int64_t B = 16, T = 8;
  const lm::TokenFile data = counting_file(100);
  lm::Batch batch = lm::sample_batch(data, B, T, /*seed=*/123, /*cursor=*/40);
  REQUIRE(batch.x.shape() == lm::Shape{B, T});
  REQUIRE(batch.y.shape() == lm::Shape{B, T});
  CHECK(batch.x.dtype() == lm::DType::I32);
  std::vector<int32_t> x = batch.x.to_vector<int32_t>(), y = batch.y.to_vector<int32_t>();
  for (int64_t b = 0; b < B; ++b) {
    const int32_t start = x[b * T];
    CHECK((start >= 0 && start <= 100 - T - 1));
    // The start by hand: Philox block at counter cursor + b on the Data stream, 64 bits mod 92.
    lm::Philox4 r = lm::philox::block(40 + b, static_cast<uint32_t>(lm::RngStream::Data), 123);
    CHECK(start == static_cast<int32_t>(((static_cast<uint64_t>(r.v[1]) << 32) | r.v[0]) % 92));
    for (int64_t t = 0; t < T; ++t) {
      CHECK(x[b * T + t] == start + t);
      CHECK(y[b * T + t] == start + t + 1);
    }
  }
}

TEST_CASE("batches: (seed, cursor) reproduces a batch, other cursors and seeds differ", "[batch]") {
  const lm::TokenFile data = counting_file(5000);
  auto rows = [&](uint64_t seed, uint64_t cursor) {
    return lm::sample_batch(data, 4, 16, seed, cursor).x.to_vector<int32_t>();
  };
  CHECK(rows(7, 0) == rows(7, 0));
  CHECK(rows(7, 0) != rows(7, 4));
  CHECK(rows(7, 0) != rows(8, 0));
  // Row b of cursor c is row 0 of cursor c + b: one counter per row, as documented.
  std::vector<int32_t> a = rows(7, 10), b = rows(7, 12);
  CHECK(std::vector<int32_t>(a.begin() + 2 * 16, a.end()) == std::vector<int32_t>(b.begin(), b.begin() + 2 * 16));
}

TEST_CASE("batches: every start is reachable and roughly uniform", "[batch]") {
  // 4 possible starts, 4000 draws: each count is Binomial(4000, 1/4), sd ~27; 150 is > 5 sd.
  const lm::TokenFile data = counting_file(7);  // T = 3 -> starts 0..3
  std::vector<int> count(4, 0);
  for (uint64_t cursor = 0; cursor < 4000; cursor += 8) {
    std::vector<int32_t> x = lm::sample_batch(data, 8, 3, 99, cursor).x.to_vector<int32_t>();
    for (int b = 0; b < 8; ++b) ++count[static_cast<size_t>(x[b * 3])];
  }
  for (int c : count) CHECK(std::abs(c - 1000) < 150);
}

TEST_CASE("batches: a file shorter than T + 1 tokens is a clear error", "[batch]") {
  const lm::TokenFile data = counting_file(8);
  CHECK_THROWS_WITH(lm::sample_batch(data, 2, 8, 1, 0), Catch::Contains("holds 8 tokens") &&
                    Catch::Contains("T + 1 = 9"));
  // Exactly T + 1 tokens: one possible window, start 0.
  std::vector<int32_t> x = lm::sample_batch(data, 3, 7, 1, 0).x.to_vector<int32_t>();
  for (int b = 0; b < 3; ++b) CHECK(x[b * 7] == 0);
  CHECK_THROWS_AS(lm::sample_batch(data, 0, 4, 1, 0), lm::Error);
}

TEST_CASE("batches: --doc-starts windows begin right after a separator, every such start is drawn", "[batch]") {
  // Documents of 3, 5 and 4 tokens, each ending in the separator 9: [1 2 9][3 4 5 6 9][7 8 1 9] ...
  // repeated twice; by hand the starts are 0, 3, 8, 12, 15, 20 (and 24, the file's end).
  std::vector<int32_t> t;
  for (int rep = 0; rep < 2; ++rep)
    for (int32_t v : {1, 2, 9, 3, 4, 5, 6, 9, 7, 8, 1, 9}) t.push_back(v);
  const lm::TokenFile data = lm::TokenFile::from_tokens(t, 10);
  CHECK(lm::document_starts(data, 9, 100) == std::vector<int64_t>{0, 3, 8, 12, 15, 20});
  // T = 4: a window needs T + 1 = 5 tokens, so the last start is 24 - 5 = 19.
  const std::vector<int64_t> starts = lm::document_starts(data, 9, 24 - 4 - 1);
  REQUIRE(starts == std::vector<int64_t>{0, 3, 8, 12, 15});
  std::set<int32_t> firsts;
  for (uint64_t cursor = 0; cursor < 400; cursor += 8) {
    lm::Batch b = lm::sample_batch(data, 8, 4, 3, cursor, &starts);
    std::vector<int32_t> x = b.x.to_vector<int32_t>(), y = b.y.to_vector<int32_t>();
    for (int r = 0; r < 8; ++r) {
      // The row's start, by hand: the Philox draw over the 5 starts.
      const int64_t s = starts[static_cast<size_t>(lm::window_start(cursor + r, 3, 5))];
      for (int k = 0; k < 4; ++k) {
        CHECK(x[r * 4 + k] == t[static_cast<size_t>(s + k)]);
        CHECK(y[r * 4 + k] == t[static_cast<size_t>(s + k + 1)]);
      }
      firsts.insert(x[r * 4]);
    }
  }
  CHECK(firsts == std::set<int32_t>{1, 3, 7});  // every window opens a document
  // A start past the last full window, or none at all, is an error, not a short window.
  const std::vector<int64_t> too_late{0, 20}, none;
  CHECK_THROWS_WITH(lm::sample_batch(data, 2, 4, 1, 0, &too_late), Catch::Contains("document start 20"));
  CHECK_THROWS_WITH(lm::sample_batch(data, 2, 4, 1, 0, &none), Catch::Contains("no document start"));
}

TEST_CASE("write_file_atomic: replaces the file whole, and a failed write leaves the old one and no temp file",
          "[io]") {
  const fs::path dir = lm::test::fresh_temp_dir("tokfile_atomic");
  const fs::path f = dir / "table.tsv";
  lm::write_file_atomic(f.string(), std::string("a\tb\n", 4));
  lm::write_file_atomic(f.string(), std::string("x\0y", 3));  // binary bytes, shorter than before
  CHECK(read_bytes(f) == std::string("x\0y", 3));
  CHECK_FALSE(fs::exists(dir / "table.tsv.tmp"));
  // A write that fails midway (a file-size limit of 1000 bytes here, a full disk elsewhere): an
  // error that says so, the old file as it was, no temp file.
  {
    lm::test::FileSizeLimit limit(1000);
    CHECK_THROWS_WITH(lm::write_file_atomic(f.string(), std::string(5000, 'z'), "tsv"),
                      Catch::Contains("tsv: writing") && Catch::Contains("table.tsv.tmp") &&
                          Catch::Contains("File too large"));
  }
  CHECK(read_bytes(f) == std::string("x\0y", 3));
  CHECK_FALSE(fs::exists(dir / "table.tsv.tmp"));
  // A leftover regular temp file (an earlier write interrupted) is replaced, not appended to.
  lm::test::write_text_file(dir / "table.tsv.tmp", "stale stale stale");
  lm::write_file_atomic(f.string(), "new");
  CHECK(read_bytes(f) == "new");
  CHECK_FALSE(fs::exists(dir / "table.tsv.tmp"));
  // A directory where the file should go is refused before anything is written.
  fs::create_directories(dir / "taken");
  fs::path inner = dir / "taken" / "keep.txt";
  lm::write_file_atomic(inner.string(), "kept");
  CHECK_THROWS_WITH(lm::write_file_atomic((dir / "taken").string(), "new", "tsv"),
                    Catch::Contains("tsv: ") && Catch::Contains("taken is a directory"));
  CHECK_FALSE(fs::exists(dir / "taken.tmp"));
  CHECK(read_bytes(inner) == "kept");
  // A folder that does not exist: nothing is written, the error names the file.
  CHECK_THROWS_WITH(lm::write_file_atomic((dir / "missing" / "t.tsv").string(), "z"), Catch::Contains("t.tsv.tmp"));
  fs::remove_all(dir);
}

TEST_CASE("write_file_atomic: an output path that is not a regular file is refused and left as it was", "[io]") {
  // Before the writer refused them, each of these became a regular file (the rename replaced it)
  // and the write reported success; run as root with --out /dev/full, it replaced the system's
  // device. Every node here is made in the test's own folder, except /dev/null at the end.
  const fs::path dir = lm::test::fresh_temp_dir("atomic_not_regular");
  struct RemoveAtEnd {  // also when a REQUIRE below stops the test early
    fs::path dir;
    ~RemoveAtEnd() {
      std::error_code ec;
      fs::remove_all(dir, ec);
    }
  } remove_at_end{dir};
  const auto refused = [&](const fs::path& p, const std::string& kind) {
    std::string error;
    try {
      lm::write_file_atomic(p.string(), "replaced", "explore");
    } catch (const lm::Error& e) {
      error = e.what();
    }
    INFO("writing " << p << " gave: " << (error.empty() ? "no error" : error));
    CHECK_THAT(error, Catch::Contains("explore: " + p.string() + " is " + kind + ", not a regular file"));
    CHECK_FALSE(fs::exists(fs::symlink_status(p.string() + ".tmp")));
    return !error.empty();
  };
  // A FIFO: first, and required, because the cases below must not run against a writer that
  // replaces what it is given (the last one names a real device).
  REQUIRE(lm::test::make_fifo(dir / "pipe"));
  REQUIRE(refused(dir / "pipe", "a FIFO (named pipe)"));
  CHECK(fs::is_fifo(fs::symlink_status(dir / "pipe")));
  bool own_device_refused = false;
  if (lm::test::make_char_device(dir / "null")) {  // only as root; a twin of /dev/null, ours to lose
    REQUIRE(refused(dir / "null", "a device"));
    REQUIRE(fs::is_character_file(fs::symlink_status(dir / "null")));
    own_device_refused = true;
  }
  if (lm::test::make_socket(dir / "sock")) {
    CHECK(refused(dir / "sock", "a socket"));
    CHECK(fs::is_socket(fs::symlink_status(dir / "sock")));
  }
  // A symbolic link is refused, not written through: its target keeps its bytes, the link stays
  // a link, and a dangling link does not create the file it names.
  lm::test::write_text_file(dir / "theirs.txt", "someone else's");
  fs::create_symlink(dir / "theirs.txt", dir / "link");
  CHECK(refused(dir / "link", "a symbolic link to " + (dir / "theirs.txt").string()));
  CHECK(fs::is_symlink(fs::symlink_status(dir / "link")));
  CHECK(read_bytes(dir / "theirs.txt") == "someone else's");
  fs::create_symlink(dir / "nowhere.txt", dir / "dangling");
  CHECK(refused(dir / "dangling", "a symbolic link to " + (dir / "nowhere.txt").string()));
  CHECK_FALSE(fs::exists(dir / "nowhere.txt"));
  // Something other than a regular file under the temporary name is not written through either
  // (a FIFO there would block the open; a link would send the bytes to its target).
  fs::create_symlink(dir / "theirs.txt", dir / "out.tsv.tmp");
  CHECK_THROWS_WITH(lm::write_file_atomic((dir / "out.tsv").string(), "x", "tsv"),
                    Catch::Contains("out.tsv.tmp") && Catch::Contains("is a symbolic link"));
  CHECK(read_bytes(dir / "theirs.txt") == "someone else's");
  CHECK_FALSE(fs::exists(dir / "out.tsv"));
  REQUIRE(lm::test::make_fifo(dir / "out2.tsv.tmp"));
  CHECK_THROWS_WITH(lm::write_file_atomic((dir / "out2.tsv").string(), "x", "tsv"),
                    Catch::Contains("out2.tsv.tmp") && Catch::Contains("is a FIFO"));
  // /dev/null, a character device on every machine: refused, still a device, no /dev/null.tmp;
  // tried only where a writer that failed the cases above could not replace it.
  if (lm::test::may_aim_at_dev_null(own_device_refused)) {
    CHECK(refused("/dev/null", "a device"));
    CHECK(fs::is_character_file(fs::symlink_status("/dev/null")));
  } else {
    WARN("/dev/null not tried: this process may write to /dev but could not make a device of its own to try first");
  }
}

TEST_CASE("AppendFile: whole lines appended or truncated, and a path that is not a regular file refused", "[io]") {
  // The one checked open for a log that grows a line at a time (train's metrics.jsonl).
  const fs::path dir = lm::test::fresh_temp_dir("append_file");
  const fs::path f = dir / "metrics.jsonl";
  {
    lm::AppendFile file(f.string(), true, "train");
    std::ostream out(&file);
    out << "{\"step\":" << 1 << "}\n";
    CHECK(read_bytes(f) == "{\"step\":1}\n");  // a finished line is on disk at once
    out << "{\"step\":" << 2;
    CHECK(read_bytes(f) == "{\"step\":1}\n");  // an unfinished one is not
    out << "}\n";
  }
  CHECK(read_bytes(f) == "{\"step\":1}\n{\"step\":2}\n");
  {
    lm::AppendFile file(f.string(), false, "train");  // appended to
    std::ostream out(&file);
    out << "x";  // no newline: written when the file closes
  }
  CHECK(read_bytes(f) == "{\"step\":1}\n{\"step\":2}\nx");
  { lm::AppendFile file(f.string(), true, "train"); }  // truncated
  CHECK(read_bytes(f).empty());
  // A write that fails (a file-size limit here, a full disk elsewhere) is an error naming the file.
  {
    lm::AppendFile file(f.string(), true, "train");
    std::ostream out(&file);
    out.exceptions(std::ios::badbit);
    lm::test::FileSizeLimit limit(1000);
    CHECK_THROWS_WITH(out << std::string(5000, 'z') << "\n",
                      Catch::Contains("train: writing") && Catch::Contains("metrics.jsonl") &&
                          Catch::Contains("File too large"));
  }
  // Refused, naming what is there, before anything is opened (a FIFO would block the open):
  const auto refused = [&](const fs::path& p, const std::string& kind) {
    std::string error;
    try {
      lm::AppendFile file(p.string(), false, "train: the metrics log");
    } catch (const lm::Error& e) {
      error = e.what();
    }
    INFO("opening " << p << " gave: " << (error.empty() ? "no error" : error));
    CHECK_THAT(error, Catch::Contains("train: the metrics log: " + p.string() + " is " + kind));
  };
  REQUIRE(lm::test::make_fifo(dir / "pipe"));
  refused(dir / "pipe", "a FIFO (named pipe)");
  lm::test::write_text_file(dir / "theirs.txt", "someone else's");
  fs::create_symlink(dir / "theirs.txt", dir / "link");
  refused(dir / "link", "a symbolic link");
  CHECK(read_bytes(dir / "theirs.txt") == "someone else's");
  fs::create_directories(dir / "folder");
  refused(dir / "folder", "a directory");
  if (lm::test::make_char_device(dir / "null")) refused(dir / "null", "a device");  // only as root
  refused("/dev/null", "a device");  // refused before it is opened: nothing written to it
  fs::remove_all(dir);
}
