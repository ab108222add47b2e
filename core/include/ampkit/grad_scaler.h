// The grad scaler: dynamic loss scaling, as torch.amp.GradScaler does it, bit for bit.
//
//   scale(loss)      loss * S                      (S, float32 0-d, created lazily on loss's device)
//   unscale_(opt)    g *= 1/S for every gradient;  found_inf = any(!isfinite(g))
//   step(opt)        unscale_ if not yet done; run opt.step() unless found_inf      (1 host read)
//   update()         found_inf ? (S *= backoff, tracker = 0)
//                              : (tracker += 1; if tracker == growth_interval: S *= growth, tracker = 0)
//
// Per optimizer the scaler walks READY -> UNSCALED -> STEPPED; update() returns every optimizer to
// READY. Numerics go only through ATen's AMP kernels (_amp_foreach_non_finite_check_and_unscale_,
// one call per device and dtype group; _amp_update_scale_), which is what makes the results equal
// to torch.amp's. Each optimizer's parameter list lives here (ParamList) and gradients are read in
// C++, so the work a binding does per step does not grow with the number of parameters.
//
// Thread contract: a GradScaler is not synchronised. From Python and R every call holds the GIL,
// so calls on one scaler never overlap; C++ callers must not call one scaler from two threads at
// once.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace ampkit {

struct GradScalerOptions {
  double init_scale = 65536.0;
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  double growth_interval = 2000;  // a double so that R's numbers and 2000.0 are judged, not cast
  bool enabled = true;
};

// torch.amp.GradScaler.state_dict(), key for key: scale, growth_factor, backoff_factor,
// growth_interval, _growth_tracker. The two counts are doubles holding whole numbers, so that a
// loaded 1.5 is rejected by the rule rather than truncated on the way in.
struct ScalerState {
  double scale;
  double growth_factor;
  double backoff_factor;
  double growth_interval;
  double growth_tracker;
};

// Throws ArgumentError naming the first argument that breaks its rule.
void validate_options(const GradScalerOptions& options);
void validate_state(const ScalerState& state);

enum class OptimizerStage { Ready, Unscaled, Stepped };

// One optimizer's parameters, flattened over its param_groups. The binding builds one when it
// first sees an optimizer and resets it in place when the optimizer's param_groups change (the id,
// which keys the optimizer's stage, stays). Gradients are read from the parameters at each call,
// so a new .grad tensor is always seen.
class ParamList {
 public:
  explicit ParamList(std::vector<at::Tensor> params);
  void reset(std::vector<at::Tensor> params);
  const std::vector<at::Tensor>& params() const { return params_; }
  uint64_t id() const { return id_; }
  size_t size() const { return params_.size(); }

 private:
  std::vector<at::Tensor> params_;
  uint64_t id_;  // unique for the process's lifetime: keys the per-optimizer stage
};

// What a fused optimizer (Adam/AdamW/SGD with fused=True) reads instead of a host-side skip:
// it unscales with grad_scale (when set) and skips itself when found_inf is non-zero.
struct FusedStepArgs {
  std::optional<at::Tensor> grad_scale;
  at::Tensor found_inf;
};

class GradScaler {
 public:
  // device: a device type ("cuda", "cpu"). "cuda" without a CUDA device gives a disabled scaler
  // and a warning in warning().
  GradScaler(const std::string& device, const GradScalerOptions& options);

  bool is_enabled() const { return enabled_; }
  const std::string& device() const { return device_; }
  const std::string& warning() const { return warning_; }

  at::Tensor scale(const at::Tensor& outputs);
  void unscale_(const ParamList& optimizer);
  // Everything torch.amp's step does before calling optimizer.step(): check the stage, unscale_
  // if not yet done, then read found_inf to the host once. True when the optimizer must step.
  bool prepare_step(const ParamList& optimizer);
  // The sync-free path for optimizers with _step_supports_amp_scaling. existing_grad_scale is the
  // optimizer's own grad_scale attribute, if it has one.
  FusedStepArgs prepare_fused_step(const ParamList& optimizer,
                                   const std::optional<at::Tensor>& existing_grad_scale);
  // Called after optimizer.step() returned (or was skipped); an optimizer that raised stays put.
  void mark_stepped(const ParamList& optimizer);

  void update();
  void update(double new_scale);
  void update(const at::Tensor& new_scale);

  // Both read the device to the host (get_scale once, state_dict twice) when the scale exists.
  double get_scale();
  ScalerState state_dict();
  // Validates the whole state first: an invalid state changes nothing.
  void load_state_dict(const ScalerState& state);

  double growth_factor() const { return growth_factor_; }
  double backoff_factor() const { return backoff_factor_; }
  int64_t growth_interval() const { return growth_interval_; }
  void set_growth_factor(double value);
  void set_backoff_factor(double value);
  void set_growth_interval(double value);

  // True between the first unscale_/step of an iteration and update(): the state that must not be
  // pickled or checkpointed.
  bool has_optimizer_states() const { return !states_.empty(); }
  std::optional<OptimizerStage> stage(const ParamList& optimizer) const;
  // Host reads done so far (the .item() calls), for tests of the one-sync-per-step contract.
  int64_t host_reads() const { return host_reads_; }

 private:
  struct OptimizerState {
    uint64_t optimizer_id;
    OptimizerStage stage = OptimizerStage::Ready;
    // One found_inf per device the gradients were on; empty until unscaled.
    std::vector<std::pair<c10::Device, at::Tensor>> found_inf_per_device;
  };

  void check_initialised(const char* function) const;
  void lazy_init(const c10::Device& device);
  OptimizerState& state_for(const ParamList& optimizer);
  const OptimizerState* find_state(const ParamList& optimizer) const;
  void unscale_grads(const ParamList& optimizer, const at::Tensor& inv_scale, bool allow_fp16,
                     OptimizerState& state);
  at::Tensor combined_found_inf(const OptimizerState& state) const;
  at::Tensor inverse_scale() const;
  double read_to_host(const at::Tensor& tensor);

  std::string device_;
  c10::DeviceType device_type_;
  std::string warning_;
  bool enabled_;
  double init_scale_;
  int64_t init_growth_tracker_ = 0;
  double growth_factor_;
  double backoff_factor_;
  int64_t growth_interval_;
  at::Tensor scale_;           // undefined until the first scale()
  at::Tensor growth_tracker_;  // int32, created with scale_
  std::vector<OptimizerState> states_;  // insertion order, like torch.amp's dict
  int64_t host_reads_ = 0;
};

}  // namespace ampkit
