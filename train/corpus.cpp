// corpus.cpp: an R unserialiser (XDR, versions 2 and 3) for the value types a data package uses,
// R lazy-load databases on top of it, and the Jane Austen extraction. The format is R's own
// (src/main/serialize.c); the comments name the parts we rely on.
// Not here: the download and the Bible (scripts/get-corpus.sh), tokenizing (prepare_tokens).
#include "train/corpus.h"

#include <zlib.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

#include "tensor/check.h"
#include "tensor/files.h"
#include "train/file_io.h"

namespace lm {

// ---- RObject helpers ----

const RObject* RObject::attr(const std::string& name) const {
  if (!attributes) return nullptr;
  for (size_t i = 0; i < attributes->tags.size(); ++i)
    if (attributes->tags[i] == name) return attributes->items[i].get();
  return nullptr;
}

std::vector<std::string> RObject::names() const {
  if (type == LIST) return tags;
  const RObject* n = attr("names");
  return (n && n->type == STR) ? n->strings : std::vector<std::string>{};
}

const RObject& RObject::element(const std::string& name) const {
  LM_CHECK(type == VEC || type == LIST, "R object: element(\"" << name << "\") needs a list, got SEXP type " << type);
  std::vector<std::string> n = names();
  for (size_t i = 0; i < n.size() && i < items.size(); ++i)
    if (n[i] == name) return *items[i];
  LM_FAIL("R object: the list has no element named \"" << name << "\"");
}

// ---- the XDR reader ----

namespace {
// Special codes that stand in the type byte for shared values (serialize.c).
constexpr int kRefSxp = 255, kNilValueSxp = 254, kGlobalEnvSxp = 253, kBaseNamespaceSxp = 250, kEmptyEnvSxp = 242,
              kBaseEnvSxp = 241;
// Flag bits of each item's leading integer.
constexpr int kHasAttr = 1 << 9, kHasTag = 1 << 10;
// CHARSXP encoding bits (in the "levels", flags >> 12).
constexpr int kLatin1Mask = 1 << 2;

// What a file can make the reader do (docs/reliability.md). Nesting: R data nests a few levels
// (janeaustenr's index: 5). Each level is a frame of item(), 5.6 KB under GCC's AddressSanitizer
// at -O1, so 200 levels need about 1.1 MB of stack in that build; 1,000 needed 7.9 MB, nearly all
// of a main thread's usual 8 MiB (tests/test_corpus.cpp refuses 5,000 levels on a 4 MiB stack).
constexpr int kMaxDepth = 200;
// Memory: every byte the result holds (objects, vector slots, string bytes) is counted against
// 8 x the input + 16 MiB. Janeaustenr's novels hold 1.4 x, a vector of empty strings 4 x (a
// 32-byte string per 8 bytes in the file); without the bound a tag that names a long symbol by
// reference copies the name into every cell, 100 KB per 12-byte cell.
constexpr size_t kExpansion = 8, kExpansionSlack = size_t{16} << 20;
// An object costs its struct and make_shared's control block (a vtable pointer, two counts).
constexpr size_t kObjectBytes = sizeof(RObject) + 16;

class XdrReader {
 public:
  explicit XdrReader(const std::string& bytes)
      : b_(bytes), budget_(kExpansion * bytes.size() + kExpansionSlack), nil_(std::make_shared<RObject>()) {}

  std::shared_ptr<RObject> read_all() {
    LM_CHECK(b_.size() >= 2 && b_[0] == 'X' && b_[1] == '\n',
             "R unserialize: not XDR serialisation (expected "
             "\"X\\n\" at the start; ASCII \"A\" and native binary \"B\" formats are not supported)");
    pos_ = 2;
    const int32_t version = i32();
    LM_CHECK(version == 2 || version == 3,
             "R unserialize: unsupported serialisation version " << version << " (this reader handles 2 and 3)");
    i32();  // the R version that wrote it
    i32();  // the oldest R version that can read it
    if (version == 3) {
      const int32_t n = i32();  // the writer's native encoding, e.g. "UTF-8"
      LM_CHECK(n >= 0 && n <= 64, "R unserialize: bad native-encoding length " << n << " at byte " << pos_ - 4);
      take(static_cast<size_t>(n));
    }
    return item(0);
  }

 private:
  const std::string& b_;
  size_t pos_ = 0;
  std::vector<std::shared_ptr<RObject>> refs_;  // back-references, 1-based in the stream
  const size_t budget_;                         // the most bytes the result may hold
  size_t spent_ = 0;                            // the bytes it holds so far
  const std::shared_ptr<RObject> nil_;          // every NULL of the result is this one object

