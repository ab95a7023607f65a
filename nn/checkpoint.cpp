// checkpoint.cpp: the safetensors writer, and a reader that checks every number in the file
// before using it. Layout (https://github.com/huggingface/safetensors): an 8-byte little-endian
// u64 N, N bytes of UTF-8 JSON header (we pad it with spaces to a multiple of 8 so the data
// starts 8-aligned), then the tensors' bytes, row-major and little-endian, back to back with no
// holes. Not memory-mapped and not streaming: each tensor is read into its own host Storage.
#include "nn/checkpoint.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <numeric>
#include <set>

#include "tensor/files.h"

namespace lm {

namespace {

using ordered_json = nlohmann::ordered_json;  // keeps header keys in file order

// The reference implementation refuses headers above 100 MB; a larger one means a corrupt file.
constexpr uint64_t kMaxHeaderBytes = 100ull << 20;

// safetensors spells dtypes in capitals. Only the three this project computes in are accepted;
// BF16, F16, I64, ... are rejected rather than silently converted.
const char* st_dtype_name(DType t) {
  switch (t) {
    case DType::F32:
      return "F32";
    case DType::F64:
      return "F64";
    case DType::I32:
      return "I32";
  }
  return "?";
}
bool parse_st_dtype(const std::string& s, DType* out) {
  if (s == "F32")
    *out = DType::F32;
  else if (s == "F64")
    *out = DType::F64;
  else if (s == "I32")
    *out = DType::I32;
  else
    return false;
  return true;
}

// We copy tensor bytes straight to and from memory, which is only right on a little-endian host.
void check_little_endian() {
  const uint16_t one = 1;
  unsigned char first_byte;
  std::memcpy(&first_byte, &one, 1);
  LM_CHECK(first_byte == 1,
           "checkpoints: this host is big-endian; safetensors data is "
           "little-endian and this code does not swap bytes");
}

uint64_t tensor_nbytes(const Tensor& t) { return static_cast<uint64_t>(t.numel()) * dtype_size(t.dtype()); }

// The first 200 characters of a JSON value, for error messages about odd header entries.
std::string snippet(const ordered_json& v) {
  std::string s = v.dump();
  return s.size() > 200 ? s.substr(0, 200) + "..." : s;
}

const Tensor* find_tensor(const Checkpoint& c, const std::string& name) {
  // A linear scan: checkpoints hold hundreds of tensors, not millions.
  for (const auto& [n, t] : c.tensors)
    if (n == name) return &t;
  return nullptr;
}

// Up to five existing names, those sharing the longest prefix with `name` first, so a missing
// "blocks.3.attn.qkv.weight" suggests "blocks.2.attn.qkv.weight" rather than "wte.weight".
std::string suggestions(const Checkpoint& c, const std::string& name) {
  if (c.tensors.empty()) return "it holds no tensors at all";
  auto common = [&](const std::string& other) {
    size_t k = 0;
    while (k < name.size() && k < other.size() && name[k] == other[k]) ++k;
    return k;
  };
  std::vector<std::string> names;
  for (const auto& entry : c.tensors) names.push_back(entry.first);
  std::stable_sort(names.begin(), names.end(),
                   [&](const std::string& a, const std::string& b) { return common(a) > common(b); });
  std::ostringstream os;
  os << "it holds " << names.size() << " tensors, e.g. ";
  for (size_t i = 0; i < names.size() && i < 5; ++i) os << (i ? ", '" : "'") << names[i] << "'";
  if (names.size() > 5) os << ", ...";
  return os.str();
}

// Owns the temporary file of a save until it is renamed into place; if anything throws before
// that, the destructor closes and deletes it, so a failed save leaves only the old file behind.
class TempFile {
 public:
  // For a save to `final_path`: its temporary file, PATH.tmp, created afresh by open_output_temp
  // (which refuses a final path that is a link, a FIFO or a device, and a PATH.tmp that is not a
  // regular file, instead of writing through it).
  explicit TempFile(const std::string& final_path)
      : path_(final_path + ".tmp"), fd_(open_output_temp(final_path, "save_safetensors")) {}
  ~TempFile() {
    if (fd_ >= 0) ::close(fd_);
    if (!committed_) ::unlink(path_.c_str());
  }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;

