// The grad scaler: dynamic loss scaling, as torch.amp.GradScaler does it, bit for bit.
//
// clang-format off
//   scale(loss)    loss * S                   (S, float32 0-d, created lazily on the loss's device)
//   unscale_(opt)  g *= 1/S for every gradient; found_inf = any(!isfinite(g))
//   step(opt)      unscale_ if not yet done; run opt.step() unless found_inf      (1 host read)
//   update()       the update rule of scale_policy.h (at its defaults torch.amp's:
//                  found_inf ? S *= backoff : every growth_interval clean steps S *= growth)
// clang-format on
//
// Per optimizer the scaler walks READY -> UNSCALED -> STEPPED; update() returns every optimizer to
// READY and keeps that iteration's outcome (which optimizer skipped, which parameters overflowed)
// until the next one. Numerics go only through ATen's AMP kernels (unscale.h, scale_policy.h),
// which is what makes the results equal to torch.amp's. Each optimizer's parameter list lives in
// C++ (param_list.h) and gradients are read there, so the work a binding does per step does not
// grow with the number of parameters. The options and counters are scaler_settings.h's table,
// the rules for the numbers scaler_rules.h's, the checkpoint format scaler_checkpoint.h's; this
// file is the state machine.
//
// Thread contract: a GradScaler is not synchronised. From Python and R every call holds the GIL,
// so calls on one scaler never overlap; C++ callers must not call one scaler from two threads at
// once.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "ampkit/errors.h"
#include "ampkit/overflow_report.h"
#include "ampkit/param_list.h"
#include "ampkit/scale_policy.h"
#include "ampkit/scaler_settings.h"
#include "ampkit/unscale.h"

namespace ampkit {

enum class OptimizerStage { Ready, Unscaled, Stepped };

// What a fused optimizer (Adam/AdamW/SGD with fused=True) reads instead of a host-side skip:
// it unscales with grad_scale (when set) and skips itself when found_inf is non-zero.
struct FusedStepArgs {
  std::optional<at::Tensor> grad_scale;
  at::Tensor found_inf;
};

// stats(): the counters and the scale, read together.
struct ScalerStats {
  int64_t steps;                      // iterations whose update() used inf checks
  int64_t skipped_steps;              // ... of which had an inf/NaN gradient
  int64_t consecutive_skipped_steps;  // the current run of such iterations
  double scale;
};

// Raised by update() when a back-off is due while the scale already equals min_scale
// (on_min_scale "raise"). The update has been applied; the scaler stays usable.
class ScaleCollapseError : public StateError {
 public:
  using StateError::StateError;
};

class GradScaler {
 public:
  // device: a device type ("cuda", "cpu"). "cuda" without a CUDA device gives a disabled scaler
  // and a warning in warning(). Every option is judged by its row of the table first.
  // allow_fp16_grads: accept float16 gradients in unscale_, as torch's ShardedGradScaler does
  // (FSDP's mixed precision may keep them); torch.amp.GradScaler refuses them.
  GradScaler(const std::string& device, const ScalerSettings& settings,
             bool allow_fp16_grads = false);

  bool is_enabled() const { return settings_.enabled; }
  const std::string& device() const { return device_; }
  const std::string& warning() const { return warning_; }

  at::Tensor scale(const at::Tensor& outputs);
  void unscale_(const ParamList& params);
  // Everything torch.amp's step does before calling optimizer.step(): check the stage, unscale_
  // if not yet done, then read found_inf to the host once. True when the optimizer may step.
  // On a skip with track_overflow, also records which parameters overflowed.
  bool may_step(const ParamList& params);
  // The sync-free path for optimizers with _step_supports_amp_scaling: what to hand the
  // optimizer instead of a host-side decision. existing_grad_scale is the optimizer's own
  // grad_scale attribute, if it has one. With track_overflow it reads found_inf once.
  FusedStepArgs fused_step_args(const ParamList& params,
                                const std::optional<at::Tensor>& existing_grad_scale);
  // What a step of any kind checks first: the scale exists, and `params` has not stepped since
  // the last update() (torch.amp's legacy optimizers, given the scaler, step themselves).
  void check_can_step(const ParamList& params) const;
  // Called after optimizer.step() returned (or was skipped); an optimizer that raised stays put.
  void mark_stepped(const ParamList& params);

  // Each returns a warning to emit (on_min_scale "warn", once per run of collapses), or "".
  // ScaleCollapseError on a collapse with on_min_scale "raise".
  std::string update();
  void update(double new_scale);
  void update(const at::Tensor& new_scale);

  // Whether the most recent step() of `params` (or, without it, of any optimizer in the most
  // recent iteration) was skipped; false when none was recorded. Free for optimizers stepped
  // through may_step (the decision was read); one host read for a fused optimizer's.
  bool step_was_skipped(const ParamList* params);
  // The counters and the scale, in one read.
  ScalerStats stats();
  // The parameters that overflowed in the most recent iteration, in order. StateError without
  // track_overflow (an empty report would read as "nothing overflowed").
  std::vector<OverflowEntry> overflow_report() const;

