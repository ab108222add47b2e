#include "ampkit/grad_scaler.h"

#include <ATen/Context.h>
#include <ATen/TensorOperators.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/full.h>
#include <ATen/ops/tensor.h>
#include <ATen/ops/zeros.h>
#include <c10/core/ScalarType.h>

#include <algorithm>

#include "ampkit/autocast.h"
#include "ampkit/errors.h"
#include "ampkit/scaler_checkpoint.h"

namespace ampkit {
namespace {

// DeviceState::counters' entries (scale_policy.h's Counter order) from the host's numbers.
std::vector<int64_t> counter_values(const ScalerCounters& c) {
  return {c.hysteresis_left, c.steps, c.skipped_steps, c.consecutive_skipped_steps};
}

}  // namespace

GradScaler::GradScaler(const std::string& device, const ScalerSettings& settings,
                       bool allow_fp16_grads)
    : device_(device),
      device_type_(parse_device_type(device, "device")),
      allow_fp16_grads_(allow_fp16_grads) {
  const ScalerState initial{settings, ScalerCounters::fresh(settings)};
  check_options(settings);
  validate_state(initial, "init_scale");
  adopt(initial);
  if (settings_.enabled && device_type_ == c10::DeviceType::CUDA &&
      !at::globalContext().hasCUDA()) {
    warning_ = "GradScaler is enabled for device 'cuda', but CUDA is not available.  Disabling.";
    settings_.enabled = false;
  }
}

void GradScaler::check_initialised(const char* function) const {
  if (!device_state_.scale.defined()) {
    throw StateError(std::string("Attempted ") + function +
                     " but _scale is None.  This may indicate your script did not use "
                     "scaler.scale(loss or outputs) earlier in the iteration.");
  }
}

void GradScaler::lazy_init(const c10::Device& device) {
  const auto on = at::TensorOptions().device(device);
  device_state_.scale = at::full({}, pending_.scale, on.dtype(at::kFloat));
  device_state_.growth_tracker = at::full({}, pending_.growth_tracker, on.dtype(at::kInt));
  device_state_.counters = at::tensor(counter_values(pending_), on.dtype(at::kLong));
}

GradScaler::OptimizerState& GradScaler::state_for(const ParamList& params) {
  for (auto& state : states_) {
    if (state.params_id == params.id()) return state;
  }
  states_.push_back(OptimizerState{params.id(), OptimizerStage::Ready, {}, std::nullopt, {}});
  return states_.back();
}

const GradScaler::OptimizerState* GradScaler::find_state(const ParamList& params) const {
  for (const auto& state : states_) {
    if (state.params_id == params.id()) return &state;
  }
  return nullptr;
}

std::optional<OptimizerStage> GradScaler::stage(const ParamList& params) const {
  const OptimizerState* state = find_state(params);
  if (state == nullptr) return std::nullopt;
  return state->stage;
}

double GradScaler::read_to_host(const at::Tensor& tensor) {
  ++host_reads_;
  return tensor.item().toDouble();
}

at::Tensor GradScaler::found_inf(const OptimizerState& state) const {
  return sum_on(state.found_inf_per_device, device_state_.scale.device());
}

at::Tensor GradScaler::scale(const at::Tensor& outputs) {
  if (!settings_.enabled) return outputs;
  const at::Tensor& scale = device_state_.scale;
  if (!scale.defined()) lazy_init(outputs.device());
  if (outputs.device() == scale.device()) return outputs * scale;
  return outputs * scale.to(at::TensorOptions().device(outputs.device()), /*non_blocking=*/true);
}

void GradScaler::unscale_state(const ParamList& params, OptimizerState& state) {
  if (state.stage == OptimizerStage::Unscaled) {
    throw StateError(
        "unscale_() has already been called on this optimizer since the last update().");
  }
  if (state.stage == OptimizerStage::Stepped) {
    throw StateError("unscale_() is being called after step().");
  }
  state.found_inf_per_device =
      unscale_and_agree(params, inverse_scale(device_state_.scale), allow_fp16_grads_);
  state.stage = OptimizerStage::Unscaled;
}

PerDevice GradScaler::unscale_and_agree(const ParamList& params, const at::Tensor& inv_scale,
                                        bool allow_fp16) {
  PerDevice found = unscale_grads(params, inv_scale, allow_fp16);
  if (agree_) {
    // A rank with no gradient still takes part: it contributes a zero on the scale's device.
    if (found.empty()) {
      const at::Tensor& scale = device_state_.scale;
      found.emplace_back(scale.device(), at::zeros({}, scale.options()));
    }
    std::vector<at::Tensor> tensors;
    for (const auto& [device, tensor] : found) tensors.push_back(tensor);
    agree_(tensors);
  }
  return found;
}

void GradScaler::unscale_(const ParamList& params) {
  if (!settings_.enabled) return;
  check_initialised("unscale_");
  unscale_state(params, state_for(params));
}

void GradScaler::set_init_growth_tracker(double value) {
  check_count(value, "_init_growth_tracker", 0);
  pending_.growth_tracker = static_cast<int64_t>(value);
}

void GradScaler::init_on(const c10::Device& device) {
  if (device_state_.scale.defined()) {
    throw StateError("_growth_tracker initialized before _scale");
  }
  lazy_init(device);
}

PerDevice GradScaler::check_inf(const ParamList& params) {
  check_initialised("_check_inf_per_device");
  OptimizerState& state = state_for(params);
  const at::Tensor one = at::full({}, 1.0, device_state_.scale.options());
  state.found_inf_per_device = unscale_and_agree(params, one, /*allow_fp16=*/true);
  return state.found_inf_per_device;
}

PerDevice GradScaler::found_inf_per_device(const ParamList& params) const {
  const OptimizerState* state = find_state(params);
  return state == nullptr ? PerDevice{} : state->found_inf_per_device;
}

void GradScaler::check_can_step(const ParamList& params) const {
  check_initialised("step");
  const OptimizerState* state = find_state(params);
  if (state != nullptr && state->stage == OptimizerStage::Stepped) {
    throw StateError("step() has already been called since the last update().");
  }
}

bool GradScaler::may_step(const ParamList& params) {
  if (!settings_.enabled) return true;
  check_can_step(params);
  OptimizerState& state = state_for(params);
  if (state.stage == OptimizerStage::Ready) unscale_state(params, state);
  if (state.found_inf_per_device.empty()) {
    throw StateError("No inf checks were recorded for this optimizer.");
  }
  // The only host read of a clean iteration: whether the optimizer may step.
  state.skipped = read_to_host(found_inf(state)) != 0.0;
  if (*state.skipped && settings_.track_overflow) {
    ++host_reads_;  // find_overflow reads all the counts at once
    state.overflow = find_overflow(params);
  }
  return !*state.skipped;
}

FusedStepArgs GradScaler::fused_step_args(const ParamList& params,
                                          const std::optional<at::Tensor>& existing_grad_scale) {
  if (!settings_.enabled) throw StateError("fused_step_args() called on a disabled GradScaler.");
  check_can_step(params);
  OptimizerState& state = state_for(params);
  FusedStepArgs args;
  if (state.stage == OptimizerStage::Unscaled) {
    // unscale_ saw no gradient (they came later): stepping would apply unchecked, scaled values.
    if (state.found_inf_per_device.empty()) {
      throw StateError("No inf checks were recorded for this optimizer.");
    }
    args.grad_scale = existing_grad_scale;  // gradients are already unscaled
  } else {
    // Only the inf check: the fused kernel divides by grad_scale itself (x * 1.0 is exact). The
    // stage stays Ready: the gradients are still scaled, so a step retried after the optimizer
    // raised must hand over grad_scale again.
    const at::Tensor& scale = device_state_.scale;
    const at::Tensor one = at::full({}, 1.0, scale.options());
    state.found_inf_per_device = unscale_and_agree(params, one, /*allow_fp16=*/true);
    // The fused kernels only read grad_scale, so the scale itself is handed over uncopied.
    args.grad_scale = existing_grad_scale ? scale * *existing_grad_scale : scale;
  }
  args.found_inf = state.found_inf_per_device.empty() ? at::zeros({}, device_state_.scale.options())
                                                      : found_inf(state);
  // The report must be taken before the step: the fused kernel itself decides to skip, so the
  // scaler reads the decision here (the one read track_overflow costs a fused optimizer).
  if (settings_.track_overflow && !state.found_inf_per_device.empty()) {
    state.skipped = read_to_host(args.found_inf) != 0.0;
    if (*state.skipped) {
      ++host_reads_;
      state.overflow = find_overflow(params);
    }
  }
  return args;
}

void GradScaler::mark_stepped(const ParamList& params) {
  if (!settings_.enabled) return;
  state_for(params).stage = OptimizerStage::Stepped;
}

std::string GradScaler::update() {
  if (!settings_.enabled) return "";
  check_initialised("update");
  at::Tensor any_found;
  bool overflow_possible = false;  // false only when every decision is known clean on the host
  for (const auto& state : states_) {
    if (state.found_inf_per_device.empty()) continue;
    at::Tensor found = found_inf(state);
    any_found = any_found.defined() ? any_found + found : found;
    overflow_possible = overflow_possible || state.skipped.value_or(true);
  }
  if (!any_found.defined()) {
    throw StateError("No inf checks were recorded prior to update.");
  }
  const Collapse collapse = apply_update(device_state_, any_found, settings_, tensor_ops_);
  finish_iteration();
  return handle_collapse(collapse, overflow_possible);
}

std::string GradScaler::handle_collapse(const Collapse& collapse, bool overflow_possible) {
  if (!settings_.min_scale || settings_.on_min_scale == OnMinScale::Ignore) return "";
  // On an accelerator the flag is read only when this iteration may have overflowed: clean
  // steps of ordinary optimizers add no host read.
  bool collapsed = false;
  if (collapse.on_host) {
    collapsed = *collapse.on_host;
  } else if (overflow_possible) {
    collapsed = read_to_host(collapse.on_device) != 0.0;
  }
  const bool first_of_run = collapsed && !pending_.collapse_warned;
  pending_.collapse_warned = collapsed;
  if (!collapsed) return "";
  const std::string message =
      "The loss scale collapsed: a gradient was inf/NaN while the scale was already at "
      "`min_scale` (" +
      format_number(*settings_.min_scale) +
      "), so backing off cannot help. Find the parameter that overflows (track_overflow=True, "
      "then overflow_report()), or lower `min_scale`.";
  if (settings_.on_min_scale == OnMinScale::Raise) throw ScaleCollapseError(message);
  return first_of_run ? message : "";
}

void GradScaler::finish_iteration() {
  last_states_ = std::move(states_);
  states_.clear();
}

std::vector<GradScaler::OptimizerState*> GradScaler::recent_steps() {
  std::vector<OptimizerState*> stepped;
  for (auto& state : states_) {
    if (state.stage == OptimizerStage::Stepped) stepped.push_back(&state);
  }
  if (!stepped.empty()) return stepped;
  for (auto& state : last_states_) {
    if (state.stage == OptimizerStage::Stepped) stepped.push_back(&state);
  }
  return stepped;
}

bool GradScaler::skipped(OptimizerState& state) {
  if (!state.skipped) {
    // A fused optimizer's decision stayed on the device: read it once, then remember it.
    state.skipped = !state.found_inf_per_device.empty() && read_to_host(found_inf(state)) != 0.0;
  }
  return *state.skipped;
}

bool GradScaler::step_was_skipped(const ParamList* params) {
  if (!settings_.enabled) return false;
  bool any = false;
  for (OptimizerState* state : recent_steps()) {
    if (params != nullptr && state->params_id != params->id()) continue;
    any = skipped(*state) || any;
  }
  return any;
}

ScalerStats GradScaler::stats() {
  if (!settings_.enabled) return {0, 0, 0, 1.0};
  const DeviceState& d = device_state_;
  if (!d.scale.defined()) {
    return {pending_.steps, pending_.skipped_steps, pending_.consecutive_skipped_steps,
            pending_.scale};
  }
  // One read: the counters and the scale together, as doubles (exact below 2^53).
  const at::Tensor host =
      at::cat({d.counters.to(at::kDouble), d.scale.to(at::kDouble).reshape({1})}).cpu();
  ++host_reads_;
  const double* v = host.const_data_ptr<double>();
  return {static_cast<int64_t>(v[kSteps]), static_cast<int64_t>(v[kSkipped]),
          static_cast<int64_t>(v[kConsecutive]), v[kNumCounters]};
}

std::vector<OverflowEntry> GradScaler::overflow_report() const {
  std::vector<OverflowEntry> report;
  if (!settings_.enabled) return report;
  if (!settings_.track_overflow) {
    throw StateError(
        "overflow_report() needs the scaler built with `track_overflow` on: without it, which "
        "parameters overflowed is not recorded (an empty report would read as none did).");
  }
  const auto& states =
      std::any_of(states_.begin(), states_.end(),
                  [](const OptimizerState& s) { return s.stage == OptimizerStage::Stepped; })
          ? states_
          : last_states_;
  for (const auto& state : states)
    report.insert(report.end(), state.overflow.begin(), state.overflow.end());
  return report;
}

void GradScaler::update(double new_scale) {
  if (!settings_.enabled) return;
  check_initialised("update");
  check_chosen_scale(new_scale, "new_scale");
  check_within_bounds(new_scale);
  device_state_.scale.fill_(new_scale);
  finish_iteration();
}

void GradScaler::update(const at::Tensor& new_scale) {
  if (!settings_.enabled) return;
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
    throw ArgumentError(rule + ", got dtype " +
                        std::string(c10::toString(new_scale.scalar_type())) +
                        " (a real floating dtype is needed).");
  }
  // A CPU value is checked (reading it is no device sync); a CUDA one is not, since that would
  // read the device to the host, which update() never does.
  if (new_scale.device().is_cpu()) {
    check_chosen_scale(new_scale.item().toDouble(), "new_scale");
    check_within_bounds(new_scale.item().toDouble());
  }
  device_state_.scale.copy_(new_scale.reshape({}));
  finish_iteration();
}

