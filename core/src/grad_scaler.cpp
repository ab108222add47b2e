#include "ampkit/grad_scaler.h"

#include <ATen/Context.h>
#include <ATen/TensorOperators.h>
#include <ATen/ops/_amp_foreach_non_finite_check_and_unscale.h>
#include <ATen/ops/_amp_update_scale.h>
#include <ATen/ops/full.h>
#include <ATen/ops/zeros.h>
#include <c10/core/GradMode.h>
#include <c10/core/ScalarType.h>

#include <atomic>
#include <cmath>
#include <limits>

#include "ampkit/autocast.h"
#include "ampkit/errors.h"

namespace ampkit {
namespace {

constexpr double kMaxInterval = std::numeric_limits<int32_t>::max();  // the tracker is int32
constexpr double kMaxFloat = std::numeric_limits<float>::max();         // the scale is float32

// A scale the user chooses (init_scale, new_scale): positive and representable in float32.
void require_finite_positive(double value, const char* name) {
  if (!(std::isfinite(value) && value > 0)) {
    throw ArgumentError(std::string("`") + name + "` must be a finite number > 0, got " +
                        format_number(value) + ".");
  }
  if (value > kMaxFloat) {
    throw ArgumentError(std::string("`") + name + "` must be at most " + format_number(kMaxFloat) +
                        " (the scale is a float32), got " + format_number(value) + ".");
  }
}

// A scale read from a checkpoint: anything the update rule can reach, which includes 0 (repeated
// backoff underflows) and inf (repeated growth overflows), so that torch.amp's states load.
void require_reachable_scale(double value, const char* name) {
  if (!(value >= 0 && (value <= kMaxFloat || std::isinf(value)))) {
    throw ArgumentError(std::string("`") + name + "` must be a number >= 0 that a float32 holds " +
                        "(inf included), got " + format_number(value) + ".");
  }
}

void require_growth_factor(double value, const char* name) {
  if (!(std::isfinite(value) && value > 1)) {
    throw ArgumentError(std::string("`") + name + "` must be a finite number > 1, got " +
                        format_number(value) + ".");
  }
}

void require_backoff_factor(double value, const char* name) {
  if (!(value > 0 && value < 1)) {
    throw ArgumentError(std::string("`") + name + "` must be in (0, 1), got " +
                        format_number(value) + ".");
  }
}

void require_whole(double value, const char* name, double minimum) {
  if (!(std::isfinite(value) && value >= minimum && value == std::floor(value))) {
    throw ArgumentError(std::string("`") + name + "` must be a whole number >= " +
                        format_number(minimum) + ", got " + format_number(value) + ".");
  }
  if (value > kMaxInterval) {
    throw ArgumentError(std::string("`") + name + "` must be at most 2147483647 (the growth " +
                        "tracker is int32), got " + format_number(value) + ".");
  }
}

// The tensor `master` on `device`: itself when already there, else a copy made once per call.
const at::Tensor& on_device(std::vector<std::pair<c10::Device, at::Tensor>>& replicas,
                            const at::Tensor& master, const c10::Device& device) {
  for (const auto& [where, tensor] : replicas) {
    if (where == device) return tensor;
  }
  at::Tensor replica = master.device() == device
                           ? master
                           : master.to(at::TensorOptions().device(device), /*non_blocking=*/true,
                                       /*copy=*/true);
  replicas.emplace_back(device, std::move(replica));
  return replicas.back().second;
}

std::atomic<uint64_t> next_param_list_id{1};

}  // namespace

void validate_options(const GradScalerOptions& options) {
  require_finite_positive(options.init_scale, "init_scale");
  require_growth_factor(options.growth_factor, "growth_factor");
  require_backoff_factor(options.backoff_factor, "backoff_factor");
  require_whole(options.growth_interval, "growth_interval", 1);
}

void validate_state(const ScalerState& state) {
  require_reachable_scale(state.scale, "scale");
  require_growth_factor(state.growth_factor, "growth_factor");
  require_backoff_factor(state.backoff_factor, "backoff_factor");
  require_whole(state.growth_interval, "growth_interval", 1);
  require_whole(state.growth_tracker, "_growth_tracker", 0);
}

ParamList::ParamList(std::vector<at::Tensor> params) : id_(next_param_list_id.fetch_add(1)) {
  reset(std::move(params));
}

void ParamList::reset(std::vector<at::Tensor> params) {
  for (size_t i = 0; i < params.size(); ++i) {
    if (!params[i].defined()) {
      throw ArgumentTypeError("`params` must hold tensors; element " + std::to_string(i) +
                              " is undefined.");
    }
  }
  params_ = std::move(params);
}

GradScaler::GradScaler(const std::string& device, const GradScalerOptions& options)
    : device_(device), device_type_(parse_device_type(device, "device")) {
  validate_options(options);
  enabled_ = options.enabled;
  init_scale_ = options.init_scale;
  growth_factor_ = options.growth_factor;
  backoff_factor_ = options.backoff_factor;
  growth_interval_ = static_cast<int64_t>(options.growth_interval);
  if (enabled_ && device_type_ == c10::DeviceType::CUDA && !at::globalContext().hasCUDA()) {
    warning_ = "GradScaler is enabled for device 'cuda', but CUDA is not available.  Disabling.";
    enabled_ = false;
  }
}

void GradScaler::check_initialised(const char* function) const {
  if (!scale_.defined()) {
    throw StateError(std::string("Attempted ") + function +
                     " but _scale is None.  This may indicate your script did not use "
                     "scaler.scale(loss or outputs) earlier in the iteration.");
  }
}

void GradScaler::lazy_init(const c10::Device& device) {
  scale_ = at::full({}, init_scale_, at::TensorOptions().dtype(at::kFloat).device(device));
  growth_tracker_ =
      at::full({}, init_growth_tracker_, at::TensorOptions().dtype(at::kInt).device(device));
}

GradScaler::OptimizerState& GradScaler::state_for(const ParamList& optimizer) {
  for (auto& state : states_) {
    if (state.optimizer_id == optimizer.id()) return state;
  }
  states_.push_back(OptimizerState{optimizer.id(), OptimizerStage::Ready, {}});
  return states_.back();
}

const GradScaler::OptimizerState* GradScaler::find_state(const ParamList& optimizer) const {
  for (const auto& state : states_) {
    if (state.optimizer_id == optimizer.id()) return &state;
  }
  return nullptr;
}

std::optional<OptimizerStage> GradScaler::stage(const ParamList& optimizer) const {
  const OptimizerState* state = find_state(optimizer);
  if (state == nullptr) return std::nullopt;
  return state->stage;
}

double GradScaler::read_to_host(const at::Tensor& tensor) {
  ++host_reads_;
  return tensor.item().toDouble();
}

at::Tensor GradScaler::scale(const at::Tensor& outputs) {
  if (!enabled_) return outputs;
  if (!scale_.defined()) lazy_init(outputs.device());
  if (outputs.device() == scale_.device()) return outputs * scale_;
  return outputs * scale_.to(at::TensorOptions().device(outputs.device()), /*non_blocking=*/true);
}

void GradScaler::unscale_grads(const ParamList& optimizer, const at::Tensor& inv_scale,
                               bool allow_fp16, OptimizerState& state) {
  struct Group {
    c10::Device device;
    at::ScalarType dtype;
    std::vector<at::Tensor> grads;
  };
  std::vector<Group> groups;
  at::NoGradGuard no_grad;
  // Collect and check every gradient before the first kernel runs, so that a rejected gradient
  // leaves all of them untouched.
  for (const at::Tensor& param : optimizer.params()) {
    const at::Tensor& grad = param.grad();
    if (!grad.defined()) continue;
    if (!allow_fp16 && grad.scalar_type() == at::kHalf) {
      throw ArgumentError("Attempting to unscale FP16 gradients.");
    }
    at::Tensor to_unscale = grad;
    if (grad.is_sparse()) {
      // An uncoalesced float16 sparse gradient can overflow when its duplicates are summed later;
      // torch.amp coalesces it first so the inf check sees the summed values.
      if (grad.scalar_type() == at::kHalf) {
        to_unscale = grad.coalesce();
        param.mutable_grad() = to_unscale;
      }
      to_unscale = to_unscale._values();
    }
    Group* group = nullptr;
    for (auto& candidate : groups) {
      if (candidate.device == to_unscale.device() && candidate.dtype == to_unscale.scalar_type()) {
        group = &candidate;
        break;
      }
    }
    if (group == nullptr) {
      groups.push_back(Group{to_unscale.device(), to_unscale.scalar_type(), {}});
      group = &groups.back();
    }
    group->grads.push_back(std::move(to_unscale));
  }

  const at::Tensor found_inf =
      at::zeros({}, at::TensorOptions().dtype(at::kFloat).device(scale_.device()));
  std::vector<std::pair<c10::Device, at::Tensor>> found_per_device;
  std::vector<std::pair<c10::Device, at::Tensor>> inv_per_device;
  for (auto& group : groups) {
    at::Tensor found = on_device(found_per_device, found_inf, group.device);
    at::_amp_foreach_non_finite_check_and_unscale_(
        group.grads, found, on_device(inv_per_device, inv_scale, group.device));
  }
  state.found_inf_per_device = std::move(found_per_device);
}

at::Tensor GradScaler::inverse_scale() const {
  // 1/S computed in double then rounded to float32, as torch.amp does. On the CPU the scale is
  // plain memory: the same two IEEE operations on the host cost one tensor op instead of three
  // (no device to synchronise with). Elsewhere it stays on the device; MPS has no float64.
  if (scale_.is_cpu()) {
    const double scale = static_cast<double>(*scale_.const_data_ptr<float>());
    return at::full({}, static_cast<float>(1.0 / scale), scale_.options());
  }
  if (device_type_ == c10::DeviceType::MPS) return scale_.reciprocal();
  return scale_.to(at::kDouble).reciprocal().to(at::kFloat);
}

void GradScaler::unscale_(const ParamList& optimizer) {
  if (!enabled_) return;
  check_initialised("unscale_");
  OptimizerState& state = state_for(optimizer);
  if (state.stage == OptimizerStage::Unscaled) {
    throw StateError(
        "unscale_() has already been called on this optimizer since the last update().");
  }
  if (state.stage == OptimizerStage::Stepped) {
    throw StateError("unscale_() is being called after step().");
  }
  unscale_grads(optimizer, inverse_scale(), /*allow_fp16=*/false, state);
  state.stage = OptimizerStage::Unscaled;
}

at::Tensor GradScaler::combined_found_inf(const OptimizerState& state) const {
  const c10::Device device = scale_.device();
  at::Tensor total;
  for (const auto& [where, found] : state.found_inf_per_device) {
    at::Tensor here = where == device ? found : found.to(device, /*non_blocking=*/true);
    total = total.defined() ? total + here : here;
  }
  return total;
}

bool GradScaler::prepare_step(const ParamList& optimizer) {
  if (!enabled_) return true;
  check_initialised("step");
  if (state_for(optimizer).stage == OptimizerStage::Stepped) {
    throw StateError("step() has already been called since the last update().");
  }
  if (state_for(optimizer).stage == OptimizerStage::Ready) unscale_(optimizer);
  const OptimizerState& state = state_for(optimizer);
  if (state.found_inf_per_device.empty()) {
    throw StateError("No inf checks were recorded for this optimizer.");
  }
  // The only host read of an iteration: whether the optimizer may step.
  return read_to_host(combined_found_inf(state)) == 0.0;
}

FusedStepArgs GradScaler::prepare_fused_step(
    const ParamList& optimizer, const std::optional<at::Tensor>& existing_grad_scale) {
  if (!enabled_) throw StateError("prepare_fused_step() called on a disabled GradScaler.");
  check_initialised("step");
  OptimizerState& state = state_for(optimizer);
  if (state.stage == OptimizerStage::Stepped) {
    throw StateError("step() has already been called since the last update().");
  }
  FusedStepArgs args;
  if (state.stage == OptimizerStage::Unscaled) {
    // unscale_ saw no gradient (they came later): stepping would apply unchecked, scaled values.
    if (state.found_inf_per_device.empty()) {
      throw StateError("No inf checks were recorded for this optimizer.");
    }
    args.grad_scale = existing_grad_scale;  // gradients are already unscaled
  } else {
    // Only the inf check: the fused kernel divides by grad_scale itself (x * 1.0 is exact).
    const at::Tensor one = at::full({}, 1.0, scale_.options());
    unscale_grads(optimizer, one, /*allow_fp16=*/true, state);
    // The fused kernels only read grad_scale, so the scale itself is handed over uncopied.
    args.grad_scale = existing_grad_scale ? scale_ * *existing_grad_scale : scale_;
  }
  args.found_inf = state.found_inf_per_device.empty() ? at::zeros({}, scale_.options())
                                                      : combined_found_inf(state);
  return args;
}

void GradScaler::mark_stepped(const ParamList& optimizer) {
  if (!enabled_) return;
  state_for(optimizer).stage = OptimizerStage::Stepped;
}

void GradScaler::update() {
  if (!enabled_) return;
  check_initialised("update");
  at::Tensor found_inf;
  for (const auto& state : states_) {
    if (state.found_inf_per_device.empty()) continue;
    at::Tensor found = combined_found_inf(state);
    found_inf = found_inf.defined() ? found_inf + found : found;
  }
  if (!found_inf.defined()) {
    throw StateError("No inf checks were recorded prior to update.");
  }
  at::_amp_update_scale_(scale_, growth_tracker_, found_inf, growth_factor_, backoff_factor_,
                         growth_interval_);
  states_.clear();
}

void GradScaler::update(double new_scale) {
  if (!enabled_) return;
  check_initialised("update");
  require_finite_positive(new_scale, "new_scale");
  scale_.fill_(new_scale);
  states_.clear();
}

void GradScaler::update(const at::Tensor& new_scale) {
  if (!enabled_) return;
  check_initialised("update");
  const std::string rule = "`new_scale` must be a float or a 1-element tensor on device type '" +
                           device_ + "' with requires_grad=False";
  if (new_scale.device().type() != device_type_) {
    throw ArgumentError(rule + ", got a tensor on '" + new_scale.device().str() + "'.");
  }
  if (new_scale.numel() != 1) {
    throw ArgumentError(rule + ", got " + std::to_string(new_scale.numel()) + " elements.");
  }
  if (new_scale.requires_grad()) {
    throw ArgumentError(rule + ", got requires_grad=True.");
  }
  if (!at::isFloatingType(new_scale.scalar_type())) {
    throw ArgumentError(rule + ", got dtype " + std::string(c10::toString(new_scale.scalar_type())) +
                        " (a real floating dtype is needed).");
  }
  // A CPU value is checked (reading it is no device sync); a CUDA one is not, since that would
  // read the device to the host, which update() never does.
  if (new_scale.device().is_cpu()) {
    require_finite_positive(new_scale.item().toDouble(), "new_scale");
  }
  scale_.copy_(new_scale.reshape({}));
  states_.clear();
}

double GradScaler::get_scale() {
  if (!enabled_) return 1.0;
  return scale_.defined() ? read_to_host(scale_) : init_scale_;
}

ScalerState GradScaler::state_dict() {
  const double scale = get_scale();
  const double tracker = growth_tracker_.defined() ? read_to_host(growth_tracker_)
                                                  : static_cast<double>(init_growth_tracker_);
  return {scale, growth_factor_, backoff_factor_, static_cast<double>(growth_interval_), tracker};
}

void GradScaler::load_state_dict(const ScalerState& state) {
  if (!enabled_) return;  // torch.amp: a disabled scaler ignores what it is given
  validate_state(state);
  init_scale_ = state.scale;
  if (scale_.defined()) scale_.fill_(state.scale);
  growth_factor_ = state.growth_factor;
  backoff_factor_ = state.backoff_factor;
  growth_interval_ = static_cast<int64_t>(state.growth_interval);
  init_growth_tracker_ = static_cast<int64_t>(state.growth_tracker);
  if (growth_tracker_.defined()) growth_tracker_.fill_(init_growth_tracker_);
}

void GradScaler::set_growth_factor(double value) {
  require_growth_factor(value, "new_factor");
  growth_factor_ = value;
}

void GradScaler::set_backoff_factor(double value) {
  require_backoff_factor(value, "new_factor");
  backoff_factor_ = value;
}

void GradScaler::set_growth_interval(double value) {
  require_whole(value, "new_interval", 1);
  growth_interval_ = static_cast<int64_t>(value);
}

}  // namespace ampkit