  void write(const void* data, uint64_t n) {
    const char* p = static_cast<const char*>(data);
    while (n > 0) {  // write() may write less than asked, or be interrupted by a signal
      ssize_t w = ::write(fd_, p, static_cast<size_t>(std::min<uint64_t>(n, 1ull << 30)));
      if (w < 0 && errno == EINTR) continue;
      LM_CHECK(w > 0, "save_safetensors: writing '" << path_ << "' failed: " << std::strerror(errno));
      p += w;
      n -= static_cast<uint64_t>(w);
    }
  }

  // fsync before rename: otherwise a crash could leave `final_path` naming a file whose data
  // never reached the disk. rename() then replaces the old checkpoint in one atomic step.
  void commit(const std::string& final_path) {
    LM_CHECK(::fsync(fd_) == 0, "save_safetensors: fsync of '" << path_ << "' failed: " << std::strerror(errno));
    int rc = ::close(fd_);
    fd_ = -1;
    LM_CHECK(rc == 0, "save_safetensors: closing '" << path_ << "' failed: " << std::strerror(errno));
    LM_CHECK(std::rename(path_.c_str(), final_path.c_str()) == 0,
             "save_safetensors: renaming '" << path_ << "' to '" << final_path << "' failed: " << std::strerror(errno));
    committed_ = true;
    // Make the rename itself durable. Best effort: some filesystems refuse to fsync a directory,
    // and by now the new file is complete either way.
    std::string dir = std::filesystem::path(final_path).parent_path().string();
    int dfd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
      ::fsync(dfd);
      ::close(dfd);
    }
  }

 private:
  std::string path_;
  int fd_ = -1;
  bool committed_ = false;
};

}  // namespace

// ---- Checkpoint lookups ----

void Checkpoint::add(const std::string& name, const Tensor& t) {
  LM_CHECK(!has(name), "Checkpoint::add: a tensor named '" << name << "' is already present");
  tensors.emplace_back(name, t);
}

bool Checkpoint::has(const std::string& name) const { return find_tensor(*this, name) != nullptr; }

const Tensor& Checkpoint::get(const std::string& name) const {
  const Tensor* t = find_tensor(*this, name);
  if (t == nullptr) LM_FAIL("checkpoint has no tensor named '" << name << "'; " << suggestions(*this, name));
  return *t;
}

Tensor Checkpoint::get(const std::string& name, const Shape& expected_shape, DType expected_dtype) const {
  const Tensor& t = get(name);
  LM_CHECK(t.shape() == expected_shape && t.dtype() == expected_dtype,
           "checkpoint tensor '" << name << "' is " << dtype_name(t.dtype()) << " " << shape_str(t.shape())
                                 << ", expected " << dtype_name(expected_dtype) << " " << shape_str(expected_shape)
                                 << " (was the checkpoint written by a model with a different config?)");
  return t;
}

// ---- checksums ----

std::string checkpoint_header_crc32(const ordered_json& header) {
  ordered_json h = header;
  if (h.contains("__metadata__") && h["__metadata__"].is_object()) h["__metadata__"].erase("header_crc32");
  std::string text;
  try {
    text = h.dump();
  } catch (const nlohmann::json::exception& e) {  // a string that is not UTF-8 (the parser refuses those)
    LM_FAIL("checkpoint header: cannot be written as JSON to checksum it: " << e.what());
  }
  return crc32_hex(crc32_update(0, text.data(), text.size()));
}

std::string unverified_note(const Checkpoint& ckpt, const std::string& path) {
  if (!ckpt.checksummed)
    return "note: " + path +
           " has no CRC-32s (written before checkpoints had them): its tensors and metadata "
           "were read unverified";
  if (!ckpt.header_checksummed)
    return "note: " + path +
           " has no CRC-32 over its header (written before headers had one): its metadata "
           "(model config, tokenizer, training state) was read unverified";
  return "";
}

// ---- writing ----

