// test_corpus.cpp: the R unserialiser and lazy-load database reader on blobs built here by hand,
// byte by byte, following R's XDR format (big-endian ints, "X\n" header); zlib and gzip come
// from zlib itself. Needs no network, no R and no Debian package.
#include <catch2/catch.hpp>

#include <zlib.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>
#include <filesystem>
#include <fstream>
#include <string>
#include <pthread.h>
#include <unistd.h>
#include <vector>

#include "tensor/check.h"
#include "train/corpus.h"

namespace fs = std::filesystem;

namespace {
// R's SEXP type codes and flag bits, written out here independently of corpus.cpp.
constexpr int kSym = 1, kList = 2, kClosure = 3, kChar = 9, kLgl = 10, kInt = 13, kReal = 14, kStr = 16, kVec = 19;
constexpr int kNil = 254, kRef = 255, kAttr = 1 << 9, kTag = 1 << 10;
constexpr int kAsciiLevels = 64 << 12, kLatin1Levels = 4 << 12;

struct Xdr {
  std::string b;
  Xdr& i32(int32_t v) {
    for (int s = 24; s >= 0; s -= 8) b.push_back(static_cast<char>((static_cast<uint32_t>(v) >> s) & 0xFF));
    return *this;
  }
  Xdr& f64(double d) {
    uint64_t bits;
    std::memcpy(&bits, &d, 8);
    i32(static_cast<int32_t>(bits >> 32));
    return i32(static_cast<int32_t>(bits & 0xFFFFFFFFu));
  }
  Xdr& raw(const std::string& s) { b += s; return *this; }
  Xdr& header_v2() { return raw("X\n").i32(2).i32(0x040201).i32(0x020300); }
  Xdr& header_v3() { return raw("X\n").i32(3).i32(0x040201).i32(0x030500).i32(5).raw("UTF-8"); }
  Xdr& chars(const std::string& s, int levels = kAsciiLevels) { return i32(kChar | levels).i32(static_cast<int32_t>(s.size())).raw(s); }
  Xdr& na_chars() { return i32(kChar).i32(-1); }
  Xdr& str(const std::vector<std::string>& v, int flags = 0) {
    i32(kStr | flags).i32(static_cast<int32_t>(v.size()));
    for (const auto& s : v) chars(s);
    return *this;
  }
  Xdr& symbol(const std::string& name) { return i32(kSym).chars(name); }
  Xdr& ref(int index) { return i32((index << 8) | kRef); }
  Xdr& nil() { return i32(kNil); }
};

std::string zlib_compress(const std::string& s) {
  uLongf n = compressBound(s.size());
  std::string out(n, '\0');
  REQUIRE(compress2(reinterpret_cast<Bytef*>(&out[0]), &n, reinterpret_cast<const Bytef*>(s.data()), s.size(), 6) == Z_OK);
  out.resize(n);
  return out;
}
void gzip_to_file(const fs::path& p, const std::string& s) {
  gzFile f = gzopen(p.string().c_str(), "wb");
  REQUIRE(f != nullptr);
  REQUIRE(gzwrite(f, s.data(), static_cast<unsigned>(s.size())) == static_cast<int>(s.size()));
  gzclose(f);
}
std::string be32(uint32_t v) { return Xdr().i32(static_cast<int32_t>(v)).b; }

// n zero bytes deflated (window_bits 15: zlib, 31: gzip) from one 1 MiB buffer fed again and
// again, so a stream of 64 MiB of zeros costs 1 MiB of memory to make. Run-length matching
// (Z_RLE) deflates zeros at about 1000:1, close to deflate's limit of 1032:1, in 2 ms per MiB.
std::string deflate_zeros(size_t n, int window_bits) {
  z_stream zs{};
  REQUIRE(deflateInit2(&zs, 9, Z_DEFLATED, window_bits, 8, Z_RLE) == Z_OK);
  const std::vector<unsigned char> zeros(size_t{1} << 20, 0);
  std::string out;
  std::vector<unsigned char> buf(size_t{1} << 16);
  for (size_t left = n;;) {
    const size_t take = std::min(left, zeros.size());
    zs.next_in = const_cast<unsigned char*>(zeros.data());
    zs.avail_in = static_cast<uInt>(take);
    left -= take;
    const int flush = left == 0 ? Z_FINISH : Z_NO_FLUSH;
    int rc;
    do {
      zs.next_out = buf.data();
      zs.avail_out = static_cast<uInt>(buf.size());
      rc = deflate(&zs, flush);
      out.append(reinterpret_cast<const char*>(buf.data()), buf.size() - zs.avail_out);
    } while (zs.avail_out == 0 || (flush == Z_FINISH && rc != Z_STREAM_END));
    if (left == 0) break;
  }
  deflateEnd(&zs);
  return out;
}

// A gzip stream's last 4 bytes are ISIZE, the inflated size mod 2^32, little-endian.
std::string with_gzip_size(std::string gz, uint32_t isize) {
  for (int i = 0; i < 4; ++i) gz[gz.size() - 4 + i] = static_cast<char>((isize >> (8 * i)) & 0xFF);
  return gz;
}
}  // namespace

