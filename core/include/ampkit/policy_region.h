// The precision policies' regions on the calling thread: a stack, innermost last. A policy's
// forward (Python's _PolicyForward, R's wrapper in rpkg/R/precision.R) pushes its dtype while
// the module it wraps runs and pops it on every way out; the autocast audit reads the innermost
// one to show which operations a policy kept in which dtype.
//
// It lives in the core, not in either language, so that a policy region opened from R is seen by
// the audit (Python) with no call between the languages per module call. Per thread, as
// autocast's own state is: another thread's regions are not this thread's.
#pragma once

#include <c10/core/ScalarType.h>

#include <cstddef>
#include <optional>

namespace ampkit {

// ArgumentError unless `dtype` is float32, bfloat16 or float16 (a policy's three dtypes).
void push_policy_region(at::ScalarType dtype);

// Closes the innermost region. StateError when none is open on this thread.
void pop_policy_region();

// The innermost region's dtype, or nullopt outside every policy region.
std::optional<at::ScalarType> current_policy_dtype();

// How many policy regions are open on this thread.
size_t policy_region_depth();

// RAII form for C++ callers: the region closes when the scope ends, by return or by exception.
class PolicyRegionGuard {
 public:
  explicit PolicyRegionGuard(at::ScalarType dtype) { push_policy_region(dtype); }
  ~PolicyRegionGuard() { pop_policy_region(); }
  PolicyRegionGuard(const PolicyRegionGuard&) = delete;
  PolicyRegionGuard& operator=(const PolicyRegionGuard&) = delete;
};

}  // namespace ampkit
