#include "ampkit/scale_policy.h"

#include <ATen/TensorOperators.h>
#include <ATen/ops/_amp_update_scale.h>
#include <ATen/ops/clamp_max.h>
#include <ATen/ops/clamp_min.h>
#include <ATen/ops/isfinite.h>
#include <ATen/ops/logical_and.h>
#include <ATen/ops/scalar_tensor.h>
#include <ATen/ops/stack.h>
#include <ATen/ops/where.h>

#include <algorithm>
#include <cmath>

namespace ampkit {
namespace {

// Numbers held on the host: a CPU scaler's state, read and written in place. S * factor is
// computed in double and rounded to float32, as torch.amp's CPU kernel does.
struct HostOps {
  using Scale = float;
  using Count = int64_t;
  using Flag = bool;
  static Scale mul(Scale s, double factor) { return static_cast<float>(s * factor); }
  static Scale at_least(Scale s, double bound) { return std::max(s, static_cast<float>(bound)); }
  static Scale at_most(Scale s, double bound) { return std::min(s, static_cast<float>(bound)); }
  static Flag finite(Scale s) { return std::isfinite(s); }
  static Flag equals(Scale s, double value) { return s == static_cast<float>(value); }
  static Flag equals(Count c, int64_t value) { return c == value; }
  static Flag at_most_zero(Count c) { return c <= 0; }
  static Flag both(Flag a, Flag b) { return a && b; }
  static Flag no(Scale) { return false; }
  static Count count(Count, int64_t value) { return value; }
  template <class T>
  static T pick(Flag flag, const T& a, const T& b) {
    return flag ? a : b;
  }
};

// Numbers held on a device: each operation is queued there and nothing is read back. S * factor
// is a double product rounded once to float32, as torch.amp's CUDA kernel computes it (its
// factors are doubles) and as HostOps does: both paths give the same bits.
struct TensorOps {
  using Scale = at::Tensor;
  using Count = at::Tensor;
  using Flag = at::Tensor;
  static Scale mul(const Scale& s, double factor) {
    return (s.to(at::kDouble) * factor).to(at::kFloat);
  }
  static Scale at_least(const Scale& s, double bound) { return at::clamp_min(s, bound); }
  static Scale at_most(const Scale& s, double bound) { return at::clamp_max(s, bound); }
  static Flag finite(const Scale& s) { return at::isfinite(s); }
  static Flag equals(const at::Tensor& t, const at::Scalar& value) { return t == value; }
  static Flag at_most_zero(const Count& c) { return c <= 0; }
  static Flag both(const Flag& a, const Flag& b) { return at::logical_and(a, b); }
  static Flag no(const Scale& like) {
    return at::scalar_tensor(false, like.options().dtype(at::kBool));
  }
  static Count count(const Count& like, int64_t value) {
    return at::scalar_tensor(value, like.options());
  }
  static at::Tensor pick(const Flag& flag, const at::Tensor& a, const at::Tensor& b) {
    return at::where(flag, a, b);
  }
};

template <class Ops>
struct Values {
  typename Ops::Scale scale;
  typename Ops::Count tracker;
  typename Ops::Count hysteresis_left;
  typename Ops::Count steps, skipped, consecutive;
};

// The rule of scale_policy.h, written once for both kinds of numbers. With `scale_too` false the
// caller applies torch.amp's kernel to the scale and the tracker afterwards (the default policy):
// the rule then moves the hysteresis state and the counters only, from the same tracker.
template <class Ops>
typename Ops::Flag rule(Values<Ops>& v, const typename Ops::Flag& found, const ScalerSettings& p,
                        bool scale_too) {
  using Count = typename Ops::Count;
  const Count zero = Ops::count(v.tracker, 0);
  const Count restart = Ops::count(v.tracker, -p.growth_delay);
  const Count full = Ops::count(v.tracker, p.hysteresis);
  const Count next = v.tracker + 1;
  const auto grow = Ops::equals(next, p.growth_interval);
  // After an overflow: one less overflow to absorb; after a clean step, refilled on growth (and
  // on every clean step with consecutive_hysteresis).
  const Count left = v.hysteresis_left - 1;
  const auto backoff_due = Ops::at_most_zero(left);
  typename Ops::Flag collapsed = Ops::no(v.scale);
  if (p.min_scale) {
    collapsed = Ops::both(found, Ops::both(backoff_due, Ops::equals(v.scale, *p.min_scale)));
  }
  const Count left_on_clean =
      Ops::pick(grow, full, p.consecutive_hysteresis ? full : v.hysteresis_left);
  if (scale_too) {
    // Back off once no overflow is left to absorb, never below the floor.
    auto backed_off = Ops::mul(v.scale, p.backoff_factor);
    if (p.min_scale) backed_off = Ops::at_least(backed_off, *p.min_scale);
    const auto scale_on_overflow = Ops::pick(backoff_due, backed_off, v.scale);
    // Grow after growth_interval clean steps, never above the ceiling nor to inf.
    auto grown = Ops::mul(v.scale, p.growth_factor);
    if (p.max_scale) grown = Ops::at_most(grown, *p.max_scale);
    const auto scale_on_clean = Ops::pick(Ops::both(grow, Ops::finite(grown)), grown, v.scale);
    v.scale = Ops::pick(found, scale_on_overflow, scale_on_clean);
    v.tracker = Ops::pick(found, restart, Ops::pick(grow, zero, next));
  }
  v.hysteresis_left = Ops::pick(found, left, left_on_clean);
  v.steps = v.steps + 1;
  v.skipped = Ops::pick(found, Count(v.skipped + 1), v.skipped);
  v.consecutive = Ops::pick(found, Count(v.consecutive + 1), zero);
  return collapsed;
}

Collapse update_on_host(DeviceState& s, const at::Tensor& found_inf, const ScalerSettings& p,
                        bool scale_too) {
  float* scale = s.scale.data_ptr<float>();
  int32_t* tracker = s.growth_tracker.data_ptr<int32_t>();
  int32_t* left = s.hysteresis_left.data_ptr<int32_t>();
  int64_t* counters = s.counters.data_ptr<int64_t>();
  Values<HostOps> v{*scale, *tracker, *left, counters[0], counters[1], counters[2]};
  const bool collapsed = rule<HostOps>(v, *found_inf.const_data_ptr<float>() != 0, p, scale_too);
  *scale = v.scale;
  *tracker = static_cast<int32_t>(v.tracker);  // unchanged when the kernel moves it
  *left = static_cast<int32_t>(v.hysteresis_left);
  counters[0] = v.steps;
  counters[1] = v.skipped;
  counters[2] = v.consecutive;
  return {collapsed, {}};
}

Collapse update_on_device(DeviceState& s, const at::Tensor& found_inf, const ScalerSettings& p,
                          bool scale_too) {
  Values<TensorOps> v{s.scale,
                      s.growth_tracker.to(at::kLong),
                      s.hysteresis_left.to(at::kLong),
                      s.counters[0],
                      s.counters[1],
                      s.counters[2]};
  const at::Tensor collapsed = rule<TensorOps>(v, found_inf > 0, p, scale_too);
  if (scale_too) {
    s.scale.copy_(v.scale);
    s.growth_tracker.copy_(v.tracker);
  }
  s.hysteresis_left.copy_(v.hysteresis_left);
  s.counters.copy_(at::stack({v.steps, v.skipped, v.consecutive}));
  return {std::nullopt, collapsed};
}

}  // namespace

Collapse apply_update(DeviceState& state, const at::Tensor& found_inf,
                      const ScalerSettings& settings, bool tensor_ops) {
  // At torch.amp's settings its own kernel moves the scale and the tracker, bit for bit, after
  // the rule has read the tracker for the hysteresis state and the counters.
  const bool kernel = settings.is_torch_amp_rule();
  const Collapse collapse = state.scale.is_cpu() && !tensor_ops
                                ? update_on_host(state, found_inf, settings, !kernel)
                                : update_on_device(state, found_inf, settings, !kernel);
  if (kernel) {
    at::_amp_update_scale_(state.scale, state.growth_tracker, found_inf, settings.growth_factor,
                           settings.backoff_factor, settings.growth_interval);
  }
  return collapse;
}

}  // namespace ampkit
