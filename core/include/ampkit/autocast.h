// The autocast guard: entering and leaving a region in which eligible ops run in a lower precision.
//
// It drives the same thread-local state that torch.autocast drives (ATen's per-device enabled flag
// and dtype, the cast-cache flag and the nesting depth), in the same order as torch.autocast 2.13:
//
//   enter:  save (enabled, dtype) of the device and the cache flag; set them; nesting += 1
//   exit:   nesting -= 1; if it reached 0, clear the cast cache; restore the three saved values
//
// so regions opened by ampkit and by torch.autocast nest in either order. Two ways to use it:
// AutocastGuard for a C++ scope, and enter_autocast/exit_autocast for callers that cannot use a
// scope (R's local_autocast, training-loop callbacks): enter returns a token, exit takes it back.
#pragma once

#include <c10/core/DeviceType.h>
#include <c10/core/ScalarType.h>

#include <cstdint>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace ampkit {

// The autocast state of one device type on the calling thread, plus the thread's cache flag.
struct AutocastState {
  bool enabled;
  at::ScalarType dtype;
  bool cache_enabled;
};

// What a region asks for, resolved as torch.autocast.__init__ resolves it. Resolution happens
// once (when a Python autocast object is built, when R calls set_autocast), entering many times.
struct AutocastRequest {
  c10::DeviceType device_type;
  at::ScalarType dtype;
  bool enabled;
  bool cache_enabled;
  // Non-empty when the request was turned into a disabled region ("... Disabling autocast.").
  // The caller emits it as a warning in its own language.
  std::string warning;
};

// "cpu" -> CPU, "cuda" -> CUDA ("cuda:0" -> CUDA). Throws ArgumentError naming `argument` for a
// string that names no device type.
c10::DeviceType parse_device_type(const std::string& device_type,
                                  const char* argument = "device_type");

// parse_device_type, then ArgumentError naming `device_type` when autocast has no kernels for it.
c10::DeviceType autocast_device_type(const std::string& device_type);

// dtype unset: the device's current autocast dtype. cache_enabled unset: the current cache flag.
// CUDA requested without a CUDA device, or CPU with a dtype other than bfloat16/float16: a
// disabled region and a warning. A device type autocast does not support: ArgumentError.
AutocastRequest resolve_autocast(const std::string& device_type,
                                 std::optional<at::ScalarType> dtype, bool enabled,
                                 std::optional<bool> cache_enabled);

AutocastState current_autocast_state(c10::DeviceType device_type);

// Proof that a region was entered, holding what exit restores. Move-only: a region is left once.
class AutocastToken {
 public:
  AutocastToken(AutocastToken&&) noexcept;
  AutocastToken& operator=(AutocastToken&&) noexcept;
  AutocastToken(const AutocastToken&) = delete;
  AutocastToken& operator=(const AutocastToken&) = delete;

  // Open: entered, and neither exited nor closed by an enclosing region's unwind_autocast.
  bool active() const;
  c10::DeviceType device_type() const { return device_type_; }
  const AutocastState& previous() const { return previous_; }
  int depth() const { return depth_; }

 private:
  AutocastToken(c10::DeviceType device_type, AutocastState previous, int depth);
  friend AutocastToken enter_autocast(const AutocastRequest&);
  friend void exit_autocast(AutocastToken&);
  friend void unwind_autocast(AutocastToken&);
  friend class AutocastRegion;

  c10::DeviceType device_type_;
  AutocastState previous_;
  int depth_;  // nesting depth inside this region; exit checks regions close innermost first
  std::thread::id thread_;
  uint64_t serial_;  // order of entry on its thread (its place in the thread's open regions)
  bool active_;
};

AutocastToken enter_autocast(const AutocastRequest& request);

// Restores the state saved in `token`. StateError, with nothing changed, if the token was already
// used, belongs to another thread, or is not the innermost open region.
void exit_autocast(AutocastToken& token);

// Leaves the region of `token` while an error propagates out of it: regions entered inside it
// and left open (an R set_autocast(), a torch.autocast().__enter__() without its exit) are closed
// with it, and the state this region found comes back, so an error never leaves autocast on. The
// inner regions' tokens can no longer close anything (exit_autocast refuses them, saying why).
// StateError only for a token already exited or of another thread.
void unwind_autocast(AutocastToken& token);

// RAII form: the previous state comes back when the scope ends, by return or by exception.
class AutocastGuard {
 public:
  explicit AutocastGuard(const AutocastRequest& request);
  ~AutocastGuard();
  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;

 private:
  AutocastToken token_;
};

// A request resolved once and entered any number of times, also re-entrantly: each enter pushes a
// token, each exit pops one. This is what a Python `with` object (or an R context) holds.
class AutocastRegion {
 public:
  explicit AutocastRegion(AutocastRequest request) : request_(std::move(request)) {}
  AutocastRegion(const std::string& device_type, std::optional<at::ScalarType> dtype, bool enabled,
                 std::optional<bool> cache_enabled)
      : AutocastRegion(resolve_autocast(device_type, dtype, enabled, cache_enabled)) {}

  const AutocastRequest& request() const { return request_; }
  const std::string& warning() const { return request_.warning; }
  std::string device_type_name() const;  // "cpu", "cuda", ...
  void enter();
  // StateError, with nothing changed, when no enter is open or exit_autocast refuses.
  // `unwinding`: an error is on its way out of the region (unwind_autocast, which does not
  // refuse an inner region left open).
  void exit(bool unwinding = false);
  size_t open_count() const { return tokens_.size(); }

 private:
  AutocastRequest request_;
  std::vector<AutocastToken> tokens_;
};

bool is_autocast_enabled(const std::string& device_type);
at::ScalarType get_autocast_dtype(const std::string& device_type);

}  // namespace ampkit
