// test_checkpoint.cpp: safetensors checkpoints (nn/checkpoint.h). Round trips are compared bit
// for bit; the file layout is checked against the safetensors rules by parsing the bytes here,
// independently of the writer; a hand-assembled file must load; and every corruption of a valid
// file must be refused with a message that names the file and the problem.
#include "tests/helpers.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <tuple>

#include "nn/checkpoint.h"
#include "tensor/files.h"
#include "tensor/rng.h"
#include "train/token_file.h"
#include "train/tokenizer.h"

using namespace lm;
using namespace lm::test;
using Catch::Matchers::Contains;
using json = nlohmann::json;

namespace {

// A path in the temp dir, unique per test and process (ctest may run tests in parallel);
// the file and its ".tmp" twin are removed when the guard goes out of scope.
struct TempPath {
  std::string path;
  explicit TempPath(const std::string& stem)
      : path((std::filesystem::temp_directory_path() /
              ("lm_ckpt_" + stem + "_" + std::to_string(::getpid()) + ".safetensors")).string()) {
    cleanup();
  }
  ~TempPath() { cleanup(); }
  void cleanup() const {
    std::remove(path.c_str());
    std::remove((path + ".tmp").c_str());
  }
};

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  REQUIRE(in.is_open());
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}
void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  REQUIRE(out.good());
}
bool file_exists(const std::string& path) { return std::filesystem::exists(path); }

// The safetensors length prefix, assembled and taken apart byte by byte (not via the writer).
std::string u64_le(uint64_t v) {
  std::string s;
  for (int i = 0; i < 8; ++i) s.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
  return s;
}
uint64_t read_u64_le(const std::string& file) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(file[i]);
  return v;
}

// A file is prefix + header + data; these take one apart and put one together, so each
// rejection test can change exactly one thing in an otherwise valid file.
std::string header_text(const std::string& file) { return file.substr(8, read_u64_le(file)); }
std::string data_section(const std::string& file) { return file.substr(8 + read_u64_le(file)); }
std::string assemble(std::string header, const std::string& data) {
  header.append((8 - header.size() % 8) % 8, ' ');
  return u64_le(header.size()) + header + data;
}

// The message of the lm::Error that loading `path` raises ("" plus a test failure if none).
std::string load_error(const std::string& path) {
  try {
    load_safetensors(path);
  } catch (const Error& e) {
    return e.what();
  }
  FAIL("load_safetensors accepted a file it should refuse: " << path);
  return "";
}

// A tensor's elements as raw bytes in row-major order, read through an explicit index loop over
// its strides (not through contiguous(), which the writer itself uses).
std::string logical_bytes(const Tensor& t) {
  const size_t es = dtype_size(t.dtype());
  const char* base = static_cast<const char*>(t.raw_data());
  std::string out;
  for_each_index(t.shape(), [&](const std::vector<int64_t>& idx) {
    int64_t off = 0;
    for (size_t d = 0; d < idx.size(); ++d) off += idx[d] * t.stride(static_cast<int64_t>(d));
    out.append(base + off * static_cast<int64_t>(es), es);
  });
  return out;
}

float float_from_bits(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// Two f32 tensors of 16 bytes each ("a" [2, 2], "b" [4]) and a little metadata: the valid file
// the rejection tests corrupt.
void write_valid(const std::string& path) {
  Checkpoint c;
  c.add("a", from_vector(std::vector<float>{1, 2, 3, 4}, {2, 2}));
  c.add("b", from_vector(std::vector<float>{5, 6, 7, 8}, {4}));
  c.metadata = {{"step", 3}};
  save_safetensors(path, c);
}

}  // namespace

