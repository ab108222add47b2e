// The overflow locator's statistics: how close a module's outputs and gradients come to float16's
// range. One home for Python's ampkit.overflow_locator and R's overflow_locator(): each measures
// tensors with tensor_stats() (on their device, nothing read), reads a step's measurements to the
// host in one transfer, and adds them up in a StatsSummary.
//
// Per tensor list, in float64 (float32 on MPS, which has no float64):
//
//   amax       the largest |x|, NaN ignored (inf when an element is +-inf; 0 for no elements)
//   inf, nan   the numbers of +-inf and NaN elements
//   underflow  the number of elements that are nonzero, finite and that a cast to float16 turns
//              into zero: 0 < |x| <= 2^-25 (round-to-nearest-even sends exactly 2^-25 to zero)
//   overflow   the number of finite elements that a cast to float16 turns into inf: |x| >= 65520
//
// computed in three passes besides |x| (the max; a bucket per element with searchsorted over the
// edges 0 | 2^-25 | below 65520 | the dtype's max | inf, NaN falling past the last; the buckets'
// counts), so that both counts are what x.half() does, with no host read on any device.
#pragma once

#include <ATen/core/Tensor.h>

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

namespace ampkit {

// [amax, inf, nan, underflow, overflow] of the floating-point tensors (several add up: the
// largest amax, the sums of the counts), on their device; an undefined tensor when they have no
// elements. The tensors are not changed, and no autograd graph is recorded.
at::Tensor tensor_stats(const std::vector<at::Tensor>& tensors);

// Bits of float16 range left above amax: log2(65504 / amax); inf for 0, -inf for inf.
double float16_headroom(double amax);

// One module's measurements in one pass of one step, added up over its calls in that step.
struct StatsRow {
  int64_t step = 0;
  std::string module;
  std::string pass;   // "forward", "backward" or "parameters"
  std::string dtype;  // of the first tensor measured
  int64_t calls = 0;
  int64_t numel = 0;
  double amax = 0.0;
  int64_t inf = 0;
  int64_t nan = 0;
  int64_t underflow_count = 0;
  int64_t overflow_count = 0;

  double underflow() const;  // underflow_count / numel (0 without elements)
  double overflow() const;
  double headroom() const { return float16_headroom(amax); }
};

// The measurements read so far, added up per (step, pass, module): a module called several times
// in a step adds up (calls, numel, the counts; the largest amax).
class StatsSummary {
 public:
  // `values` are one tensor_stats() result read to the host.
  void add(int64_t step, const std::string& pass, const std::string& module,
           const std::string& dtype, int64_t numel, const std::array<double, 5>& values);

  // By step, then in the order of each (pass, module)'s first measurement in the step.
  std::vector<StatsRow> rows() const;

  // The first module, in the order measured, whose values in `pass` of `step` held an inf or
  // NaN; nullopt where none did.
  std::optional<std::string> first_nonfinite(int64_t step, const std::string& pass) const;

 private:
  std::vector<StatsRow> rows_;
  std::map<std::tuple<int64_t, std::string, std::string>, size_t> index_;
  std::map<std::pair<int64_t, std::string>, std::string> first_;
};

}  // namespace ampkit