void save_safetensors(const std::string& path, const Checkpoint& ckpt) {
  check_little_endian();
  // Header first, in the checkpoint's order; offsets are relative to the start of the data.
  ordered_json header = ordered_json::object();
  ordered_json meta = ordered_json::object();
  meta["format"] = kCheckpointFormat;
  try {
    meta["landmark"] = ckpt.metadata.dump();  // a string: safetensors metadata values must be
  } catch (const nlohmann::json::exception& e) {
    LM_FAIL("save_safetensors('" << path << "'): the metadata cannot be written as JSON: " << e.what());
  }
  header["__metadata__"] = meta;  // first in the header; completed with the CRCs below

  std::vector<Tensor> host;  // contiguous host copies, same order as ckpt.tensors
  std::set<std::string> seen;
  nlohmann::json crcs = nlohmann::json::object();
  uint64_t offset = 0;
  for (const auto& [name, t] : ckpt.tensors) {
    LM_CHECK(name != "__metadata__", "save_safetensors('" << path
                                                          << "'): '__metadata__' is reserved "
                                                             "by safetensors and cannot name a tensor");
    LM_CHECK(seen.insert(name).second, "save_safetensors('" << path << "'): two tensors are named '" << name << "'");
    LM_CHECK(t.defined(), "save_safetensors('" << path << "'): tensor '" << name << "' is undefined");
    Tensor h = t.to(Device::CPU).contiguous();
    const uint64_t nbytes = tensor_nbytes(h);
    ordered_json entry;
    entry["dtype"] = st_dtype_name(h.dtype());
    entry["shape"] = h.shape();  // [] for a 0-d tensor
    entry["data_offsets"] = {offset, offset + nbytes};
    header[name] = entry;
    offset += nbytes;
    crcs[name] = crc32_hex(crc32_update(0, h.numel() > 0 ? h.raw_data() : nullptr, h.numel() > 0 ? nbytes : 0));
    host.push_back(h);
  }
  // One CRC-32 per tensor, checked by load_safetensors: a flipped bit in the data is an error
  // naming the tensor instead of different numbers. (A string: safetensors metadata values are.)
  meta["crc32"] = crcs.dump();
  header["__metadata__"] = meta;  // the key already stands first: it keeps its place
  // And one over the header, the last thing added: the metadata, names, shapes and offsets.
  header["__metadata__"]["header_crc32"] = checkpoint_header_crc32(header);

  std::string text;
  try {
    text = header.dump();
  } catch (const nlohmann::json::exception& e) {  // e.g. a tensor name that is not UTF-8
    LM_FAIL("save_safetensors('" << path << "'): the header cannot be written as JSON: " << e.what());
  }
  text.append((8 - text.size() % 8) % 8, ' ');  // pad so the data starts at a multiple of 8

  unsigned char len[8];  // u64 little-endian, byte by byte so it is right on any host
  for (int i = 0; i < 8; ++i) len[i] = static_cast<unsigned char>(static_cast<uint64_t>(text.size()) >> (8 * i));

  TempFile out(path);
  out.write(len, 8);
  out.write(text.data(), text.size());
  for (const Tensor& h : host)
    if (h.numel() > 0) out.write(h.raw_data(), tensor_nbytes(h));
  out.commit(path);
}

// ---- reading ----

namespace {

// The file being read, with its size; read_exact reads bytes at an offset or fails naming what
// they were. `where` starts every error message.
class SafetensorsFile {
 public:
  SafetensorsFile(const std::string& path, std::string where_) : where(std::move(where_)) {
    require_regular_file(path, "checkpoint");
    in.open(path, std::ios::binary);
    LM_CHECK(in.is_open(), where << "cannot open the file (" << std::strerror(errno) << ")");
    in.seekg(0, std::ios::end);
    const auto end_pos = in.tellg();
    LM_CHECK(end_pos >= 0, where << "cannot read the file (seek failed)");
    file_size = static_cast<uint64_t>(end_pos);
  }

  void read_exact(uint64_t pos, void* dst, uint64_t n, const std::string& what) {
    in.clear();
    in.seekg(static_cast<std::streamoff>(pos));
    in.read(static_cast<char*>(dst), static_cast<std::streamsize>(n));
    LM_CHECK(in && static_cast<uint64_t>(in.gcount()) == n,
             where << "could not read " << what << " (" << n << " bytes at offset " << pos << ")");
  }

  const std::string where;
  uint64_t file_size = 0;

