// One optimizer's parameters, flattened over its param_groups, kept in C++ so that a scaler reads
// gradients without a binding walking the parameters each step.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <vector>

namespace ampkit {

// The binding builds one when it first sees an optimizer and resets it in place when the
// optimizer's param_groups change (the id, which keys the optimizer's stage in a scaler, stays).
// Gradients are read from the parameters at each call, so a new .grad tensor is always seen.
// `names` (for overflow reports) is empty or one name per parameter; empty means "param{i}".
class ParamList {
 public:
  explicit ParamList(std::vector<at::Tensor> params, std::vector<std::string> names = {});
  // ArgumentTypeError, with nothing changed, when an element is undefined or the names do not
  // match the parameters.
  void reset(std::vector<at::Tensor> params, std::vector<std::string> names = {});
  const std::vector<at::Tensor>& params() const { return params_; }
  std::string name(size_t i) const;
  uint64_t id() const { return id_; }
  size_t size() const { return params_.size(); }

 private:
  std::vector<at::Tensor> params_;
  std::vector<std::string> names_;
  uint64_t id_;  // unique for the process's lifetime
};

// Names for an optimizer's parameters (overflow reports): a group's own names where it has one per
// parameter (an optimizer built from named parameters), else "group{g}.param{i}". The second
// optimizer a scaler meets, and each after it (`optimizer` counts from 0), prefixes its names with
// "optimizer{k}.", so that names stay unique across optimizers. `given[g]` empty: none given.
std::vector<std::string> param_names(const std::vector<std::vector<std::string>>& given,
                                     const std::vector<size_t>& sizes, int optimizer);

}  // namespace ampkit
