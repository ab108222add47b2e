#include "ampkit/unscale.h"

#include <ATen/TensorOperators.h>
#include <ATen/ops/_amp_foreach_non_finite_check_and_unscale.h>
#include <ATen/ops/full.h>
#include <ATen/ops/zeros.h>
#include <c10/core/GradMode.h>
#include <c10/core/ScalarType.h>

#include <algorithm>

#include "ampkit/errors.h"

namespace ampkit {
namespace {

struct Group {
  c10::Device device;
  at::ScalarType dtype;
  std::vector<at::Tensor> grads;
};

// The gradient the kernel should see for `param`, or an undefined tensor when it has none.
at::Tensor grad_to_unscale(const at::Tensor& param, bool allow_fp16) {
  const at::Tensor& grad = param.grad();
  if (!grad.defined()) return {};
  if (!allow_fp16 && grad.scalar_type() == at::kHalf) {
    throw ArgumentError("Attempting to unscale FP16 gradients.");
  }
  if (!grad.is_sparse()) return grad;
  // An uncoalesced float16 sparse gradient can overflow when its duplicates are summed later;
  // torch.amp coalesces it first so that the inf check sees the summed values.
  at::Tensor sparse = grad;
  if (grad.scalar_type() == at::kHalf) {
    sparse = grad.coalesce();
    param.mutable_grad() = sparse;
  }
  return sparse._values();
}

std::vector<Group> group_grads(const ParamList& params, bool allow_fp16) {
  std::vector<Group> groups;
  for (const at::Tensor& param : params.params()) {
    at::Tensor grad = grad_to_unscale(param, allow_fp16);
    if (!grad.defined()) continue;
    auto group = std::find_if(groups.begin(), groups.end(), [&](const Group& g) {
      return g.device == grad.device() && g.dtype == grad.scalar_type();
    });
    if (group == groups.end()) {
      groups.push_back(Group{grad.device(), grad.scalar_type(), {}});
      group = groups.end() - 1;
    }
    group->grads.push_back(std::move(grad));
  }
  return groups;
}

// `tensor` on `device`: itself when already there, else a copy made once per call.
const at::Tensor& on_device(PerDevice& copies, const at::Tensor& tensor,
                            const c10::Device& device) {
  for (const auto& [where, copy] : copies) {
    if (where == device) return copy;
  }
  at::Tensor copy = tensor.device() == device
                        ? tensor
                        : tensor.to(at::TensorOptions().device(device), /*non_blocking=*/true,
                                    /*copy=*/true);
  copies.emplace_back(device, std::move(copy));
  return copies.back().second;
}

}  // namespace

PerDevice unscale_grads(const ParamList& params, const at::Tensor& inv_scale, bool allow_fp16,
                        const at::Tensor& given_found_inf) {
  at::NoGradGuard no_grad;
  std::vector<Group> groups = group_grads(params, allow_fp16);
  const at::Tensor found_inf =
      given_found_inf.defined()
          ? given_found_inf.clone()
          : at::zeros({}, at::TensorOptions().dtype(at::kFloat).device(inv_scale.device()));
  PerDevice found_per_device;
  PerDevice inv_per_device;
  for (auto& group : groups) {
    at::Tensor found = on_device(found_per_device, found_inf, group.device);
    at::_amp_foreach_non_finite_check_and_unscale_(
        group.grads, found, on_device(inv_per_device, inv_scale, group.device));
  }
  return found_per_device;
}

at::Tensor inverse_scale(const at::Tensor& scale) {
  // On the CPU the scale is plain memory: the same two IEEE operations (1.0 / S in double, then
  // rounded to float32) on the host cost one tensor op instead of three, with nothing to
  // synchronise. Elsewhere it stays on the device; MPS has no float64.
  if (scale.is_cpu()) {
    const double value = static_cast<double>(*scale.const_data_ptr<float>());
    return at::full({}, static_cast<float>(1.0 / value), scale.options());
  }
  if (scale.device().type() == c10::DeviceType::MPS) return scale.reciprocal();
  return scale.to(at::kDouble).reciprocal().to(at::kFloat);
}

at::Tensor sum_on(const PerDevice& found, const c10::Device& device) {
  at::Tensor total;
  for (const auto& [where, value] : found) {
    at::Tensor here = where == device ? value : value.to(device, /*non_blocking=*/true);
    total = total.defined() ? total + here : here;
  }
  return total;
}

}  // namespace ampkit
