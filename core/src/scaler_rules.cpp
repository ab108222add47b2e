#include "ampkit/scaler_rules.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

#include "ampkit/errors.h"

namespace ampkit {
namespace {

constexpr double kMaxCount = std::numeric_limits<int32_t>::max();  // the tracker is int32
constexpr double kMaxFloat = std::numeric_limits<float>::max();    // the scale is float32

[[noreturn]] void refuse(const char* name, const std::string& rule, double value) {
  throw ArgumentError("`" + std::string(name) + "` must be " + rule + ", got " +
                      format_number(value) + ".");
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

OnMinScale parse_on_min_scale(const std::string& value, const char* name) {
  if (value == "raise") return OnMinScale::Raise;
  if (value == "warn") return OnMinScale::Warn;
  if (value == "ignore") return OnMinScale::Ignore;
  throw ArgumentError("`" + std::string(name) +
                      "` must be \"raise\", \"warn\" or \"ignore\", got \"" + value + "\".");
}

std::string on_min_scale_name(OnMinScale value) {
  switch (value) {
    case OnMinScale::Raise:
      return "raise";
    case OnMinScale::Warn:
      return "warn";
    case OnMinScale::Ignore:
      return "ignore";
  }
  return "raise";
}

void validate_policy(const ScalePolicy& policy, double scale, const char* scale_name) {
  if (policy.min_scale) check_chosen_scale(*policy.min_scale, "min_scale");
  if (policy.max_scale) check_chosen_scale(*policy.max_scale, "max_scale");
  if (policy.min_scale && policy.max_scale && *policy.max_scale < *policy.min_scale) {
    refuse("max_scale", ">= `min_scale` (" + format_number(*policy.min_scale) + ")",
           *policy.max_scale);
  }
  check_count(policy.hysteresis, "hysteresis", 1);
  if (policy.min_scale && scale < *policy.min_scale) {
    refuse(scale_name, ">= `min_scale` (" + format_number(*policy.min_scale) + ")", scale);
  }
  if (policy.max_scale && scale > *policy.max_scale) {
    refuse(scale_name, "<= `max_scale` (" + format_number(*policy.max_scale) + ")", scale);
  }
}

void validate_options(const GradScalerOptions& options) {
  check_chosen_scale(options.init_scale, "init_scale");
  check_growth_factor(options.growth_factor, "growth_factor");
  check_backoff_factor(options.backoff_factor, "backoff_factor");
  check_count(options.growth_interval, "growth_interval", 1);
  validate_policy(options.policy, options.init_scale, "init_scale");
}

}  // namespace ampkit