  // Counts n more bytes of the result against the budget, before they are allocated.
  void charge(size_t n) {
    LM_CHECK(n <= budget_ - spent_, "R unserialize: the data expands past "
                                        << budget_ << " bytes in memory at byte " << pos_ << " (" << kExpansion
                                        << " times its " << b_.size()
                                        << " bytes plus 16 MiB; R data needs far less): a hostile or corrupt file?");
    spent_ += n;
  }

  const char* take(size_t n) {
    LM_CHECK(n <= b_.size() - pos_, "R unserialize: unexpected end of data at byte "
                                        << pos_ << " (wanted " << n << " more bytes, " << b_.size() - pos_
                                        << " left): truncated input?");
    const char* p = b_.data() + pos_;
    pos_ += n;
    return p;
  }
  uint32_t u32() {  // XDR integers are big-endian
    const auto* p = reinterpret_cast<const unsigned char*>(take(4));
    return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | p[3];
  }
  int32_t i32() { return static_cast<int32_t>(u32()); }
  double f64() {
    uint64_t bits = static_cast<uint64_t>(u32()) << 32;
    bits |= u32();
    double d;
    std::memcpy(&d, &bits, sizeof d);
    return d;
  }
  // A vector length: -1 announces a long length as two more integers. `min_bytes` per element
  // bounds it by what is left, so corrupt lengths fail here rather than in an allocation.
  size_t length(size_t min_bytes) {
    const size_t at = pos_;
    int64_t n = i32();
    if (n == -1) {
      uint64_t hi = u32(), lo = u32();
      n = static_cast<int64_t>((hi << 32) | lo);
    }
    LM_CHECK(n >= 0 && static_cast<uint64_t>(n) <= (b_.size() - pos_) / min_bytes,
             "R unserialize: vector length " << n << " at byte " << at << " does not fit in the " << b_.size() - pos_
                                             << " bytes left");
    return static_cast<size_t>(n);
  }

  // A CHARSXP after its flags: a length (-1 for NA, returns true) and the bytes, Latin-1
  // converted to UTF-8.
  bool read_char(std::string& out, int levels, size_t at) {
    const int32_t n = i32();
    if (n == -1) return true;
    LM_CHECK(n >= 0, "R unserialize: bad string length " << n << " at byte " << at);
    const char* p = take(static_cast<size_t>(n));
    const bool latin1 = levels & kLatin1Mask;
    charge(latin1 ? 2 * static_cast<size_t>(n) : static_cast<size_t>(n));  // a Latin-1 byte is 1 or 2 in UTF-8
    out = latin1 ? latin1_to_utf8(p, n) : std::string(p, static_cast<size_t>(n));
    return false;
  }

  // A logical, integer or double vector: a length, then the values.
  void read_numbers(RObject& obj, int type) {
    obj.type = type;
    if (type == RObject::REAL) {
      const size_t n = length(8);
      charge(n * sizeof(double));
      obj.reals.resize(n);
      for (double& v : obj.reals) v = f64();
    } else {
      const size_t n = length(4);
      charge(n * sizeof(int32_t));
      obj.ints.resize(n);
      for (int32_t& v : obj.ints) v = i32();
    }
  }

  // A character vector: a length, then one CHARSXP per element, read straight into the vector
  // (R writes a CHARSXP there, never a reference and never with attributes).
  void read_strings(RObject& obj, size_t at) {
    obj.type = RObject::STR;
    const size_t n = length(4);
    charge(n * (sizeof(std::string) + 1));
    obj.strings.resize(n);
    obj.string_na.resize(n, 0);
    for (size_t i = 0; i < n; ++i) {
      const int32_t flags = i32();
      LM_CHECK((flags & 0xFF) == RObject::CHAR && !(flags & kHasAttr),
               "R unserialize: element " << i << " of the character vector at byte " << at << " has SEXP type "
                                         << (flags & 0xFF) << (flags & kHasAttr ? " with attributes" : "")
                                         << ", expected a CHARSXP (9)");
      obj.string_na[i] = read_char(obj.strings[i], flags >> 12, pos_ - 4);
    }
  }

