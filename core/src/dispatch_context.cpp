#include "ampkit/dispatch_context.h"

#include <ATen/autocast_mode.h>
#include <ATen/core/PythonFallbackKernel.h>

namespace ampkit {

std::vector<c10::DeviceType> autocast_devices_at_dispatch_entry(
    const std::vector<c10::DeviceType>& device_types) {
  // Puts the thread's dispatch keys back as they were at the dispatcher's entry for this scope
  // (autocast's flag is whether its key is excluded there), then restores them.
  at::impl::RestorePythonTLSSnapshot entry;
  std::vector<c10::DeviceType> enabled;
  for (const auto type : device_types) {
    if (at::autocast::is_autocast_enabled(type)) enabled.push_back(type);
  }
  return enabled;
}

}  // namespace ampkit
