// The R package's compiled layer: R objects for libtorch's values, and R's calls into libtorch
// and ampkit's core with no Python on the way (docs/architecture.md: the rpkg layout, "R calls
// libtorch itself" and what follows it, the rules table).
//
// Translation units (each one that includes ATen costs the build tens of seconds: keep them few):
//   errors.cpp    libtorch's and the core's exceptions as R conditions of R torch's classes
//   values.cpp    R objects for tensors, dtypes, devices, generators; R data <-> tensors; memory
//   ops.cpp       the generated op surface: schema lookup, overload choice, argument conversion
//   amp.cpp       autocast regions and the grad scaler, straight into the core
//   autograd.cpp  backward, autograd_grad, hooks and R autograd functions (R code on R's thread)
//   indexing.cpp  x[i, j] and x[i, j] <- v with R torch's rules
//   serialize.cpp torch_save / torch_load in PyTorch's format
//   precision.cpp precision policies' regions and the overflow locator's C++ hooks
//   optim.cpp     optimizers in C++: R torch's optim_ignite_* (libtorch's torch::optim), and
//                 optim_adam's foreach step
//   modules.cpp   `self$name` in modules, module walks and chains (no libtorch)
//   tensor_dollar.cpp `x$name` on tensors: fields, and methods bound to `x` (R's API only)
//   jit.cpp       TorchScript: jit_trace, jit_compile, jit_save, jit_load
//   contrib.cpp   contrib_sort_vertices() (R torch's contributed vertex sort)
//   init.cpp      routine registration
#pragma once

#include <c10/util/Exception.h>

#define R_NO_REMAP
#include <ATen/core/Tensor.h>
#include <ATen/core/ivalue.h>
#include <R.h>
#include <Rinternals.h>
#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include <exception>
#include <functional>
#include <string>
#include <vector>

namespace ampkit_r {

// ---- errors (errors.cpp) -----------------------------------------------------------------------

// An error raised from C++ for R: `r_class` is R torch's condition class ("value_error",
// "runtime_error", "index_error", "type_error", ...).
struct Error : std::exception {
  Error(std::string r_class, std::string message)
      : r_class(std::move(r_class)), message(std::move(message)) {}
  const char* what() const noexcept override { return message.c_str(); }
  std::string r_class;
  std::string message;
};

[[noreturn]] void value_error(const std::string& message);
[[noreturn]] void type_error(const std::string& message);

// Keeps the exception in flight (called in a catch block) for signal_kept_error().
void keep_error(std::exception_ptr error) noexcept;
// Signals the kept error as an R condition (a longjmp: call it where no C++ object with a
// destructor is alive, as AMPKIT_R_END does). Never returns.
SEXP signal_kept_error();

// libtorch's warnings (TORCH_WARN) while an entry runs on R's thread: kept, and issued as R
// warnings (class ampkit_warning) once the entry's C++ frames are gone.
class WarningCollector : public c10::WarningHandler {
 public:
  void process(const c10::Warning& warning) override;
  ~WarningCollector() override;  // hands its warnings to finish_call()
 private:
  std::vector<std::string> messages_;
};

// After an entry's body: issues the warnings it kept, then signals the error it kept (`result`
// null) or returns `result`. May longjmp (an error; a warning under options(warn = 2)): called
// where no C++ object with a destructor is alive.
SEXP finish_call(SEXP result);

template <typename Body>
SEXP guarded_call(Body&& body) {
  SEXP result = nullptr;
  {
    WarningCollector collector;
    c10::WarningUtils::WarningHandlerGuard guard(&collector);
    try {
      result = body();
    } catch (...) {
      keep_error(std::current_exception());
      result = nullptr;
    }
  }
  return finish_call(result);
}

// Every .Call entry's body, a lambda run by guarded_call: C++ exceptions become R conditions and
// libtorch's warnings R warnings, after the C++ frames are gone.
#define AMPKIT_R_BEGIN return ::ampkit_r::guarded_call([&]() -> SEXP {
#define AMPKIT_R_END \
  });

