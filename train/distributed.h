// distributed.h: data-parallel training across processes, on an existing engine: MPI (OpenMPI on
// Debian: libopenmpi-dev) between processes, and NCCL for the gradients of a CUDA model when the
// build has both. `mpirun -np N landmark train ...` starts N ranks; each holds the whole model,
// reads its own rows of every batch (docs/distributed.md), and after backward the gradients are
// summed across ranks in one flat buffer, so every rank takes the same optimizer step.
//
// A process that was not started by mpirun (no OMPI_COMM_WORLD_SIZE, PMI_SIZE or PMIX_RANK in its
// environment) is rank 0 of 1 and never touches MPI, so a build with MPI behaves as one without.
// A build without MPI that mpirun starts as one of several ranks refuses to train (every rank
// would otherwise write the same files).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tensor/tensor.h"

namespace lm {
namespace dist {

struct World {
  int rank = 0, size = 1;
  bool mpi = false;  // MPI initialised (by this process, on the first call to world())
  bool root() const { return rank == 0; }
};

// The ranks of this run, MPI initialised on the first call when mpirun started the process.
const World& world();
bool built_with_mpi();
bool built_with_nccl();
// "none", "mpi" or "mpi+nccl": what this build can use.
const char* backend_name();
// The world size mpirun announced in the environment (1 when there is none).
int launcher_world_size();

// Sums across ranks, in place, every rank receiving the result (MPI_Allreduce). No-ops on one rank.
void allreduce_sum(std::vector<double>& values);
// Sums a flat tensor across ranks in place: f32 or f64, contiguous, CPU or CUDA. A CUDA tensor goes
// through NCCL when the build has it, else through a host copy and MPI.
void allreduce_sum(Tensor& flat);
// Rank 0's values to every rank (MPI_Bcast).
void broadcast(std::vector<double>& values);
// Every parameter gradient of `grads` summed across ranks and divided by the number of ranks:
// the gradients copied into one flat buffer per dtype, one all-reduce each, copied back. Returns
// the bytes each rank handed to the all-reduce.
int64_t average_gradients(const std::vector<Tensor>& grads);

// Stops every rank (MPI_Abort) when more than one runs; called on an error, so that no rank waits
// forever in a collective the failed one will never join. Does nothing on one rank.
void abort_all(int code);
// MPI_Finalize when MPI was initialised (at the end of a run).
void finalize();

}  // namespace dist
}  // namespace lm