void GradScaler::check_within_bounds(double new_scale) const {
  // The scale a checkpoint of this scaler may hold: within [min_scale, max_scale].
  ScalerState state{settings_, pending_};
  state.counters.scale = new_scale;
  validate_state(state, "new_scale");
}

double GradScaler::get_scale() {
  if (!settings_.enabled) return 1.0;
  const at::Tensor& scale = device_state_.scale;
  return scale.defined() ? read_to_host(scale) : pending_.scale;
}

ScalerState GradScaler::state_dict() {
  ScalerState s{settings_, pending_};
  const DeviceState& d = device_state_;
  if (!d.scale.defined()) {
    if (!settings_.enabled) s.counters.scale = 1.0;
    return s;
  }
  // One read for the whole device state.
  const at::Tensor host =
      at::cat({d.scale.to(at::kDouble).reshape({1}), d.growth_tracker.to(at::kDouble).reshape({1}),
               d.counters.to(at::kDouble)})
          .cpu();
  ++host_reads_;
  const double* v = host.const_data_ptr<double>();
  const double* counters = v + 2;
  s.counters.scale = v[0];
  s.counters.growth_tracker = static_cast<int64_t>(v[1]);
  s.counters.hysteresis_left = static_cast<int64_t>(counters[kHysteresisLeft]);
  s.counters.steps = static_cast<int64_t>(counters[kSteps]);
  s.counters.skipped_steps = static_cast<int64_t>(counters[kSkipped]);
  s.counters.consecutive_skipped_steps = static_cast<int64_t>(counters[kConsecutive]);
  return s;
}

