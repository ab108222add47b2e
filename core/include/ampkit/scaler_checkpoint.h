// The grad scaler's checkpoint format: torch.amp.GradScaler.state_dict() key for key, plus
// ampkit's own keys (the scale policy, its hysteresis state and the step counters). A state moves
// between ampkit (Python or R) and torch.amp in both directions: torch.amp ignores the keys it
// does not know, and a torch.amp dict, which lacks ampkit's keys, loads with the policy the scaler
// was built with and the counters at zero. The keys, their order, their kinds and the rules a
// loaded state must meet live here alone; Python builds its dict from to_state_dict().
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "ampkit/scaler_rules.h"

namespace ampkit {

// torch.amp's five keys, in torch.amp's order: every state dict has them.
inline constexpr std::array<const char*, 5> kStateKeys = {
    "scale", "growth_factor", "backoff_factor", "growth_interval", "_growth_tracker"};
// ampkit's keys, after torch.amp's: optional when loading.
inline constexpr std::array<const char*, 10> kPolicyKeys = {
    "min_scale",           "max_scale",
    "hysteresis",          "consecutive_hysteresis",
    "on_min_scale",        "track_overflow",
    "_hysteresis_tracker", "_steps",
    "_skipped_steps",      "_consecutive_skipped_steps"};

// The whole state as numbers and settings. Counts are doubles holding whole numbers, so that a
// loaded 1.5 is refused by the rule rather than truncated on the way in.
struct ScalerState {
  double scale;
  double growth_factor;
  double backoff_factor;
  double growth_interval;
  double growth_tracker;
  ScalePolicy policy;
  bool track_overflow = false;
  double hysteresis_left = 1;
  double steps = 0;
  double skipped_steps = 0;
  double consecutive_skipped_steps = 0;
};

// A value in a state dict: None, a flag, a whole number, a number or a text. The languages map
// these to their own (Python: None/bool/int/float/str; R: NULL/logical/numeric/character).
using StateValue = std::variant<std::monostate, bool, int64_t, double, std::string>;
using StateDict = std::vector<std::pair<std::string, StateValue>>;  // in key order

// The state as a dict: torch.amp's keys (the counts as whole numbers), then ampkit's.
StateDict to_state_dict(const ScalerState& state);

// Refuses a key list without torch.amp's five keys or with a key neither list has (StateError for
// an empty list, the state of a disabled scaler; ArgumentError naming `state_dict` otherwise).
// Callers check the keys before converting values, so an unknown key is reported as unknown.
void check_state_keys(const std::vector<std::string>& keys);

// check_state_keys, each value's kind (ArgumentTypeError naming the key), then validate_state.
// ampkit's keys that `values` lacks keep the settings of `current` and reset its counters.
ScalerState from_state_dict(const std::map<std::string, StateValue>& values,
                            const ScalerState& current);

// Throws ArgumentError naming the first key whose value breaks its rule.
void validate_state(const ScalerState& state);

}  // namespace ampkit
