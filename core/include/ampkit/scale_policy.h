// The update rule of the scale and the step counters: the one place that says how an iteration's
// inf/NaN result changes the scaler's device state.
//
// On overflow:   tracker = -growth_delay; hysteresis_left -= 1;
//                if hysteresis_left <= 0 (a back-off is due): S = max(S * backoff_factor,
//                min_scale)
// On a clean step: tracker += 1; if consecutive_hysteresis: hysteresis_left = hysteresis
//                if tracker == growth_interval:
//                    tracker = 0; hysteresis_left = hysteresis
//                    S' = min(S * growth_factor, max_scale); S = S' if S' is finite
// Counters:      steps += 1; skipped += overflow; consecutive = overflow ? consecutive + 1 : 0
// Collapse:      a back-off due while S already equals min_scale (an overflow that hysteresis
//                absorbs is none: DeepSpeed's rule).
//
// Whose rule is whose: torch.amp.GradScaler is this rule at the defaults (no floor, ceiling,
// hysteresis or delay). Megatron-LM's DynamicGradScaler is it with min_scale and hysteresis
// (GradScaler.from_megatron); DeepSpeed's DynamicLossScaler with min_scale, hysteresis,
// consecutive_hysteresis and growth_delay = 1 (its first growth comes at the (W+1)-th clean step
// after an overflow or the start, then every W; GradScaler.from_deepspeed). Neither peer refuses
// to grow into inf, as this rule does: the schedules agree below float32's largest scale.
//
// S * factor is a double product rounded once to float32, as torch.amp's kernels compute it on
// the CPU and in CUDA. At torch.amp's settings (no floor, ceiling, hysteresis or delay) the
// scaler calls torch.amp's kernel for the scale and the tracker.
//
// The rule is written once, as a template over how numbers are held: HostOps for a scale that
// lives in CPU memory (plain arithmetic, no dispatch: a CPU scaler's update costs nanoseconds)
// and TensorOps for a scale on an accelerator (ATen ops queued on the device, no host read).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <optional>

#include "ampkit/scaler_settings.h"

namespace ampkit {

// The scaler's device state: what an update changes.
struct DeviceState {
  at::Tensor scale;            // float32, 0-d
  at::Tensor growth_tracker;   // int32, 0-d
  at::Tensor hysteresis_left;  // int32, 0-d
  at::Tensor counters;         // int64, {3}: steps, skipped steps, consecutive skipped steps
};

// Whether the update was a collapse: known on the host when the state is in CPU memory, else a
// 0-d bool tensor on the device that the caller reads only if it must.
struct Collapse {
  std::optional<bool> on_host;
  at::Tensor on_device;
};

// Applies one iteration's result (found_inf, a float32 0-d tensor on the state's device; > 0 is an
// overflow) to `state`, in place. `tensor_ops` forces the accelerator path on CPU tensors, so
// that tests hold both paths to the same reference.
Collapse apply_update(DeviceState& state, const at::Tensor& found_inf,
                      const ScalerSettings& settings, bool tensor_ops = false);

}  // namespace ampkit
