// distributed.cpp: the ranks of a data-parallel run (distributed.h): MPI when mpirun started the
// process and the build has it, NCCL for CUDA gradients when the build has that too.
#include "train/distributed.h"

#include <cstdlib>
#include <cstring>
#include <map>

#include "tensor/check.h"
#include "tensor/create.h"
#include "tensor/ops.h"

#ifdef LANDMARK_WITH_MPI
#define OMPI_SKIP_MPICXX 1  // the C API only: OpenMPI's C++ bindings warn under -Wextra
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>
#endif
#ifdef LANDMARK_WITH_NCCL
#include <cuda_runtime.h>
#include <nccl.h>
#endif

namespace lm {
namespace dist {

namespace {
World g_world;
bool g_started = false;
[[maybe_unused]] bool g_finalized = false;  // used with MPI only

int env_int(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return -1;
  char* end = nullptr;
  const long x = std::strtol(v, &end, 10);
  return (end != nullptr && *end == '\0' && x >= 0 && x < (1L << 30)) ? static_cast<int>(x) : -1;
}

#ifdef LANDMARK_WITH_MPI
void mpi_check(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return;
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, msg, &len);
  LM_FAIL("distributed: " << what << " failed: " << std::string(msg, static_cast<size_t>(len)));
}
#endif

#ifdef LANDMARK_WITH_NCCL
ncclComm_t g_nccl = nullptr;
void nccl_check(ncclResult_t rc, const char* what) {
  LM_CHECK(rc == ncclSuccess, "distributed: " << what << " failed: " << ncclGetErrorString(rc));
}
// One NCCL communicator over the MPI ranks, made on first use: rank 0's unique id reaches the
// others by MPI_Bcast. Each rank uses the device the CUDA code already selected.
ncclComm_t nccl_comm() {
  if (g_nccl != nullptr) return g_nccl;
  ncclUniqueId id;
  if (g_world.rank == 0) nccl_check(ncclGetUniqueId(&id), "ncclGetUniqueId");
  mpi_check(MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD), "MPI_Bcast of the NCCL id");
  nccl_check(ncclCommInitRank(&g_nccl, g_world.size, id, g_world.rank), "ncclCommInitRank");
  return g_nccl;
}
#endif
}  // namespace

bool built_with_mpi() {
#ifdef LANDMARK_WITH_MPI
  return true;
#else
  return false;
#endif
}

bool built_with_nccl() {
#ifdef LANDMARK_WITH_NCCL
  return true;
#else
  return false;
#endif
}

const char* backend_name() { return built_with_nccl() ? "mpi+nccl" : built_with_mpi() ? "mpi" : "none"; }

int launcher_world_size() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE"}) {
    const int n = env_int(name);
    if (n > 0) return n;
  }
  return 1;
}

const World& world() {
  if (g_started) return g_world;
  g_started = true;
  const int announced = launcher_world_size();
  const bool launched = announced > 1 || env_int("OMPI_COMM_WORLD_RANK") >= 0 || env_int("PMIX_RANK") >= 0;
  if (!launched) return g_world;  // one rank, MPI untouched
#ifdef LANDMARK_WITH_MPI
  int provided = 0;
  mpi_check(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided), "MPI_Init_thread");
  g_world.mpi = true;
  // Errors come back as codes (mpi_check throws, the program's error path calls abort_all)
  // instead of MPI's default of aborting inside the call with its own message.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  mpi_check(MPI_Comm_rank(MPI_COMM_WORLD, &g_world.rank), "MPI_Comm_rank");
  mpi_check(MPI_Comm_size(MPI_COMM_WORLD, &g_world.size), "MPI_Comm_size");
#ifdef LANDMARK_WITH_NCCL
  // Ranks that share a machine share its GPUs round-robin by their local rank.
  int devices = 0;
  const int local = env_int("OMPI_COMM_WORLD_LOCAL_RANK");
  if (local >= 0 && cudaGetDeviceCount(&devices) == cudaSuccess && devices > 0) cudaSetDevice(local % devices);
#endif
#else
  LM_CHECK(announced <= 1, "distributed: mpirun started " << announced
                                                          << " ranks, but this build of landmark has no MPI "
                                                          << "(install libopenmpi-dev and rebuild; CMake finds it)");
#endif
  return g_world;
}

void allreduce_sum(std::vector<double>& values) {
  if (world().size == 1 || values.empty()) return;
#ifdef LANDMARK_WITH_MPI
  mpi_check(
      MPI_Allreduce(MPI_IN_PLACE, values.data(), static_cast<int>(values.size()), MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD),
      "MPI_Allreduce");
#endif
}

