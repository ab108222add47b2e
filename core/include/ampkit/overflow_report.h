// Which parameters overflowed: per parameter, how many gradient elements are inf and how many NaN.
// Run only on a skipped step (one more pass over the gradients and one read to the host), so that
// clean steps cost nothing.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ampkit/param_list.h"

namespace ampkit {

struct OverflowEntry {
  std::string name;
  int64_t inf;
  int64_t nan;
};

// The parameters of `params` whose gradient holds inf or NaN, in parameter order. Reads the counts
// to the host once (all parameters together).
std::vector<OverflowEntry> find_overflow(const ParamList& params);

}  // namespace ampkit
