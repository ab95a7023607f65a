// cuda/gemm.cu: batched row-major GEMM on CUDA through cuBLAS (one lazily created handle, every
// status checked). cuBLAS is column-major; a row-major matrix read column-major is its
// transpose, so C = op(A) op(B) is computed as C^T = op(B)^T op(A)^T with A and B swapped.
// Not a hand-written GEMM: the teaching version is gemm_naive in tensor/cpu/gemm.cpp, the
// CPU fast path is gemm_blocked there.
#include <cublas_v2.h>

#include <climits>
#include <mutex>

#include "tensor/cuda/common.cuh"
#include "tensor/kernels.h"

namespace lm {
namespace cuda {

namespace {

#define LM_CUBLAS_CHECK(call)                                                                  \
  do {                                                                                         \
    cublasStatus_t lm_cublas_st_ = (call);                                                     \
    if (lm_cublas_st_ != CUBLAS_STATUS_SUCCESS)                                                \
      LM_FAIL("cuBLAS call `" #call "` failed: " << cublasGetStatusName(lm_cublas_st_) << ": " \
                                                 << cublasGetStatusString(lm_cublas_st_));     \
  } while (0)

// The one handle, made on first use (creating it costs milliseconds and device memory). It is
// never destroyed: at process exit the CUDA context may already be gone, and the driver frees
// everything anyway. Bound to the device that is current at creation (the project uses one).
cublasHandle_t handle() {
  static std::mutex mu;
  static cublasHandle_t h = nullptr;
  std::lock_guard<std::mutex> lock(mu);
  if (h == nullptr) {
    cublasHandle_t created = nullptr;
    LM_CUBLAS_CHECK(cublasCreate(&created));
    // Full-precision f32 (no TF32 tensor-core rounding), so results match the CPU to f32 accuracy.
    LM_CUBLAS_CHECK(cublasSetMathMode(created, CUBLAS_DEFAULT_MATH));
    h = created;
  }
  return h;
}

int as_int(int64_t v, const char* what) {
  LM_CHECK(v >= 0 && v <= INT_MAX, "matmul on cuda: " << what << " = " << v << " does not fit cuBLAS's int");
  return static_cast<int>(v);
}

cublasStatus_t gemm_strided_batched(cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, float alpha,
                                    const float* a, int lda, long long sa, const float* b, int ldb, long long sb,
                                    float beta, float* c, int ldc, long long sc, int batch) {
  return cublasSgemmStridedBatched(handle(), ta, tb, m, n, k, &alpha, a, lda, sa, b, ldb, sb, &beta, c, ldc, sc, batch);
}
cublasStatus_t gemm_strided_batched(cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, double alpha,
                                    const double* a, int lda, long long sa, const double* b, int ldb, long long sb,
                                    double beta, double* c, int ldc, long long sc, int batch) {
  return cublasDgemmStridedBatched(handle(), ta, tb, m, n, k, &alpha, a, lda, sa, b, ldb, sb, &beta, c, ldc, sc, batch);
}

// c (batch, M, N), rows ldc apart and batches stride_c apart, total = batch M N: c = beta c.
// K == 0: the product is empty, so C = beta * C (and exactly 0 when beta == 0, whatever C held,
// as gemm_naive does). Handled here rather than trusting every cuBLAS version's quick return.
template <class Scalar>
__global__ void scale_c_kernel(Scalar* c, int64_t M, int64_t N, int64_t ldc, int64_t stride_c, int64_t total,
                               double beta) {
  LM_CUDA_FOR(i, total) {
    const int64_t b = i / (M * N), ij = i % (M * N);
    Scalar& v = c[b * stride_c + (ij / N) * ldc + ij % N];
    v = beta == 0.0 ? Scalar(0) : static_cast<Scalar>(beta * static_cast<double>(v));
  }
}

template <class Scalar>
void gemm_impl(const GemmArgs& g, const Scalar* A, const Scalar* B, Scalar* C) {
  if (g.M == 0 || g.N == 0 || g.batch == 0) return;
  if (g.K == 0) {
    const int64_t total = g.batch * g.M * g.N;
    scale_c_kernel<Scalar><<<blocks_for(total), kThreads>>>(C, g.M, g.N, g.ldc, g.stride_c, total, g.beta);
    LM_CUDA_CHECK_LAUNCH("scale_c_kernel");
    return;
  }
  // Row-major C (M, N) is column-major C^T (N, M) with leading dimension ldc. In column-major
  // terms we compute C^T = op(B)^T op(A)^T:
  //   first operand  op(B)^T (N, K): B's storage read column-major is B^T when !trans_b (so no
  //                  transpose) and op(B) itself when trans_b (so transpose it);
  //   second operand op(A)^T (K, M): likewise from A's storage and trans_a.
  const cublasOperation_t op_b = g.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_a = g.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  const int m = as_int(g.N, "N"), n = as_int(g.M, "M"), k = as_int(g.K, "K");
  const int ldb = as_int(g.ldb, "ldb"), lda = as_int(g.lda, "lda"), ldc = as_int(g.ldc, "ldc");
  const int batch = as_int(g.batch, "batch");
  // stride_b == 0 shares one B across the batch; cuBLAS accepts a zero stride for inputs.
  LM_CUBLAS_CHECK(gemm_strided_batched(op_b, op_a, m, n, k, static_cast<Scalar>(g.alpha), B, ldb, g.stride_b, A, lda,
                                       g.stride_a, static_cast<Scalar>(g.beta), C, ldc, g.stride_c, batch));
}

}  // namespace

void gemm(const GemmArgs& g, const Tensor& A, const Tensor& B, const Tensor& C) {
  LM_DISPATCH_FLOAT(C.dtype(), "matmul",
                    { gemm_impl<scalar_t>(g, A.data<scalar_t>(), B.data<scalar_t>(), C.data<scalar_t>()); });
}

}  // namespace cuda
}  // namespace lm
