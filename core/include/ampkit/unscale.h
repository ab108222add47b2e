// Unscaling gradients: grouping them for ATen's kernel and computing 1/S.
//
// _amp_foreach_non_finite_check_and_unscale_ takes a list of tensors of one device and one dtype,
// so gradients are grouped by (device, dtype) and the kernel runs once per group, never once per
// parameter. Each device gets its own found_inf (the kernel writes it on the gradients' device);
// the scaler sums them where it needs one answer.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <utility>
#include <vector>

#include "ampkit/param_list.h"

namespace ampkit {

using PerDevice = std::vector<std::pair<c10::Device, at::Tensor>>;

// g *= inv_scale for every defined gradient of `params`, in place, and found_inf (float32, one per
// device the gradients are on, each 0 or 1) set when a gradient held inf or NaN. Every gradient is
// checked before the first kernel runs: a float16 gradient with allow_fp16 false raises
// ArgumentError and leaves all of them untouched. Returns an empty list when no gradient is
// defined.
// `found_inf`, when given, is the starting value (torch.amp's private _unscale_grads_ takes one):
// like torch.amp's replicator, each device records into a copy and the given tensor is never
// written. Otherwise a zero on inv_scale's device.
PerDevice unscale_grads(const ParamList& params, const at::Tensor& inv_scale, bool allow_fp16,
                        const at::Tensor& found_inf = {});

// 1/S rounded to float32, computed in double as torch.amp does.
at::Tensor inverse_scale(const at::Tensor& scale);

// The sum of per-device found_inf tensors, on `device`; undefined when `found` is empty.
at::Tensor sum_on(const PerDevice& found, const c10::Device& device);

}  // namespace ampkit
