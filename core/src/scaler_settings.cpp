#include "ampkit/scaler_settings.h"

#include <algorithm>

#include "ampkit/errors.h"

namespace ampkit {
namespace {

// The name of a value's kind, as Python names it (what the user wrote in most cases).
std::string kind_name(const SettingValue& value) {
  if (const auto* other = std::get_if<OtherKind>(&value)) return other->name;
  static const char* names[] = {"NoneType", "bool", "int", "float", "str"};
  return names[value.index()];
}

[[noreturn]] void wrong_kind(const std::string& name, const char* rule, const SettingValue& value) {
  throw ArgumentTypeError(must_be(name, rule, kind_name(value)));
}

double to_number(const std::string& name, const SettingValue& value) {
  if (const auto* d = std::get_if<double>(&value)) return *d;
  if (const auto* i = std::get_if<int64_t>(&value)) return static_cast<double>(*i);
  wrong_kind(name, "a number", value);
}

bool flag_value(const std::string& name, const SettingValue& value) {
  if (const auto* b = std::get_if<bool>(&value)) return *b;
  wrong_kind(name, "True or False", value);
}

std::string text(const std::string& name, const SettingValue& value) {
  if (const auto* s = std::get_if<std::string>(&value)) return *s;
  wrong_kind(name, "a string", value);
}

// A whole number judged as a double first, so that 1.5 is refused rather than truncated.
int64_t whole(const std::string& name, const SettingValue& value, double minimum) {
  const double v = to_number(name, value);
  check_count(v, name.c_str(), minimum);
  return static_cast<int64_t>(v);
}

OnMinScale parse_on_min_scale(const std::string& value) {
  if (value == "raise") return OnMinScale::Raise;
  if (value == "warn") return OnMinScale::Warn;
  if (value == "ignore") return OnMinScale::Ignore;
  throw ArgumentError("`on_min_scale` must be \"raise\", \"warn\" or \"ignore\", got \"" + value +
                      "\".");
}

ScalerEntry make(const char* name, bool option, Key key,
                 std::function<SettingValue(const ScalerState&)> get,
                 std::function<void(ScalerState&, const SettingValue&)> set) {
  return {name, option, key, std::move(get), std::move(set)};
}

// A row over one field of the state (`part`: its settings or its counters): the value as it
// is, and `convert` (name, value) -> the field's type, which judges it.
template <class Part, class T, class Convert>
ScalerEntry field_entry(const char* name, bool option, Key key, Part ScalerState::*part,
                        T Part::*field, Convert convert) {
  return make(
      name, option, key,
      [part, field](const ScalerState& s) { return SettingValue((s.*part).*field); },
      [name, part, field, convert](ScalerState& s, const SettingValue& v) {
        (s.*part).*field = convert(name, v);
      });
}

auto number_from(entry::Check check) {
  return [check](const char* name, const SettingValue& v) {
    const double value = to_number(name, v);
    check(value, name);
    return value;
  };
}

auto whole_from(double minimum) {
  return [minimum](const char* name, const SettingValue& v) { return whole(name, v, minimum); };
}

}  // namespace

std::string on_min_scale_name(OnMinScale value) {
  switch (value) {
    case OnMinScale::Warn:
      return "warn";
    case OnMinScale::Ignore:
      return "ignore";
    case OnMinScale::Raise:
      break;
  }
  return "raise";
}

namespace entry {

ScalerEntry number(const char* name, double ScalerSettings::*field, Check check, Key key) {
  return field_entry(name, true, key, &ScalerState::settings, field, number_from(check));
}

ScalerEntry optional_number(const char* name, std::optional<double> ScalerSettings::*field,
                            Check check) {
  return make(
      name, true, Key::Ampkit,
      [field](const ScalerState& s) {
        const auto& value = s.settings.*field;
        return value ? SettingValue(*value) : SettingValue(std::monostate{});
      },
      [name, field, check](ScalerState& s, const SettingValue& v) {
        if (std::holds_alternative<std::monostate>(v)) {
          s.settings.*field = std::nullopt;
          return;
        }
        if (!std::holds_alternative<double>(v) && !std::holds_alternative<int64_t>(v)) {
          wrong_kind(name, "a number or None", v);
        }
        const double value = to_number(name, v);
        check(value, name);
        s.settings.*field = value;
      });
}

ScalerEntry count(const char* name, int64_t ScalerSettings::*field, double minimum, Key key) {
  return field_entry(name, true, key, &ScalerState::settings, field, whole_from(minimum));
}

ScalerEntry flag(const char* name, bool ScalerSettings::*field, Key key) {
  return field_entry(name, true, key, &ScalerState::settings, field, flag_value);
}

ScalerEntry on_min_scale() {
  return make(
      "on_min_scale", true, Key::Ampkit,
      [](const ScalerState& s) { return SettingValue(on_min_scale_name(s.settings.on_min_scale)); },
      [](ScalerState& s, const SettingValue& v) {
        if (!std::holds_alternative<std::string>(v)) {
          wrong_kind("on_min_scale", "\"raise\", \"warn\" or \"ignore\"", v);
        }
        s.settings.on_min_scale = parse_on_min_scale(text("on_min_scale", v));
      });
}

// Repeated backoff underflows to 0 and growth overflows to inf: a checkpoint may hold both.
ScalerEntry scale() {
  return field_entry("scale", false, Key::TorchAmp, &ScalerState::counters, &ScalerCounters::scale,
                     number_from(check_reachable_scale));
}

// Read after the options (from_state_dict sets those first): with a growth delay the tracker
// restarts below zero, never further down than the delay.
ScalerEntry growth_tracker() {
  return make(
      "_growth_tracker", false, Key::TorchAmp,
      [](const ScalerState& s) { return SettingValue(s.counters.growth_tracker); },
      [](ScalerState& s, const SettingValue& v) {
        const auto minimum = static_cast<double>(-s.settings.growth_delay);
        s.counters.growth_tracker = whole("_growth_tracker", v, minimum);
      });
}

ScalerEntry counter(const char* name, int64_t ScalerCounters::*field, double minimum, Key key) {
  return field_entry(name, false, key, &ScalerState::counters, field, whole_from(minimum));
}

ScalerEntry counter_flag(const char* name, bool ScalerCounters::*field) {
  return field_entry(name, false, Key::Ampkit, &ScalerState::counters, field, flag_value);
}

}  // namespace entry

void check_options(const ScalerSettings& settings) {
  ScalerState state{settings, {}};
  for (const auto& e : scaler_table()) {
    if (e.option) e.set(state, e.get(state));
  }
}

ScalerSettings settings_from_options(const std::map<std::string, SettingValue>& options) {
  const auto& table = scaler_table();
  ScalerState state;
  for (const auto& [name, value] : options) {
    auto row = std::find_if(table.begin(), table.end(),
                            [&](const ScalerEntry& e) { return e.option && e.name == name; });
    if (row == table.end()) throw ArgumentError("GradScaler has no option `" + name + "`.");
    row->set(state, value);
  }
  return state.settings;
}

std::vector<std::pair<std::string, SettingValue>> option_defaults() {
  const ScalerState defaults;
  std::vector<std::pair<std::string, SettingValue>> out;
  for (const auto& e : scaler_table()) {
    if (e.option) out.emplace_back(e.name, e.get(defaults));
  }
  return out;
}

}  // namespace ampkit