void broadcast(std::vector<double>& values) {
  if (world().size == 1 || values.empty()) return;
#ifdef LANDMARK_WITH_MPI
  mpi_check(MPI_Bcast(values.data(), static_cast<int>(values.size()), MPI_DOUBLE, 0, MPI_COMM_WORLD), "MPI_Bcast");
#endif
}

void allreduce_sum(Tensor& flat) {
  if (world().size == 1) return;
  LM_CHECK(flat.is_contiguous() && (flat.dtype() == DType::F32 || flat.dtype() == DType::F64),
           "distributed: all-reduce needs a contiguous f32 or f64 tensor");
#ifdef LANDMARK_WITH_NCCL
  if (flat.device() == Device::CUDA) {
    nccl_check(ncclAllReduce(flat.raw_data(), flat.raw_data(), static_cast<size_t>(flat.numel()),
                             flat.dtype() == DType::F32 ? ncclFloat32 : ncclFloat64, ncclSum, nccl_comm(), nullptr),
               "ncclAllReduce");
    LM_CHECK(cudaStreamSynchronize(nullptr) == cudaSuccess,
             "distributed: cudaStreamSynchronize after ncclAllReduce failed");
    return;
  }
#endif
  if (flat.device() != Device::CPU) {  // a CUDA tensor without NCCL: through the host
    Tensor host = flat.to(Device::CPU);
    allreduce_sum(host);
    flat.copy_(host.to(flat.device()));
    return;
  }
#ifdef LANDMARK_WITH_MPI
  // MPI counts are int: send the buffer in pieces of at most 2^30 elements.
  const int64_t n = flat.numel(), piece = int64_t(1) << 30;
  const size_t elem = flat.dtype() == DType::F32 ? sizeof(float) : sizeof(double);
  char* base = static_cast<char*>(flat.raw_data());
  for (int64_t at = 0; at < n; at += piece) {
    const int count = static_cast<int>(std::min(piece, n - at));
    mpi_check(MPI_Allreduce(MPI_IN_PLACE, base + static_cast<size_t>(at) * elem, count,
                            flat.dtype() == DType::F32 ? MPI_FLOAT : MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD),
              "MPI_Allreduce of the gradients");
  }
#endif
}

int64_t average_gradients(const std::vector<Tensor>& grads) {
  const World& w = world();
  if (w.size == 1) return 0;
  // One flat buffer per (dtype, device): in practice one, all f32 on one device.
  std::map<std::pair<int, int>, std::vector<const Tensor*>> groups;
  for (const Tensor& g : grads)
    if (g.defined()) groups[{static_cast<int>(g.dtype()), static_cast<int>(g.device())}].push_back(&g);
  int64_t bytes = 0;
  for (auto& [key, members] : groups) {
    int64_t n = 0;
    for (const Tensor* g : members) n += g->numel();
    const DType dt = members.front()->dtype();
    const Device dev = members.front()->device();
    Tensor flat = empty({n}, dt, dev);
    int64_t at = 0;
    for (const Tensor* g : members) {
      flat.narrow(0, at, g->numel()).copy_(g->reshape({g->numel()}));
      at += g->numel();
    }
    allreduce_sum(flat);
    bytes += n * static_cast<int64_t>(dt == DType::F32 ? sizeof(float) : sizeof(double));
    Tensor mean = mul(flat, 1.0 / static_cast<double>(w.size));
    at = 0;
    for (const Tensor* g : members) {
      Tensor dst = *g;  // shares the gradient's storage
      dst.copy_(mean.narrow(0, at, g->numel()).reshape(g->shape()));
      at += g->numel();
    }
  }
  return bytes;
}

void abort_all(int code) {
#ifdef LANDMARK_WITH_MPI
  if (g_world.mpi && g_world.size > 1 && !g_finalized) MPI_Abort(MPI_COMM_WORLD, code);
#else
  (void)code;
#endif
}

void finalize() {
#ifdef LANDMARK_WITH_MPI
  if (g_world.mpi && !g_finalized) {
    g_finalized = true;
#ifdef LANDMARK_WITH_NCCL
    if (g_nccl != nullptr) ncclCommDestroy(g_nccl);
    g_nccl = nullptr;
#endif
    MPI_Finalize();
  }
#endif
}

}  // namespace dist
}  // namespace lm
