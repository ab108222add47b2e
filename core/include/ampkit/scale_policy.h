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
//
// hysteresis_left and the counters move by one affine map per outcome (overflow, clean, growth:
// counter_steps()), the same table on the host and, as a handful of vector ops, on a device.
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
// Each op launched on an accelerator costs the host microseconds, so the device path keeps them
// few: at torch.amp's settings an update is torch.amp's kernel plus five ops for the counters
// (it was 23, and cost a CUDA training step of the seed MLP 10% against torch.amp).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <optional>
#include <utility>

#include "ampkit/scaler_settings.h"

namespace ampkit {

// The scaler's device state: what an update changes.
struct DeviceState {
  at::Tensor scale;           // float32, 0-d
  at::Tensor growth_tracker;  // int32, 0-d (torch.amp's kernel moves it)
  at::Tensor counters;        // int64, {4}: the Counter entries below, in that order
  // How an update moves the counters, on their device (scale_policy.cpp's counter_maps), and
  // the settings (hysteresis, consecutive_hysteresis) it was made for: made once, not per update.
  at::Tensor counter_maps;
  std::pair<int64_t, bool> counter_maps_key{};
};

// The entries of DeviceState::counters.
enum Counter : int64_t { kHysteresisLeft = 0, kSteps, kSkipped, kConsecutive, kNumCounters };

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
