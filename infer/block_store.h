// The paper's cache of block K/V (Section 3.2); beyond the paper: the disk, f16 and GPU backings.
// block_store.h: "slow memory" for the K and V of cached blocks of one layer. Blocks are appended
// in order and read back by index; when a capacity is set the store is a ring that overwrites
// the oldest block. Two backings with one interface:
//   RAM:  blocks in segments of kSegmentBlocks, added as the store grows (never copied, so growing
//         costs no second copy; mapped from the kernel, so the part of a segment not written yet
//         is not resident).
//   disk: one file per store in a directory the user names. The file gets a fresh name (created
//         exclusively, so two runs sharing the directory never meet) and is unlinked at once, so
//         nothing is left behind, even after a crash, and no file of the user's is touched. Space
//         is reserved ahead (posix_fallocate), so a full disk is an error when it happens, not a
//         SIGBUS later. Blocks are written with pwrite and read back with pread only when a step
//         retrieves them (fetch), so resident memory holds the blocks one step uses, not the
//         whole context: the context length is bounded by disk, not RAM.
//   device: segments as in RAM, but in the memory of a CUDA device (Tensor segments), filled by
//         append(Tensor, Tensor) from device tensors; k() and v() are device pointers. For a
//         session on the GPU that keeps block K/V there instead of offloading them to the host
//         (InferConfig::blocks_on_device); infer/cuda/chunk_attention.cu gathers from it.
// The host backings can store K/V as f32 (as computed) or as f16 (half the bytes to hold, write and
// read; tensor/half.h): an f16 store converts on append and converts the fetched blocks back to
// f32 in the staging buffer, so every reader sees f32 either way.
// Landmark keys never live here (they stay in fast memory, layer_cache.h). A "cell" is where one
// held block's K and V are stored (a position in a segment or in the file); a ring reuses cells.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tensor/dtype.h"
#include "tensor/tensor.h"

namespace lm {

class BlockStore {
 public:
  static constexpr int64_t kSegmentBlocks = 64;  // RAM: blocks per allocation
  // block_elems: elements of K (and of V) per block, i.e. NH * (F + 1) * HS. capacity 0 grows
  // without bound. dir empty: RAM; else a directory that must exist and be writable. half: store
  // f16 (dtype must be F32, the dtype blocks are given and read back in).
  // device CUDA: the device backing (dir must be empty, half false).
  BlockStore(int64_t block_elems, DType dtype, int64_t capacity = 0, const std::string& dir = "", bool half = false,
             Device device = Device::CPU);
  ~BlockStore();
  BlockStore(const BlockStore&) = delete;
  BlockStore& operator=(const BlockStore&) = delete;

  void append(const void* k, const void* v);  // copies one block; evicts the oldest when full (host)
  // The same from contiguous tensors of block_elems elements on the store's device (any backing).
  void append(const Tensor& k, const Tensor& v);
  int64_t size() const { return count_; }       // blocks held
  int64_t evicted() const { return evicted_; }  // blocks dropped from the front so far

  // Makes the held blocks `ids` (0 = oldest held) readable through k() and v() until the next
  // fetch() or append(). An f32 store in RAM: nothing to do, every held block is readable. Disk:
  // one pread per block into a staging buffer that replaces the previous fetch's; f16: the blocks
  // converted to f32 into that buffer.
  void fetch(const std::vector<int32_t>& ids);
  // Whether k() and v() need a fetch() first (disk or f16); readers call fetch only then, since
  // an f32 store in RAM is read in place, per decoded token.
  bool needs_fetch() const { return fd_ >= 0 || half_; }
  // Blocks fetch() has read from slow memory (disk, or converted from f16) so far, each distinct
  // block of a fetch once.
  int64_t blocks_read() const { return blocks_read_; }
  // The i-th held block's K and V, in the store's dtype (f32 for an f16 store). When needs_fetch():
  // only blocks of the last fetch() (others are an error). Valid until the next fetch() or append().
  const void* k(int64_t i) const;
  const void* v(int64_t i) const;

  // A device store becomes a host store in RAM: every cell is copied to host memory (one copy per
  // segment), the device memory is freed, and the held blocks keep their indices and bytes (the
  // ring too). For a session that reads its prompt with block K/V on the GPU and then generates
  // with them offloaded (InferenceSession::move_blocks_to_host). A host store: nothing to do.
  void move_to_host();

  bool on_disk() const { return fd_ >= 0; }
  Device device() const { return device_; }  // where k() and v() point
  bool half() const { return half_; }
  int64_t bytes_per_block() const { return 2 * block_bytes_; }                   // as stored (f16: half of f32's)
  int64_t reserved_bytes() const { return reserved_cells_ * 2 * block_bytes_; }  // disk: file size

 private:
  int64_t cell_of(int64_t i) const { return capacity_ > 0 ? (evicted_ + i) % capacity_ : i; }
  // The cell the next appended block goes to: checks that its offset fits 64 bits and, when the
  // ring is full, evicts the oldest block (count_ is incremented by the caller once it is written).
  int64_t claim_cell();
  void reserve_disk(int64_t cells);  // the file holds at least `cells` cells
  char* ram_cell(int64_t cell) const;
  const char* ram_cell_or_null(int64_t cell) const;  // null on disk
  const char* block_ptr(int64_t i) const;            // K then V of held block i
  void drop_staging();                               // no held block is fetched any more

  int64_t block_elems_;
  int64_t block_bytes_;  // K (or V) of one block as stored
  int64_t out_bytes_;    // the same as k() and v() return it (f32 for an f16 store)
  bool half_;
  int64_t capacity_;
  int64_t count_ = 0, evicted_ = 0;  // held block i sits in cell cell_of(i)
  int64_t blocks_read_ = 0;
  // RAM: each segment mapped from the kernel (anonymous mmap), not taken from the heap: its pages
  // become resident only as blocks are written into them, even where the heap held freed memory
  // that was still resident, and they go back to the system with the segment.
  struct Unmap {
    size_t bytes = 0;
    void operator()(char* p) const;
  };
  using Segment = std::unique_ptr<char, Unmap>;
  Segment new_segment() const;
  std::vector<Segment> segments_;
  Device device_ = Device::CPU;
  DType dtype_;
  std::vector<Tensor> dev_segments_;  // device: kSegmentBlocks cells of K then V each
  int fd_ = -1;                       // disk
  std::string path_;                  // disk: the file's name while it existed (errors)
  int64_t reserved_cells_ = 0;
  std::vector<char> staging_;        // disk or f16: the fetched blocks, K then V each, as read
  std::vector<uint16_t> half_buf_;   // f16: one block's K and V converted (append), or as read (disk fetch)
  std::vector<int32_t> staged_ids_;  // held indices in staging order
  std::vector<int32_t> staged_at_;   // held index -> staging index, -1 if not fetched
};

}  // namespace lm
