#include "ampkit/policy_region.h"

#include <string>
#include <vector>

#include "ampkit/errors.h"

namespace ampkit {
namespace {

// Innermost last. Regions nest as module calls do, so a vector is the whole state.
thread_local std::vector<at::ScalarType> regions;

}  // namespace

void push_policy_region(at::ScalarType dtype) {
  if (dtype != at::kFloat && dtype != at::kBFloat16 && dtype != at::kHalf) {
    throw ArgumentError(must_be("dtype", "float32, bfloat16 or float16", c10::toString(dtype)));
  }
  regions.push_back(dtype);
}

void pop_policy_region() {
  if (regions.empty()) {
    throw StateError("a precision policy region was closed, but none is open on this thread.");
  }
  regions.pop_back();
}

std::optional<at::ScalarType> current_policy_dtype() {
  if (regions.empty()) return std::nullopt;
  return regions.back();
}

size_t policy_region_depth() { return regions.size(); }

}  // namespace ampkit