TEST_CASE("checkpoint: f32 f64 i32 tensors round-trip bit-exactly incl. 0-d and empty and a strided view", "[checkpoint]") {
  manual_seed(7);
  // Values chosen to catch any conversion on the way: -0, a denormal, infinities, a NaN with
  // a payload, the extremes of f32 and of i32.
  std::vector<float> special = {0.1f, -0.0f, 1e-40f, INFINITY, -INFINITY, float_from_bits(0x7fc01234u),
                                std::numeric_limits<float>::max(), std::numeric_limits<float>::min(),
                                -1.5f, 3.0f, 123456.7f, 1.0f / 3.0f};
  Tensor f32 = from_vector(special, {3, 4});
  Tensor f64 = randn({2, 3, 2}, DType::F64);
  Tensor i32 = from_vector(std::vector<int32_t>{std::numeric_limits<int32_t>::min(), -1, 0, 1,
                                                std::numeric_limits<int32_t>::max()}, {5});
  Tensor scalar = scalar_tensor(-2.75, DType::F64);  // 0-d: shape []
  Tensor empty_rows = zeros({0, 5});
  Tensor empty_cols = zeros({3, 0}, DType::I32);
  Tensor base = randn({4, 3});
  Tensor view = base.transpose(0, 1);  // (3, 4) with strides (1, 3)
  REQUIRE_FALSE(view.is_contiguous());

  Checkpoint c;
  c.add("f32", f32);
  c.add("f64", f64);
  c.add("i32", i32);
  c.add("scalar", scalar);
  c.add("empty_rows", empty_rows);
  c.add("empty_cols", empty_cols);
  c.add("view", view);
  TempPath tmp("roundtrip");
  save_safetensors(tmp.path, c);
  Checkpoint back = load_safetensors(tmp.path);

  // Same names in the same order, same dtype and shape, same bytes.
  REQUIRE(back.tensors.size() == c.tensors.size());
  for (size_t i = 0; i < c.tensors.size(); ++i) {
    const auto& [name, want] = c.tensors[i];
    INFO("tensor " << name);
    CHECK(back.tensors[i].first == name);
    const Tensor& got = back.tensors[i].second;
    CHECK(got.dtype() == want.dtype());
    CHECK(got.shape() == want.shape());
    CHECK(got.device() == Device::CPU);
    CHECK(logical_bytes(got) == logical_bytes(want));
  }
  CHECK(back.get("scalar").dim() == 0);
  CHECK(back.get("scalar").item() == -2.75);
  CHECK(back.get("empty_rows").numel() == 0);
  // The view, checked against the base by hand: view[i][j] = base[j][i], bit for bit.
  std::vector<float> b = base.to_vector<float>(), v = back.get("view").to_vector<float>();
  for (int64_t i = 0; i < 3; ++i)
    for (int64_t j = 0; j < 4; ++j) CHECK(std::memcmp(&v[i * 4 + j], &b[j * 3 + i], 4) == 0);
  // The NaN payload survived (a float conversion would have been free to drop it).
  uint32_t nan_bits;
  float nan_back = back.get("f32").to_vector<float>()[5];
  std::memcpy(&nan_bits, &nan_back, 4);
  CHECK(nan_bits == 0x7fc01234u);
}

TEST_CASE("checkpoint: nested JSON metadata round-trips exactly", "[checkpoint]") {
  Checkpoint c;
  c.add("w", ones({2}));
  c.metadata = {
      {"config", {{"n_layer", 2}, {"block_len", 50}, {"dropout", 0.1}, {"name", "tiny \"gpt\" \xc3\xbc \\ /"}}},
      {"step", 1234},
      {"rng", {{"seed", std::numeric_limits<uint64_t>::max()}, {"offset", 7}}},
      {"history", {1.5, -2.25, nullptr, true}},
      {"empty", json::object()},
  };
  TempPath tmp("metadata");
  save_safetensors(tmp.path, c);
  Checkpoint back = load_safetensors(tmp.path);
  CHECK(back.metadata == c.metadata);
  CHECK(back.metadata["config"]["dropout"].get<double>() == 0.1);  // exact, not approximately
  CHECK(back.metadata["rng"]["seed"].get<uint64_t>() == std::numeric_limits<uint64_t>::max());

  // No metadata at all comes back as null.
  Checkpoint bare;
  bare.add("w", ones({1}));
  save_safetensors(tmp.path, bare);
  CHECK(load_safetensors(tmp.path).metadata.is_null());
}

