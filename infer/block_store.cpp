// block_store.cpp: BlockStore in RAM or in a memory-mapped file (block_store.h).
#include "infer/block_store.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "tensor/check.h"

namespace lm {

BlockStore::BlockStore(int64_t block_elems, DType dtype, int64_t capacity, const std::string& path)
    : block_bytes_(block_elems * static_cast<int64_t>(dtype_size(dtype))), capacity_(capacity), path_(path) {
  LM_CHECK(block_elems > 0 && capacity >= 0, "BlockStore: bad block size " << block_elems << " or capacity " << capacity);
  if (!path.empty()) {
    fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0644);
    LM_CHECK(fd_ >= 0, "BlockStore: cannot create " << path << ": " << std::strerror(errno));
  }
  grow(capacity > 0 ? capacity : 16);
}

BlockStore::~BlockStore() {
  if (map_) ::munmap(map_, static_cast<size_t>(slots_ * 2 * block_bytes_));
  if (fd_ >= 0) {
    ::close(fd_);
    ::unlink(path_.c_str());  // the file is scratch space of this session
  }
}

void BlockStore::grow(int64_t slots) {
  const size_t bytes = static_cast<size_t>(slots * 2 * block_bytes_);
  if (fd_ < 0) {
    // Re-lay the ring out in order so that slot arithmetic stays simple after growing.
    std::unique_ptr<char[]> next(new char[bytes]);  // uninitialised: untouched pages stay unmapped
    for (int64_t i = 0; i < count_; ++i)
      std::memcpy(next.get() + i * 2 * block_bytes_, slot_ptr((head_ + i) % slots_), static_cast<size_t>(2 * block_bytes_));
    ram_ = std::move(next);
  } else {
    LM_CHECK(::ftruncate(fd_, static_cast<off_t>(bytes)) == 0,
             "BlockStore: cannot grow " << path_ << " to " << bytes << " bytes: " << std::strerror(errno));
    void* m = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd_, 0);
    LM_CHECK(m != MAP_FAILED, "BlockStore: cannot map " << path_ << ": " << std::strerror(errno));
    if (map_) {
      // The file keeps the old slots in place; unwrap the ring into the new tail if it wrapped.
      ::munmap(map_, static_cast<size_t>(slots_ * 2 * block_bytes_));
    }
    map_ = static_cast<char*>(m);
    if (head_ != 0) {  // only possible for a full ring that grows, which capacity rules out
      LM_FAIL("BlockStore: internal error: growing a wrapped ring");
    }
  }
  slots_ = slots;
  head_ = 0;
}

char* BlockStore::slot_ptr(int64_t slot) const {
  char* base = fd_ >= 0 ? map_ : ram_.get();
  return base + slot * 2 * block_bytes_;
}

void BlockStore::append(const void* k, const void* v) {
  if (capacity_ > 0 && count_ == capacity_) {  // full ring: the oldest slot is reused
    head_ = (head_ + 1) % slots_;
    --count_;
    ++evicted_;
  } else if (count_ == slots_) {
    grow(2 * slots_);
  }
  char* dst = slot_ptr((head_ + count_) % slots_);
  std::memcpy(dst, k, static_cast<size_t>(block_bytes_));
  std::memcpy(dst + block_bytes_, v, static_cast<size_t>(block_bytes_));
  ++count_;
}

const void* BlockStore::k(int64_t i) const {
  LM_CHECK(i >= 0 && i < count_, "BlockStore: block " << i << " of " << count_);
  return slot_ptr((head_ + i) % slots_);
}

const void* BlockStore::v(int64_t i) const {
  LM_CHECK(i >= 0 && i < count_, "BlockStore: block " << i << " of " << count_);
  return slot_ptr((head_ + i) % slots_) + block_bytes_;
}

}  // namespace lm