TEST_CASE("R unserialize: a named character vector with an NA", "[corpus]") {
  // c(a = "x", b = NA): STRSXP with attributes; attributes = pairlist(names = c("a", "b")).
  Xdr x;
  x.header_v3().i32(kStr | kAttr).i32(2).chars("x").na_chars();
  x.i32(kList | kTag).symbol("names").str({"a", "b"}).nil();
  std::shared_ptr<lm::RObject> v = lm::r_unserialize(x.b);
  REQUIRE(v->type == lm::RObject::STR);
  CHECK(v->strings == std::vector<std::string>{"x", ""});
  CHECK(v->string_na == std::vector<char>{0, 1});
  CHECK(v->names() == std::vector<std::string>{"a", "b"});
  REQUIRE(v->attr("names") != nullptr);
  CHECK(v->attr("class") == nullptr);
}

TEST_CASE("R unserialize: lists, numbers, pairlists and symbol back-references", "[corpus]") {
  // list(first = 1:3, second = c(n = 2.5), third = TRUE) in version 2. "names" appears three
  // times: spelled out once, then as REFSXP 1 (symbols are stored in the reference table).
  Xdr x;
  x.header_v2().i32(kVec | kAttr).i32(3);
  x.i32(kInt).i32(3).i32(1).i32(2).i32(3);
  x.i32(kReal | kAttr).i32(1).f64(2.5);
  x.i32(kList | kTag).symbol("names").str({"n"}).nil();
  x.i32(kLgl).i32(1).i32(1);
  x.i32(kList | kTag).ref(1).str({"first", "second", "third"}).nil();
  std::shared_ptr<lm::RObject> v = lm::r_unserialize(x.b);
  REQUIRE(v->type == lm::RObject::VEC);
  CHECK(v->names() == std::vector<std::string>{"first", "second", "third"});
  CHECK(v->element("first").ints == std::vector<int32_t>{1, 2, 3});
  CHECK(v->element("second").reals == std::vector<double>{2.5});
  CHECK(v->element("second").names() == std::vector<std::string>{"n"});
  CHECK(v->element("third").type == lm::RObject::LGL);
  CHECK_THROWS_WITH(v->element("fourth"), Catch::Contains("fourth"));

  // A bare pairlist (tagged cells, NULL-terminated) flattens to items + tags.
  Xdr p;
  p.header_v2().i32(kList | kTag).symbol("a").str({"1"}).i32(kList | kTag).symbol("b").i32(kInt).i32(1).i32(7).nil();
  std::shared_ptr<lm::RObject> l = lm::r_unserialize(p.b);
  REQUIRE(l->type == lm::RObject::LIST);
  CHECK(l->tags == std::vector<std::string>{"a", "b"});
  CHECK(l->element("b").ints == std::vector<int32_t>{7});
}