TEST_CASE("checkpoint: the file follows the safetensors layout rules", "[checkpoint]") {
  Checkpoint c;
  std::vector<float> first = {1.0f, -2.0f, 0.5f};  // 12 bytes: odd multiple of 4 on purpose
  c.add("first", from_vector(first, {3}));
  c.add("second", from_vector(std::vector<double>{0.25, -8.0}, {2}));
  c.add("third", from_vector(std::vector<int32_t>{42}, {1, 1}));
  c.metadata = {{"step", 9}};
  TempPath tmp("layout");
  save_safetensors(tmp.path, c);
  const std::string file = read_bytes(tmp.path);

  // Header: length a multiple of 8 (Python's writer aligns the same way), opens with '{',
  // padded only with spaces, and parses as a JSON object.
  REQUIRE(file.size() >= 8);
  const uint64_t n = read_u64_le(file);
  CHECK(n % 8 == 0);
  REQUIRE(8 + n <= file.size());
  const std::string text = file.substr(8, n);
  CHECK(text[0] == '{');
  const size_t last_brace = text.find_last_of('}');
  CHECK(text.find_first_not_of(' ', last_brace + 1) == std::string::npos);
  const json header = json::parse(text);
  REQUIRE(header.is_object());

  // Metadata values are all strings; ours carry the format and the landmark JSON.
  const json& meta = header.at("__metadata__");
  for (const auto& item : meta.items()) CHECK(item.value().is_string());
  CHECK(meta.at("format") == "landmark-v1");
  CHECK(json::parse(meta.at("landmark").get<std::string>()) == c.metadata);

  // Tensor entries: dtypes in safetensors spelling, and offsets that tile the data section
  // from 0 to its end, in order, with no gap.
  CHECK(header.at("first").at("dtype") == "F32");
  CHECK(header.at("second").at("dtype") == "F64");
  CHECK(header.at("third").at("dtype") == "I32");
  CHECK(header.at("third").at("shape") == json::array({1, 1}));
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  for (const auto& item : header.items())
    if (item.key() != "__metadata__")
      ranges.emplace_back(item.value().at("data_offsets")[0].get<uint64_t>(),
                          item.value().at("data_offsets")[1].get<uint64_t>());
  std::sort(ranges.begin(), ranges.end());
  uint64_t covered = 0;
  for (const auto& r : ranges) {
    CHECK(r.first == covered);
    covered = r.second;
  }
  CHECK(covered == file.size() - 8 - n);
  CHECK(covered == 12 + 16 + 4);

  // The first data byte sits at 8 + N and holds "first" in little-endian f32.
  CHECK(header.at("first").at("data_offsets") == json::array({0, 12}));
  CHECK(std::memcmp(file.data() + 8 + n, first.data(), 12) == 0);
  CHECK(static_cast<unsigned char>(file[8 + n + 7]) == 0xC0);  // -2.0f = 0xC0000000, high byte last
}

TEST_CASE("checkpoint: a hand-assembled safetensors file is accepted", "[checkpoint]") {
  // Written byte by byte, without the writer. The header is deliberately not padded (the spec
  // allows any length) and lists the tensors in an order that is not alphabetical.
  const std::string header =
      R"({"__metadata__":{"format":"landmark-v1"},)"
      R"("w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
      R"("n":{"dtype":"I32","shape":[],"data_offsets":[8,12]},)"
      R"("d":{"dtype":"F64","shape":[1],"data_offsets":[12,20]}})";
  const unsigned char data[] = {
      0x00, 0x00, 0xC0, 0x3F,                          // w[0] =  1.5f  (0x3FC00000)
      0x00, 0x00, 0x00, 0xC0,                          // w[1] = -2.0f  (0xC0000000)
      0xFE, 0xFF, 0xFF, 0xFF,                          // n    = -2     (two's complement)
      0x9A, 0x99, 0x99, 0x99, 0x99, 0x99, 0xB9, 0x3F,  // d[0] =  0.1   (0x3FB999999999999A)
  };
  std::string file;
  for (int i = 0; i < 8; ++i) file.push_back(static_cast<char>((header.size() >> (8 * i)) & 0xff));
  file += header;
  file.append(reinterpret_cast<const char*>(data), sizeof data);
  TempPath tmp("handmade");
  write_bytes(tmp.path, file);

  Checkpoint c = load_safetensors(tmp.path);
  REQUIRE(c.tensors.size() == 3);
  CHECK(c.tensors[0].first == "w");  // header order, not sorted
  CHECK(c.tensors[1].first == "n");
  CHECK(c.tensors[2].first == "d");
  CHECK(c.get("w", {2}, DType::F32).to_vector<float>() == std::vector<float>{1.5f, -2.0f});
  CHECK(c.get("n", {}, DType::I32).to_vector<int32_t>() == std::vector<int32_t>{-2});
  CHECK(c.get("d", {1}, DType::F64).to_vector<double>() == std::vector<double>{0.1});
  CHECK(c.metadata.is_null());  // no "landmark" entry
  CHECK_FALSE(c.checksummed);    // no "crc32" entry: loads all the same
}

