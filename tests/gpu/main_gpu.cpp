// main_gpu.cpp: entry point of lm_gpu_tests. Without a usable CUDA device it prints why and exits
// 77, which CTest reports as "skipped" (SKIP_RETURN_CODE in tests/CMakeLists.txt), not "passed".
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cstdio>

#include "tensor/storage.h"

int main(int argc, char** argv) {
  if (lm::cuda_device_count() == 0) {
    std::printf("SKIP: no usable CUDA device: %s\n", lm::cuda_unavailable_reason().c_str());
    return 77;
  }
  return Catch::Session().run(argc, argv);
}
