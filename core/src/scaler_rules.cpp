#include "ampkit/scaler_rules.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

#include "ampkit/errors.h"
#include "ampkit/scaler_settings.h"

namespace ampkit {
namespace {

constexpr double kMaxFloat = std::numeric_limits<float>::max();  // the scale is float32

[[noreturn]] void refuse(const char* name, const std::string& rule, double value) {
  throw ArgumentError(must_be(name, rule, format_number(value)));
}

}  // namespace

void check_chosen_scale(double value, const char* name) {
  if (!(std::isfinite(value) && value > 0)) refuse(name, "a finite number > 0", value);
  if (value > kMaxFloat) {
    refuse(name, "at most " + format_number(kMaxFloat) + " (the scale is a float32)", value);
  }
}

void check_reachable_scale(double value, const char* name) {
  // Repeated backoff underflows to 0 and repeated growth overflows to inf: torch.amp's update
  // rule reaches both, so a checkpoint holding them must load.
  if (!(value >= 0 && (value <= kMaxFloat || std::isinf(value)))) {
    refuse(name, "a number >= 0 that a float32 holds (inf included)", value);
  }
}

void check_growth_factor(double value, const char* name) {
  if (!(std::isfinite(value) && value > 1)) refuse(name, "a finite number > 1", value);
}

void check_backoff_factor(double value, const char* name) {
  if (!(value > 0 && value < 1)) refuse(name, "in (0, 1)", value);
}

void check_count(double value, const char* name, double minimum) {
  if (!(std::isfinite(value) && value >= minimum && value == std::floor(value))) {
    refuse(name, "a whole number >= " + format_number(minimum), value);
  }
  if (value > kMaxCount) refuse(name, "at most 2147483647 (it is kept as an int32)", value);
}

void validate_state(const ScalerState& state, const char* scale_name) {
  const ScalerSettings& s = state.settings;
  if (s.min_scale && s.max_scale && *s.max_scale < *s.min_scale) {
    refuse("max_scale", ">= `min_scale` (" + format_number(*s.min_scale) + ")", *s.max_scale);
  }
  const double scale = state.counters.scale;
  if (s.min_scale && scale < *s.min_scale) {
    refuse(scale_name, ">= `min_scale` (" + format_number(*s.min_scale) + ")", scale);
  }
  if (s.max_scale && scale > *s.max_scale) {
    refuse(scale_name, "<= `max_scale` (" + format_number(*s.max_scale) + ")", scale);
  }
  // Overflows still to absorb: never more than hysteresis.
  if (state.counters.hysteresis_left > s.hysteresis) {
    refuse("_hysteresis_tracker", "<= `hysteresis` (" + std::to_string(s.hysteresis) + ")",
           static_cast<double>(state.counters.hysteresis_left));
  }
  // With a growth delay the tracker restarts below zero, never further down than the delay.
  const auto tracker = static_cast<double>(state.counters.growth_tracker);
  const auto lowest = static_cast<double>(-s.growth_delay);
  if (tracker < lowest) {
    refuse("_growth_tracker",
           ">= " + format_number(lowest) + (s.growth_delay ? " (-`growth_delay`)" : ""), tracker);
  }
  // The skipped iterations are some of the iterations, and the current run of skips some of
  // those: stats() would report impossible counts otherwise.
  const ScalerCounters& c = state.counters;
  if (c.skipped_steps > c.steps) {
    refuse("_skipped_steps", "<= `_steps` (" + std::to_string(c.steps) + ")",
           static_cast<double>(c.skipped_steps));
  }
  if (c.consecutive_skipped_steps > c.skipped_steps) {
    refuse("_consecutive_skipped_steps",
           "<= `_skipped_steps` (" + std::to_string(c.skipped_steps) + ")",
           static_cast<double>(c.consecutive_skipped_steps));
  }
}

}  // namespace ampkit