TEST_CASE("checkpoint: the reader refuses corrupt files and says which file and what is wrong", "[checkpoint]") {
  TempPath tmp("corrupt");
  write_valid(tmp.path);
  const std::string valid = read_bytes(tmp.path);
  const std::string text = header_text(valid), data = data_section(valid);
  REQUIRE(data.size() == 32);
  json header = json::parse(text);
  REQUIRE_NOTHROW(load_safetensors(tmp.path));  // the starting point is valid
  const std::string& p = tmp.path;
  // The sections below edit the header and write it back without its own checksum (as a file from
  // before it had one), so that each edit reaches the check it is about; the header's checksum is
  // tested on its own further down.
  header["__metadata__"].erase("header_crc32");

  SECTION("missing file") {
    TempPath gone("missing");
    CHECK_THAT(load_error(gone.path), Contains(gone.path) && Contains("No such file"));
  }
  SECTION("a directory") {
    const std::string dir = std::filesystem::temp_directory_path().string();
    CHECK_THAT(load_error(dir), Contains(dir) && Contains("directory"));
  }
  SECTION("shorter than the 8-byte length prefix") {
    write_bytes(p, valid.substr(0, 5));
    CHECK_THAT(load_error(p), Contains(p) && Contains("5 bytes long") && Contains("too short"));
  }
  SECTION("truncated by one byte") {
    write_bytes(p, valid.substr(0, valid.size() - 1));
    CHECK_THAT(load_error(p), Contains(p) && Contains("truncated") && Contains("31 bytes follow"));
  }
  SECTION("first 8 bytes overwritten: absurd header length") {
    write_bytes(p, std::string(8, '\xff') + valid.substr(8));
    CHECK_THAT(load_error(p), Contains(p) && Contains("header length") && Contains("18446744073709551615"));
  }
  SECTION("header that is not JSON") {
    write_bytes(p, assemble("{not json", data));
    CHECK_THAT(load_error(p), Contains(p) && Contains("not valid JSON"));
  }
  SECTION("header that is JSON but not an object") {
    write_bytes(p, assemble("[1, 2]", data));
    CHECK_THAT(load_error(p), Contains(p) && Contains("not an object"));
  }
  SECTION("a shape that disagrees with the offsets") {
    header["a"]["shape"] = {3, 2};  // 24 bytes of f32, but the offsets span 16
    write_bytes(p, assemble(header.dump(), data));
    CHECK_THAT(load_error(p), Contains(p) && Contains("tensor 'a'") && Contains("[3, 2]") &&
                                  Contains("needs 24 bytes") && Contains("span 16"));
  }
  SECTION("an unknown dtype") {
    header["a"]["dtype"] = "BF16";
    write_bytes(p, assemble(header.dump(), data));
    CHECK_THAT(load_error(p), Contains(p) && Contains("tensor 'a'") && Contains("BF16") && Contains("not supported"));
  }
  SECTION("a negative size in a shape") {
    header["b"]["shape"] = {-4};
    write_bytes(p, assemble(header.dump(), data));
    CHECK_THAT(load_error(p), Contains(p) && Contains("tensor 'b'") && Contains("non-negative"));
  }
  SECTION("overlapping offsets") {
    header["b"]["data_offsets"] = {8, 24};  // a is [0, 16)
    write_bytes(p, assemble(header.dump(), data));
    CHECK_THAT(load_error(p), Contains(p) && Contains("overlap"));
  }
  SECTION("offsets out of range") {
    header["b"]["data_offsets"] = {1000, 1016};
    write_bytes(p, assemble(header.dump(), data));
    CHECK_THAT(load_error(p), Contains(p) && Contains("tensor 'b'") && Contains("out of range"));
  }
  SECTION("a hole between tensors") {
    header["b"]["data_offsets"] = {20, 36};  // bytes [16, 20) belong to nobody
    write_bytes(p, assemble(header.dump(), data + std::string(4, '\0')));
    CHECK_THAT(load_error(p), Contains(p) && Contains("bytes [16, 20)") && Contains("holes"));
  }
  SECTION("bytes after the last tensor") {
    write_bytes(p, valid + std::string(4, '\0'));
    CHECK_THAT(load_error(p), Contains(p) && Contains("4 bytes after the last tensor"));
  }
  SECTION("a tensor named twice") {
    const std::string twice = R"({"__metadata__":{"format":"landmark-v1"},)"
                              R"("a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},)"
                              R"("a":{"dtype":"F32","shape":[4],"data_offsets":[16,32]}})";
    write_bytes(p, assemble(twice, data));
    CHECK_THAT(load_error(p), Contains(p) && Contains("'a' twice"));
  }
  SECTION("missing format metadata") {
    header.erase("__metadata__");
    write_bytes(p, assemble(header.dump(), data));
    CHECK_THAT(load_error(p), Contains(p) && Contains("not a landmark checkpoint") && Contains("no \"format\""));
  }
  SECTION("another program's format") {
    header["__metadata__"]["format"] = "pt";
    write_bytes(p, assemble(header.dump(), data));
    CHECK_THAT(load_error(p), Contains(p) && Contains("not a landmark checkpoint") && Contains("\"pt\""));
  }
  SECTION("a metadata value that is not a string") {
    header["__metadata__"]["step"] = 3;
    write_bytes(p, assemble(header.dump(), data));
    CHECK_THAT(load_error(p), Contains(p) && Contains("__metadata__[\"step\"]") && Contains("must be strings"));
  }
  SECTION("landmark metadata that is not JSON") {
    header["__metadata__"]["landmark"] = "{oops";
    write_bytes(p, assemble(header.dump(), data));
    CHECK_THAT(load_error(p), Contains(p) && Contains("__metadata__.landmark is not valid JSON"));
  }
  SECTION("the writer records each tensor's CRC-32 (values from Python's zlib.crc32)") {
    // zlib.crc32(struct.pack('<4f', 1, 2, 3, 4)) and (5, 6, 7, 8): the bytes of "a" and "b".
    const json crcs = json::parse(header["__metadata__"]["crc32"].get<std::string>());
    CHECK(crcs == json{{"a", "8ba71454"}, {"b", "f66072af"}});
    CHECK(load_safetensors(p).checksummed);
  }
  SECTION("one flipped bit in a tensor's data") {
    for (size_t byte : {size_t(0), size_t(13), size_t(31)}) {
      std::string flipped = data;
      flipped[byte] = static_cast<char>(flipped[byte] ^ 0x10);
      write_bytes(p, assemble(text, flipped));
      const std::string name = byte < 16 ? "'a'" : "'b'";
      INFO("byte " << byte);
      CHECK_THAT(load_error(p), Contains(p) && Contains("tensor " + name + " is corrupt") && Contains("CRC-32"));
    }
  }
  SECTION("a CRC-32 list that misses a tensor, names an extra one, or is not JSON") {
    header["__metadata__"]["crc32"] = json{{"a", "8ba71454"}}.dump();
    write_bytes(p, assemble(header.dump(), data));
    CHECK_THAT(load_error(p), Contains(p) && Contains("tensor 'b' has no CRC-32"));
    header["__metadata__"]["crc32"] = json{{"a", "8ba71454"}, {"b", "f66072af"}, {"c", "00000000"}}.dump();
    write_bytes(p, assemble(header.dump(), data));
    CHECK_THAT(load_error(p), Contains(p) && Contains("names 'c'"));
    header["__metadata__"]["crc32"] = "{oops";
    write_bytes(p, assemble(header.dump(), data));
    CHECK_THAT(load_error(p), Contains(p) && Contains("__metadata__.crc32 is not valid JSON"));
  }
  SECTION("a file from before checksums (no crc32 entry) still loads, and says so") {
    header["__metadata__"].erase("crc32");
    write_bytes(p, assemble(header.dump(), data));
    Checkpoint c = load_safetensors(p);
    CHECK_FALSE(c.checksummed);
    CHECK(c.get("b").to_vector<float>() == std::vector<float>{5, 6, 7, 8});
  }
}

