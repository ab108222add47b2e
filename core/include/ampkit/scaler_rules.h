// The rules for the grad scaler's numbers: the one place that says what a valid init_scale,
// growth_factor, backoff_factor, count or scale is, and the rules between them. The table of
// options (scaler_settings.h) names, for each, the rule here that judges it. Python and R hand
// numbers over as doubles and these functions judge them, so the rule and its message exist once.
//
// Every check throws ArgumentError naming `name` (the argument as the caller spelt it:
// "growth_factor", "new_factor", "new_scale") and the rule, with the value received.
#pragma once

namespace ampkit {

// The largest count: trackers and counters are int32 on the device, as torch.amp's tracker is.
inline constexpr double kMaxCount = 2147483647.0;

struct ScalerState;  // scaler_settings.h

// A scale the user chooses (init_scale, new_scale): finite, > 0 and representable in float32.
void check_chosen_scale(double value, const char* name);
// A scale read from a checkpoint: anything the update rule can reach, 0 and inf included.
void check_reachable_scale(double value, const char* name);
// growth_factor: finite and > 1.
void check_growth_factor(double value, const char* name);
// backoff_factor: in (0, 1).
void check_backoff_factor(double value, const char* name);
// growth_interval, hysteresis, trackers and counters: whole numbers >= minimum an int32 holds.
void check_count(double value, const char* name, double minimum);

// The rules between entries of a whole state (the constructor's, or a loaded one): max_scale >=
// min_scale; the scale within [min_scale, max_scale]; the hysteresis tracker <= hysteresis; the
// growth tracker >= -growth_delay.
// `scale_name` names the scale in the message ("init_scale", "scale").
void validate_state(const ScalerState& state, const char* scale_name);

}  // namespace ampkit
