#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>
#include <cstdio>
#include "tensor/storage.h"
int main(int argc, char** argv) {
  if (!lm::cuda_compiled()) { std::printf("SKIP: built without CUDA\n"); return 77; }
  if (lm::cuda_device_count() == 0) { std::printf("SKIP: no CUDA device\n"); return 77; }
  return Catch::Session().run(argc, argv);
}