TEST_CASE("checkpoint: every one-bit flip in the length prefix or the header is refused", "[checkpoint]") {
  // The header holds the metadata (a model config here, as a training checkpoint's) besides the
  // tensors' names, shapes and offsets. A flip inside a JSON string or a number leaves valid JSON:
  // only a checksum over the header can tell, so each of the 8 x (8 + N) flips is tried in turn.
  TempPath tmp("headerflip");
  Checkpoint c;
  c.add("a", from_vector(std::vector<float>{1, 2, 3, 4}, {2, 2}));
  c.add("b", from_vector(std::vector<float>{5, 6, 7, 8}, {4}));
  c.metadata = {{"model", {{"attention", "landmark"}, {"landmark_every", 8}, {"n_head", 2}, {"n_embd", 48}}},
                {"step", 3}};
  save_safetensors(tmp.path, c);
  const std::string valid = read_bytes(tmp.path);
  const size_t header_end = 8 + read_u64_le(valid);
  size_t tried = 0, accepted = 0;
  std::string first_accepted;
  for (size_t byte = 0; byte < header_end; ++byte)
    for (int bit = 0; bit < 8; ++bit) {
      std::string flipped = valid;
      flipped[byte] = static_cast<char>(flipped[byte] ^ (1 << bit));
      write_bytes(tmp.path, flipped);
      ++tried;
      try {
        load_safetensors(tmp.path);
        if (accepted++ == 0) first_accepted = "byte " + std::to_string(byte) + " bit " + std::to_string(bit);
      } catch (const Error&) {
      }
    }
  INFO(accepted << " of " << tried << " flips loaded; the first: " << first_accepted);
  CHECK(tried == 8 * header_end);
  CHECK(accepted == 0);

  // The two flips a bad-input probe found, by name: "attention" -> "cttention" and
  // "landmark_every" -> "landmark_ever}" (0x79 ^ 0x04 = '}'). The message says the header is corrupt.
  const std::string text = header_text(valid);
  for (const auto& [word, at, mask] : {std::tuple<std::string, size_t, char>{"attention", 0, 0x02},
                                       std::tuple<std::string, size_t, char>{"landmark_every", 13, 0x04}}) {
    const size_t pos = text.find(word);
    REQUIRE(pos != std::string::npos);
    std::string flipped = valid;
    flipped[8 + pos + at] = static_cast<char>(flipped[8 + pos + at] ^ mask);
    write_bytes(tmp.path, flipped);
    INFO(word);
    CHECK_THAT(load_error(tmp.path), Contains(tmp.path) && Contains("header") && Contains("CRC-32"));
  }
}

