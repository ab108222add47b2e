#include "ampkit/overflow_report.h"

#include <ATen/ops/isinf.h>
#include <ATen/ops/isnan.h>
#include <ATen/ops/stack.h>
#include <c10/core/GradMode.h>

namespace ampkit {

std::vector<OverflowEntry> find_overflow(const ParamList& params) {
  at::NoGradGuard no_grad;
  std::vector<size_t> which;
  std::vector<at::Tensor> counts;  // inf, nan for each parameter with a gradient
  for (size_t i = 0; i < params.size(); ++i) {
    at::Tensor grad = params.params()[i].grad();
    if (!grad.defined()) continue;
    if (grad.is_sparse()) grad = grad._values();
    which.push_back(i);
    counts.push_back(at::isinf(grad).sum().to(at::kLong));
    counts.push_back(at::isnan(grad).sum().to(at::kLong));
  }
  std::vector<OverflowEntry> report;
  if (counts.empty()) return report;
  // One read for all parameters. Gradients on several devices are gathered on the first one.
  const c10::Device device = counts.front().device();
  for (auto& count : counts) count = count.to(device);
  const at::Tensor host = at::stack(counts).cpu();
  const int64_t* n = host.const_data_ptr<int64_t>();
  for (size_t k = 0; k < which.size(); ++k) {
    if (n[2 * k] + n[2 * k + 1] > 0)
      report.push_back({params.name(which[k]), n[2 * k], n[2 * k + 1]});
  }
  return report;
}

}  // namespace ampkit
