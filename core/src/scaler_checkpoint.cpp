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

bool contains(const std::vector<std::string>& keys, const std::string& key) {
  return std::find(keys.begin(), keys.end(), key) != keys.end();
}

// The checkpointed rows in state-dict order: torch.amp's keys, then ampkit's.
std::vector<const ScalerEntry*> checkpointed_rows() {
  std::vector<const ScalerEntry*> rows;
  for (const Key key : {Key::TorchAmp, Key::Ampkit}) {
    for (const auto& e : scaler_table()) {
      if (e.key == key) rows.push_back(&e);
    }
  }
  return rows;
}

}  // namespace

std::vector<std::string> state_keys() {
  std::vector<std::string> keys;
  for (const ScalerEntry* e : checkpointed_rows()) keys.push_back(e->name);
  return keys;
}

std::vector<std::string> torch_amp_state_keys() {
  std::vector<std::string> keys;
  for (const ScalerEntry* e : checkpointed_rows()) {
    if (e->key == Key::TorchAmp) keys.push_back(e->name);
  }
  return keys;
}

StateDict to_state_dict(const ScalerState& state) {
  StateDict dict;
  for (const ScalerEntry* e : checkpointed_rows()) dict.emplace_back(e->name, e->get(state));
  return dict;
}

void check_state_keys(const std::vector<std::string>& keys) {
  if (keys.empty()) {
    throw StateError(
        "The source state dict is empty, possibly because it was saved from a disabled "
        "instance of GradScaler.");
  }
  const std::vector<std::string> known = state_keys();
  std::vector<std::string> missing, unknown;
  for (const auto& key : torch_amp_state_keys()) {
    if (!contains(keys, key)) missing.push_back(key);
  }
  for (const auto& key : keys) {
    if (!contains(known, key)) unknown.push_back(key);
  }
  if (!missing.empty()) {
    throw MissingKeyError("`state_dict` is missing the key(s) " + key_list(missing) + ".");
  }
  if (!unknown.empty()) {
    throw ArgumentError("`state_dict` has unknown key(s) " + key_list(unknown) + "; the keys are " +
                        key_list(known) + ".");
  }
}

ScalerState from_state_dict(const std::map<std::string, SettingValue>& values,
                            const ScalerState& current) {
  std::vector<std::string> keys;
  for (const auto& [key, value] : values) keys.push_back(key);
  check_state_keys(keys);
  ScalerState s = current;
  // The options first: a counter absent from `values` starts afresh under the loaded options.
  for (const bool options : {true, false}) {
    const ScalerState fresh{s.settings, ScalerCounters::fresh(s.settings)};
    for (const auto& e : scaler_table()) {
      if (e.key == Key::None || e.option != options) continue;
      const auto given = values.find(e.name);
      if (given != values.end()) {
        e.set(s, given->second);
      } else if (!e.option) {
        e.set(s, e.get(fresh));
      }
    }
  }
  return s;
}

}  // namespace ampkit
