// test_corpus.cpp: the R unserialiser and lazy-load database reader on blobs built here by hand,
// byte by byte, following R's XDR format (big-endian ints, "X\n" header); zlib and gzip come
// from zlib itself. Needs no network, no R and no Debian package.
#include <catch2/catch.hpp>

#include <zlib.h>

#include <cstring>
#include <map>
#include <filesystem>
#include <fstream>
#include <string>
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
  fs::remove_all(dir);
}
