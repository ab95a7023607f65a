// check.h: the one way this project reports bad input or broken invariants.
// LM_CHECK(cond, message) throws lm::Error naming the file:line, the failed expression and a
// message built with <<, so callers can print shapes and values. Not for hot inner loops.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

namespace lm {

// Every error the library raises on purpose. what() is a complete, human-readable sentence.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& msg) : std::runtime_error(msg) {}
};

namespace detail {
[[noreturn]] void fail(const char* file, int line, const char* expr, const std::string& msg);
}  // namespace detail

}  // namespace lm

// Usage: LM_CHECK(a.dim() == 2, "matmul: expected a 2-d tensor, got shape " << shape_str(a.shape()));
#define LM_CHECK(cond, ...)                                              \
  do {                                                                   \
    if (!(cond)) {                                                       \
      std::ostringstream lm_check_os_;                                   \
      lm_check_os_ << __VA_ARGS__;                                       \
      ::lm::detail::fail(__FILE__, __LINE__, #cond, lm_check_os_.str()); \
    }                                                                    \
  } while (0)

// Unconditional failure with the same formatting.
#define LM_FAIL(...)                                                     \
  do {                                                                   \
    std::ostringstream lm_check_os_;                                     \
    lm_check_os_ << __VA_ARGS__;                                         \
    ::lm::detail::fail(__FILE__, __LINE__, nullptr, lm_check_os_.str()); \
  } while (0)