TEST_CASE("checkpoint: the header's CRC-32 covers the header as written, and files from before it load with a note",
          "[checkpoint]") {
  TempPath tmp("headercrc");
  write_valid(tmp.path);
  const std::string valid = read_bytes(tmp.path);
  const std::string text = header_text(valid), data = data_section(valid);
  const Checkpoint c = load_safetensors(tmp.path);
  CHECK(c.checksummed);
  CHECK(c.header_checksummed);
  CHECK(unverified_note(c, tmp.path).empty());

  // Independently of checkpoint_header_crc32: the writer's header text with its last metadata entry
  // cut out of the bytes (and the padding dropped) is what the recorded CRC-32 covers.
  const size_t at = text.find(R"(,"header_crc32":")");
  REQUIRE(at != std::string::npos);
  const std::string recorded = text.substr(at + 17, 8);
  std::string covered = text.substr(0, at) + text.substr(at + 26);
  covered.erase(covered.find_last_not_of(' ') + 1);
  CHECK(crc32_hex(crc32_update(0, covered.data(), covered.size())) == recorded);
  CHECK(checkpoint_header_crc32(nlohmann::ordered_json::parse(text)) == recorded);

  // Without the entry (a file from before it), the file loads; the note names the file and what
  // was not verified. Without the tensors' CRC-32s too, the note says so.
  nlohmann::ordered_json header = nlohmann::ordered_json::parse(text);
  header["__metadata__"].erase("header_crc32");
  write_bytes(tmp.path, assemble(header.dump(), data));
  Checkpoint old = load_safetensors(tmp.path);
  CHECK(old.checksummed);
  CHECK_FALSE(old.header_checksummed);
  CHECK_THAT(unverified_note(old, tmp.path), Contains(tmp.path) && Contains("no CRC-32 over its header"));
  header["__metadata__"].erase("crc32");
  write_bytes(tmp.path, assemble(header.dump(), data));
  old = load_safetensors(tmp.path);
  CHECK_FALSE(old.checksummed);
  CHECK_THAT(unverified_note(old, tmp.path), Contains(tmp.path) && Contains("no CRC-32s"));

  // A header CRC-32 without the tensors' (the writer always writes both), with a correct value.
  header["__metadata__"]["header_crc32"] = checkpoint_header_crc32(header);
  write_bytes(tmp.path, assemble(header.dump(), data));
  CHECK_THAT(load_error(tmp.path), Contains(tmp.path) && Contains("no per-tensor crc32"));
  // A damaged entry name does not make a file pass for an old one: unknown names are refused.
  std::string renamed = valid;
  renamed.replace(8 + at + 2, 12, "header_crc33");
  write_bytes(tmp.path, renamed);
  CHECK_THAT(load_error(tmp.path), Contains(tmp.path) && Contains("\"header_crc33\"") && Contains("does not know"));
}

