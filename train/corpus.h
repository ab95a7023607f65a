// corpus.h: getting the real training text out of Debian packages. Jane Austen's novels ship in
// r-cran-janeaustenr as an R lazy-load database (Rdata.rdb + Rdata.rdx), so this holds a small
// reader for R's XDR serialisation, just the parts those files use. scripts/get-corpus.sh
// downloads the packages and dumps the King James Bible with the package's own `bible` program.
// Not here: R environments, closures, bytecode, ALTREP or bzip2/xz-compressed databases.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace lm {

// One R value, as much of it as we read. `type` is R's SEXPTYPE number.
struct RObject {
  enum Type : int { NIL = 0, SYM = 1, LIST = 2, ENV = 4, CHAR = 9, LGL = 10, INT = 13, REAL = 14, STR = 16, VEC = 19 };
  int type = NIL;
  std::string chars;                            // SYM: the name; CHAR: the bytes (as UTF-8)
  bool is_na = false;                           // CHAR: NA_character_
  std::vector<std::string> strings;             // STR: the elements ("" for NA)
  std::vector<char> string_na;                  // STR: 1 where the element is NA
  std::vector<int32_t> ints;                    // INT, LGL (NA = INT32_MIN)
  std::vector<double> reals;                    // REAL
  std::vector<std::shared_ptr<RObject>> items;  // VEC elements; LIST values (the pairlist, flattened)
  std::vector<std::string> tags;                // LIST: the tag of each value ("" when untagged)
  std::shared_ptr<RObject> attributes;          // a LIST of tagged values, or null

  const RObject* attr(const std::string& name) const;     // null when absent
  std::vector<std::string> names() const;                 // the "names" attribute (LIST: the tags); empty if none
  const RObject& element(const std::string& name) const;  // VEC or LIST element by name; throws
};

// Parses R's serialisation in XDR form: "X\n", then version 2 or 3 (3 adds the native
// encoding), then one object. Throws lm::Error naming the byte offset of a problem, also when
// objects nest more than 200 levels deep or the result would hold more than 8 x the input's
// bytes + 16 MiB. Every NULL in the result is one shared object.
std::shared_ptr<RObject> r_unserialize(const std::string& bytes);

// zlib or gzip data -> bytes (the format is detected from the header). `what` names the data
// in error messages. The size is checked while inflating, against a nonzero expected_size, else
// gzip's trailer, else deflate's maximum ratio (1032:1); a promise past that ratio, or output
// past the promise, is an error before more is inflated. A promise must be met exactly. Whatever
// the promise, at most kMaxInflatedBytes come out: a larger promise is refused before inflating.
constexpr size_t kMaxInflatedBytes = size_t{64} << 20;
std::string inflate_bytes(const std::string& compressed, const std::string& what, size_t expected_size = 0);

// Every object of an R lazy-load database `base`.rdb / `base`.rdx (e.g. ".../data/Rdata"), by
// name. The .rdx index lists (offset, length) per variable; each .rdb entry is a 4-byte
// big-endian length followed by a zlib stream of a serialised object.
std::map<std::string, std::shared_ptr<RObject>> read_lazyload_db(const std::string& base);

// The six novels from janeaustenr's data directory (the one holding Rdata.rdb), each a
// character vector of lines, joined with "\n" (one final newline). Keys: emma, mansfieldpark,
// northangerabbey, persuasion, prideprejudice, sensesensibility. Throws if one is missing.
std::map<std::string, std::string> extract_austen(const std::string& rdb_dir);

// extract_austen, then each novel to out_dir/<name>.txt (temp file + rename). Returns the
// paths written. This is what `landmark extract-austen <rdb_dir> <out_dir>` runs.
std::vector<std::string> write_austen(const std::string& rdb_dir, const std::string& out_dir);

}  // namespace lm