// Runs R code from C++ (callbacks: hooks, autograd functions, modules): an R error becomes a C++
// exception (R_UnwindProtect), so that C++ frames unwind normally; the R condition is re-signalled
// unchanged once back in R.
SEXP eval_protected(SEXP call, SEXP env);

// The package's namespace, where C++ calls the package's R helpers.
SEXP package_namespace();

// How an R value reads in a message: "a tensor", "a character vector of length 2", "NULL", ...
std::string describe(SEXP x);

// The message of a Python exception left set on this thread, taken; "" if none (autograd.cpp,
// where Python's C API is looked up).
std::string python_error_message();

// ---- values (values.cpp) -----------------------------------------------------------------------

bool is_tensor(SEXP x);
// The tensor an R tensor holds (an undefined tensor for R torch's undefined tensors).
at::Tensor tensor_of(SEXP x, const char* arg);
// A new R tensor holding one reference to `t` (its storage counted for the garbage collector).
SEXP make_tensor(at::Tensor t);
// A full collection of R's garbage (the finalizers free the tensors R dropped), counted with the
// package's own (values.cpp): where an allocation failed.
void collect_garbage();
// Whether a libtorch error is an allocation failure, on any device (errors.cpp).
bool out_of_memory(const c10::Error& e);
// Runs the collection that waits for the end of a backward pass, if one does (values.cpp).
void collect_pending();

bool is_dtype(SEXP x);
c10::ScalarType dtype_of(SEXP x, const char* arg);
// A dtype object or its name ("float16": R/values.R's aliases).
c10::ScalarType dtype_or_name_of(SEXP x, const char* arg);
// TRUE or FALSE, not NA.
bool flag_of(SEXP x, const char* arg);
SEXP make_dtype(c10::ScalarType type);

bool is_device(SEXP x);
// A torch_device object or a string such as "cpu", "cuda", "cuda:1".
c10::Device device_of(SEXP x, const char* arg);
SEXP make_device(const c10::Device& device);

bool is_generator(SEXP x);
at::Generator generator_of(SEXP x);
SEXP make_generator(at::Generator g);

// An R list of tensors (NULL elements: undefined tensors; one tensor: a list of it) and back.
// tensor_list takes the tensors by value and moves them into R objects: a fresh result is held
// once (values.cpp counts it). Both in autograd.cpp.
std::vector<at::Tensor> tensors_of(SEXP list, const char* arg);
SEXP tensor_list(std::vector<at::Tensor> tensors);

// R numbers of one element, checked.
bool is_number(SEXP x);     // a double, integer or logical of length 1, not NA
bool is_integer64(SEXP x);  // bit64's integer64 (int64 bits in doubles)
int64_t integer64_at(SEXP x, R_xlen_t i, const char* arg);  // element i; NA is an error
double number_of(SEXP x, const char* arg);
// An int64 for R: an integer where it fits R's integers, else a double (exact up to 2^53).
SEXP r_int64(int64_t x);
int64_t whole_number_of(SEXP x, const char* arg);  // a whole number within int64
std::vector<int64_t> whole_numbers_of(SEXP x, const char* arg);

// R torch's 1-based dimension (and index) rule: d > 0 is d - 1; d < 0 counts from the end as
// in PyTorch (-1 is the last); 0 is an error naming the argument.
int64_t zero_based(int64_t index, const char* arg);
// The same rule for a tensor of positions (an index, a loss's class targets), made 0-based;
// `zero` throws where one is 0 (indexing.cpp).
at::Tensor zero_based_tensor(const at::Tensor& t, const std::function<void()>& zero);
// The error for a 0 among 1-based positions or dims, in R torch's words (its tests match them),
// naming the argument.
[[noreturn]] void zero_position_error(const std::string& arg);

}  // namespace ampkit_r