 private:
  std::ifstream in;
};

// 1. The header length (returned in *n), and the header as a JSON object with no key twice.
ordered_json read_header(SafetensorsFile& file, uint64_t* header_bytes) {
  const std::string& where = file.where;
  const uint64_t file_size = file.file_size;
  LM_CHECK(file_size >= 8, where << "the file is " << file_size
                                 << " bytes long, too short for the "
                                    "8-byte header length that starts every safetensors file");
  unsigned char len[8];
  file.read_exact(0, len, 8, "the header length");
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | len[i];
  LM_CHECK(n <= file_size - 8, where << "the header length in the first 8 bytes says " << n << " bytes, but only "
                                     << file_size - 8 << " bytes follow (corrupt, or not a safetensors file)");
  LM_CHECK(n <= kMaxHeaderBytes, where << "the header length " << n << " is absurd (limit " << kMaxHeaderBytes << ")");
  std::string text(n, '\0');
  if (n > 0) file.read_exact(8, &text[0], n, "the header");
  *header_bytes = n;
  // JSON text never holds a NUL byte (strings escape it), but nlohmann's parser takes one for the
  // end of its input and would ignore whatever follows: a flipped bit in the padding, or worse.
  const size_t nul = text.find('\0');
  LM_CHECK(nul == std::string::npos, where << "the header holds a NUL byte at offset " << nul << " (JSON text cannot: "
                                           << "the header is corrupt)");

  // nlohmann keeps the last of two equal keys; watch top-level keys to refuse such files.
  std::set<std::string> keys;
  std::string duplicate;
  ordered_json::parser_callback_t watch_keys = [&](int depth, ordered_json::parse_event_t event, ordered_json& parsed) {
    if (depth == 1 && event == ordered_json::parse_event_t::key && !keys.insert(parsed.get<std::string>()).second)
      duplicate = parsed.get<std::string>();
    return true;
  };
  ordered_json header;
  try {
    header = ordered_json::parse(text, watch_keys);
  } catch (const ordered_json::exception& e) {
    LM_FAIL(where << "the header is not valid JSON (" << e.what() << ")");
  }
  LM_CHECK(header.is_object(), where << "the header is JSON but not an object: " << snippet(header));
  LM_CHECK(text[0] == '{', where << "the header must begin with '{' (safetensors rule)");
  LM_CHECK(duplicate.empty(), where << "the header names '" << duplicate << "' twice");
  return header;
}

// What __metadata__ holds for us: our own metadata (null when the file has none) and the tensors'
// CRC-32s (null: a file from before checksums, which loads with checksummed = false); whether the
// header's own CRC-32 was there (and matched).
struct Metadata {
  nlohmann::json landmark, crcs;
  bool header_checksummed = false;
};

// 2. Metadata: all strings (safetensors rule), and our format marker before anything else,
// so a foreign file is reported as such rather than by its first unsupported dtype. Then the
// header's CRC-32, before any of it is believed: one flipped bit in the metadata's JSON
// (attention -> cttention) leaves valid JSON that says something else.
Metadata read_metadata(const ordered_json& header, const std::string& where) {
  Metadata m;
  const ordered_json no_meta = ordered_json::object();
  const ordered_json& meta = header.contains("__metadata__") ? header["__metadata__"] : no_meta;
  LM_CHECK(meta.is_object(), where << "__metadata__ must be an object of strings, got " << snippet(meta));
  for (const auto& [key, value] : meta.items())
    LM_CHECK(value.is_string(), where << "__metadata__[\"" << key << "\"] is " << snippet(value)
                                      << ", but safetensors metadata values must be strings");
  LM_CHECK(meta.contains("format"), where << "not a landmark checkpoint: __metadata__ has no \"format\" "
                                             "entry (expected \""
                                          << kCheckpointFormat << "\")");
  const std::string format = meta["format"].get<std::string>();
  LM_CHECK(format == kCheckpointFormat, where << "not a landmark checkpoint: __metadata__.format is \"" << format
                                              << "\", expected \"" << kCheckpointFormat << "\"");
  // A name this reader does not know is a damaged one: "header_crc32" with a flipped bit must not
  // make the file pass for one written before the header had a checksum.
  for (const auto& [key, value] : meta.items())
    LM_CHECK(key == "format" || key == "landmark" || key == "crc32" || key == "header_crc32",
             where << "__metadata__ has an entry named \"" << key << "\", which this reader does not know (it "
                   << "knows format, landmark, crc32 and header_crc32): a damaged name, or another program's file");
  if (meta.contains("header_crc32")) {
    const std::string recorded = meta["header_crc32"].get<std::string>(), found = checkpoint_header_crc32(header);
    LM_CHECK(found == recorded, where << "the header is corrupt: its CRC-32 is " << found << ", the file recorded "
                                      << recorded << " (a flipped bit or an edit in the metadata, the tensor names, "
                                      << "shapes or offsets)");
    LM_CHECK(meta.contains("crc32"), where << "__metadata__ has a header_crc32 but no per-tensor crc32 (every file "
                                           << "written with the one has the other)");
    m.header_checksummed = true;
  }
  if (meta.contains("landmark")) {
    try {
      m.landmark = nlohmann::json::parse(meta["landmark"].get<std::string>());
    } catch (const nlohmann::json::exception& e) {
      LM_FAIL(where << "__metadata__.landmark is not valid JSON (" << e.what() << ")");
    }
  }
  if (meta.contains("crc32")) {
    nlohmann::json& crcs = m.crcs;
    try {
      crcs = nlohmann::json::parse(meta["crc32"].get<std::string>());
    } catch (const nlohmann::json::exception& e) {
      LM_FAIL(where << "__metadata__.crc32 is not valid JSON (" << e.what() << ")");
    }
    LM_CHECK(crcs.is_object(), where << "__metadata__.crc32 must map tensor names to CRC-32s, got " << snippet(crcs));
  }
  return m;
}

// One tensor's header entry: its bytes are [begin, end) of the data section.
struct Entry {
  std::string name;
  DType dtype;
  Shape shape;
  uint64_t begin, end;
};

// numel * dtype size, refusing shapes whose size overflows 64 bits.
uint64_t entry_bytes(const Entry& e, const std::string& what) {
  for (int64_t d : e.shape)
    if (d == 0) return 0;
  uint64_t nbytes = dtype_size(e.dtype);
  for (int64_t d : e.shape) {
    LM_CHECK(nbytes <= std::numeric_limits<uint64_t>::max() / static_cast<uint64_t>(d),
             what << "shape " << shape_str(e.shape) << " is impossibly large");
    nbytes *= static_cast<uint64_t>(d);
  }
  return nbytes;
}

// 3. Each tensor entry on its own: known dtype, a shape of non-negative integers, and
// data_offsets whose length is exactly numel * dtype size.
Entry parse_entry(const std::string& name, const ordered_json& v, const std::string& where) {
  const std::string what = where + "tensor '" + name + "': ";
  LM_CHECK(v.is_object() && v.contains("dtype") && v.contains("shape") && v.contains("data_offsets"),
           what << "expected {\"dtype\", \"shape\", \"data_offsets\"}, got " << snippet(v));
  Entry e;
  e.name = name;
  const ordered_json& dt = v["dtype"];
  LM_CHECK(dt.is_string() && parse_st_dtype(dt.get<std::string>(), &e.dtype),
           what << "dtype " << snippet(dt) << " is not supported (this reader knows F32, F64 and I32)");
  const ordered_json& sh = v["shape"];
  LM_CHECK(sh.is_array(), what << "shape must be an array, got " << snippet(sh));
  for (const auto& d : sh) {
    LM_CHECK(d.is_number_unsigned() && d.get<uint64_t>() <= uint64_t(std::numeric_limits<int64_t>::max()),
             what << "shape " << snippet(sh) << " must hold non-negative integers");
    e.shape.push_back(d.get<int64_t>());
  }
  const uint64_t nbytes = entry_bytes(e, what);
  const ordered_json& off = v["data_offsets"];
  LM_CHECK(off.is_array() && off.size() == 2 && off[0].is_number_unsigned() && off[1].is_number_unsigned(),
           what << "data_offsets must be [begin, end] with non-negative integers, got " << snippet(off));
  e.begin = off[0].get<uint64_t>();
  e.end = off[1].get<uint64_t>();
  LM_CHECK(e.begin <= e.end, what << "data_offsets [" << e.begin << ", " << e.end << "] end before they begin");
  LM_CHECK(e.end - e.begin == nbytes, what << "shape " << shape_str(e.shape) << " of " << st_dtype_name(e.dtype)
                                           << " needs " << nbytes << " bytes, but data_offsets [" << e.begin << ", "
                                           << e.end << "] span " << e.end - e.begin);
  return e;
}

// 4. Together, in offset order, the tensors must tile the data section exactly: in range,
// no overlaps, no holes, nothing after the last one (safetensors forbids unindexed bytes).
void check_tiling(const std::vector<Entry>& entries, uint64_t data_size, const std::string& where) {
  std::vector<size_t> order(entries.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return entries[a].begin != entries[b].begin ? entries[a].begin < entries[b].begin : entries[a].end < entries[b].end;
  });
  uint64_t covered = 0;  // bytes of the data section tiled so far
  std::string previous = "(start of data)";
  for (size_t i : order) {
    const Entry& e = entries[i];
    LM_CHECK(e.end <= data_size, where << "tensor '" << e.name << "' ends at byte " << e.end << " of the data "
                                       << "section, but only " << data_size << " bytes follow the header: the file "
                                       << "is truncated or its data_offsets are out of range");
    LM_CHECK(e.begin >= covered, where << "tensors '" << previous << "' and '" << e.name
                                       << "' overlap (data_offsets begin " << e.begin << " < end " << covered << ")");
    LM_CHECK(e.begin == covered, where << "bytes [" << covered << ", " << e.begin << ") of the data section "
                                       << "belong to no tensor (safetensors forbids holes)");
    covered = e.end;
    previous = e.name;
  }
  LM_CHECK(covered == data_size, where << "the file has " << data_size - covered << " bytes after the last "
                                       << "tensor's data (safetensors forbids unindexed bytes)");
}

