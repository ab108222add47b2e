#include "ampkit/param_list.h"

#include <atomic>
#include <string>

#include "ampkit/errors.h"

namespace ampkit {
namespace {
std::atomic<uint64_t> next_param_list_id{1};
}  // namespace

ParamList::ParamList(std::vector<at::Tensor> params, std::vector<std::string> names)
    : id_(next_param_list_id.fetch_add(1)) {
  reset(std::move(params), std::move(names));
}

std::string ParamList::name(size_t i) const {
  return names_.empty() ? "param" + std::to_string(i) : names_[i];
}

void ParamList::reset(std::vector<at::Tensor> params, std::vector<std::string> names) {
  if (!names.empty() && names.size() != params.size()) {
    throw ArgumentTypeError(
        "`names` must hold one name per parameter: " + std::to_string(params.size()) +
        " parameters, " + std::to_string(names.size()) + " names.");
  }
  for (size_t i = 0; i < params.size(); ++i) {
    if (!params[i].defined()) {
      throw ArgumentTypeError("`params` must hold tensors; element " + std::to_string(i) +
                              " is undefined.");
    }
  }
  params_ = std::move(params);
  names_ = std::move(names);
}

std::vector<std::string> param_names(const std::vector<std::vector<std::string>>& given,
                                     const std::vector<size_t>& sizes, int optimizer) {
  const std::string prefix = optimizer > 0 ? "optimizer" + std::to_string(optimizer) + "." : "";
  std::vector<std::string> names;
  for (size_t g = 0; g < sizes.size(); ++g) {
    const bool named = g < given.size() && given[g].size() == sizes[g];
    for (size_t i = 0; i < sizes[g]; ++i) {
      names.push_back(named ? prefix + given[g][i]
                            : prefix + "group" + std::to_string(g) + ".param" + std::to_string(i));
    }
  }
  return names;
}

}  // namespace ampkit
