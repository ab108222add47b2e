// Precision policies and the overflow locator from R (R/precision.R), straight into the core.
//
// A policy's forward opens a policy region in the core (policy_region.h) around the module's own
// forward, so that the autocast audit (Python, a dispatch mode) sees R's regions as its own
// without a call into Python per module call; a float32 region first casts the module's
// float16/bfloat16 inputs to float32, as the hand edit does.
//
// The locator measures with the core (tensor_stats.h) and adds up there (StatsSummary): R's
// forward hooks hand each module's output to C_locator_forward, which measures it on its device
// and puts a C++ hook on each output that requires grad (the gradient with respect to it, in the
// backward pass); parameters get a C++ post-accumulate-grad hook (their .grad as accumulated,
// before any unscale, as Python's locator measures it). No hook calls R: the backward pass runs
// no R code for the locator, on whichever thread it runs. A step's measurements stay on the
// device until R ends the step (C_locator_op "read": one transfer per step).
#include <ATen/ops/stack.h>
#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>

#include <array>
#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "ampkit/policy_region.h"
#include "ampkit/tensor_stats.h"
#include "ampkit_r.h"

namespace ampkit_r {
namespace {

// ---- policy regions ----------------------------------------------------------------------------

bool low_precision(const at::Tensor& t) {
  return t.defined() && (t.scalar_type() == at::kHalf || t.scalar_type() == at::kBFloat16);
}

// `x` with its float16/bfloat16 tensors (also inside lists) cast to float32; other values as
// they are. A list is copied only when something in it changes.
SEXP float32_inputs(SEXP x) {
  if (is_tensor(x)) {
    const at::Tensor t = tensor_of(x, "input");
    return low_precision(t) ? make_tensor(t.to(at::kFloat)) : x;
  }
  if (TYPEOF(x) != VECSXP) return x;
  SEXP out = x;
  int protected_ = 0;
  for (R_xlen_t i = 0; i < Rf_xlength(x); ++i) {
    SEXP item = VECTOR_ELT(x, i);
    SEXP cast = PROTECT(float32_inputs(item));
    if (cast != item) {
      if (out == x) {
        out = PROTECT(Rf_shallow_duplicate(x));
        ++protected_;
      }
      SET_VECTOR_ELT(out, i, cast);
    }
    UNPROTECT(1);
  }
  UNPROTECT(protected_);
  return out;
}

// ---- the overflow locator ----------------------------------------------------------------------

// PyTorch's name of a floating-point dtype ("float32"), as the locator's rows show it.
std::string dtype_name(at::ScalarType type) {
  switch (type) {
    case at::kFloat:
      return "float32";
    case at::kDouble:
      return "float64";
    case at::kHalf:
      return "float16";
    case at::kBFloat16:
      return "bfloat16";
    default: {
      std::string name = c10::toString(type);  // Float8_e4m3fn -> float8_e4m3fn
      for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      return name;
    }
  }
}

struct Pending {
  int64_t step;
  const char* pass;
  std::string module;
  std::string dtype;
  int64_t numel;
  at::Tensor stats;
};

struct PostHook;

// One locator's state. Hooks hold it weakly: a hook that outlives its locator does nothing.
struct Locator {
  std::mutex mutex;
  std::vector<Pending> pending;  // in the order measured
  ampkit::StatsSummary summary;
  int64_t host_reads = 0;
  int64_t last_step = -1;  // parameters' gradients go to the last step begun
  std::atomic<bool> active{true};
  std::vector<std::pair<at::Tensor, PostHook*>> watched;  // parameters and the hook set on each

  // Measures `tensors` (on their device); false when they have nothing to measure.
  bool add(int64_t step, const char* pass, const std::string& module,
           const std::vector<at::Tensor>& tensors) {
    at::Tensor stats = ampkit::tensor_stats(tensors);
    if (!stats.defined()) return false;
    int64_t numel = 0;
    for (const auto& t : tensors) numel += t.numel();
    std::lock_guard<std::mutex> lock(mutex);
    pending.push_back(
        {step, pass, module, dtype_name(tensors.front().scalar_type()), numel, std::move(stats)});
    return true;
  }