TEST_CASE("R unserialize: Latin-1 strings become UTF-8", "[corpus]") {
  Xdr x;
  x.header_v2().i32(kStr).i32(1).chars("caf\xE9", kLatin1Levels);
  CHECK(lm::r_unserialize(x.b)->strings[0] == "caf\xC3\xA9");
}

TEST_CASE("R unserialize: bad input fails with the reason", "[corpus]") {
  Xdr good;
  good.header_v2().str({"hello"});
  CHECK_THROWS_WITH(lm::r_unserialize(good.b.substr(0, good.b.size() - 2)), Catch::Contains("unexpected end"));
  CHECK_THROWS_WITH(lm::r_unserialize("A\n2\n"), Catch::Contains("not XDR"));
  CHECK_THROWS_WITH(lm::r_unserialize(Xdr().raw("X\n").i32(4).i32(0).i32(0).b), Catch::Contains("version 4"));
  CHECK_THROWS_WITH(lm::r_unserialize(Xdr().header_v2().i32(kClosure).b), Catch::Contains("SEXP type 3"));
  CHECK_THROWS_WITH(lm::r_unserialize(Xdr().header_v2().ref(2).b), Catch::Contains("reference 2"));
  CHECK_THROWS_WITH(lm::r_unserialize(Xdr().header_v2().i32(kInt).i32(1000000).b), Catch::Contains("length 1000000"));
}

