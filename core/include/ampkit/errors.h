// The three kinds of error the core raises. The bindings map each to a Python exception class
// that is also the built-in type torch.amp raises for the same misuse, so code written against
// torch.amp catches ampkit's errors unchanged (see python/src/bindings.cpp).
#pragma once

#include <stdexcept>
#include <string>

namespace ampkit {

// An argument with a value outside its rule ("`growth_factor` must be > 1, got 0.5.").
// Python: ampkit.ArgumentError, a ValueError and an AssertionError (torch.amp asserts on factors).
class ArgumentError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

// A string that names no device ("tpu9", "cuda:x"), or a device autocast does not run on
// ("meta"). torch raises RuntimeError for both ("Invalid device string: ...") and torch's own
// tests expect that type: Python: ampkit.DeviceStringError, an ArgumentError (so a ValueError)
// and a RuntimeError.
class DeviceStringError : public ArgumentError {
 public:
  using ArgumentError::ArgumentError;
};

// A checkpoint without a key it must have. torch.amp reads each key as `state_dict["scale"]` and
// raises KeyError: Python: ampkit.MissingKeyError, an ArgumentError (so a ValueError) and a
// KeyError.
class MissingKeyError : public ArgumentError {
 public:
  using ArgumentError::ArgumentError;
};

// An argument of the wrong kind (a device string that names no device type, a dtype AMP cannot
// use). Python: ampkit.ArgumentTypeError, a TypeError.
class ArgumentTypeError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

// A call out of order: unscale_ twice, step twice, update with no inf checks, exiting an autocast
// region twice. Python: ampkit.StateError, a RuntimeError and an AssertionError (torch.amp uses
// both for these).
class StateError : public std::logic_error {
 public:
  using std::logic_error::logic_error;
};

// How every message about one argument reads: "`name` must be <rule>, got <got>."
std::string must_be(const std::string& name, const std::string& rule, const std::string& got);

// Shortest text that reads back as the same double: 0.5 -> "0.5", 1.1 -> "1.1", inf -> "inf".
std::string format_number(double value);

}  // namespace ampkit
