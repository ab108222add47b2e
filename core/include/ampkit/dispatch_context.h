// The autocast state an operation was called in, read from inside a dispatch mode.
//
// The autocast audit (python/ampkit/audit.py) watches operations from a TorchDispatchMode. There,
// torch's thread-local state reads autocast as off (the Python key runs with every key above it
// excluded), so the audit learns the state from the Python call that led to the operation, in a
// TorchFunctionMode. Operations called from R (or any C++) reach the dispatch mode with no Python
// call around them: for those, this reads the state as it was when the outermost operation
// entered the dispatcher (the snapshot torch keeps for its Python key), i.e. the caller's state.
#pragma once

#include <c10/core/DeviceType.h>

#include <vector>

namespace ampkit {

// Which of `device_types` had autocast on when the operation being dispatched was called.
// Valid only inside a dispatch mode's handler (torch raises otherwise).
std::vector<c10::DeviceType> autocast_devices_at_dispatch_entry(
    const std::vector<c10::DeviceType>& device_types);

}  // namespace ampkit