// 5. Only now, with every range known to be valid, read the data.
// 6. Each tensor's bytes against its CRC-32 (when the file has them). Values are not judged
// here (a file may hold infinities on purpose); weight loaders refuse NaN and infinity.
void read_tensors(SafetensorsFile& file, const std::vector<Entry>& entries, uint64_t data_start,
                  const nlohmann::json& crcs, Checkpoint& ckpt) {
  const std::string& where = file.where;
  for (const Entry& e : entries) {
    Tensor t(e.shape, e.dtype, Device::CPU);
    if (e.end > e.begin)
      file.read_exact(data_start + e.begin, t.raw_data(), e.end - e.begin, "tensor '" + e.name + "'");
    if (ckpt.checksummed) {
      LM_CHECK(crcs.contains(e.name) && crcs[e.name].is_string(),
               where << "tensor '" << e.name << "' has no CRC-32 in __metadata__.crc32 (every tensor must)");
      const std::string found = crc32_hex(crc32_update(0, e.end > e.begin ? t.raw_data() : nullptr, e.end - e.begin));
      LM_CHECK(found == crcs[e.name].get<std::string>(),
               where << "tensor '" << e.name << "' is corrupt: its bytes have CRC-32 " << found << ", the file "
                     << "recorded " << crcs[e.name].get<std::string>());
    }
    ckpt.tensors.emplace_back(e.name, t);
  }
  if (ckpt.checksummed)
    for (const auto& [name, value] : crcs.items())
      LM_CHECK(ckpt.has(name), where << "__metadata__.crc32 names '" << name << "', which is not a tensor in the file");
}

}  // namespace

Checkpoint load_safetensors(const std::string& path) {
  check_little_endian();
  SafetensorsFile file(path, "load_safetensors('" + path + "'): ");
  uint64_t n = 0;
  const ordered_json header = read_header(file, &n);
  Metadata meta = read_metadata(header, file.where);
  std::vector<Entry> entries;
  for (const auto& [name, v] : header.items())
    if (name != "__metadata__") entries.push_back(parse_entry(name, v, file.where));
  const uint64_t data_start = 8 + n, data_size = file.file_size - data_start;
  check_tiling(entries, data_size, file.where);

  Checkpoint ckpt;
  ckpt.metadata = std::move(meta.landmark);
  ckpt.checksummed = !meta.crcs.is_null();
  ckpt.header_checksummed = meta.header_checksummed;
  read_tensors(file, entries, data_start, meta.crcs, ckpt);
  return ckpt;
}

}  // namespace lm
