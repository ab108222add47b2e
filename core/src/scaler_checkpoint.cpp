#include "ampkit/scaler_checkpoint.h"

#include <algorithm>

#include "ampkit/errors.h"

namespace ampkit {
namespace {

// ['a', 'b'], as Python prints a list of strings: the messages read the same from Python and R.
std::string key_list(const std::vector<std::string>& keys) {
  std::string out = "[";
  for (size_t i = 0; i < keys.size(); ++i) out += (i ? ", '" : "'") + keys[i] + "'";
  return out + "]";
}

template <size_t N>
bool contains(const std::array<const char*, N>& keys, const std::string& key) {
  return std::find(keys.begin(), keys.end(), key) != keys.end();
}

// The name of a value's kind, as Python names it (what the user wrote in most cases).
std::string kind_name(const StateValue& value) {
  static const char* names[] = {"NoneType", "bool", "int", "float", "str"};
  return names[value.index()];
}

[[noreturn]] void wrong_kind(const std::string& key, const char* rule, const StateValue& value) {
  throw ArgumentTypeError("`" + key + "` must be " + rule + ", got " + kind_name(value) + ".");
}

double number(const std::string& key, const StateValue& value) {
  if (const auto* d = std::get_if<double>(&value)) return *d;
  if (const auto* i = std::get_if<int64_t>(&value)) return static_cast<double>(*i);
  wrong_kind(key, "a number", value);
}

std::optional<double> optional_number(const std::string& key, const StateValue& value) {
  if (std::holds_alternative<std::monostate>(value)) return std::nullopt;
  if (std::holds_alternative<bool>(value) || std::holds_alternative<std::string>(value)) {
    wrong_kind(key, "a number or None", value);
  }
  return number(key, value);
}

bool flag(const std::string& key, const StateValue& value) {
  if (const auto* b = std::get_if<bool>(&value)) return *b;
  wrong_kind(key, "True or False", value);
}

std::string text(const std::string& key, const StateValue& value) {
  if (const auto* s = std::get_if<std::string>(&value)) return *s;
  wrong_kind(key, "a string", value);
}

StateValue optional(const std::optional<double>& value) {
  return value ? StateValue(*value) : StateValue(std::monostate{});
}

StateValue whole(double value) { return StateValue(static_cast<int64_t>(value)); }

}  // namespace

StateDict to_state_dict(const ScalerState& s) {
  return {{"scale", s.scale},
          {"growth_factor", s.growth_factor},
          {"backoff_factor", s.backoff_factor},
          {"growth_interval", whole(s.growth_interval)},
          {"_growth_tracker", whole(s.growth_tracker)},
          {"min_scale", optional(s.policy.min_scale)},
          {"max_scale", optional(s.policy.max_scale)},
          {"hysteresis", whole(s.policy.hysteresis)},
          {"consecutive_hysteresis", s.policy.consecutive_hysteresis},
          {"on_min_scale", on_min_scale_name(s.policy.on_min_scale)},
          {"track_overflow", s.track_overflow},
          {"_hysteresis_tracker", whole(s.hysteresis_left)},
          {"_steps", whole(s.steps)},
          {"_skipped_steps", whole(s.skipped_steps)},
          {"_consecutive_skipped_steps", whole(s.consecutive_skipped_steps)}};
}

void check_state_keys(const std::vector<std::string>& keys) {
  if (keys.empty()) {
    throw StateError(
        "The source state dict is empty, possibly because it was saved from a disabled "
        "instance of GradScaler.");
  }
  std::vector<std::string> missing, unknown;
  for (const char* key : kStateKeys) {
    if (std::find(keys.begin(), keys.end(), key) == keys.end()) missing.push_back(key);
  }
  for (const auto& key : keys) {
    if (!contains(kStateKeys, key) && !contains(kPolicyKeys, key)) unknown.push_back(key);
  }
  if (!missing.empty()) {
    throw ArgumentError("`state_dict` is missing the key(s) " + key_list(missing) + ".");
  }
  if (!unknown.empty()) {
    std::vector<std::string> known(kStateKeys.begin(), kStateKeys.end());
    known.insert(known.end(), kPolicyKeys.begin(), kPolicyKeys.end());
    throw ArgumentError("`state_dict` has unknown key(s) " + key_list(unknown) + "; the keys are " +
                        key_list(known) + ".");
  }
}

ScalerState from_state_dict(const std::map<std::string, StateValue>& values,
                            const ScalerState& current) {
  std::vector<std::string> keys;
  for (const auto& [key, value] : values) keys.push_back(key);
  check_state_keys(keys);
  ScalerState s = current;
  s.scale = number("scale", values.at("scale"));
  s.growth_factor = number("growth_factor", values.at("growth_factor"));
  s.backoff_factor = number("backoff_factor", values.at("backoff_factor"));
  s.growth_interval = number("growth_interval", values.at("growth_interval"));
  s.growth_tracker = number("_growth_tracker", values.at("_growth_tracker"));
  auto has = [&](const char* key) { return values.count(key) > 0; };
  if (has("min_scale")) s.policy.min_scale = optional_number("min_scale", values.at("min_scale"));
  if (has("max_scale")) s.policy.max_scale = optional_number("max_scale", values.at("max_scale"));
  if (has("hysteresis")) s.policy.hysteresis = number("hysteresis", values.at("hysteresis"));
  if (has("consecutive_hysteresis")) {
    s.policy.consecutive_hysteresis =
        flag("consecutive_hysteresis", values.at("consecutive_hysteresis"));
  }
  if (has("on_min_scale")) {
    s.policy.on_min_scale = parse_on_min_scale(text("on_min_scale", values.at("on_min_scale")));
  }
  if (has("track_overflow")) s.track_overflow = flag("track_overflow", values.at("track_overflow"));
  // A state without ampkit's counters (torch.amp's) starts them afresh.
  s.hysteresis_left = has("_hysteresis_tracker")
                          ? number("_hysteresis_tracker", values.at("_hysteresis_tracker"))
                          : s.policy.hysteresis;
  s.steps = has("_steps") ? number("_steps", values.at("_steps")) : 0;
  s.skipped_steps =
      has("_skipped_steps") ? number("_skipped_steps", values.at("_skipped_steps")) : 0;
  s.consecutive_skipped_steps =
      has("_consecutive_skipped_steps")
          ? number("_consecutive_skipped_steps", values.at("_consecutive_skipped_steps"))
          : 0;
  validate_state(s);
  return s;
}

void validate_state(const ScalerState& s) {
  check_reachable_scale(s.scale, "scale");
  check_growth_factor(s.growth_factor, "growth_factor");
  check_backoff_factor(s.backoff_factor, "backoff_factor");
  check_count(s.growth_interval, "growth_interval", 1);
  check_count(s.growth_tracker, "_growth_tracker", 0);
  validate_policy(s.policy, s.scale, "scale");
  // The hysteresis tracker goes below zero while overflows keep coming at the floor.
  check_count(s.hysteresis_left, "_hysteresis_tracker", -2147483647.0);
  check_count(s.steps, "_steps", 0);
  check_count(s.skipped_steps, "_skipped_steps", 0);
  check_count(s.consecutive_skipped_steps, "_consecutive_skipped_steps", 0);
}

}  // namespace ampkit