  // Both read the device to the host (get_scale once, state_dict once) when the scale exists.
  double get_scale();
  ScalerState state_dict();
  // Validates the whole state first: an invalid state changes nothing.
  void load_state_dict(const ScalerState& state);

  const ScalerSettings& settings() const { return settings_; }
  double growth_factor() const { return settings_.growth_factor; }
  double backoff_factor() const { return settings_.backoff_factor; }
  int64_t growth_interval() const { return settings_.growth_interval; }
  void set_growth_factor(double value);
  void set_backoff_factor(double value);
  void set_growth_interval(double value);
  // The scale tensor itself (undefined before the first scale()): what torch.amp's `_scale` and
  // R torch's `.scale` expose. Read-only by contract.
  const at::Tensor& scale_tensor() const { return device_state_.scale; }
  const at::Tensor& growth_tracker_tensor() const { return device_state_.growth_tracker; }

  // torch.amp's private surface, which public code calls (see python/ampkit/grad_scaler.py):
  // the scale and tracker the device state is created with (_init_scale, _init_growth_tracker),
  // creating it on a device (_lazy_init_scale_growth_tracker), the inf check without unscaling
  // (_check_inf_per_device, recorded for the optimizer as a fused step's would be) and what was
  // recorded (_found_inf_per_device).
  double init_scale() const { return pending_.scale; }
  int64_t init_growth_tracker() const { return pending_.growth_tracker; }
  void set_init_growth_tracker(double value);
  void init_on(const c10::Device& device);
  PerDevice check_inf(const ParamList& params);
  PerDevice found_inf_per_device(const ParamList& params) const;

  // True between the first unscale_/step of an iteration and update(): the state that must not be
  // pickled or checkpointed.
  bool has_optimizer_states() const { return !states_.empty(); }
  std::optional<OptimizerStage> stage(const ParamList& params) const;
  // Host reads done so far (the .item() calls), for tests of the one-sync-per-step contract.
  int64_t host_reads() const { return host_reads_; }
  // How the found_inf tensors of one unscale are agreed on before anything reads them: called
  // with them (one per device, float32) right after each unscale, it may change them in place.
  // A sharded scaler all-reduces them over its process group, so that every rank takes the same
  // skip decision and the same scale; the state machine is otherwise the same.
  using FoundInfAgreement = std::function<void(const std::vector<at::Tensor>&)>;
  void set_found_inf_agreement(FoundInfAgreement agree) { agree_ = std::move(agree); }

  // Tests only: run a CPU scaler's policy update through the accelerator path (ATen ops).
  void use_tensor_ops_for_policy(bool value) { tensor_ops_ = value; }

 private:
  struct OptimizerState {
    uint64_t params_id;
    OptimizerStage stage = OptimizerStage::Ready;
    // One found_inf per device the gradients were on; empty until unscaled.
    PerDevice found_inf_per_device;
    std::optional<bool> skipped;          // known on the host once may_step read it
    std::vector<OverflowEntry> overflow;  // track_overflow, on a skip
  };

  void check_initialised(const char* function) const;
  void lazy_init(const c10::Device& device);
  OptimizerState& state_for(const ParamList& params);
  const OptimizerState* find_state(const ParamList& params) const;
  // unscale_ on a state already looked up (step() reuses the lookup).
  void unscale_state(const ParamList& params, OptimizerState& state);
  at::Tensor found_inf(const OptimizerState& state) const;
  double read_to_host(const at::Tensor& tensor);
  // The optimizers of the most recent iteration that stepped: this one's, else the last one's.
  std::vector<OptimizerState*> recent_steps();
  bool skipped(OptimizerState& state);
  std::string handle_collapse(const Collapse& collapse, bool overflow_possible);
  void finish_iteration();
  // ArgumentError naming `new_scale` outside [min_scale, max_scale] (update(new_scale): a CUDA
  // tensor is not read, so not checked).
  void check_within_bounds(double new_scale) const;
  // Takes `state` as the scaler's settings and state (the constructor's and load_state_dict's).
  void adopt(const ScalerState& state);
  // unscale_grads, then the agreement on found_inf.
  PerDevice unscale_and_agree(const ParamList& params, const at::Tensor& inv_scale,
                              bool allow_fp16);

  std::string device_;
  c10::DeviceType device_type_;
  std::string warning_;
  ScalerSettings settings_;  // settings_.enabled is false too for "cuda" without CUDA
  // The device state, undefined until the first scale(); until then `pending_` holds what it
  // will be created with (the constructor's values, or a loaded checkpoint's). Its
  // collapse_warned is the host's flag at all times: a collapse is reported once per run.
  DeviceState device_state_;
  ScalerCounters pending_;
  std::vector<OptimizerState> states_;       // this iteration, insertion order like torch.amp's
  std::vector<OptimizerState> last_states_;  // the previous iteration's, kept for its outcome
  bool allow_fp16_grads_ = false;
  FoundInfAgreement agree_;
  bool tensor_ops_ = false;
  int64_t host_reads_ = 0;
};

}  // namespace ampkit
