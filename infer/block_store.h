// block_store.h: "slow memory" for the K and V of cached blocks of one layer. Blocks are appended
// in order and read back by index; when a capacity is set the store is a ring that overwrites
// the oldest block. Two backings with one interface: RAM, or a file that is memory-mapped so
// the context length is bounded by disk rather than RAM (the OS pages blocks in on access and
// may drop them again). Landmark keys never live here (they stay in fast memory, infer/cache.h).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tensor/dtype.h"

namespace lm {

class BlockStore {
 public:
  // block_elems: elements of K (and of V) per block, i.e. NH * (F + 1) * HS. capacity 0 grows
  // without bound. path empty: RAM; else the backing file (created or truncated).
  BlockStore(int64_t block_elems, DType dtype, int64_t capacity = 0, const std::string& path = "");
  ~BlockStore();
  BlockStore(const BlockStore&) = delete;
  BlockStore& operator=(const BlockStore&) = delete;

  void append(const void* k, const void* v);  // copies one block; evicts the oldest when full
  int64_t size() const { return count_; }      // blocks held
  int64_t evicted() const { return evicted_; } // blocks dropped from the front so far
  // The i-th held block (0 = oldest held). Pointers stay valid until the next append.
  const void* k(int64_t i) const;
  const void* v(int64_t i) const;
  bool mapped() const { return fd_ >= 0; }
  int64_t bytes_per_block() const { return 2 * block_bytes_; }

 private:
  char* slot_ptr(int64_t slot) const;
  void grow(int64_t slots);
  int64_t block_bytes_;
  int64_t capacity_;
  int64_t count_ = 0, evicted_ = 0, head_ = 0;  // ring: the oldest held block is slot head_
  int64_t slots_ = 0;                           // allocated slots
  // RAM slots. Allocated without zero-filling (new char[], not a vector), so slots not written
  // yet are not resident: after a doubling, only the blocks held take memory.
  std::unique_ptr<char[]> ram_;
  int fd_ = -1;
  char* map_ = nullptr;
  std::string path_;
};

}  // namespace lm
