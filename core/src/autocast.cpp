#include "ampkit/autocast.h"

#include <ATen/Context.h>
#include <ATen/autocast_mode.h>
#include <c10/core/Device.h>
#include <c10/util/Exception.h>

#include "ampkit/errors.h"

namespace ampkit {
namespace {

std::string upper(std::string text) {
  for (auto& c : text) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return text;
}

// torch.autocast's message for a dtype the device cannot autocast to, word for word.
std::string unsupported_dtype_warning(c10::DeviceType device_type) {
  const std::string name = upper(c10::DeviceTypeName(device_type, /*lower_case=*/true));
  return "In " + name + " autocast, but the target dtype is not supported. Disabling autocast.\n" +
         name + " Autocast only supports dtypes of torch.bfloat16, torch.float16 currently.";
}

}  // namespace

c10::DeviceType parse_device_type(const std::string& device_type, const char* argument) {
  // "cuda:0" is accepted and means its type, as torch.autocast accepts it.
  try {
    return c10::Device(device_type).type();
  } catch (const c10::Error&) {
    throw DeviceStringError("Invalid device string: '" + device_type + "': `" + argument +
                            "` must be a device type such as 'cpu' or 'cuda', got '" + device_type +
                            "'.");
  }
}

c10::DeviceType autocast_device_type(const std::string& device_type) {
  const c10::DeviceType type = parse_device_type(device_type);
  if (!at::autocast::is_autocast_available(type)) {
    // A RuntimeError in torch too (torch.autocast("meta")): a DeviceStringError is both.
    throw DeviceStringError("`device_type`: User specified an unsupported autocast device_type '" +
                            device_type + "'.");
  }
  return type;
}

AutocastRequest resolve_autocast(const std::string& device_type,
                                 std::optional<at::ScalarType> dtype, bool enabled,
                                 std::optional<bool> cache_enabled) {
  const c10::DeviceType type = autocast_device_type(device_type);
  AutocastRequest request{type, dtype.value_or(at::autocast::get_autocast_dtype(type)), enabled,
                          cache_enabled.value_or(at::autocast::is_autocast_cache_enabled()), ""};
  if (!request.enabled) return request;
  if (type == c10::DeviceType::CUDA) {
    if (!at::globalContext().hasCUDA()) {
      request.warning = "CUDA is not available or torch_xla is imported. Disabling autocast.";
      request.enabled = false;
    }
  } else if (request.dtype != at::kBFloat16 && request.dtype != at::kHalf) {
    // torch.autocast still installs the requested dtype in the disabled region; so do we.
    request.warning = unsupported_dtype_warning(type);
    request.enabled = false;
  }
  return request;
}

AutocastState current_autocast_state(c10::DeviceType device_type) {
  return {at::autocast::is_autocast_enabled(device_type),
          at::autocast::get_autocast_dtype(device_type), at::autocast::is_autocast_cache_enabled()};
}

AutocastToken::AutocastToken(c10::DeviceType device_type, AutocastState previous, int depth)
    : device_type_(device_type),
      previous_(previous),
      depth_(depth),
      thread_(std::this_thread::get_id()),
      active_(true) {}

AutocastToken::AutocastToken(AutocastToken&& other) noexcept
    : device_type_(other.device_type_),
      previous_(other.previous_),
      depth_(other.depth_),
      thread_(other.thread_),
      active_(other.active_) {
  other.active_ = false;  // the moved-from token can no longer close the region
}

AutocastToken& AutocastToken::operator=(AutocastToken&& other) noexcept {
  device_type_ = other.device_type_;
  previous_ = other.previous_;
  depth_ = other.depth_;
  thread_ = other.thread_;
  active_ = other.active_;
  other.active_ = false;
  return *this;
}

AutocastToken enter_autocast(const AutocastRequest& request) {
  const AutocastState previous = current_autocast_state(request.device_type);
  at::autocast::set_autocast_enabled(request.device_type, request.enabled);
  at::autocast::set_autocast_dtype(request.device_type, request.dtype);
  const int depth = at::autocast::increment_nesting();
  at::autocast::set_autocast_cache_enabled(request.cache_enabled);
  return AutocastToken(request.device_type, previous, depth);
}

void exit_autocast(AutocastToken& token) {
  if (!token.active_) {
    throw StateError("This autocast region was already exited; each region is exited once.");
  }
  if (token.thread_ != std::this_thread::get_id()) {
    throw StateError(
        "An autocast region must be exited on the thread that entered it (autocast state is "
        "thread-local).");
  }
  // The nesting counter is shared with torch.autocast; a mismatch means an inner region is still
  // open, and restoring now would leave that region's state behind when it closes.
  const int depth = at::autocast::increment_nesting() - 1;
  at::autocast::decrement_nesting();
  if (depth != token.depth_) {
    throw StateError(
        "Autocast regions must be exited innermost first: this region was entered at "
        "depth " +
        std::to_string(token.depth_) + " but the current depth is " + std::to_string(depth) + ".");
  }
  if (at::autocast::decrement_nesting() == 0) {
    at::autocast::clear_cache();
  }
  at::autocast::set_autocast_enabled(token.device_type_, token.previous_.enabled);
  at::autocast::set_autocast_dtype(token.device_type_, token.previous_.dtype);
  at::autocast::set_autocast_cache_enabled(token.previous_.cache_enabled);
  token.active_ = false;
}

AutocastGuard::AutocastGuard(const AutocastRequest& request) : token_(enter_autocast(request)) {}

AutocastGuard::~AutocastGuard() {
  // A scope is always left innermost first on its own thread, so exit cannot fail here; catching
  // keeps the destructor noexcept should a caller break that by hand.
  try {
    if (token_.active()) exit_autocast(token_);
  } catch (...) {
  }
}

std::string AutocastRegion::device_type_name() const {
  return c10::DeviceTypeName(request_.device_type, /*lower_case=*/true);
}

void AutocastRegion::enter() { tokens_.push_back(enter_autocast(request_)); }

void AutocastRegion::exit() {
  if (tokens_.empty()) {
    throw StateError("This autocast region is not open: exit() without a matching enter().");
  }
  exit_autocast(tokens_.back());  // throws before the pop, so a refused exit changes nothing
  tokens_.pop_back();
}

bool is_autocast_enabled(const std::string& device_type) {
  return at::autocast::is_autocast_enabled(autocast_device_type(device_type));
}

at::ScalarType get_autocast_dtype(const std::string& device_type) {
  return at::autocast::get_autocast_dtype(autocast_device_type(device_type));
}

}  // namespace ampkit