TEST_CASE("lazy-load database with zlib entries, and the Austen extraction", "[corpus]") {
  fs::path dir = fs::temp_directory_path() / ("lm_test_corpus_" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::vector<std::string> names = {"emma", "mansfieldpark", "northangerabbey", "persuasion",
                                          "prideprejudice", "sensesensibility"};
  // The .rdb: per object, a 4-byte big-endian length and a zlib stream of its serialisation.
  std::string rdb;
  std::vector<std::pair<int, int>> where;
  for (const std::string& n : names) {
    const std::string blob = Xdr().header_v3().str({n + " line 1", "", n + " end"}).b;
    const std::string entry = be32(static_cast<uint32_t>(blob.size())) + zlib_compress(blob);
    where.emplace_back(static_cast<int>(rdb.size()), static_cast<int>(entry.size()));
    rdb += entry;
  }
  // The .rdx (gzip): list(variables = list(name = c(offset, length), ...), references = list(),
  // compressed = TRUE).
  auto index = [&](int compressed) {
    Xdr x;
    x.header_v3().i32(kVec | kAttr).i32(3);
    x.i32(kVec | kAttr).i32(static_cast<int32_t>(names.size()));
    for (const auto& [off, len] : where) x.i32(kInt).i32(2).i32(off).i32(len);
    x.i32(kList | kTag).symbol("names").str(names).nil();
    x.i32(kVec).i32(0);
    x.i32(kLgl).i32(1).i32(compressed);
    x.i32(kList | kTag).ref(1).str({"variables", "references", "compressed"}).nil();
    return x.b;
  };
  std::ofstream(dir / "Rdata.rdb", std::ios::binary) << rdb;
  gzip_to_file(dir / "Rdata.rdx", index(1));

  auto db = lm::read_lazyload_db((dir / "Rdata").string());
  REQUIRE(db.size() == 6);
  CHECK(db.at("emma")->strings == std::vector<std::string>{"emma line 1", "", "emma end"});
  std::map<std::string, std::string> novels = lm::extract_austen(dir.string());
  CHECK(novels.at("persuasion") == "persuasion line 1\n\npersuasion end\n");
  std::vector<std::string> written = lm::write_austen(dir.string(), (dir / "out").string());
  CHECK(written.size() == 6);
  std::ifstream in(dir / "out" / "emma.txt", std::ios::binary);
  CHECK(std::string(std::istreambuf_iterator<char>(in), {}) == "emma line 1\n\nemma end\n");

  // bzip2/xz databases are refused with the reason; a damaged entry names itself.
  gzip_to_file(dir / "Rdata.rdx", index(3));
  CHECK_THROWS_WITH(lm::read_lazyload_db((dir / "Rdata").string()), Catch::Contains("compression method 3"));
  gzip_to_file(dir / "Rdata.rdx", index(1));
  rdb[static_cast<size_t>(where[2].first) + 10] ^= 0x5A;
  std::ofstream(dir / "Rdata.rdb", std::ios::binary | std::ios::trunc) << rdb;
  CHECK_THROWS_WITH(lm::read_lazyload_db((dir / "Rdata").string()), Catch::Contains("northangerabbey"));
  CHECK_THROWS_WITH(lm::extract_austen((dir / "nowhere").string()), Catch::Contains("Rdata.rdx"));

  // An entry whose stream holds 1 MiB more than the length in its header stops there, by name.
  rdb.clear();
  where.clear();
  for (const std::string& n : names) {
    const std::string blob = Xdr().header_v3().str({n}).b;
    const std::string extra = n == "emma" ? std::string(size_t{1} << 20, '\0') : "";
    const std::string entry = be32(static_cast<uint32_t>(blob.size())) + zlib_compress(blob + extra);
    where.emplace_back(static_cast<int>(rdb.size()), static_cast<int>(entry.size()));
    rdb += entry;
  }
  std::ofstream(dir / "Rdata.rdb", std::ios::binary | std::ios::trunc) << rdb;
  gzip_to_file(dir / "Rdata.rdx", index(1));
  CHECK_THROWS_WITH(lm::read_lazyload_db((dir / "Rdata").string()),
                    Catch::Contains("Rdata.rdb entry \"emma\": the data inflates past the") &&
                        Catch::Contains("bytes the header promised"));
  fs::remove_all(dir);
}

TEST_CASE("inflate_bytes: a zlib bomb stops at the size it promised, before inflating the rest", "[corpus]") {
  // 64 MiB of zeros in about 64 KB, behind a header that promises 1000 bytes. The old reader
  // inflated all 64 MiB (and kept them) before comparing; now the output stops at the promise.
  const std::string bomb = deflate_zeros(size_t{64} << 20, 15);
  CHECK(bomb.size() < 70000);
  using Clock = std::chrono::steady_clock;
  auto seconds_since = [](Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); };
  // Promised honestly, it inflates whole; the time that takes is the yardstick below.
  Clock::time_point t0 = Clock::now();
  std::string whole = lm::inflate_bytes(bomb, "bomb", size_t{64} << 20);
  const double whole_s = seconds_since(t0);
  CHECK(whole.size() == (size_t{64} << 20));
  CHECK(whole.find_first_not_of('\0') == std::string::npos);
  std::string().swap(whole);
  t0 = Clock::now();
  CHECK_THROWS_WITH(lm::inflate_bytes(bomb, "bomb", 1000),
                    Catch::Contains("bomb: the data inflates past the 1000 bytes the header promised (stopped there)"));
  // Stopping after 1000 bytes takes microseconds, inflating 64 MiB about 0.1 s (the old reader
  // inflated all of it, then compared: a 1.5 MB stream of 1.5 GiB took it 3.8 s and 2.1 GB).
  CHECK(seconds_since(t0) < whole_s / 10);
  // A promise that deflate cannot keep (more than 1032 bytes out per byte in) is refused before
  // inflating anything; an honest promise still inflates.
  CHECK_THROWS_WITH(lm::inflate_bytes(bomb, "bomb", size_t{1} << 40),
                    Catch::Contains("the header promised 1099511627776 bytes, more than deflate can make of"));
  // A promise deflate could keep but the project cannot use (past 64 MiB; the largest janeaustenr
  // object is a few MB) is refused before inflating, naming the promise: the old reader inflated a
  // 1.5 MB stream's honest 1.5 GiB (11.8 s, 2.1 GB).
  t0 = Clock::now();
  CHECK_THROWS_WITH(lm::inflate_bytes(bomb, "bomb", (size_t{64} << 20) + 1),
                    Catch::Contains("the header promised 67108865 bytes, more than the 67108864 bytes (64 MiB)"));
  CHECK(seconds_since(t0) < whole_s / 10);
  const std::string small = deflate_zeros(size_t{1} << 20, 15);
  CHECK(lm::inflate_bytes(small, "small", size_t{1} << 20) == std::string(size_t{1} << 20, '\0'));
  CHECK_THROWS_WITH(lm::inflate_bytes(small, "small", (size_t{1} << 20) + 1),
                    Catch::Contains("got 1048576 bytes, the header promised 1048577"));
}