TEST_CASE("checkpoint: get names a missing tensor and a wrong shape or dtype", "[checkpoint]") {
  Checkpoint c;
  c.add("blocks.0.attn.weight", zeros({2, 3}));
  c.add("blocks.1.attn.weight", zeros({2, 3}));
  c.add("wte.weight", zeros({5, 2}));
  CHECK(c.has("wte.weight"));
  CHECK_FALSE(c.has("wpe.weight"));
  CHECK(c.get("wte.weight").storage() == c.tensors[2].second.storage());  // no copy

  // The suggestion lists the names closest to the missing one first.
  CHECK_THROWS_WITH(c.get("blocks.2.attn.weight"),
                    Contains("'blocks.2.attn.weight'") && Contains("3 tensors, e.g. 'blocks.0.attn.weight'"));
  CHECK_THROWS_WITH(c.get("blocks.0.attn.weight", {3, 2}, DType::F32),
                    Contains("'blocks.0.attn.weight'") && Contains("[2, 3]") && Contains("[3, 2]"));
  CHECK_THROWS_WITH(c.get("wte.weight", {5, 2}, DType::F64), Contains("'wte.weight'") && Contains("f64") && Contains("f32"));
  CHECK_THROWS_AS(c.get("nope"), Error);
  CHECK(c.get("wte.weight", {5, 2}, DType::F32).shape() == Shape{5, 2});
  CHECK_THROWS_WITH(c.add("wte.weight", ones({1})), Contains("already present"));
  CHECK_THROWS_WITH(Checkpoint{}.get("x"), Contains("no tensors at all"));
}

TEST_CASE("checkpoint: save goes through a temp file that does not remain", "[checkpoint]") {
  TempPath tmp("atomic");
  Checkpoint v1;
  v1.add("w", full({3}, 1.0));
  save_safetensors(tmp.path, v1);
  CHECK(file_exists(tmp.path));
  CHECK_FALSE(file_exists(tmp.path + ".tmp"));

  // An interrupted save leaves a half-written ".tmp" behind; the checkpoint itself is untouched
  // and the next save simply replaces the leftover.
  write_bytes(tmp.path + ".tmp", "half a checkpoint");
  CHECK(load_safetensors(tmp.path).get("w").to_vector<float>() == std::vector<float>{1, 1, 1});
  Checkpoint v2;
  v2.add("w", full({3}, 2.0));
  save_safetensors(tmp.path, v2);
  CHECK_FALSE(file_exists(tmp.path + ".tmp"));
  CHECK(load_safetensors(tmp.path).get("w").to_vector<float>() == std::vector<float>{2, 2, 2});

  // Refused saves change nothing on disk.
  const std::string before = read_bytes(tmp.path);
  Checkpoint twice;
  twice.add("w", ones({1}));
  twice.tensors.emplace_back("w", ones({1}));  // bypasses add()'s check
  CHECK_THROWS_WITH(save_safetensors(tmp.path, twice), Contains(tmp.path) && Contains("two tensors are named 'w'"));
  Checkpoint reserved;
  reserved.add("__metadata__", ones({1}));
  CHECK_THROWS_WITH(save_safetensors(tmp.path, reserved), Contains("reserved"));
  Checkpoint undefined;
  undefined.add("u", Tensor());
  CHECK_THROWS_WITH(save_safetensors(tmp.path, undefined), Contains("'u' is undefined"));
  CHECK(read_bytes(tmp.path) == before);
  CHECK_FALSE(file_exists(tmp.path + ".tmp"));

  // A directory that does not exist: the error names the path.
  const std::string nowhere = "/nonexistent-lm-dir/ckpt.safetensors";
  CHECK_THROWS_WITH(save_safetensors(nowhere, v1), Contains(nowhere) && Contains("cannot create"));
}