  std::shared_ptr<RObject> item(int depth) {
    LM_CHECK(depth < kMaxDepth, "R unserialize: objects nested more than "
                                    << kMaxDepth << " levels deep at byte " << pos_
                                    << " (R data nests a few levels): a hostile or corrupt file?");
    const size_t at = pos_;
    const int32_t flags = i32();
    const int type = flags & 0xFF, levels = flags >> 12;
    if (type == kNilValueSxp) return nil_;
    if (type == kRefSxp) return reference(flags, at);
    charge(kObjectBytes);
    auto obj = std::make_shared<RObject>();
    switch (type) {
      case kGlobalEnvSxp:
      case kEmptyEnvSxp:
      case kBaseEnvSxp:
      case kBaseNamespaceSxp:
        obj->type = RObject::ENV;  // a well-known environment: nothing more in the stream
        return obj;
      case RObject::SYM: {
        obj->type = RObject::SYM;
        std::shared_ptr<RObject> name = item(depth + 1);  // a CHARSXP, or a reference to a symbol
        charge(name->chars.size() + sizeof(obj));         // the name copied, the symbol's slot in refs_
        obj->chars = name->chars;
        refs_.push_back(obj);  // later uses of the symbol are REFSXPs
        return obj;
      }
      case RObject::LIST:
        read_pairlist(*obj, flags, depth);
        return obj;
      case RObject::CHAR:
        obj->type = RObject::CHAR;
        obj->is_na = read_char(obj->chars, levels, at);
        break;
      case RObject::LGL:
      case RObject::INT:
      case RObject::REAL:
        read_numbers(*obj, type);
        break;
      case RObject::STR:
        read_strings(*obj, at);
        break;
      case RObject::VEC: {
        obj->type = type;
        const size_t n = length(4);
        charge(n * sizeof(obj));
        obj->items.resize(n);
        for (auto& it : obj->items) it = item(depth + 1);
        break;
      }
      default:
        LM_FAIL("R unserialize: SEXP type "
                << type << " at byte " << at
                << " is not supported (this reader "
                   "handles NULL, symbols, pairlists, character, logical, integer, double and list vectors)");
    }
    if (flags & kHasAttr) obj->attributes = item(depth + 1);
    return obj;
  }

  // A REFSXP: a symbol stored earlier, by its 1-based index in the flags or in the next integer.
  std::shared_ptr<RObject> reference(int32_t flags, size_t at) {
    int64_t index = flags >> 8;
    if (index == 0) index = i32();
    LM_CHECK(index >= 1 && index <= static_cast<int64_t>(refs_.size()),
             "R unserialize: reference " << index << " at byte " << at << " but only " << refs_.size()
                                         << " objects were stored");
    return refs_[static_cast<size_t>(index - 1)];
  }

  // A pairlist is cells (attributes?, tag?, CAR, CDR) with the rest of the list in CDR; we walk
  // the CDRs in a loop, so long lists cost no recursion. A tag that refers to a symbol copies
  // its name, so each cell is charged for it.
  void read_pairlist(RObject& list, int32_t flags, int depth) {
    list.type = RObject::LIST;
    for (;;) {
      std::shared_ptr<RObject> attrs = (flags & kHasAttr) ? item(depth + 1) : nullptr;
      if (attrs && !list.attributes) list.attributes = attrs;  // only the first cell's count
      std::string tag;
      if (flags & kHasTag) {
        std::shared_ptr<RObject> symbol = item(depth + 1);
        charge(symbol->chars.size());
        tag = symbol->chars;
      }
      charge(sizeof(std::string) + sizeof(attrs));  // the cell's slots in tags and items
      list.tags.push_back(std::move(tag));
      list.items.push_back(item(depth + 1));
      const size_t at = pos_;
      flags = i32();
      const int type = flags & 0xFF;
      if (type == kNilValueSxp) return;
      LM_CHECK(type == RObject::LIST, "R unserialize: a pairlist ends in SEXP type "
                                          << type << " at byte " << at << " (dotted pairs are not supported)");
    }
  }

