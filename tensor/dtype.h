// dtype.h: the element types (f32, f64, i32) and devices (CPU, CUDA) a tensor can have.
// Host-side only; kernels receive typed pointers, never a DType.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace lm {

enum class DType : uint8_t { F32, F64, I32 };
enum class Device : uint8_t { CPU, CUDA };

inline size_t dtype_size(DType t) { return t == DType::F64 ? 8 : 4; }
inline bool is_floating(DType t) { return t != DType::I32; }
const char* dtype_name(DType t);            // "f32", "f64", "i32"
const char* device_name(Device d);          // "cpu", "cuda"
DType parse_dtype(const std::string& s);    // inverse of dtype_name; throws on unknown names
Device parse_device(const std::string& s);  // inverse of device_name; throws on unknown names

template <class Scalar>
constexpr DType dtype_of();
template <>
constexpr DType dtype_of<float>() {
  return DType::F32;
}
template <>
constexpr DType dtype_of<double>() {
  return DType::F64;
}
template <>
constexpr DType dtype_of<int32_t>() {
  return DType::I32;
}

}  // namespace lm

// Run a block with `scalar_t` bound to the C++ type of `dt`. The FLOAT variant accepts f32/f64
// and reports `opname` with the offending dtype otherwise; ALL also accepts i32.
#define LM_DISPATCH_FLOAT(dt, opname, ...)                                                                  \
  do {                                                                                                      \
    switch (dt) {                                                                                           \
      case ::lm::DType::F32: {                                                                              \
        using scalar_t = float;                                                                             \
        __VA_ARGS__;                                                                                        \
        break;                                                                                              \
      }                                                                                                     \
      case ::lm::DType::F64: {                                                                              \
        using scalar_t = double;                                                                            \
        __VA_ARGS__;                                                                                        \
        break;                                                                                              \
      }                                                                                                     \
      default:                                                                                              \
        LM_FAIL(opname << ": dtype " << ::lm::dtype_name(dt) << " is not supported (expected f32 or f64)"); \
    }                                                                                                       \
  } while (0)

// Same as LM_DISPATCH_ALL but binds the type to a name of your choice, for nested dispatches.
#define LM_DISPATCH_ALL_AS(dt, type_name, opname, ...) \
  do {                                                 \
    switch (dt) {                                      \
      case ::lm::DType::F32: {                         \
        using type_name = float;                       \
        __VA_ARGS__;                                   \
        break;                                         \
      }                                                \
      case ::lm::DType::F64: {                         \
        using type_name = double;                      \
        __VA_ARGS__;                                   \
        break;                                         \
      }                                                \
      case ::lm::DType::I32: {                         \
        using type_name = int32_t;                     \
        __VA_ARGS__;                                   \
        break;                                         \
      }                                                \
      default:                                         \
        LM_FAIL(opname << ": unknown dtype");          \
    }                                                  \
  } while (0)

#define LM_DISPATCH_ALL(dt, opname, ...) LM_DISPATCH_ALL_AS(dt, scalar_t, opname, __VA_ARGS__)
