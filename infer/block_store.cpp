// The paper's cache of block K/V (Section 3.2); beyond the paper: the disk, f16 and GPU backings.
// block_store.cpp: BlockStore in RAM segments or in an unlinked file read with pread (block_store.h).
#include "infer/block_store.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <exception>
#include <limits>

#include "tensor/check.h"
#include "tensor/cpu/parallel.h"
#include "tensor/half.h"

namespace lm {

namespace {
// Disk space is reserved in steps of about this many bytes (at least one cell): few fallocate
// calls, and at most one step of unused space per layer.
constexpr int64_t kReserveStepBytes = int64_t(64) << 20;

// The whole of [buf, buf + n) to / from offset `at`, across short transfers and signals.
void write_all(int fd, const char* buf, int64_t n, int64_t at, const std::string& path) {
  while (n > 0) {
    const ssize_t w = ::pwrite(fd, buf, static_cast<size_t>(n), static_cast<off_t>(at));
    if (w < 0 && errno == EINTR) continue;
    LM_CHECK(w > 0, "block store: cannot write " << n << " bytes at offset " << at << " of " << path << ": "
                                                 << (w < 0 ? std::strerror(errno) : "nothing written"));
    buf += w;
    n -= w;
    at += w;
  }
}
void read_all(int fd, char* buf, int64_t n, int64_t at, const std::string& path) {
  while (n > 0) {
    const ssize_t r = ::pread(fd, buf, static_cast<size_t>(n), static_cast<off_t>(at));
    if (r < 0 && errno == EINTR) continue;
    LM_CHECK(r > 0, "block store: cannot read " << n << " bytes at offset " << at << " of " << path << ": "
                                                << (r < 0 ? std::strerror(errno) : "the file is shorter"));
    buf += r;
    n -= r;
    at += r;
  }
}
}  // namespace

BlockStore::BlockStore(int64_t block_elems, DType dtype, int64_t capacity, const std::string& dir, bool half,
                       Device device)
    : block_elems_(block_elems),
      block_bytes_(0),
      out_bytes_(0),
      half_(half),
      capacity_(capacity),
      device_(device),
      dtype_(dtype) {
  LM_CHECK(device == Device::CPU || (dir.empty() && !half),
           "block store: block K/V kept on " << device_name(device)
                                             << " are neither in files (--block-dir) nor f16 "
                                                "(--kv-dtype f16); those are for block K/V in host memory");
  const int64_t elem = static_cast<int64_t>(dtype_size(dtype));
  LM_CHECK(block_elems > 0 && block_elems <= std::numeric_limits<int64_t>::max() / 4 / elem,
           "block store: bad block size of " << block_elems << " elements");
  LM_CHECK(capacity >= 0, "block store: capacity must be >= 0 (0 = unlimited), got " << capacity);
  LM_CHECK(!half || dtype == DType::F32,
           "block store: f16 storage converts from f32, but the blocks are " << dtype_name(dtype));
  out_bytes_ = block_elems * elem;
  block_bytes_ = half ? block_elems * 2 : out_bytes_;
  if (half) half_buf_.resize(static_cast<size_t>(2 * block_elems));
  // Cell offsets (cell * 2 * block_bytes) must fit in 63 bits for any cell the store can reach;
  // a capacity beyond that could never be filled anyway.
  const int64_t max_cells = std::numeric_limits<int64_t>::max() / (2 * block_bytes_);
  LM_CHECK(capacity <= max_cells,
           "block store: capacity " << capacity << " blocks of " << 2 * block_bytes_
                                    << " bytes is more than a 64-bit offset can address (at most " << max_cells << ")");
  if (dir.empty()) return;
  struct stat st {};
  LM_CHECK(::stat(dir.c_str(), &st) == 0 && S_ISDIR(st.st_mode),
           "block store: " << dir << " is not a directory (give an existing directory for the block files)");
  std::string name = dir + "/landmark-blocks-XXXXXX";
  fd_ = ::mkostemp(name.data(), O_CLOEXEC);  // a fresh name, created exclusively (O_EXCL)
  LM_CHECK(fd_ >= 0, "block store: cannot create a block file in " << dir << ": " << std::strerror(errno));
  path_ = name;
  // Unlinked at once: the file lives as long as the descriptor, and nothing stays in the
  // directory when the process ends, however it ends.
  if (::unlink(name.c_str()) != 0) {
    const int err = errno;
    ::close(fd_);
    fd_ = -1;
    LM_FAIL("block store: cannot unlink the fresh block file " << name << ": " << std::strerror(err));
  }
}

BlockStore::~BlockStore() {
  if (fd_ >= 0) ::close(fd_);
}

void BlockStore::reserve_disk(int64_t cells) {
  if (cells <= reserved_cells_) return;
  const int64_t step = std::max<int64_t>(1, kReserveStepBytes / (2 * block_bytes_));
  int64_t want = std::max(cells, reserved_cells_ + step);
  if (capacity_ > 0) want = std::min(want, capacity_);
  const int64_t from = reserved_cells_ * 2 * block_bytes_, len = (want - reserved_cells_) * 2 * block_bytes_;
  int rc;
  do {
    rc = ::posix_fallocate(fd_, static_cast<off_t>(from), static_cast<off_t>(len));
  } while (rc == EINTR);
  LM_CHECK(rc == 0, "block store: cannot reserve " << len << " more bytes for block K/V in " << path_ << " ("
                                                   << std::strerror(rc) << (rc == ENOSPC ? ": the disk is full" : "")
                                                   << ")");
  reserved_cells_ = want;
}

char* BlockStore::ram_cell(int64_t cell) const {
  if (device_ != Device::CPU)
    return static_cast<char*>(dev_segments_[static_cast<size_t>(cell / kSegmentBlocks)].raw_data()) +
           (cell % kSegmentBlocks) * 2 * block_bytes_;
  return segments_[static_cast<size_t>(cell / kSegmentBlocks)].get() + (cell % kSegmentBlocks) * 2 * block_bytes_;
}

int64_t BlockStore::claim_cell() {
  LM_CHECK(capacity_ > 0 || count_ < std::numeric_limits<int64_t>::max() / (2 * block_bytes_),
           "block store: more blocks than a 64-bit offset can address");
  if (capacity_ > 0 && count_ == capacity_) {  // full ring: the oldest block's cell is reused
    --count_;
    ++evicted_;
  }
  return cell_of(count_);
}

void BlockStore::append(const Tensor& k, const Tensor& v) {
  LM_CHECK(k.device() == device_ && v.device() == device_ && k.dtype() == dtype_ && v.dtype() == dtype_ &&
               k.is_contiguous() && v.is_contiguous() && k.numel() == block_elems_ && v.numel() == block_elems_,
           "block store: a block's K " << describe(k) << " and V " << describe(v) << " must be contiguous "
                                       << dtype_name(dtype_) << " tensors of " << block_elems_ << " elements on "
                                       << device_name(device_));
  if (device_ == Device::CPU) return append(k.raw_data(), v.raw_data());
  const int64_t cell = claim_cell();
  while (static_cast<int64_t>(dev_segments_.size()) * kSegmentBlocks <= cell)
    dev_segments_.emplace_back(std::vector<int64_t>{kSegmentBlocks * 2 * block_elems_}, dtype_, device_);
  const Tensor& seg = dev_segments_[static_cast<size_t>(cell / kSegmentBlocks)];
  const int64_t at = (cell % kSegmentBlocks) * 2 * block_elems_;
  seg.narrow(0, at, block_elems_).copy_(k.view({block_elems_}));
  seg.narrow(0, at + block_elems_, block_elems_).copy_(v.view({block_elems_}));
  ++count_;
}

void BlockStore::append(const void* k, const void* v) {
  LM_CHECK(device_ == Device::CPU,
           "block store: blocks kept on " << device_name(device_) << " are appended as tensors on that device");
  const int64_t cell = claim_cell();
  if (half_) {  // convert K then V into half_buf_ and store that instead
    const float* kf = static_cast<const float*>(k);
    const float* vf = static_cast<const float*>(v);
    for (int64_t e = 0; e < block_elems_; ++e) {
      half_buf_[static_cast<size_t>(e)] = float_to_half(kf[e]);
      half_buf_[static_cast<size_t>(block_elems_ + e)] = float_to_half(vf[e]);
    }
    k = half_buf_.data();
    v = half_buf_.data() + block_elems_;
  }
  if (fd_ < 0) {
    while (static_cast<int64_t>(segments_.size()) * kSegmentBlocks <= cell) segments_.push_back(new_segment());
    char* dst = ram_cell(cell);
    std::memcpy(dst, k, static_cast<size_t>(block_bytes_));
    std::memcpy(dst + block_bytes_, v, static_cast<size_t>(block_bytes_));
  } else {
    reserve_disk(cell + 1);
    write_all(fd_, static_cast<const char*>(k), block_bytes_, cell * 2 * block_bytes_, path_);
    write_all(fd_, static_cast<const char*>(v), block_bytes_, cell * 2 * block_bytes_ + block_bytes_, path_);
  }
  ++count_;
  drop_staging();  // held indices have moved on (or a cell was overwritten): the last fetch is void
}

void BlockStore::move_to_host() {
  if (device_ == Device::CPU) return;
  // Host segments of the same size, so a cell keeps its number and cell_of() its meaning.
  std::vector<Segment> host;
  const size_t seg_bytes = static_cast<size_t>(kSegmentBlocks * 2 * block_bytes_);
  for (const Tensor& seg : dev_segments_) {
    const Tensor h = seg.to(Device::CPU);
    host.push_back(new_segment());
    std::memcpy(host.back().get(), h.raw_data(), seg_bytes);
  }
  segments_ = std::move(host);
  dev_segments_.clear();
  device_ = Device::CPU;
}

void BlockStore::Unmap::operator()(char* p) const {
  if (p) ::munmap(p, bytes);
}

BlockStore::Segment BlockStore::new_segment() const {
  const size_t bytes = static_cast<size_t>(kSegmentBlocks * 2 * block_bytes_);
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  LM_CHECK(p != MAP_FAILED, "block store: cannot map " << bytes << " bytes for " << kSegmentBlocks
                                                       << " more blocks in RAM: " << std::strerror(errno)
                                                       << " (out of memory? --block-dir keeps blocks on disk)");
  return Segment(static_cast<char*>(p), Unmap{bytes});
}

void BlockStore::drop_staging() {
  for (int32_t id : staged_ids_) staged_at_[static_cast<size_t>(id)] = -1;
  staged_ids_.clear();
}

void BlockStore::fetch(const std::vector<int32_t>& ids) {
  if (!needs_fetch()) {
    for (int32_t id : ids) LM_CHECK(id >= 0 && id < count_, "block store: fetch block " << id << " of " << count_);
    return;
  }
  drop_staging();
  staged_at_.resize(static_cast<size_t>(count_), -1);
  for (int32_t id : ids) {
    LM_CHECK(id >= 0 && id < count_, "block store: fetch block " << id << " of " << count_);
    if (staged_at_[static_cast<size_t>(id)] >= 0) continue;  // asked twice
    staged_at_[static_cast<size_t>(id)] = static_cast<int32_t>(staged_ids_.size());
    staged_ids_.push_back(id);
  }
  blocks_read_ += static_cast<int64_t>(staged_ids_.size());
  // The staging buffer keeps its largest size (it is one step's blocks, not the context's).
  const size_t out = static_cast<size_t>(2 * out_bytes_), need = staged_ids_.size() * out;
  if (staging_.size() < need) staging_.resize(need);
  if (!half_) {  // f32 on disk: straight into staging, the reads split among the threads
    const int64_t n = static_cast<int64_t>(staged_ids_.size());
    std::vector<std::exception_ptr> failed(static_cast<size_t>(n));  // an error can't leave a parallel loop
    cpu::parallel_for(n, 2 * block_bytes_, [&](int64_t u0, int64_t u1) {
      for (int64_t u = u0; u < u1; ++u) {
        try {
          read_all(fd_, staging_.data() + u * out, 2 * block_bytes_, cell_of(staged_ids_[u]) * 2 * block_bytes_, path_);
        } catch (...) {
          failed[static_cast<size_t>(u)] = std::current_exception();
        }
      }
    });
    for (const std::exception_ptr& f : failed)
      if (f) std::rethrow_exception(f);  // the first block that failed, as the serial loop reported it
    return;
  }
  for (size_t u = 0; u < staged_ids_.size(); ++u) {
    char* dst = staging_.data() + u * out;
    const int64_t cell = cell_of(staged_ids_[u]);
    const uint16_t* src = reinterpret_cast<const uint16_t*>(ram_cell_or_null(cell));
    if (!src) {  // f16 on disk: read, then convert
      read_all(fd_, reinterpret_cast<char*>(half_buf_.data()), 2 * block_bytes_, cell * 2 * block_bytes_, path_);
      src = half_buf_.data();
    }
    float* f = reinterpret_cast<float*>(dst);
    for (int64_t e = 0; e < 2 * block_elems_; ++e) f[e] = half_to_float(src[e]);
  }
}

const char* BlockStore::ram_cell_or_null(int64_t cell) const { return fd_ < 0 ? ram_cell(cell) : nullptr; }

const char* BlockStore::block_ptr(int64_t i) const {
  LM_CHECK(i >= 0 && i < count_, "block store: block " << i << " of " << count_);
  if (!needs_fetch()) return ram_cell(cell_of(i));
  const int32_t u = i < static_cast<int64_t>(staged_at_.size()) ? staged_at_[static_cast<size_t>(i)] : -1;
  LM_CHECK(u >= 0, "block store: block " << i << " is " << (half_ ? "stored in f16" : "on disk")
                                         << " and was not fetched (call fetch() first)");
  return staging_.data() + static_cast<size_t>(u) * static_cast<size_t>(2 * out_bytes_);
}

const void* BlockStore::k(int64_t i) const { return block_ptr(i); }
const void* BlockStore::v(int64_t i) const { return block_ptr(i) + out_bytes_; }

}  // namespace lm
