// The grad scaler's settings and counters, and the one table that describes them.
//
// Every option of the scaler is a field of ScalerSettings (its default is the field's
// initialiser) and one row of scaler_table() below (its name, its rule, whether a state dict
// holds it). Everything else is derived from the table: the constructor's keyword arguments in
// Python and R (their names and defaults, through ampkit._C.SCALER_OPTIONS), the state dict's keys
// and their order, what load_state_dict accepts and how it judges each value. Adding an option
// is a field and a row here, its effect in scale_policy.cpp, and the two signatures
// (python/ampkit/grad_scaler.py, rpkg/R/grad_scaler.R).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "ampkit/scaler_rules.h"

namespace ampkit {

// What update() does when a back-off is due while the scale already equals min_scale.
enum class OnMinScale { Raise, Warn, Ignore };

// The options. At their defaults the scaler is torch.amp.GradScaler, bit for bit.
struct ScalerSettings {
  double init_scale = 65536.0;
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  int64_t growth_interval = 2000;
  bool enabled = true;
  std::optional<double> min_scale;  // unset: no floor
  std::optional<double> max_scale;  // unset: no ceiling
  int64_t hysteresis = 1;           // overflows in a row before a back-off
  bool consecutive_hysteresis = false;
  // Clean steps added before the first growth after an overflow or the start: the growth
  // tracker restarts at -growth_delay there (DeepSpeed's schedule is growth_delay = 1).
  int64_t growth_delay = 0;
  OnMinScale on_min_scale = OnMinScale::Raise;
  bool track_overflow = false;

  // torch.amp's rule (no floor, ceiling, hysteresis or delay): update() runs its kernel.
  bool is_torch_amp_rule() const {
    return !min_scale && !max_scale && hysteresis == 1 && !consecutive_hysteresis &&
           growth_delay == 0;
  }
};

// What update() changes: the scale, its trackers and the step counters.
struct ScalerCounters {
  double scale = 65536.0;
  int64_t growth_tracker = 0;
  int64_t hysteresis_left = 1;
  int64_t steps = 0;
  int64_t skipped_steps = 0;
  int64_t consecutive_skipped_steps = 0;
  bool collapse_warned = false;  // on_min_scale "warn" has warned for the current run

  // A fresh start under `settings`: the state a new scaler, or a torch.amp checkpoint, begins in.
  static ScalerCounters fresh(const ScalerSettings& settings) {
    ScalerCounters c;
    c.scale = settings.init_scale;
    c.growth_tracker = -settings.growth_delay;
    c.hysteresis_left = settings.hysteresis;
    return c;
  }
};

struct ScalerState {
  ScalerSettings settings;
  ScalerCounters counters;
};

// A value of a kind no row takes (a tensor, a list): it carries its type's name, so that the
// row's message says what was given ("`enabled` must be True or False, got Tensor.").
struct OtherKind {
  std::string name;
};

// A value at the border: None, a flag, a whole number, a number, a text or another kind. The
// languages map theirs to these (Python: None/bool/int/float/str; R: NULL/logical/numeric/
// character).
using SettingValue = std::variant<std::monostate, bool, int64_t, double, std::string, OtherKind>;

// Where an entry stands in a state dict: not at all, as one of ampkit's keys (optional when
// loading, so that torch.amp's dicts load), or as one of torch.amp's five (required).
enum class Key { None, Ampkit, TorchAmp };

// One row of the table.
struct ScalerEntry {
  std::string name;
  bool option;  // a constructor argument (Python keyword, R argument); else a counter
  Key key;
  std::function<SettingValue(const ScalerState&)> get;
  // Converts the value (ArgumentTypeError naming the entry), judges it by its own rule
  // (ArgumentError), then stores it. Rules between entries are validate_state()'s.
  std::function<void(ScalerState&, const SettingValue&)> set;
};

// The kinds of rows: options (a number judged by `check`, a number or None, a whole number >=
// `minimum`, a flag, the on_min_scale choice) and counters (the scale, whole numbers, a flag).
namespace entry {
using Check = void (*)(double, const char*);
ScalerEntry number(const char* name, double ScalerSettings::*field, Check check, Key key);
ScalerEntry optional_number(const char* name, std::optional<double> ScalerSettings::*field,
                            Check check);
ScalerEntry count(const char* name, int64_t ScalerSettings::*field, double minimum,
                  Key key = Key::Ampkit);
ScalerEntry flag(const char* name, bool ScalerSettings::*field, Key key = Key::Ampkit);
ScalerEntry on_min_scale();
ScalerEntry scale();
ScalerEntry growth_tracker();  // torch.amp's "_growth_tracker": >= -growth_delay
ScalerEntry counter(const char* name, int64_t ScalerCounters::*field, double minimum,
                    Key key = Key::Ampkit);
ScalerEntry counter_flag(const char* name, bool ScalerCounters::*field);
}  // namespace entry

// The table, in signature order for the options and in state-dict order for the keys
// (torch.amp's five first, in torch.amp's order).
inline const std::vector<ScalerEntry>& scaler_table() {
  using S = ScalerSettings;
  using C = ScalerCounters;
  static const std::vector<ScalerEntry> table = {
      entry::number("init_scale", &S::init_scale, check_chosen_scale, Key::None),
      entry::scale(),
      entry::number("growth_factor", &S::growth_factor, check_growth_factor, Key::TorchAmp),
      entry::number("backoff_factor", &S::backoff_factor, check_backoff_factor, Key::TorchAmp),
      entry::count("growth_interval", &S::growth_interval, 1, Key::TorchAmp),
      entry::growth_tracker(),
      entry::flag("enabled", &S::enabled, Key::None),
      entry::optional_number("min_scale", &S::min_scale, check_chosen_scale),
      entry::optional_number("max_scale", &S::max_scale, check_chosen_scale),
      entry::count("hysteresis", &S::hysteresis, 1),
      entry::flag("consecutive_hysteresis", &S::consecutive_hysteresis),
      entry::count("growth_delay", &S::growth_delay, 0),
      entry::on_min_scale(),
      entry::flag("track_overflow", &S::track_overflow),
      // The hysteresis tracker goes below zero while overflows keep coming at the floor.
      entry::counter("_hysteresis_tracker", &C::hysteresis_left, -kMaxCount),
      entry::counter("_steps", &C::steps, 0),
      entry::counter("_skipped_steps", &C::skipped_steps, 0),
      entry::counter("_consecutive_skipped_steps", &C::consecutive_skipped_steps, 0),
      entry::counter_flag("_collapse_warned", &C::collapse_warned),
  };
  return table;
}

// Judges every option of `settings` by its own row (what the constructor and load_state_dict run
// on settings built in C++); the rules between entries are validate_state()'s.
void check_options(const ScalerSettings& settings);

// The options given by name (the constructor's keywords): each judged by its row, an unknown
// name refused, the others at their defaults. The rules between options are the constructor's
// (GradScaler checks the whole before it builds anything).
ScalerSettings settings_from_options(const std::map<std::string, SettingValue>& options);

// The options' names and default values, in signature order (what Python and R show).
std::vector<std::pair<std::string, SettingValue>> option_defaults();

std::string on_min_scale_name(OnMinScale value);

}  // namespace ampkit