TEST_CASE("readers refuse a FIFO, a directory or a missing path by name, without opening it", "[checkpoint][io]") {
  // A FIFO with no writer: opening it for reading would block forever, so a reader that opened
  // first would hang this test (CTest's timeout then fails it).
  const std::string dir = std::filesystem::temp_directory_path().string() + "/lm_test_fifo_" + std::to_string(::getpid());
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::string fifo = dir + "/checkpoint.safetensors";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  CHECK_THROWS_WITH(load_safetensors(fifo), Catch::Contains(fifo) && Catch::Contains("a FIFO (named pipe), not a regular file"));
  CHECK_THROWS_WITH(lm::TokenFile(fifo), Catch::Contains("token file") && Catch::Contains("FIFO"));
  CHECK_THROWS_WITH(lm::load_tokenizer(fifo), Catch::Contains("FIFO"));
  CHECK_THROWS_WITH(lm::require_regular_file(dir, "thing"), Catch::Contains("thing " + dir + ": this is a directory"));
  CHECK_THROWS_WITH(lm::require_regular_file(dir + "/absent", "thing"), Catch::Contains("No such file"));
  CHECK_NOTHROW(lm::require_regular_file(__FILE__, "this test's own source"));
  std::filesystem::remove_all(dir);
}

TEST_CASE("checkpoint: save refuses an output or a temporary name that is not a regular file, and writes through nothing",
          "[checkpoint][io]") {
  // The independent answer is the file system itself: after each refused save, the link's target
  // and the FIFO are byte for byte (or kind for kind) what they were, and nothing new is there.
  namespace fs = std::filesystem;
  const std::string dir = fs::temp_directory_path().string() + "/lm_test_save_kinds_" + std::to_string(::getpid());
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string victim = dir + "/victim.txt";
  { std::ofstream(victim) << "someone else's file"; }
  Checkpoint v;
  v.add("w", full({3}, 1.0));

  // The output itself a symbolic link: refused, the link and its target untouched.
  const std::string link = dir + "/link.safetensors";
  fs::create_symlink(victim, link);
  CHECK_THROWS_WITH(save_safetensors(link, v), Contains(link) && Contains("symbolic link") && Contains("save_safetensors"));
  CHECK(fs::is_symlink(fs::symlink_status(link)));

  // The output a FIFO: refused (a rename would have replaced it with a file).
  const std::string fifo = dir + "/fifo.safetensors";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  CHECK_THROWS_WITH(save_safetensors(fifo, v), Contains(fifo) && Contains("FIFO"));
  CHECK(fs::is_fifo(fs::symlink_status(fifo)));

  // PATH.tmp a link to someone else's file: refused; opening it with O_TRUNC would have emptied the target.
  const std::string out = dir + "/ckpt.safetensors";
  fs::create_symlink(victim, out + ".tmp");
  CHECK_THROWS_WITH(save_safetensors(out, v), Contains(out + ".tmp") && Contains("symbolic link"));
  CHECK_FALSE(fs::exists(fs::symlink_status(out)));
  fs::remove(out + ".tmp");

  // With the link gone, the same save goes through (a leftover regular PATH.tmp: the test above).
  save_safetensors(out, v);
  CHECK(load_safetensors(out).get("w").to_vector<float>() == std::vector<float>{1, 1, 1});

  std::ifstream in(victim);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  CHECK(text == "someone else's file");
  fs::remove_all(dir);
}