TEST_CASE("inflate_bytes: gzip data without a promised size is held to its trailer's size", "[corpus]") {
  // 1 MiB of zeros, gzip-wrapped (as a .rdx index is). The true trailer inflates; a falsified
  // one that says 1000 bytes stops there; one beyond deflate's ratio is refused before inflating.
  const std::string gz = deflate_zeros(size_t{1} << 20, 31);
  CHECK(lm::inflate_bytes(gz, "index").size() == (size_t{1} << 20));
  CHECK_THROWS_WITH(lm::inflate_bytes(with_gzip_size(gz, 1000), "index"),
                    Catch::Contains("index: the data inflates past the 1000 bytes the gzip trailer promised"));
  CHECK_THROWS_WITH(lm::inflate_bytes(with_gzip_size(gz, 0xFFFFFFFFu), "index"),
                    Catch::Contains("the gzip trailer promised 4294967295 bytes, more than deflate can make"));
  // zlib data without a promise is bounded by deflate's ratio only, which honest data never exceeds.
  CHECK(lm::inflate_bytes(deflate_zeros(size_t{1} << 20, 15), "plain").size() == (size_t{1} << 20));
}

TEST_CASE("R unserialize: tags and symbol names copied by reference are bounded by the input's size", "[corpus]") {
  // A pairlist whose first cell's tag is a symbol with a 100 KB name and whose other cells (12
  // bytes each: flags, REFSXP 1, a NULL value) refer to it: each cell copies the name into its tag.
  const std::string name(100000, 'n');
  auto pairlist = [&](int cells) {
    Xdr x;
    x.header_v2().i32(kList | kTag).symbol(name).nil();
    for (int i = 1; i < cells; ++i) x.i32(kList | kTag).ref(1).nil();
    return x.nil().b;
  };
  // 100 cells: 101 KB in, 10 MB of tags, inside 8 x the input + 16 MiB: it loads, every tag whole.
  std::shared_ptr<lm::RObject> ok = lm::r_unserialize(pairlist(100));
  REQUIRE(ok->tags.size() == 100);
  CHECK(ok->tags[99] == name);
  // 3,000 cells: 136 KB in, 300 MB of tags. (The old reader made them all; 340 KB took > 4 GiB.)
  const std::string hostile = pairlist(3000);
  CHECK(hostile.size() < 140000);
  CHECK_THROWS_WITH(lm::r_unserialize(hostile), Catch::Contains("R unserialize: the data expands past") &&
                                                    Catch::Contains("a hostile or corrupt file?"));
  // The same through symbols: a list of 3,000 symbols whose names are references to the first.
  Xdr syms;
  syms.header_v2().i32(kVec).i32(3000).symbol(name);
  for (int i = 1; i < 3000; ++i) syms.i32(kSym).ref(1);
  CHECK_THROWS_WITH(lm::r_unserialize(syms.b), Catch::Contains("the data expands past"));
  // Plain data is inside the bound: 300,000 lines of a novel-like text (a quarter of them empty,
  // as between paragraphs) load, and so do a million empty strings, the most a character vector
  // holds per byte of its file (a 32-byte string per 8 bytes: 33 MB from 8 MB).
  std::vector<std::string> lines;
  for (int i = 0; i < 300000; ++i)
    lines.push_back(i % 4 == 3 ? "" : "It is a truth universally acknowledged, line " + std::to_string(i));
  CHECK(lm::r_unserialize(Xdr().header_v3().str(lines).b)->strings == lines);
  CHECK(lm::r_unserialize(Xdr().header_v3().str(std::vector<std::string>(1000000)).b)->strings.size() == 1000000);
}