  static std::string latin1_to_utf8(const char* p, int32_t n) {
    std::string out;
    for (int32_t i = 0; i < n; ++i) {
      unsigned char c = static_cast<unsigned char>(p[i]);
      if (c < 0x80) {
        out.push_back(static_cast<char>(c));
      } else {
        out.push_back(static_cast<char>(0xC0 | (c >> 6)));
        out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
      }
    }
    return out;
  }
};

std::string read_file(const std::string& path, const char* what) {
  require_regular_file(path, what);
  std::ifstream in(path, std::ios::binary);
  LM_CHECK(in, "cannot open " << what << " " << path << " (missing file?)");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

std::shared_ptr<RObject> r_unserialize(const std::string& bytes) { return XdrReader(bytes).read_all(); }

// ---- compression ----

namespace {
// Deflate's densest code is a 258-byte match in 2 bits: at most 1032 bytes out per byte in. The
// slack covers a tiny stream; zlib's and gzip's headers and trailers only lower the ratio.
constexpr size_t kMaxDeflateRatio = 1032, kDeflateSlack = 1024;

bool is_gzip(const std::string& s) {
  return s.size() >= 2 && static_cast<unsigned char>(s[0]) == 0x1f && static_cast<unsigned char>(s[1]) == 0x8b;
}

// The most bytes `compressed` may inflate to, and who promised it: the caller (a header), else
// gzip's trailer (ISIZE, its last 4 bytes, little-endian: the size mod 2^32, so gzip data past
// 4 GiB is refused), else deflate's ratio. A promise past that ratio is refused here.
struct InflateLimit {
  size_t bytes;
  const char* promiser;
  bool exact;  // the output must be exactly `bytes` long
};
InflateLimit inflate_limit(const std::string& compressed, const std::string& what, size_t expected_size) {
  const size_t most = kMaxDeflateRatio * compressed.size() + kDeflateSlack;
  InflateLimit limit{most, "deflate's maximum ratio allows", false};
  if (expected_size != 0) {
    limit = {expected_size, "the header promised", true};
  } else if (is_gzip(compressed) && compressed.size() >= 18) {  // a 10-byte header, an 8-byte trailer
    const auto* p = reinterpret_cast<const unsigned char*>(compressed.data() + compressed.size() - 4);
    const size_t isize = size_t{p[0]} | (size_t{p[1]} << 8) | (size_t{p[2]} << 16) | (size_t{p[3]} << 24);
    limit = {isize, "the gzip trailer promised", true};
  }
  LM_CHECK(limit.bytes <= most, "inflate " << what << ": " << limit.promiser << " " << limit.bytes
                                           << " bytes, more than deflate can make of " << compressed.size()
                                           << " compressed bytes (at most " << kMaxDeflateRatio
                                           << " per byte): a zlib bomb or corrupt data");
  // What the project can use bounds what it inflates, whatever a header honestly promises.
  LM_CHECK(!limit.exact || limit.bytes <= kMaxInflatedBytes,
           "inflate " << what << ": " << limit.promiser << " " << limit.bytes << " bytes, more than the "
                      << kMaxInflatedBytes << " bytes (64 MiB) this project inflates from one stream (the largest "
                      << "janeaustenr object is a few MB); refused before inflating");
  if (!limit.exact && limit.bytes > kMaxInflatedBytes) limit = {kMaxInflatedBytes, "the project's limit of", false};
  return limit;
}

// inflateEnd on every way out.
struct Inflater {
  z_stream zs{};
  ~Inflater() { inflateEnd(&zs); }
};
}  // namespace

std::string inflate_bytes(const std::string& compressed, const std::string& what, size_t expected_size) {
  LM_CHECK(compressed.size() <= std::numeric_limits<uInt>::max(),
           "inflate " << what << ": " << compressed.size() << " compressed bytes, more than zlib takes at once");
  const InflateLimit limit = inflate_limit(compressed, what, expected_size);
  Inflater z;
  z_stream& zs = z.zs;
  LM_CHECK(inflateInit2(&zs, 15 + 32) == Z_OK,
           "inflate " << what << ": zlib failed to initialise");  // +32: zlib or gzip
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(compressed.data()));
  zs.avail_in = static_cast<uInt>(compressed.size());
  std::string out;
  char buf[1 << 16];
  int rc = Z_OK;
  while (rc == Z_OK) {
    // Room for at most one byte past the limit: the size is checked as the data comes, so a bomb
    // stops there rather than after inflating all of itself.
    const size_t room = std::min(sizeof buf, limit.bytes - out.size() + 1);
    zs.next_out = reinterpret_cast<Bytef*>(buf);
    zs.avail_out = static_cast<uInt>(room);
    rc = inflate(&zs, Z_NO_FLUSH);
    out.append(buf, room - zs.avail_out);
    LM_CHECK(out.size() <= limit.bytes, "inflate " << what << ": the data inflates past the " << limit.bytes
                                                   << " bytes " << limit.promiser
                                                   << " (stopped there): a zlib bomb or corrupt data");
    if (rc == Z_BUF_ERROR && zs.avail_in == 0) break;  // input ended before the stream did
  }
  LM_CHECK(rc == Z_STREAM_END, "inflate " << what << ": corrupt or truncated zlib/gzip data (zlib code " << rc
                                          << (zs.msg ? std::string(", ") + zs.msg : std::string()) << ")");
  LM_CHECK(!limit.exact || out.size() == limit.bytes,
           "inflate " << what << ": got " << out.size() << " bytes, " << limit.promiser << " " << limit.bytes);
  return out;
}

// ---- lazy-load databases ----

std::map<std::string, std::shared_ptr<RObject>> read_lazyload_db(const std::string& base) {
  const std::string rdx_path = base + ".rdx", rdb_path = base + ".rdb";
  // The index is saveRDS() output: gzip-compressed serialisation, or (rarely) plain.
  std::string rdx = read_file(rdx_path, "R database index");
  if (is_gzip(rdx)) rdx = inflate_bytes(rdx, rdx_path);
  std::shared_ptr<RObject> index = r_unserialize(rdx);
  const RObject& variables = index->element("variables");
  const RObject& compressed = index->element("compressed");
  LM_CHECK((compressed.type == RObject::LGL || compressed.type == RObject::INT) && compressed.ints.size() == 1,
           rdx_path << ": \"compressed\" should be one logical or integer");
  const int method = compressed.ints[0];  // FALSE/0 plain, TRUE/1 zlib, 2 bzip2, 3 xz
  LM_CHECK(method == 0 || method == 1, rdx_path << ": compression method " << method
                                                << " (2 = bzip2, 3 = xz) "
                                                   "is not supported; only zlib (TRUE) and none");

  const std::string rdb = read_file(rdb_path, "R database");
  std::map<std::string, std::shared_ptr<RObject>> out;
  const std::vector<std::string> names = variables.names();
  LM_CHECK(names.size() == variables.items.size(),
           rdx_path << ": \"variables\" has " << variables.items.size() << " entries but " << names.size()
                    << " names");  // (a fuzzer found the mismatch: out_of_range)
  for (size_t i = 0; i < names.size(); ++i) {
    const RObject& loc = *variables.items.at(i);
    std::vector<double> v;
    for (int32_t x : loc.ints) v.push_back(x);
    for (double x : loc.reals) v.push_back(x);
    LM_CHECK(v.size() == 2 && v[0] >= 0 && v[1] >= 0 && v[0] + v[1] <= static_cast<double>(rdb.size()),
             rdx_path << ": entry \"" << names[i] << "\" should be (offset, length) inside the " << rdb.size()
                      << "-byte " << rdb_path);
    std::string entry = rdb.substr(static_cast<size_t>(v[0]), static_cast<size_t>(v[1]));
    const std::string what = rdb_path + " entry \"" + names[i] + "\"";
    if (method == 1) {
      LM_CHECK(entry.size() >= 4, what << " is shorter than its 4-byte length header");
      const auto* p = reinterpret_cast<const unsigned char*>(entry.data());
      const size_t size = (size_t{p[0]} << 24) | (size_t{p[1]} << 16) | (size_t{p[2]} << 8) | p[3];
      entry = inflate_bytes(entry.substr(4), what, size);
    }
    try {
      out[names[i]] = r_unserialize(entry);
    } catch (const Error& e) {
      LM_FAIL(what << ": " << e.what());
    }
  }
  return out;
}

// ---- Jane Austen ----

std::map<std::string, std::string> extract_austen(const std::string& rdb_dir) {
  const auto db = read_lazyload_db(rdb_dir + "/Rdata");
  std::map<std::string, std::string> novels;
  for (const char* name :
       {"emma", "mansfieldpark", "northangerabbey", "persuasion", "prideprejudice", "sensesensibility"}) {
    auto it = db.find(name);
    LM_CHECK(it != db.end(), rdb_dir << "/Rdata.rdb has no object \"" << name
                                     << "\": is this janeaustenr's data "
                                        "directory (usr/lib/R/site-library/janeaustenr/data)?");
    const RObject& lines = *it->second;
    LM_CHECK(lines.type == RObject::STR, rdb_dir << "/Rdata.rdb: \"" << name << "\" is SEXP type " << lines.type
                                                 << ", expected a character vector of lines");
    std::string text;
    for (const std::string& line : lines.strings) text += line + "\n";  // NA lines are ""
    novels[name] = std::move(text);
  }
  return novels;
}

std::vector<std::string> write_austen(const std::string& rdb_dir, const std::string& out_dir) {
  const auto novels = extract_austen(rdb_dir);
  std::error_code ec;
  std::filesystem::create_directories(out_dir, ec);
  LM_CHECK(!ec, "write_austen: cannot create " << out_dir << " (" << ec.message() << ")");
  std::vector<std::string> paths;
  for (const auto& [name, text] : novels) {
    paths.push_back(out_dir + "/" + name + ".txt");
    write_file_atomic(paths.back(), text);
  }
  return paths;
}

}  // namespace lm
