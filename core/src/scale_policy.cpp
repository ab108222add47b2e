#include "ampkit/scale_policy.h"

#include <ATen/TensorOperators.h>
#include <ATen/ops/_amp_update_scale.h>
#include <ATen/ops/addcmul.h>
#include <ATen/ops/clamp_max.h>
#include <ATen/ops/clamp_min.h>
#include <ATen/ops/isfinite.h>
#include <ATen/ops/logical_and.h>
#include <ATen/ops/scalar_tensor.h>
#include <ATen/ops/tensor.h>
#include <ATen/ops/where.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <utility>
#include <vector>

namespace ampkit {
namespace {

// How one iteration moves DeviceState::counters: for each outcome an affine map, entry by entry,
// c' = c * keep + add. The one statement of the counters' and hysteresis' part of the rule.
struct CounterMap {
  std::array<int64_t, kNumCounters> keep, add;
};
struct CounterMaps {
  CounterMap overflow, clean, growth;  // growth: a clean step on which the scale grows
};

CounterMaps counter_maps(const ScalerSettings& p) {
  const int64_t full = p.hysteresis;
  const bool refill = p.consecutive_hysteresis;  // a clean step refills hysteresis
  // Entries: hysteresis_left, steps, skipped, consecutive.
  return {{{1, 1, 1, 1}, {-1, 1, 1, 1}},
          {{refill ? 0 : 1, 1, 1, 0}, {refill ? full : 0, 1, 0, 0}},
          {{0, 1, 1, 0}, {full, 1, 0, 0}}};
}

// Numbers held on the host: a CPU scaler's state, read and written in place. S * factor is
// computed in double and rounded to float32, as torch.amp's CPU kernel does.
struct HostOps {
  using Scale = float;
  using Count = int64_t;
  using Flag = bool;
  using Counters = int64_t*;
  static Scale mul(Scale s, double factor) { return static_cast<float>(s * factor); }
  static Scale at_least(Scale s, double bound) { return std::max(s, static_cast<float>(bound)); }
  static Scale at_most(Scale s, double bound) { return std::min(s, static_cast<float>(bound)); }
  static Flag finite(Scale s) { return std::isfinite(s); }
  static Flag equals(Scale s, double value) { return s == static_cast<float>(value); }
  static Flag equals(Count c, int64_t value) { return c == value; }
  static Flag at_most_zero(Count c) { return c <= 0; }
  static Flag both(Flag a, Flag b) { return a && b; }
  static Count count(Count, int64_t value) { return value; }
  template <class T>
  static T pick(Flag flag, const T& a, const T& b) {
    return flag ? a : b;
  }
  static Count hysteresis_left(Counters c) { return c[kHysteresisLeft]; }
  static void advance(Counters c, Flag found, Flag grow, const ScalerSettings& p) {
    const CounterMaps maps = counter_maps(p);
    const CounterMap& m = found ? maps.overflow : grow ? maps.growth : maps.clean;
    for (int64_t i = 0; i < kNumCounters; ++i) c[i] = c[i] * m.keep[i] + m.add[i];
  }
};

// Numbers held on a device: each operation is queued there and nothing is read back. S * factor
// is a double product rounded once to float32, as torch.amp's CUDA kernel computes it (its
// factors are doubles) and as HostOps does: both paths give the same bits.
struct TensorOps {
  using Scale = at::Tensor;
  using Count = at::Tensor;
  using Flag = at::Tensor;
  using Counters = DeviceState&;
  static Scale mul(const Scale& s, double factor) {
    return (s.to(at::kDouble) * factor).to(at::kFloat);
  }
  static Scale at_least(const Scale& s, double bound) { return at::clamp_min(s, bound); }
  static Scale at_most(const Scale& s, double bound) { return at::clamp_max(s, bound); }
  static Flag finite(const Scale& s) { return at::isfinite(s); }
  static Flag equals(const at::Tensor& t, const at::Scalar& value) { return t == value; }
  static Flag at_most_zero(const Count& c) { return c <= 0; }
  static Flag both(const Flag& a, const Flag& b) { return at::logical_and(a, b); }
  static Count count(const Count& like, int64_t value) {
    return at::scalar_tensor(value, like.options());
  }
  static at::Tensor pick(const Flag& flag, const at::Tensor& a, const at::Tensor& b) {
    return at::where(flag, a, b);
  }
  static Count hysteresis_left(const DeviceState& s) { return s.counters[kHysteresisLeft]; }
  // The outcome's map is chosen on the device, then applied in place: three ops.
  static void advance(DeviceState& s, const Flag& found, const Flag& grow,
                      const ScalerSettings& p) {
    const at::Tensor& maps = counter_maps_on_device(s, p);
    const at::Tensor map = at::where(found, maps[0], at::where(grow, maps[2], maps[1]));
    at::addcmul_out(s.counters, map[1], s.counters, map[0]);
  }
  // counter_maps(p) as a {3, 2, kNumCounters} tensor beside the counters, made once per settings
  // (a copy from the host per update would cost a transfer each time).
  static const at::Tensor& counter_maps_on_device(DeviceState& s, const ScalerSettings& p) {
    const std::pair<int64_t, bool> key{p.hysteresis, p.consecutive_hysteresis};
    if (!s.counter_maps.defined() || s.counter_maps_key != key) {
      const CounterMaps maps = counter_maps(p);
      std::vector<int64_t> values;
      for (const CounterMap* m : {&maps.overflow, &maps.clean, &maps.growth}) {
        values.insert(values.end(), m->keep.begin(), m->keep.end());
        values.insert(values.end(), m->add.begin(), m->add.end());
      }
      s.counter_maps = at::tensor(values, at::kLong)
                           .reshape({3, 2, kNumCounters})
                           .to(s.counters.device(), /*non_blocking=*/true);
      s.counter_maps_key = key;
    }
    return s.counter_maps;
  }
};

// The rule of scale_policy.h, written once for both kinds of numbers. With `scale_too` false the
// caller applies torch.amp's kernel to the scale and the tracker afterwards (the default policy):
// the rule then moves the hysteresis state and the counters only, from the same tracker. The
// collapse flag is left unset (false, or an undefined tensor) without a floor.
template <class Ops>
typename Ops::Flag rule(typename Ops::Scale& scale, typename Ops::Count& tracker,
                        typename Ops::Counters counters, const typename Ops::Flag& found,
                        const ScalerSettings& p, bool scale_too) {
  using Count = typename Ops::Count;
  const auto grow = Ops::equals(tracker, p.growth_interval - 1);  // tracker + 1 == interval
  typename Ops::Flag collapsed{};
  if (scale_too || p.min_scale) {
    // After an overflow one less is left to absorb; a back-off is due when none is.
    const auto backoff_due = Ops::at_most_zero(Count(Ops::hysteresis_left(counters) - 1));
    if (p.min_scale) {
      collapsed = Ops::both(found, Ops::both(backoff_due, Ops::equals(scale, *p.min_scale)));
    }
    if (scale_too) {
      // Back off once no overflow is left to absorb, never below the floor.
      auto backed_off = Ops::mul(scale, p.backoff_factor);
      if (p.min_scale) backed_off = Ops::at_least(backed_off, *p.min_scale);
      const auto scale_on_overflow = Ops::pick(backoff_due, backed_off, scale);
      // Grow after growth_interval clean steps, never above the ceiling nor to inf.
      auto grown = Ops::mul(scale, p.growth_factor);
      if (p.max_scale) grown = Ops::at_most(grown, *p.max_scale);
      const auto scale_on_clean = Ops::pick(Ops::both(grow, Ops::finite(grown)), grown, scale);
      const Count restart = Ops::count(tracker, -p.growth_delay);
      const Count zero = Ops::count(tracker, 0);
      const Count next = tracker + 1;
      scale = Ops::pick(found, scale_on_overflow, scale_on_clean);
      tracker = Ops::pick(found, restart, Ops::pick(grow, zero, next));
    }
  }
  Ops::advance(counters, found, grow, p);
  return collapsed;
}

Collapse update_on_host(DeviceState& s, const at::Tensor& found_inf, const ScalerSettings& p,
                        bool scale_too) {
  float* scale = s.scale.data_ptr<float>();
  int32_t* tracker = s.growth_tracker.data_ptr<int32_t>();
  float new_scale = *scale;
  int64_t new_tracker = *tracker;
  const bool collapsed = rule<HostOps>(new_scale, new_tracker, s.counters.data_ptr<int64_t>(),
                                       *found_inf.const_data_ptr<float>() != 0, p, scale_too);
  *scale = new_scale;
  *tracker = static_cast<int32_t>(new_tracker);  // unchanged when the kernel moves it
  return {collapsed, {}};
}

Collapse update_on_device(DeviceState& s, const at::Tensor& found_inf, const ScalerSettings& p,
                          bool scale_too) {
  at::Tensor scale = s.scale;
  at::Tensor tracker = s.growth_tracker;
  const at::Tensor collapsed = rule<TensorOps>(scale, tracker, s, found_inf > 0, p, scale_too);
  if (scale_too) {
    s.scale.copy_(scale);
    s.growth_tracker.copy_(tracker);
  }
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