namespace {
// An object nested `levels` deep, three ways. Lists: list(list(...(NULL))), `levels` lists. CAR:
// a pairlist cell whose value is the next cell, each ended by a NULL CDR. Attributes: an integer
// whose attributes are a pairlist whose value is the next such integer (two levels per step).
enum class Nest { kListOfLists, kPairlistInCar, kAttributes };
std::string nested(Nest kind, int levels) {
  Xdr x;
  x.header_v2();
  for (int i = 0; i < levels; ++i) {
    if (kind == Nest::kListOfLists) x.i32(kVec).i32(1);
    if (kind == Nest::kPairlistInCar) x.i32(kList);
    if (kind == Nest::kAttributes) {
      x.i32(kInt | kAttr).i32(0).i32(kList | kTag);
      i == 0 ? x.symbol("a") : x.ref(1);
    }
  }
  x.nil();
  for (int i = 0; kind != Nest::kListOfLists && i < levels; ++i) x.nil();  // each cell's CDR
  return x.b;
}

// What r_unserialize(bytes) throws when run on a thread with a stack of `stack_bytes` ("" if it
// returns). A stack too small for the reader's recursion kills the test program.
std::string unserialize_on_stack(const std::string& bytes, size_t stack_bytes) {
  struct Job {
    const std::string& bytes;
    std::string error;
  } job{bytes, ""};
  auto run = [](void* p) -> void* {
    auto* j = static_cast<Job*>(p);
    try {
      lm::r_unserialize(j->bytes);
    } catch (const std::exception& e) {
      j->error = e.what();
    }
    return nullptr;
  };
  pthread_attr_t attr;
  REQUIRE(pthread_attr_init(&attr) == 0);
  REQUIRE(pthread_attr_setstacksize(&attr, stack_bytes) == 0);
  pthread_t thread;
  REQUIRE(pthread_create(&thread, &attr, run, &job) == 0);
  REQUIRE(pthread_join(thread, nullptr) == 0);
  pthread_attr_destroy(&attr);
  return job.error;
}
}  // namespace

TEST_CASE("R unserialize: nesting is refused past 200 levels, in lists, pairlist values and attributes", "[corpus]") {
  // 200 levels: far past any R data (janeaustenr's index nests 5). The path from the top down to
  // the last NULL may hold 200 objects.
  CHECK_NOTHROW(lm::r_unserialize(nested(Nest::kListOfLists, 199)));
  CHECK_THROWS_WITH(lm::r_unserialize(nested(Nest::kListOfLists, 200)), Catch::Contains("nested more than 200 levels"));
  for (Nest kind : {Nest::kListOfLists, Nest::kPairlistInCar, Nest::kAttributes}) {
    CAPTURE(static_cast<int>(kind));
    CHECK_NOTHROW(lm::r_unserialize(nested(kind, 60)));
    // 5,000 levels, refused on a 4 MiB stack, half the usual 8 MiB of a program's main thread.
    // Under GCC's AddressSanitizer at -O1 (the CI's sanitizer build) a level took about 8 KB when
    // the limit was 1,000, so this input needed 7.9 MB of stack; 200 levels need about 1.1 MB.
    CHECK_THAT(unserialize_on_stack(nested(kind, 5000), size_t{4} << 20),
               Catch::Contains("nested more than 200 levels deep"));
  }
}