void GradScaler::load_state_dict(const ScalerState& state) {
  if (!settings_.enabled) return;  // torch.amp: a disabled scaler ignores what it is given
  check_options(state.settings);
  validate_state(state, "scale");
  const bool enabled = settings_.enabled;  // not part of a checkpoint
  adopt(state);
  settings_.enabled = enabled;
}

void GradScaler::adopt(const ScalerState& state) {
  settings_ = state.settings;
  pending_ = state.counters;
  // A scale that exists keeps its tensor (and device): filled in place, as torch.amp does.
  if (device_state_.scale.defined()) {
    DeviceState& d = device_state_;
    d.scale.fill_(pending_.scale);
    d.growth_tracker.fill_(pending_.growth_tracker);
    d.counters.copy_(at::tensor(counter_values(pending_), d.counters.options().device(c10::kCPU)));
  }
}

void GradScaler::set_growth_factor(double value) {
  check_growth_factor(value, "new_factor");
  settings_.growth_factor = value;
}

void GradScaler::set_backoff_factor(double value) {
  check_backoff_factor(value, "new_factor");
  settings_.backoff_factor = value;
}

void GradScaler::set_growth_interval(double value) {
  check_count(value, "new_interval", 1);
  settings_.growth_interval = static_cast<int64_t>(value);
}

}  // namespace ampkit