  // Each step's pending measurements in one transfer, added to the summary.
  void read() {
    std::vector<Pending> now;
    {
      std::lock_guard<std::mutex> lock(mutex);
      now.swap(pending);
    }
    std::map<int64_t, std::vector<const Pending*>> by_step;
    for (const auto& p : now) by_step[p.step].push_back(&p);
    for (const auto& [step, entries] : by_step) {
      std::vector<at::Tensor> stats;
      for (const Pending* p : entries) stats.push_back(p->stats);
      const at::Tensor host = at::stack(stats).to(at::kCPU, at::kDouble);
      ++host_reads;
      const double* v = host.const_data_ptr<double>();
      for (size_t i = 0; i < entries.size(); ++i) {
        const Pending& p = *entries[i];
        summary.add(step, p.pass, p.module, p.dtype, p.numel,
                    {v[5 * i], v[5 * i + 1], v[5 * i + 2], v[5 * i + 3], v[5 * i + 4]});
      }
    }
  }
};

using LocatorPtr = std::shared_ptr<Locator>;

// The parameters' hook: their gradient as accumulated. A parameter has one slot for such hooks
// (Python's are a dict behind it): the hook that was there runs first, and is put back at close.
struct PostHook : torch::autograd::PostAccumulateGradHook {
  PostHook(std::weak_ptr<Locator> locator, std::string module,
           std::unique_ptr<torch::autograd::PostAccumulateGradHook> previous)
      : locator(std::move(locator)), module(std::move(module)), previous(std::move(previous)) {}

  void operator()(const torch::autograd::Variable& tensor) override {
    if (previous) (*previous)(tensor);
    const LocatorPtr loc = locator.lock();
    if (!loc || !loc->active) return;
    const at::Tensor grad = tensor.grad();
    if (!grad.defined() || grad.is_sparse()) return;
    int64_t step;
    {
      std::lock_guard<std::mutex> lock(loc->mutex);
      step = loc->last_step;
    }
    if (step >= 0) loc->add(step, "parameters", module, {grad});
  }

