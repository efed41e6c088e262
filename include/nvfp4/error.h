// nvfp4/error.h -- the one exception type of the public API.
//
// The public API validates once and throws nvfp4::Error with a message that names the
// operation and every parameter involved, e.g. "[quantized_matmul] K=1000 is not a multiple
// of 16". Kernels never throw: they return a Status and the API layer turns it into an Error.
#pragma once

#include <stdexcept>
#include <string>

namespace nvfp4 {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Throws Error("[op] message") -- the single formatting point for API errors.
[[noreturn]] void fail(const char* op, const std::string& message);

}  // namespace nvfp4
