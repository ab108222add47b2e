// The rules for the grad scaler's numbers: the one place that says what a valid init_scale,
// growth_factor, backoff_factor, growth_interval, tracker or scale is. Python and R hand numbers
// over as doubles and these functions judge them, so the rule and its message exist once.
//
// Every check throws ArgumentError naming `name` (the argument as the caller spelt it:
// "growth_factor", "new_factor", "new_scale") and the rule, with the value received.
#pragma once

#include <optional>
#include <string>

namespace ampkit {

// What update() does when a gradient overflows while the scale already equals min_scale.
enum class OnMinScale { Raise, Warn, Ignore };

// The scale policy beyond torch.amp (Megatron-LM's and DeepSpeed's rule on torch.amp's tracker):
// a floor and a ceiling for the scale, and hysteresis (that many overflows before a backoff).
// At its defaults the policy is torch.amp's and update() runs torch.amp's kernel.
struct ScalePolicy {
  std::optional<double> min_scale;  // unset: no floor
  std::optional<double> max_scale;  // unset: no ceiling
  double hysteresis = 1;            // a double so that it is judged, not cast
  bool consecutive_hysteresis = false;
  OnMinScale on_min_scale = OnMinScale::Raise;

  bool is_default() const {
    return !min_scale && !max_scale && hysteresis == 1 && !consecutive_hysteresis;
  }
};

struct GradScalerOptions {
  double init_scale = 65536.0;
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  double growth_interval = 2000;  // a double so that R's numbers and 2000.0 are judged, not cast
  bool enabled = true;
  ScalePolicy policy;
  bool track_overflow = false;  // record which parameters overflowed on a skipped step
  // Accept float16 gradients in unscale_ (torch's ShardedGradScaler does: FSDP's mixed precision
  // may keep them); torch.amp.GradScaler refuses them.
  bool allow_fp16_grads = false;
};

// A scale the user chooses (init_scale, new_scale): finite, > 0 and representable in float32.
void check_chosen_scale(double value, const char* name);
// A scale read from a checkpoint: anything the update rule can reach, 0 and inf included.
void check_reachable_scale(double value, const char* name);
// growth_factor: finite and > 1.
void check_growth_factor(double value, const char* name);
// backoff_factor: in (0, 1).
void check_backoff_factor(double value, const char* name);
// growth_interval (minimum 1) and the growth tracker (minimum 0): whole numbers an int32 holds.
void check_count(double value, const char* name, double minimum);

// "raise" | "warn" | "ignore" -> OnMinScale; ArgumentError naming `name` otherwise.
OnMinScale parse_on_min_scale(const std::string& value, const char* name = "on_min_scale");
std::string on_min_scale_name(OnMinScale value);

// min_scale and max_scale: finite, > 0, float32; max_scale >= min_scale; hysteresis a whole
// number >= 1 within int32; `scale` (the initial or a loaded scale) within [min_scale, max_scale].
// `scale_name` names the scale in the message ("init_scale", "scale").
void validate_policy(const ScalePolicy& policy, double scale, const char* scale_name);

// Throws for the first option that breaks its rule.
void validate_options(const GradScalerOptions& options);

}  // namespace ampkit
