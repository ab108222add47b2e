// The grad scaler's checkpoint format, derived from the table in scaler_settings.h: torch.amp's
// five keys first (scale, growth_factor, backoff_factor, growth_interval, _growth_tracker, in
// torch.amp's order), then ampkit's (the options that change the rule, its trackers and the
// step counters). A state moves between ampkit (Python or R) and torch.amp in both directions:
// torch.amp ignores the keys it does not know, and a torch.amp dict, which lacks ampkit's keys,
// loads with the options the scaler was built with and its counters afresh.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "ampkit/scaler_settings.h"

namespace ampkit {

using StateDict = std::vector<std::pair<std::string, SettingValue>>;  // in key order

// Every key, in state-dict order; and torch.amp's five, which every state dict has.
std::vector<std::string> state_keys();
std::vector<std::string> torch_amp_state_keys();

// The state as a dict, each entry as its row gets it (counts as whole numbers).
StateDict to_state_dict(const ScalerState& state);

// Refuses a key list without torch.amp's five keys or with a key the table does not have
// (StateError for an empty list, the state of a disabled scaler; ArgumentError naming
// `state_dict` otherwise). Callers check the keys before converting values, so an unknown key is
// reported as unknown.
void check_state_keys(const std::vector<std::string>& keys);

// check_state_keys, then each value by its row (kind, then rule). Options that `values` lacks
// keep `current`'s; counters it lacks start afresh. The rules between entries are
// GradScaler::load_state_dict's (validate_state), checked there before anything changes.
ScalerState from_state_dict(const std::map<std::string, SettingValue>& values,
                            const ScalerState& current);

}  // namespace ampkit
