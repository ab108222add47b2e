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

// The regions ampkit has open on this thread, innermost last: what unwind_autocast restores for
// the inner regions it closes (each one's device type and the state it found). torch.autocast's
// own regions are not here; the nesting depth, which both count, covers them.
struct OpenEntry {
  uint64_t serial;
  c10::DeviceType device_type;
  AutocastState previous;
};
thread_local std::vector<OpenEntry> open_regions;
thread_local uint64_t next_serial = 0;

bool is_open(uint64_t serial) {
  for (auto it = open_regions.rbegin(); it != open_regions.rend(); ++it) {
    if (it->serial == serial) return true;
    if (it->serial < serial) return false;  // serials grow toward the top
  }
  return false;
}

void restore(c10::DeviceType device_type, const AutocastState& state) {
  at::autocast::set_autocast_enabled(device_type, state.enabled);
  at::autocast::set_autocast_dtype(device_type, state.dtype);
  at::autocast::set_autocast_cache_enabled(state.cache_enabled);
}

int current_depth() {
  const int depth = at::autocast::increment_nesting() - 1;
  at::autocast::decrement_nesting();
  return depth;
}

// What exit and unwind refuse alike: a token already exited, closed by an unwind, or of another
// thread.
void check_open_here(bool active, const std::thread::id& thread, uint64_t serial) {
  if (!active) {
    throw StateError("This autocast region was already exited; each region is exited once.");
  }
  if (thread != std::this_thread::get_id()) {
    throw StateError(
        "An autocast region must be exited on the thread that entered it (autocast state is "
        "thread-local).");
  }
  if (!is_open(serial)) {
    throw StateError(
        "This autocast region was closed with a region around it, which ended (by an error, or "
        "at the end of its scope) while this one was open; it cannot be exited again.");
  }
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
      serial_(next_serial++),
      active_(true) {}

AutocastToken::AutocastToken(AutocastToken&& other) noexcept
    : device_type_(other.device_type_),
      previous_(other.previous_),
      depth_(other.depth_),
      thread_(other.thread_),
      serial_(other.serial_),
      active_(other.active_) {
  other.active_ = false;  // the moved-from token can no longer close the region
}

AutocastToken& AutocastToken::operator=(AutocastToken&& other) noexcept {
  device_type_ = other.device_type_;
  previous_ = other.previous_;
  depth_ = other.depth_;
  thread_ = other.thread_;
  serial_ = other.serial_;
  active_ = other.active_;
  other.active_ = false;
  return *this;
}

bool AutocastToken::active() const {
  // Another thread's regions are not in this thread's list: only the flag can be read there.
  return active_ && (thread_ != std::this_thread::get_id() || is_open(serial_));
}

AutocastToken enter_autocast(const AutocastRequest& request) {
  const AutocastState previous = current_autocast_state(request.device_type);
  at::autocast::set_autocast_enabled(request.device_type, request.enabled);
  at::autocast::set_autocast_dtype(request.device_type, request.dtype);
  const int depth = at::autocast::increment_nesting();
  at::autocast::set_autocast_cache_enabled(request.cache_enabled);
  AutocastToken token(request.device_type, previous, depth);
  open_regions.push_back({token.serial_, request.device_type, previous});
  return token;
}

void exit_autocast(AutocastToken& token) {
  check_open_here(token.active_, token.thread_, token.serial_);
  // The nesting counter is shared with torch.autocast; a mismatch means an inner region is still
  // open, and restoring now would leave that region's state behind when it closes.
  const int depth = current_depth();
  if (depth != token.depth_) {
    throw StateError(
        "Autocast regions must be exited innermost first: this region was entered at "
        "depth " +
        std::to_string(token.depth_) + " but the current depth is " + std::to_string(depth) + ".");
  }
  if (at::autocast::decrement_nesting() == 0) {
    at::autocast::clear_cache();
  }
  restore(token.device_type_, token.previous_);
  open_regions.pop_back();  // the depth matched, so every ampkit region inside is closed
  token.active_ = false;
}

void unwind_autocast(AutocastToken& token) {
  check_open_here(token.active_, token.thread_, token.serial_);
  // The inner regions of ampkit still open, innermost first, each restoring what it found (they
  // may be of other device types); then this one.
  while (open_regions.back().serial != token.serial_) {
    restore(open_regions.back().device_type, open_regions.back().previous);
    open_regions.pop_back();
  }
  open_regions.pop_back();
  // torch.autocast's regions left open inside count in the depth too: closed here with ours.
  for (int depth = current_depth(); depth >= token.depth_ && depth > 0; --depth) {
    if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
  }
  restore(token.device_type_, token.previous_);
  token.active_ = false;
}

AutocastGuard::AutocastGuard(const AutocastRequest& request) : token_(enter_autocast(request)) {}

AutocastGuard::~AutocastGuard() {
  // A scope is left on its own thread; unwind_autocast also closes what the scope left open
  // inside it (by hand, or an error on its way). Catching keeps the destructor noexcept.
  try {
    if (token_.active()) unwind_autocast(token_);
  } catch (...) {
  }
}

std::string AutocastRegion::device_type_name() const {
  return c10::DeviceTypeName(request_.device_type, /*lower_case=*/true);
}

void AutocastRegion::enter() { tokens_.push_back(enter_autocast(request_)); }

void AutocastRegion::exit(bool unwinding) {
  if (tokens_.empty()) {
    throw StateError("This autocast region is not open: exit() without a matching enter().");
  }
  if (!tokens_.back().active() && tokens_.back().thread_ == std::this_thread::get_id()) {
    // Closed by an enclosing region's unwind: dropped, and refused in exit_autocast's words.
    AutocastToken closed = std::move(tokens_.back());
    tokens_.pop_back();
    exit_autocast(closed);
  }
  // Throws before the pop, so a refused exit changes nothing.
  if (unwinding) {
    unwind_autocast(tokens_.back());
  } else {
    exit_autocast(tokens_.back());
  }
  tokens_.pop_back();
}

bool is_autocast_enabled(const std::string& device_type) {
  return at::autocast::is_autocast_enabled(autocast_device_type(device_type));
}

at::ScalarType get_autocast_dtype(const std::string& device_type) {
  return at::autocast::get_autocast_dtype(autocast_device_type(device_type));
}

}  // namespace ampkit