  std::weak_ptr<Locator> locator;
  std::string module;
  std::unique_ptr<torch::autograd::PostAccumulateGradHook> previous;
};

SEXP locator_tag = nullptr;

void finalize_locator(SEXP x) {
  auto* p = static_cast<LocatorPtr*>(R_ExternalPtrAddr(x));
  if (p == nullptr) return;
  R_ClearExternalPtr(x);
  (*p)->active = false;
  delete p;
}

Locator& locator_of(SEXP x) {
  if (locator_tag == nullptr) locator_tag = Rf_install("ampkit_overflow_locator");
  if (TYPEOF(x) != EXTPTRSXP || R_ExternalPtrTag(x) != locator_tag ||
      R_ExternalPtrAddr(x) == nullptr) {
    value_error("expected an overflow locator, got " + describe(x) + ".");
  }
  return **static_cast<LocatorPtr*>(R_ExternalPtrAddr(x));
}

LocatorPtr shared_locator(SEXP x) {
  locator_of(x);
  return *static_cast<LocatorPtr*>(R_ExternalPtrAddr(x));
}

// The floating-point tensors of an R value: a tensor, or those in a list (recursively).
void floating_tensors(SEXP x, std::vector<at::Tensor>& out) {
  if (is_tensor(x)) {
    const at::Tensor t = tensor_of(x, "output");
    if (t.defined() && t.is_floating_point()) out.push_back(t);
  } else if (TYPEOF(x) == VECSXP) {
    for (R_xlen_t i = 0; i < Rf_xlength(x); ++i) floating_tensors(VECTOR_ELT(x, i), out);
  }
}

std::string string_of(SEXP x, const char* arg) {
  if (TYPEOF(x) != STRSXP || XLENGTH(x) != 1 || STRING_ELT(x, 0) == NA_STRING) {
    value_error(std::string("`") + arg + "` must be a string, got " + describe(x) + ".");
  }
  return Rf_translateCharUTF8(STRING_ELT(x, 0));
}

// Puts back each parameter's post-accumulate-grad slot where it still holds our hook, the last
// set first (a parameter shared by two modules has two, the second holding the first).
void unwatch(Locator& loc) {
  for (auto it = loc.watched.rbegin(); it != loc.watched.rend(); ++it) {
    auto& slot = torch::autograd::impl::post_acc_grad_hooks(it->first);
    if (slot.get() == it->second) {
      std::unique_ptr<torch::autograd::PostAccumulateGradHook> previous =
          std::move(it->second->previous);
      slot = std::move(previous);  // destroys our hook
    }
  }
  loc.watched.clear();
}

SEXP summary_columns(const std::vector<ampkit::StatsRow>& rows) {
  const auto n = static_cast<R_xlen_t>(rows.size());
  const char* names[] = {"step", "module", "pass", "dtype",     "calls",    "numel",
                         "amax", "inf",    "nan",  "underflow", "overflow", "headroom"};
  SEXP out = PROTECT(Rf_allocVector(VECSXP, 12));
  SEXP step = SET_VECTOR_ELT(out, 0, Rf_allocVector(INTSXP, n));
  SEXP module = SET_VECTOR_ELT(out, 1, Rf_allocVector(STRSXP, n));
  SEXP pass = SET_VECTOR_ELT(out, 2, Rf_allocVector(STRSXP, n));
  SEXP dtype = SET_VECTOR_ELT(out, 3, Rf_allocVector(STRSXP, n));
  SEXP calls = SET_VECTOR_ELT(out, 4, Rf_allocVector(INTSXP, n));
  double* numbers[7];
  for (int k = 0; k < 7; ++k)
    numbers[k] = REAL(SET_VECTOR_ELT(out, 5 + k, Rf_allocVector(REALSXP, n)));
  for (R_xlen_t i = 0; i < n; ++i) {
    const ampkit::StatsRow& r = rows[i];
    INTEGER(step)[i] = static_cast<int>(r.step);
    SET_STRING_ELT(module, i, Rf_mkCharCE(r.module.c_str(), CE_UTF8));
    SET_STRING_ELT(pass, i, Rf_mkChar(r.pass.c_str()));
    SET_STRING_ELT(dtype, i, Rf_mkChar(r.dtype.c_str()));
    INTEGER(calls)[i] = static_cast<int>(r.calls);
    numbers[0][i] = static_cast<double>(r.numel);
    numbers[1][i] = r.amax;
    numbers[2][i] = static_cast<double>(r.inf);
    numbers[3][i] = static_cast<double>(r.nan);
    numbers[4][i] = r.underflow();
    numbers[5][i] = r.overflow();
    numbers[6][i] = r.headroom();
  }
  SEXP out_names = PROTECT(Rf_allocVector(STRSXP, 12));
  for (int k = 0; k < 12; ++k) SET_STRING_ELT(out_names, k, Rf_mkChar(names[k]));
  Rf_setAttrib(out, R_NamesSymbol, out_names);
  UNPROTECT(2);
  return out;
}

SEXP first_columns(const Locator& loc, int64_t steps) {
  const char* passes[] = {"forward", "backward", "parameters"};
  SEXP out = PROTECT(Rf_allocVector(VECSXP, 4));
  SEXP step = SET_VECTOR_ELT(out, 0, Rf_allocVector(INTSXP, steps));
  for (int64_t s = 0; s < steps; ++s) INTEGER(step)[s] = static_cast<int>(s);
  for (int k = 0; k < 3; ++k) {
    SEXP col = SET_VECTOR_ELT(out, k + 1, Rf_allocVector(STRSXP, steps));
    for (int64_t s = 0; s < steps; ++s) {
      const auto first = loc.summary.first_nonfinite(s, passes[k]);
      SET_STRING_ELT(col, s, first ? Rf_mkCharCE(first->c_str(), CE_UTF8) : NA_STRING);
    }
  }
  SEXP names = PROTECT(Rf_allocVector(STRSXP, 4));
  SET_STRING_ELT(names, 0, Rf_mkChar("step"));
  for (int k = 0; k < 3; ++k) SET_STRING_ELT(names, k + 1, Rf_mkChar(passes[k]));
  Rf_setAttrib(out, R_NamesSymbol, names);
  UNPROTECT(2);
  return out;
}

}  // namespace

// ---- .Call entries -----------------------------------------------------------------------------

// Opens a policy region of `dtype` (a torch_dtype or its name) on this thread.
extern "C" SEXP C_policy_push(SEXP dtype) {
  AMPKIT_R_BEGIN
  ampkit::push_policy_region(TYPEOF(dtype) == INTSXP ? dtype_of(dtype, "dtype")
                                                     : dtype_or_name_of(dtype, "dtype"));
  return R_NilValue;
  AMPKIT_R_END
}

extern "C" SEXP C_policy_pop() {
  AMPKIT_R_BEGIN
  ampkit::pop_policy_region();
  return R_NilValue;
  AMPKIT_R_END
}

// The innermost region's dtype name, or NULL.
extern "C" SEXP C_policy_current() {
  AMPKIT_R_BEGIN
  const auto dtype = ampkit::current_policy_dtype();
  if (!dtype) return R_NilValue;
  return Rf_mkString(dtype_name(*dtype).c_str());
  AMPKIT_R_END
}

// A list of a forward's arguments with their float16/bfloat16 tensors cast to float32.
extern "C" SEXP C_policy_float32_args(SEXP args) {
  AMPKIT_R_BEGIN
  return float32_inputs(args);
  AMPKIT_R_END
}

extern "C" SEXP C_locator_new() {
  AMPKIT_R_BEGIN
  if (locator_tag == nullptr) locator_tag = Rf_install("ampkit_overflow_locator");
  auto* p = new LocatorPtr(std::make_shared<Locator>());
  SEXP x = PROTECT(R_MakeExternalPtr(p, locator_tag, R_NilValue));
  R_RegisterCFinalizerEx(x, finalize_locator, TRUE);
  UNPROTECT(1);
  return x;
  AMPKIT_R_END
}

// A module's forward output in `step`: measured now, and a hook on each of its tensors that
// requires grad measures the gradient with respect to it in the backward pass.
extern "C" SEXP C_locator_forward(SEXP locator, SEXP step, SEXP name, SEXP output) {
  AMPKIT_R_BEGIN
  const LocatorPtr loc = shared_locator(locator);
  const int64_t index = whole_number_of(step, "step");
  const std::string module = string_of(name, "name");
  std::vector<at::Tensor> tensors;
  floating_tensors(output, tensors);
  if (!loc->add(index, "forward", module, tensors)) return R_NilValue;
  const std::weak_ptr<Locator> weak = loc;
  for (const auto& t : tensors) {
    if (!t.requires_grad()) continue;
    t.register_hook([weak, index, module](const at::TensorBase& grad) {
      const LocatorPtr alive = weak.lock();
      if (alive && alive->active && grad.defined()) {
        alive->add(index, "backward", module, {at::Tensor(grad)});
      }
    });
  }
  return R_NilValue;
  AMPKIT_R_END
}

// Watches the gradients of a module's own parameters (a list of tensors) as they accumulate.
extern "C" SEXP C_locator_params(SEXP locator, SEXP name, SEXP params) {
  AMPKIT_R_BEGIN
  const LocatorPtr loc = shared_locator(locator);
  const std::string module = string_of(name, "name");
  for (R_xlen_t i = 0; i < Rf_xlength(params); ++i) {
    const at::Tensor p = tensor_of(VECTOR_ELT(params, i), "params");
    if (!p.requires_grad() || !p.is_leaf()) continue;
    auto& slot = torch::autograd::impl::post_acc_grad_hooks(p);
    auto hook = std::make_unique<PostHook>(loc, module, std::move(slot));
    loc->watched.emplace_back(p, hook.get());
    torch::autograd::impl::set_post_acc_grad_hooks(p, std::move(hook));
  }
  return R_NilValue;
  AMPKIT_R_END
}

// "step" (a step begins: `arg` its index), "read" (the pending measurements to the host),
// "close" (hooks off, parameters' hooks put back), "result" (`arg` steps: list(summary columns,
// first non-finite columns, host reads)).
extern "C" SEXP C_locator_op(SEXP locator, SEXP what, SEXP arg) {
  AMPKIT_R_BEGIN
  Locator& loc = locator_of(locator);
  const std::string op = string_of(what, "what");
  if (op == "step") {
    std::lock_guard<std::mutex> lock(loc.mutex);
    loc.last_step = whole_number_of(arg, "step");
    return R_NilValue;
  }
  if (op == "read") {
    loc.read();
    return R_NilValue;
  }
  if (op == "close") {
    loc.active = false;
    unwatch(loc);
    return R_NilValue;
  }
  if (op == "result") {
    loc.read();
    SEXP out = PROTECT(Rf_allocVector(VECSXP, 3));
    SET_VECTOR_ELT(out, 0, summary_columns(loc.summary.rows()));
    SET_VECTOR_ELT(out, 1, first_columns(loc, whole_number_of(arg, "steps")));
    SET_VECTOR_ELT(out, 2, Rf_ScalarInteger(static_cast<int>(loc.host_reads)));
    UNPROTECT(1);
    return out;
  }
  value_error("unknown locator operation `" + op + "`.");
  AMPKIT_R_END
}

}  // namespace ampkit_r
