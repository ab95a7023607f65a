// layer_cache.cpp: LayerCache (layer_cache.h): blocks into the store, landmark keys, the tail.
#include "infer/layer_cache.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "landmark/tokens.h"
#include "nn/functional.h"
#include "tensor/create.h"
#include "tensor/ops.h"

namespace lm {

LayerCache::LayerCache(int64_t nh, int64_t f, int64_t hs, DType dt, int64_t capacity, const std::string& block_dir,
                       Device dev, bool kv_f16, bool idx, bool blocks_on_device)
    : store(std::make_unique<BlockStore>(nh * f * hs, dt, capacity, block_dir, kv_f16,
                                         blocks_on_device ? dev : Device::CPU)),
      indexed(idx),
      NH(nh),
      F(f),
      HS(hs),
      dtype(dt),
      device(dev) {
  keys_rot_t_buf = zeros({nh, hs, 0}, dt, dev);
  tail_k = zeros({nh, 0, hs}, dt, dev);
  tail_v = zeros({nh, 0, hs}, dt, dev);
  if (indexed) {
    LM_CHECK(dev == Device::CPU && (dt == DType::F32 || dt == DType::F64),
             "LayerCache: the landmark key index is for f32 or f64 caches on the CPU, not " << dtype_name(dt) << " on "
                                                                                            << device_name(dev));
    for (int64_t h = 0; h < nh; ++h) {
      if (dt == DType::F32)
        index_f32.emplace_back(hs);
      else
        index_f64.emplace_back(hs);
    }
  }
}

Tensor LayerCache::landmark_keys_rot_t() const { return keys_rot_t_buf.narrow(2, key_begin, key_count); }

Tensor LayerCache::gate_keys(const std::vector<int32_t>& blocks, const std::vector<int32_t>& turns,
                             RotaryCache& rope) const {
  LM_CHECK(!indexed && blocks.size() == turns.size(),
           "LayerCache::gate_keys: " << blocks.size() << " blocks and " << turns.size() << " turns, from a "
                                     << (indexed ? "cache with a key index (use scored_key)" : "scan cache"));
  const int64_t P = static_cast<int64_t>(blocks.size());
  if (P == 0) return Tensor({0, NH, 1, HS}, dtype, device);
  for (int32_t b : blocks)
    LM_CHECK(b >= 0 && b < key_count, "LayerCache::gate_keys: block " << b << " of " << key_count << " held");
  // Every value of the P keys by one gather from the whole buffer seen as rows of one value
  // (embedding is exactly a row gather): value d of head h of block b is at buffer element
  // (h * HS + d) * key_capacity + key_begin + b. No copy of the other keys.
  LM_CHECK(NH * HS * key_capacity <= std::numeric_limits<int32_t>::max(),
           "LayerCache::gate_keys: a key buffer of " << NH * HS * key_capacity << " values is past 32-bit indices");
  std::vector<int32_t> at(static_cast<size_t>(P * NH * HS));
  for (int64_t p = 0; p < P; ++p)
    for (int64_t e = 0; e < NH * HS; ++e)
      at[static_cast<size_t>(p * NH * HS + e)] =
          static_cast<int32_t>(e * key_capacity + key_begin + blocks[static_cast<size_t>(p)]);
  const Tensor kept =
      embedding(keys_rot_t_buf.reshape({NH * HS * key_capacity, 1}), from_vector(at, {P * NH * HS}).to(device))
          .reshape({P, NH, 1, HS});
  const RotaryTables flat = rope.tables(turns);  // (1, P, HS/2)
  const RotaryTables rt{flat.cos.reshape({P, 1, HS / 2}), flat.sin.reshape({P, 1, HS / 2})};
  return rotary(kept, rt);
}

namespace {
// Appends each head's landmark key of one block to the index: rot is (NH, 1, HS).
template <class Scalar>
void index_append(std::vector<LandmarkKeyIndex<Scalar>>& index, const Tensor& rot) {
  const Tensor r = rot.contiguous();
  const int64_t HS = r.size(2);
  for (size_t h = 0; h < index.size(); ++h) index[h].append(r.data<Scalar>() + h * HS);
}
template <class Scalar>
void index_keep_newest(std::vector<LandmarkKeyIndex<Scalar>>& index, int64_t held) {
  for (auto& ix : index) ix.drop_oldest(ix.size() - held);
}
}  // namespace

int64_t LayerCache::absorb(const Tensor& k_loc, const Tensor& v_loc, const std::vector<int32_t>& kinds,
                           RotaryCache& rope, PositionMode positions, int64_t first_gid, const Tensor* q_loc) {
  const int64_t L = k_loc.size(1);
  LM_CHECK(static_cast<int64_t>(kinds.size()) == L, "LayerCache: " << kinds.size() << " kinds for " << L << " keys");
  LM_CHECK(k_loc.device() == device && v_loc.device() == device,
           "LayerCache: keys " << describe(k_loc) << " and values " << describe(v_loc) << " must be on "
                               << device_name(device) << ", the cache's device");
  int64_t end = 0;  // the completed blocks are [0, end): everything up to the last landmark
  for (int64_t j = 0; j < L; ++j)
    if (kinds[j] == kLandmark) end = j + 1;
  // A host store from a device: the completed blocks cross in one copy each for K and V (on the
  // CPU, or into a store on the same device, these are views, no copy).
  const Device sd = store->device();
  const Tensor k_host = k_loc.narrow(1, 0, end).to(sd), v_host = v_loc.narrow(1, 0, end).to(sd);
  // Room for the new keys first (at most one per landmark in the chunk): when the buffer is full,
  // a new one a quarter larger than what it must hold takes the keys held, moved to the front.
  // Growing by a fixed factor keeps adding a key O(1) on average (each key is copied at most
  // 1/0.25 = 4 times over the buffer's growth, on average); a quarter rather than a doubling
  // keeps the unused room, which is resident (the buffer is transposed, so every page of it holds
  // the first columns of some feature's row), under a fifth of the keys: 0.2% of the whole cache
  // at F 50, where doubling left up to a whole key per block unused (0.8 MB at 32k tokens).
  int64_t landmarks = 0;
  for (int64_t j = 0; j < end; ++j) landmarks += kinds[j] == kLandmark;
  if (!indexed && key_begin + key_count + landmarks > key_capacity) {
    const int64_t need = key_count + landmarks, cap = std::max<int64_t>(64, need + need / 4);
    Tensor kr({NH, HS, cap}, dtype, device);
    kr.narrow(2, 0, key_count).copy_(landmark_keys_rot_t());
    keys_rot_t_buf = kr;
    key_begin = 0;
    key_capacity = cap;
  }
  int64_t begin = 0, completed = 0;
  for (int64_t j = 0; j < end; ++j) {
    if (kinds[j] != kLandmark) continue;
    LM_CHECK(j - begin == F, "LayerCache: a block of " << j - begin << " regular tokens (F = " << F << ")");
    // The F regular tokens: K transposed per head, (NH, HS, F): a query then scores a block by
    // streaming along its tokens (cpu::rotated_vec_times_rows); V as it is, (NH, F, HS). The
    // landmark's value is dropped (never read) and its key goes to fast memory below.
    Tensor kb = k_host.narrow(1, begin, F).transpose(1, 2).contiguous(), vb = v_host.narrow(1, begin, F).contiguous();
    store->append(kb, vb);
    const int64_t gid = first_gid + completed;
    // Another scoring's summary of the block (hooks.h), its keys seen where its landmark key is
    // scored (slot 0 with stingy positions, its true place with exact ones).
    if (scoring) scoring->add_block(k_loc, q_loc, begin, positions == PositionMode::Exact ? gid * (F + 1) : 0, rope);
    const int32_t p = static_cast<int32_t>(positions == PositionMode::Exact ? gid * (F + 1) + F : F);
    const Tensor key = k_loc.narrow(1, j, 1), key_rot = rotary(key.unsqueeze(0), rope.at(p)).squeeze(0);  // (NH, 1, HS)
    if (indexed) {
      if (dtype == DType::F32)
        index_append(index_f32, key_rot);
      else
        index_append(index_f64, key_rot);
    } else {
      const int64_t col = key_begin + key_count;
      keys_rot_t_buf.narrow(2, col, 1).copy_(key_rot.transpose(1, 2));
      ++key_count;
    }
    begin = j + 1;
    ++completed;
  }
  // Keep as many landmark keys as the store keeps blocks (its capacity): the newest.
  const int64_t held = store->size();
  if (completed > 0 && indexed) {
    if (dtype == DType::F32)
      index_keep_newest(index_f32, held);
    else
      index_keep_newest(index_f64, held);
  } else if (key_count > held) {
    key_begin += key_count - held;
    key_count = held;
  }
  if (scoring) scoring->keep_newest(held);
  tail_len = L - begin;
  tail_k = k_loc.narrow(1, begin, tail_len).contiguous();
  tail_v = v_loc.narrow(1, begin, tail_len).contiguous();
  if (q_loc) tail_q = q_loc->narrow(1, begin, tail_len).contiguous();
  return completed;
}

}  // namespace lm
