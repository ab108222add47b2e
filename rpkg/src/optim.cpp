// Optimizers in C++, two kinds:
//
// R torch's optim_ignite_*(): libtorch's own C++ optimizers (torch::optim::Adam, AdamW, SGD,
// RMSprop, Adagrad), as R torch's "ignite" optimizers are. Their update rules are libtorch's C++
// ones (per tensor), not PyTorch's Python ones that optim_*() follow (R/optim.R): the two differ
// in the last bits (exp_avg.mul_().add_() here, lerp_() there), so these are kept apart. An R
// object here is an external pointer (class ampkit_ignite) to an Ignite: the optimizer and the
// table of its kind. R/optim-ignite.R keeps the parameters' R objects and options outside
// libtorch's (R torch's extra group entries such as `initial_lr`); the options libtorch knows
// live only in libtorch's groups, so a step always uses what R last set.
//
// The steps of optim_sgd(), optim_adam() and optim_adamw() unfused, optim_rmsprop(),
// optim_adagrad(), optim_rprop(), optim_asgd() and optim_adadelta() (C_foreach_adam, C_*_update):
// PyTorch's Python rules, the ATen ops R/optim.R and R/optim-more.R ran one by one from R, in the
// same order (the end of this file).
#include <torch/optim/adagrad.h>
#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>
#include <torch/optim/rmsprop.h>
#include <torch/optim/sgd.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "ampkit_r.h"

namespace ampkit_r {
namespace {

using torch::optim::OptimizerOptions;
using torch::optim::OptimizerParamState;

// A Python float as torch.optim's per-tensor arithmetic (its CPU default) multiplies by it:
// Python has no Scalar overload of mul, so `buf.mul_(0.9)` is mul_.Tensor with a wrapped 0-dim
// double, and mul_.Scalar (ATen's C++ `t.mul_(0.9)`, and _foreach_mul_(list, 0.9) on the CPU)
// rounds half and bfloat16 tensors differently (SGD's momentum buffer: 6.359375 for PyTorch's
// 6.36328125), and so does div_ now and then; add_ of a number agrees. Wrapped, as Python's: an
// unwrapped 0-dim double would make a 0-dim float32 parameter's product a double one. Its
// foreach default on CUDA takes the Scalar overloads.
at::Tensor py_float(double v) {
  at::Tensor t = at::scalar_tensor(v, at::TensorOptions().dtype(at::kDouble));
  t.unsafeGetTensorImpl()->set_wrapped_number(true);
  return t;
}

// `ts` times `v` as torch.optim's default on their device multiplies (py_float() says why).
// Per tensor, not _foreach_mul_(list, py_float(v)): Python's dispatch modes (the autocast audit)
// get a wrapped number as a float, which that overload cannot take back.
void mul_by(const std::vector<at::Tensor>& ts, double v, bool foreach) {
  if (foreach) {
    at::_foreach_mul_(ts, v);
    return;
  }
  const at::Tensor number = py_float(v);
  for (const at::Tensor& t : ts) t.mul_(number);
}

// ---- reading and writing a group's options (a named R list) -------------------------------------

SEXP element(SEXP list, const char* name) {
  SEXP names = Rf_getAttrib(list, R_NamesSymbol);
  for (R_xlen_t i = 0; TYPEOF(list) == VECSXP && TYPEOF(names) == STRSXP && i < Rf_xlength(list);
       ++i) {
    if (std::strcmp(CHAR(STRING_ELT(names, i)), name) == 0) return VECTOR_ELT(list, i);
  }
  value_error(std::string("The options have no `") + name + "`.");
}

double number(SEXP list, const char* name) { return number_of(element(list, name), name); }
bool flag(SEXP list, const char* name) { return flag_of(element(list, name), name); }

std::tuple<double, double> pair(SEXP list, const char* name) {
  SEXP x = element(list, name);
  if (TYPEOF(x) != REALSXP || Rf_xlength(x) != 2 || ISNAN(REAL(x)[0]) || ISNAN(REAL(x)[1])) {
    value_error(std::string("`") + name + "` must be two numbers, got " + describe(x) + ".");
  }
  return {REAL(x)[0], REAL(x)[1]};
}

// A named R list from (name, value) pairs; the values are protected by the caller's list.
class ListWriter {
 public:
  explicit ListWriter(int n)
      : list_(PROTECT(Rf_allocVector(VECSXP, n))), names_(PROTECT(Rf_allocVector(STRSXP, n))) {}
  ListWriter& add(const char* name, SEXP value) {
    SET_VECTOR_ELT(list_, i_, value);
    SET_STRING_ELT(names_, i_++, Rf_mkChar(name));
    return *this;
  }
  SEXP done() {
    Rf_setAttrib(list_, R_NamesSymbol, names_);
    UNPROTECT(2);
    return list_;
  }

 private:
  SEXP list_;
  SEXP names_;
  R_xlen_t i_ = 0;
};

SEXP real(double x) { return Rf_ScalarReal(x); }
SEXP logical(bool x) { return Rf_ScalarLogical(x ? TRUE : FALSE); }
SEXP real_pair(const std::tuple<double, double>& x) {
  SEXP out = Rf_allocVector(REALSXP, 2);
  REAL(out)[0] = std::get<0>(x);
  REAL(out)[1] = std::get<1>(x);
  return out;
}

// ---- a state's tensors
// -----------------------------------------------------------------------------

// A state tensor for R: a copy (the state dict is a snapshot, as R torch's), and an empty float
// tensor in the place of one libtorch has not made (Adam's max_exp_avg_sq without amsgrad: R
// torch's placeholder, which keeps every state's names the same).
at::Tensor out_tensor(const at::Tensor& t) {
  return t.defined() ? t.clone() : at::empty({0}, at::TensorOptions().dtype(at::kFloat));
}
at::Tensor step_tensor(int64_t step) { return at::full({1}, step, at::kLong); }

// A state tensor from R for parameter `p`: a copy on p's device (and in its dtype when both are
// floating point, as PyTorch's load_state_dict casts), or undefined for the placeholder of an
// optional one.
at::Tensor in_tensor(const at::Tensor& t, const at::Tensor& p, bool optional) {
  if (!t.defined()) {
    if (optional) return at::Tensor();  // R torch's own state dicts may hold undefined ones
    value_error("A state's tensors must be tensors, got NULL.");
  }
  if (optional && t.numel() == 0 && p.numel() != 0) return at::Tensor();
  auto options = t.options().device(p.device());
  if (t.is_floating_point() && p.is_floating_point()) options = options.dtype(p.scalar_type());
  return t.to(options, /*non_blocking=*/false, /*copy=*/true);
}
int64_t in_step(const at::Tensor& t) {
  if (!t.defined() || t.numel() != 1) value_error("A state's `step` must be a one-element tensor.");
  return t.item<int64_t>();
}

// An optional state tensor the options now ask for (amsgrad, or RMSprop's centered or momentum
// turned on after the state was made, or a state loaded without it): zeros, as libtorch makes it
// for a new state, so that the step does not fail halfway.
void complete(at::Tensor& t, bool wanted, const at::Tensor& p) {
  if (wanted && !t.defined()) t = at::zeros_like(p, at::MemoryFormat::Preserve);
}

// ---- the kinds
// -------------------------------------------------------------------------------------

// Adam and AdamW: the same options and state.
template <class Opt, class AdamOptions, class AdamState>
struct AdamLike {
  using Optimizer = Opt;
  using Options = AdamOptions;
  using State = AdamState;
  static constexpr auto initial_states = nullptr;
  static constexpr size_t states = 4;
  static Options options(SEXP l) {
    return Options(number(l, "lr"))
        .betas(pair(l, "betas"))
        .eps(number(l, "eps"))
        .weight_decay(number(l, "weight_decay"))
        .amsgrad(flag(l, "amsgrad"));
  }
  static SEXP list(const Options& o) {
    return ListWriter(5)
        .add("lr", real(o.lr()))
        .add("betas", real_pair(o.betas()))
        .add("eps", real(o.eps()))
        .add("weight_decay", real(o.weight_decay()))
        .add("amsgrad", logical(o.amsgrad()))
        .done();
  }
  static std::vector<at::Tensor> state(const State& s) {
    return {out_tensor(s.exp_avg()), out_tensor(s.exp_avg_sq()), out_tensor(s.max_exp_avg_sq()),
            step_tensor(s.step())};
  }
  static void complete_state(State& s, const Options& o, const at::Tensor& p) {
    complete(s.max_exp_avg_sq(), o.amsgrad(), p);
  }
  static std::unique_ptr<State> make_state(const std::vector<at::Tensor>& v, const at::Tensor& p) {
    auto s = std::make_unique<State>();
    s->exp_avg(in_tensor(v[0], p, false));
    s->exp_avg_sq(in_tensor(v[1], p, false));
    s->max_exp_avg_sq(in_tensor(v[2], p, true));
    s->step(in_step(v[3]));
    return s;
  }
};

struct Adam
    : AdamLike<torch::optim::Adam, torch::optim::AdamOptions, torch::optim::AdamParamState> {};
struct AdamW
    : AdamLike<torch::optim::AdamW, torch::optim::AdamWOptions, torch::optim::AdamWParamState> {};

struct Sgd {
  using Optimizer = torch::optim::SGD;
  using Options = torch::optim::SGDOptions;
  using State = torch::optim::SGDParamState;
  static constexpr size_t states = 1;
  static constexpr auto initial_states = nullptr;
  static Options options(SEXP l) {
    return Options(number(l, "lr"))
        .momentum(number(l, "momentum"))
        .dampening(number(l, "dampening"))
        .weight_decay(number(l, "weight_decay"))
        .nesterov(flag(l, "nesterov"));
  }
  static SEXP list(const Options& o) {
    return ListWriter(5)
        .add("lr", real(o.lr()))
        .add("momentum", real(o.momentum()))
        .add("dampening", real(o.dampening()))
        .add("weight_decay", real(o.weight_decay()))
        .add("nesterov", logical(o.nesterov()))
        .done();
  }
  static std::vector<at::Tensor> state(const State& s) { return {out_tensor(s.momentum_buffer())}; }
  static void complete_state(State&, const Options&, const at::Tensor&) {}
  static std::unique_ptr<State> make_state(const std::vector<at::Tensor>& v, const at::Tensor& p) {
    auto s = std::make_unique<State>();
    s->momentum_buffer(in_tensor(v[0], p, false));
    return s;
  }
};

struct Rmsprop {
  using Optimizer = torch::optim::RMSprop;
  using Options = torch::optim::RMSpropOptions;
  using State = torch::optim::RMSpropParamState;
  static constexpr size_t states = 4;
  static constexpr auto initial_states = nullptr;
  static Options options(SEXP l) {
    return Options(number(l, "lr"))
        .alpha(number(l, "alpha"))
        .eps(number(l, "eps"))
        .weight_decay(number(l, "weight_decay"))
        .momentum(number(l, "momentum"))
        .centered(flag(l, "centered"));
  }
  static SEXP list(const Options& o) {
    return ListWriter(6)
        .add("lr", real(o.lr()))
        .add("alpha", real(o.alpha()))
        .add("eps", real(o.eps()))
        .add("weight_decay", real(o.weight_decay()))
        .add("momentum", real(o.momentum()))
        .add("centered", logical(o.centered()))
        .done();
  }
  static std::vector<at::Tensor> state(const State& s) {
    return {out_tensor(s.grad_avg()), out_tensor(s.square_avg()), out_tensor(s.momentum_buffer()),
            step_tensor(s.step())};
  }
  static void complete_state(State& s, const Options& o, const at::Tensor& p) {
    complete(s.grad_avg(), o.centered(), p);
    complete(s.momentum_buffer(), o.momentum() > 0, p);
  }
  static std::unique_ptr<State> make_state(const std::vector<at::Tensor>& v, const at::Tensor& p) {
    auto s = std::make_unique<State>();
    s->grad_avg(in_tensor(v[0], p, true));
    s->square_avg(in_tensor(v[1], p, false));
    s->momentum_buffer(in_tensor(v[2], p, true));
    s->step(in_step(v[3]));
    return s;
  }
};

struct Adagrad {
  using Optimizer = torch::optim::Adagrad;
  using Options = torch::optim::AdagradOptions;
  using State = torch::optim::AdagradParamState;
  static constexpr size_t states = 2;
  // libtorch's Adagrad makes its parameters' states when it is made (a step finds none for a
  // later group's and fails): a later group's are made the same way, before the group is added.
  static std::vector<std::unique_ptr<OptimizerParamState>> initial_states(
      const std::vector<at::Tensor>& params, const OptimizerOptions& options) {
    const auto& o = static_cast<const Options&>(options);
    std::vector<std::unique_ptr<OptimizerParamState>> out;
    for (const auto& p : params) {
      auto s = std::make_unique<State>();
      s->step(0);
      s->sum(at::full_like(p, o.initial_accumulator_value(), at::MemoryFormat::Preserve));
      out.push_back(std::move(s));
    }
    return out;
  }
  static Options options(SEXP l) {
    return Options(number(l, "lr"))
        .lr_decay(number(l, "lr_decay"))
        .weight_decay(number(l, "weight_decay"))
        .initial_accumulator_value(number(l, "initial_accumulator_value"))
        .eps(number(l, "eps"));
  }
  static SEXP list(const Options& o) {
    return ListWriter(5)
        .add("lr", real(o.lr()))
        .add("lr_decay", real(o.lr_decay()))
        .add("weight_decay", real(o.weight_decay()))
        .add("initial_accumulator_value", real(o.initial_accumulator_value()))
        .add("eps", real(o.eps()))
        .done();
  }
  static void complete_state(State&, const Options&, const at::Tensor&) {}
  static std::vector<at::Tensor> state(const State& s) {
    return {out_tensor(s.sum()), step_tensor(s.step())};
  }
  static std::unique_ptr<State> make_state(const std::vector<at::Tensor>& v, const at::Tensor& p) {
    auto s = std::make_unique<State>();
    s->sum(in_tensor(v[0], p, false));
    s->step(in_step(v[1]));
    return s;
  }
};

// One kind's operations, through the libtorch base classes (the table an Ignite points to).
struct Kind {
  size_t states;  // the number of tensors in a parameter's state
  // The states of a group's parameters made before the group is added after the optimizer was
  // made (nullptr: none; libtorch makes them at the first step).
  std::vector<std::unique_ptr<OptimizerParamState>> (*initial_states)(
      const std::vector<at::Tensor>&, const OptimizerOptions&);
  // Makes the optional tensors of a parameter's state that its group's options now ask for.
  void (*complete_state)(OptimizerParamState&, const OptimizerOptions&, const at::Tensor&);
  std::unique_ptr<torch::optim::Optimizer> (*make)(std::vector<at::Tensor>, SEXP);
  std::unique_ptr<OptimizerOptions> (*options)(SEXP);
  SEXP (*list)(const OptimizerOptions&);
  std::vector<at::Tensor> (*state)(const OptimizerParamState&);
  std::unique_ptr<OptimizerParamState> (*make_state)(const std::vector<at::Tensor>&,
                                                     const at::Tensor&);
};

template <class K>
const Kind* kind() {
  using Options = typename K::Options;
  static const Kind k{
      K::states,
      K::initial_states,
      [](OptimizerParamState& s, const OptimizerOptions& o, const at::Tensor& p) {
        K::complete_state(static_cast<typename K::State&>(s), static_cast<const Options&>(o), p);
      },
      [](std::vector<at::Tensor> params, SEXP l) -> std::unique_ptr<torch::optim::Optimizer> {
        return std::make_unique<typename K::Optimizer>(std::move(params), K::options(l));
      },
      [](SEXP l) -> std::unique_ptr<OptimizerOptions> {
        return std::make_unique<Options>(K::options(l));
      },
      [](const OptimizerOptions& o) { return K::list(static_cast<const Options&>(o)); },
      [](const OptimizerParamState& s) {
        return K::state(static_cast<const typename K::State&>(s));
      },
      [](const std::vector<at::Tensor>& v, const at::Tensor& p)
          -> std::unique_ptr<OptimizerParamState> { return K::make_state(v, p); }};
  return &k;
}

const Kind* kind_named(const std::string& name) {
  if (name == "adam") return kind<Adam>();
  if (name == "adamw") return kind<AdamW>();
  if (name == "sgd") return kind<Sgd>();
  if (name == "rmsprop") return kind<Rmsprop>();
  if (name == "adagrad") return kind<Adagrad>();
  value_error("Unknown ignite optimizer: " + name + ".");
}

// ---- the R object
// --------------------------------------------------------------------------------

struct Ignite {
  const Kind* kind;
  std::unique_ptr<torch::optim::Optimizer> optimizer;
};

SEXP ignite_tag() {
  static SEXP tag = Rf_install("ampkit_ignite");
  return tag;
}

void finalize(SEXP x) {
  auto* p = static_cast<Ignite*>(R_ExternalPtrAddr(x));
  if (p == nullptr) return;
  R_ClearExternalPtr(x);
  delete p;
}

Ignite& ignite_of(SEXP x) {
  if (TYPEOF(x) != EXTPTRSXP || R_ExternalPtrTag(x) != ignite_tag() ||
      R_ExternalPtrAddr(x) == nullptr) {
    value_error("Expected an ignite optimizer, got " + describe(x) + ".");
  }
  return *static_cast<Ignite*>(R_ExternalPtrAddr(x));
}

std::string string_of(SEXP x) {
  if (TYPEOF(x) != STRSXP || Rf_xlength(x) != 1) value_error("Expected a string.");
  return CHAR(STRING_ELT(x, 0));
}

}  // namespace

// A new optimizer of kind `name` over `params` (a list of tensors) with `options` (a named list).
extern "C" SEXP C_ignite_new(SEXP name, SEXP params, SEXP options) {
  AMPKIT_R_BEGIN
  const Kind* k = kind_named(string_of(name));
  auto* ignite = new Ignite{k, k->make(tensors_of(params, "params"), options)};
  SEXP x = PROTECT(R_MakeExternalPtr(ignite, ignite_tag(), R_NilValue));
  R_RegisterCFinalizerEx(x, finalize, TRUE);
  UNPROTECT(1);
  return x;
  AMPKIT_R_END
}

extern "C" SEXP C_ignite_add_group(SEXP x, SEXP params, SEXP options) {
  AMPKIT_R_BEGIN
  Ignite& ig = ignite_of(x);
  auto params_ = tensors_of(params, "params");
  auto group_options = ig.kind->options(options);
  // Everything that can fail before the group is added: R's and libtorch's groups stay the same.
  std::vector<std::unique_ptr<OptimizerParamState>> states;
  if (ig.kind->initial_states != nullptr) states = ig.kind->initial_states(params_, *group_options);
  ig.optimizer->add_param_group(torch::optim::OptimizerParamGroup(params_, group_options->clone()));
  // libtorch (2.13) replaces the options a new group gives with the optimizer's defaults where
  // they equal the options' own defaults (amsgrad = false): set them as given.
  ig.optimizer->param_groups().back().set_options(std::move(group_options));
  for (size_t i = 0; i < states.size(); ++i) {
    ig.optimizer->state()[params_[i].unsafeGetTensorImpl()] = std::move(states[i]);
  }
  return R_NilValue;
  AMPKIT_R_END
}

// The groups' options libtorch keeps, one named list a group.
extern "C" SEXP C_ignite_groups(SEXP x) {
  AMPKIT_R_BEGIN
  Ignite& ig = ignite_of(x);
  const auto& groups = ig.optimizer->param_groups();
  SEXP out = PROTECT(Rf_allocVector(VECSXP, static_cast<R_xlen_t>(groups.size())));
  for (size_t i = 0; i < groups.size(); ++i) {
    SET_VECTOR_ELT(out, static_cast<R_xlen_t>(i), ig.kind->list(groups[i].options()));
  }
  UNPROTECT(1);
  return out;
  AMPKIT_R_END
}

// Sets every group's options from `options` (a list of named lists, one a group): all of them are
// read before any is set, so a bad one changes nothing.
extern "C" SEXP C_ignite_set_groups(SEXP x, SEXP options) {
  AMPKIT_R_BEGIN
  Ignite& ig = ignite_of(x);
  auto& groups = ig.optimizer->param_groups();
  if (TYPEOF(options) != VECSXP || static_cast<size_t>(Rf_xlength(options)) != groups.size()) {
    value_error(
        "Parameter groups must be a list of the same length as the number of parameter "
        "groups.");
  }
  std::vector<std::unique_ptr<OptimizerOptions>> read;
  for (size_t i = 0; i < groups.size(); ++i) {
    read.push_back(ig.kind->options(VECTOR_ELT(options, static_cast<R_xlen_t>(i))));
  }
  for (size_t i = 0; i < groups.size(); ++i) {
    groups[i].set_options(std::move(read[i]));
  }
  return R_NilValue;
  AMPKIT_R_END
}

extern "C" SEXP C_ignite_step(SEXP x) {
  AMPKIT_R_BEGIN
  Ignite& ig = ignite_of(x);
  auto& state = ig.optimizer->state();
  for (auto& group : ig.optimizer->param_groups()) {
    for (const auto& p : group.params()) {
      auto it = state.find(p.unsafeGetTensorImpl());
      if (it != state.end()) ig.kind->complete_state(*it->second, group.options(), p);
    }
  }
  ig.optimizer->step();
  return R_NilValue;
  AMPKIT_R_END
}

extern "C" SEXP C_ignite_zero_grad(SEXP x) {
  AMPKIT_R_BEGIN
  ignite_of(x).optimizer->zero_grad();
  return R_NilValue;
  AMPKIT_R_END
}

// The state of each of `params` (a list of tensors): NULL where libtorch has none, else a list of
// copies of its tensors in the kind's order (R/optim-ignite.R names them). With `copy` FALSE,
// only whether each has one (a logical vector: no copies).
extern "C" SEXP C_ignite_states(SEXP x, SEXP params, SEXP copy) {
  AMPKIT_R_BEGIN
  Ignite& ig = ignite_of(x);
  const auto ps = tensors_of(params, "params");
  const auto& state = ig.optimizer->state();
  if (!flag_of(copy, "copy")) {
    SEXP out = PROTECT(Rf_allocVector(LGLSXP, static_cast<R_xlen_t>(ps.size())));
    for (size_t i = 0; i < ps.size(); ++i) {
      LOGICAL(out)[i] = state.find(ps[i].unsafeGetTensorImpl()) != state.end() ? TRUE : FALSE;
    }
    UNPROTECT(1);
    return out;
  }
  SEXP out = PROTECT(Rf_allocVector(VECSXP, static_cast<R_xlen_t>(ps.size())));
  for (size_t i = 0; i < ps.size(); ++i) {
    auto it = state.find(ps[i].unsafeGetTensorImpl());
    if (it == state.end()) continue;
    SET_VECTOR_ELT(out, static_cast<R_xlen_t>(i), tensor_list(ig.kind->state(*it->second)));
  }
  UNPROTECT(1);
  return out;
  AMPKIT_R_END
}

// Replaces the states of `params` with `states` (a list with, for each, its tensors in the kind's
// order): every state is made before any is replaced.
extern "C" SEXP C_ignite_set_states(SEXP x, SEXP params, SEXP states) {
  AMPKIT_R_BEGIN
  Ignite& ig = ignite_of(x);
  const auto ps = tensors_of(params, "params");
  std::vector<std::unique_ptr<OptimizerParamState>> made;
  if (TYPEOF(states) != VECSXP || static_cast<size_t>(Rf_xlength(states)) != ps.size()) {
    value_error("Expected one state a parameter.");
  }
  for (size_t i = 0; i < ps.size(); ++i) {
    const auto tensors = tensors_of(VECTOR_ELT(states, static_cast<R_xlen_t>(i)), "state");
    if (tensors.size() != ig.kind->states) {
      value_error("Expected " + std::to_string(ig.kind->states) +
                  " tensors in the state of parameter " + std::to_string(i + 1) + ", got " +
                  std::to_string(tensors.size()) + ".");
    }
    made.push_back(ig.kind->make_state(tensors, ps[i]));
  }
  auto& state = ig.optimizer->state();
  for (size_t i = 0; i < ps.size(); ++i) state[ps[i].unsafeGetTensorImpl()] = std::move(made[i]);
  return R_NilValue;
  AMPKIT_R_END
}

// ---- the steps of optim_*() (R/optim.R, R/optim-more.R) ---------------------------------------

// The arguments of the update entries below, from R/optim.R: `tensors` a list of tensor lists
// (the parameters first), `numbers` doubles and `flags` logicals, each of a fixed length. A
// list of another length than the parameters' is refused where the update reads it.
struct UpdateArgs {
  std::vector<std::vector<at::Tensor>> lists;
  const double* numbers;
  const int* flags;
  size_t n;  // the parameters

  // `names`: each list's name, the state's entry for a state list (for the errors).
  UpdateArgs(const char* entry, SEXP tensors, std::vector<const char*> names, SEXP numbers,
             int n_numbers, SEXP flags, int n_flags)
      : names_(std::move(names)) {
    const auto n_lists = static_cast<R_xlen_t>(names_.size());
    if (TYPEOF(tensors) != VECSXP || Rf_xlength(tensors) != n_lists || TYPEOF(numbers) != REALSXP ||
        Rf_xlength(numbers) != n_numbers || TYPEOF(flags) != LGLSXP ||
        Rf_xlength(flags) != n_flags) {
      value_error(std::string(entry) + ": expected " + std::to_string(n_lists) + " tensor lists, " +
                  std::to_string(n_numbers) + " numbers and " + std::to_string(n_flags) +
                  " flags.");
    }
    for (R_xlen_t i = 0; i < n_lists; ++i) {
      lists.push_back(tensors_of(VECTOR_ELT(tensors, i), names_[static_cast<size_t>(i)]));
    }
    this->numbers = REAL(numbers);
    this->flags = LOGICAL(flags);
    n = lists[0].size();
  }
  bool flag(int i) const { return flags[i] == TRUE; }
  // List i, which the update reads: as many tensors as parameters (NULL ones undefined).
  std::vector<at::Tensor>& sized(int i) {
    auto& ts = lists[static_cast<size_t>(i)];
    if (ts.size() != n) {
      value_error("`" + std::string(names_[static_cast<size_t>(i)]) + "` has " +
                  std::to_string(ts.size()) + " tensors for " + std::to_string(n) + " parameters.");
    }
    return ts;
  }
  // The same, each tensor there (not NULL).
  std::vector<at::Tensor>& list(int i) {
    auto& ts = sized(i);
    for (const auto& t : ts) {
      if (!t.defined()) {
        value_error("A parameter's optimizer state has no `" +
                    std::string(names_[static_cast<size_t>(i)]) +
                    "` (an option that needs it was turned on after its first step?).");
      }
    }
    return ts;
  }

 private:
  std::vector<const char*> names_;
};

// A complex tensor as pairs of reals, as PyTorch's updates view them (an update's arithmetic is
// then on the real and imaginary parts apart: a squared gradient is not a complex square).
at::Tensor as_real(const at::Tensor& t) { return t.is_complex() ? at::view_as_real(t) : t; }
std::vector<at::Tensor> as_real(const std::vector<at::Tensor>& ts) {
  std::vector<at::Tensor> out;
  out.reserve(ts.size());
  for (const auto& t : ts) out.push_back(as_real(t));
  return out;
}

// PyTorch's _multi_tensor_adam (capturable and differentiable off) over one group: `tensors` is
// list(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, steps), `numbers` c(lr, beta1,
// beta2, weight_decay, eps), `flags` c(amsgrad, maximize, decoupled (AdamW), cuda). Each op is the
// one R/optim.R called with the same scalars (doubles), so the step is PyTorch's to the bit; in C
// its ~10 calls cost no R dispatch (~4 us each from R). The step counts are CPU tensors, read
// without a device sync, as PyTorch's.
extern "C" SEXP C_foreach_adam(SEXP tensors, SEXP numbers, SEXP flags) {
  AMPKIT_R_BEGIN
  UpdateArgs a("C_foreach_adam", tensors,
               {"params", "grads", "exp_avg", "exp_avg_sq", "max_exp_avg_sq", "step"}, numbers, 5,
               flags, 4);
  const double lr = a.numbers[0], beta1 = a.numbers[1], beta2 = a.numbers[2];
  const double weight_decay = a.numbers[3], eps = a.numbers[4];
  const bool amsgrad = a.flag(0), maximize = a.flag(1), decoupled = a.flag(2), cuda = a.flag(3);
  auto params = a.list(0);
  auto grads = a.list(1);
  const auto exp_avgs = as_real(a.list(2));
  const auto exp_avg_sqs = as_real(a.list(3));
  const auto max_sqs = amsgrad ? as_real(a.list(4)) : std::vector<at::Tensor>();
  const auto& steps = a.list(5);
  // Complex parameters: PyTorch's per-tensor update (its CPU default) decays them as they are,
  // then views them as pairs of reals; its foreach one (its CUDA default) views them first. The
  // two round differently.
  if (cuda) {
    params = as_real(params);
    grads = as_real(grads);
  }
  at::NoGradGuard no_grad;
  if (maximize) grads = at::_foreach_neg(grads);
  at::_foreach_add_(steps, 1.0);
  if (weight_decay != 0) {
    if (decoupled) {
      mul_by(params, 1 - lr * weight_decay, cuda);
    } else {
      grads = at::_foreach_add(grads, params, weight_decay);
    }
  }
  params = as_real(params);
  grads = as_real(grads);
  at::_foreach_lerp_(exp_avgs, grads, 1 - beta1);
  mul_by(exp_avg_sqs, beta2, cuda);
  at::_foreach_addcmul_(exp_avg_sqs, grads, grads, 1 - beta2);
  std::vector<c10::Scalar> bias2_sqrt;
  std::vector<c10::Scalar> step_size;
  for (const auto& s : steps) {
    const double step = s.item<double>();
    const double bias1 = 1 - std::pow(beta1, step);
    const double bias2 = 1 - std::pow(beta2, step);
    step_size.emplace_back(-(lr / bias1));
    // `bias_correction2**0.5` in both of PyTorch's updates (2.11 to 2.13): Python's float power,
    // C's pow(), which math.sqrt() (older releases') differs from in the last bit now and then.
    bias2_sqrt.emplace_back(std::pow(bias2, 0.5));
  }
  std::vector<at::Tensor> denom;
  if (amsgrad) {
    at::_foreach_maximum_(max_sqs, exp_avg_sqs);
    denom = at::_foreach_sqrt(max_sqs);
  } else {
    denom = at::_foreach_sqrt(exp_avg_sqs);
  }
  if (cuda) {
    at::_foreach_div_(denom, bias2_sqrt);
  } else {  // `exp_avg_sq.sqrt() / bias_correction2_sqrt`: a Python float (py_float())
    for (size_t i = 0; i < denom.size(); ++i) denom[i].div_(py_float(bias2_sqrt[i].toDouble()));
  }
  at::_foreach_add_(denom, eps);
  at::_foreach_addcdiv_(params, exp_avgs, denom, step_size);
  return R_NilValue;
  AMPKIT_R_END
}

// PyTorch's SGD (its per-tensor arithmetic, as ATen's foreach ops over the group, one call
// each): `tensors` is list(params, grads, momentum_buffers), a buffer NULL where its parameter
// has none yet (made here from the gradient, as PyTorch makes it), `numbers` c(lr, momentum,
// dampening, weight_decay), `flags` c(nesterov, maximize). Returns the buffers made (a list,
// NULL where one was given), or NULL without momentum.
extern "C" SEXP C_sgd_update(SEXP tensors, SEXP numbers, SEXP flags) {
  AMPKIT_R_BEGIN
  UpdateArgs a("C_sgd_update", tensors, {"params", "grads", "momentum_buffer"}, numbers, 4, flags,
               2);
  const double lr = a.numbers[0], momentum = a.numbers[1], dampening = a.numbers[2];
  const double weight_decay = a.numbers[3];
  const bool nesterov = a.flag(0), maximize = a.flag(1);
  const auto& params = a.list(0);
  auto grads = a.list(1);
  std::vector<at::Tensor> bufs = momentum != 0 ? a.sized(2) : std::vector<at::Tensor>();
  at::NoGradGuard no_grad;
  if (maximize) grads = at::_foreach_neg(grads);
  if (weight_decay != 0) grads = at::_foreach_add(grads, params, weight_decay);
  std::vector<at::Tensor> made(momentum != 0 ? a.n : 0);
  if (momentum != 0) {
    std::vector<at::Tensor> old_bufs, old_grads;
    for (size_t i = 0; i < a.n; ++i) {
      if (bufs[i].defined()) {
        old_bufs.push_back(bufs[i]);
        old_grads.push_back(grads[i]);
      }
    }
    if (!old_bufs.empty()) {
      mul_by(old_bufs, momentum, !params[0].is_cpu());
      at::_foreach_add_(old_bufs, old_grads, 1 - dampening);
    }
    for (size_t i = 0; i < a.n; ++i) {
      if (!bufs[i].defined()) bufs[i] = made[i] = grads[i].clone().detach();
    }
    grads = nesterov ? at::_foreach_add(grads, bufs, momentum) : bufs;
  }
  at::_foreach_add_(params, grads, -lr);
  if (momentum == 0) return R_NilValue;
  SEXP out = PROTECT(Rf_allocVector(VECSXP, static_cast<R_xlen_t>(a.n)));
  for (size_t i = 0; i < a.n; ++i) {
    if (made[i].defined()) SET_VECTOR_ELT(out, static_cast<R_xlen_t>(i), make_tensor(made[i]));
  }
  UNPROTECT(1);
  return out;
  AMPKIT_R_END
}

// PyTorch's _single_tensor_rmsprop (its CPU default; differentiable and capturable off):
// `tensors` is list(params, grads, square_avgs, grad_avgs, momentum_buffers, steps), `numbers`
// c(lr, alpha, eps, weight_decay, momentum), `flags` c(centered). The ops and scalars of
// torch.optim.RMSprop in its order, tensor by tensor, so the step is PyTorch's to the bit (in C,
// not ~8 calls of R, ~4 us each, per parameter).
extern "C" SEXP C_rmsprop_update(SEXP tensors, SEXP numbers, SEXP flags) {
  AMPKIT_R_BEGIN
  UpdateArgs a("C_rmsprop_update", tensors,
               {"params", "grads", "square_avg", "grad_avg", "momentum_buffer", "step"}, numbers, 5,
               flags, 1);
  const double lr = a.numbers[0], alpha = a.numbers[1], eps = a.numbers[2];
  const double weight_decay = a.numbers[3], momentum = a.numbers[4];
  const bool centered = a.flag(0);
  const auto& params = a.list(0);
  const auto& grads = a.list(1);
  const auto& square_avgs = a.list(2);
  // Checked before anything changes: a state the options need and it lacks is an error.
  const auto grad_avgs = centered ? a.list(3) : std::vector<at::Tensor>();
  const auto bufs = momentum > 0 ? a.list(4) : std::vector<at::Tensor>();
  const auto& steps = a.list(5);
  at::NoGradGuard no_grad;
  for (size_t i = 0; i < a.n; ++i) {
    steps[i].add_(1);
    at::Tensor grad = grads[i];
    if (weight_decay != 0) grad = grad.add(params[i], weight_decay);
    grad = as_real(grad);
    const at::Tensor param = as_real(params[i]);
    const at::Tensor square_avg = as_real(square_avgs[i]);
    square_avg.mul_(py_float(alpha)).addcmul_(grad, grad, 1 - alpha);
    at::Tensor avg;
    if (centered) {
      const at::Tensor grad_avg = as_real(grad_avgs[i]);
      grad_avg.lerp_(grad, 1 - alpha);
      avg = square_avg.addcmul(grad_avg, grad_avg, -1).sqrt_();
    } else {
      avg = square_avg.sqrt();
    }
    avg.add_(eps);
    if (momentum > 0) {
      const at::Tensor buf = as_real(bufs[i]);
      buf.mul_(py_float(momentum)).addcdiv_(grad, avg);
      param.add_(buf, -lr);
    } else {
      param.addcdiv_(grad, avg, -lr);
    }
  }
  return R_NilValue;
  AMPKIT_R_END
}

// PyTorch's _single_tensor_adagrad for dense gradients (its CPU default): `tensors` is
// list(params, grads, sums, steps), `numbers` c(lr, lr_decay, weight_decay, eps). Each step's
// learning rate is computed from the count read back (a host read, as PyTorch's).
extern "C" SEXP C_adagrad_update(SEXP tensors, SEXP numbers, SEXP flags) {
  AMPKIT_R_BEGIN
  UpdateArgs a("C_adagrad_update", tensors, {"params", "grads", "sum", "step"}, numbers, 4, flags,
               0);
  const double lr = a.numbers[0], lr_decay = a.numbers[1], weight_decay = a.numbers[2];
  const double eps = a.numbers[3];
  const auto& params = a.list(0);
  const auto& grads = a.list(1);
  const auto& sums = a.list(2);
  const auto& steps = a.list(3);
  at::NoGradGuard no_grad;
  for (size_t i = 0; i < a.n; ++i) {
    steps[i].add_(1);
    const double step = steps[i].item<double>();
    at::Tensor grad = grads[i];
    if (weight_decay != 0) grad = grad.add(params[i], weight_decay);
    const double clr = lr / (1 + (step - 1) * lr_decay);
    grad = as_real(grad);
    const at::Tensor sum = as_real(sums[i]);
    sum.addcmul_(grad, grad, 1);
    const at::Tensor std = sum.sqrt().add_(eps);
    as_real(params[i]).addcdiv_(grad, std, -clr);
  }
  return R_NilValue;
  AMPKIT_R_END
}

// PyTorch's _single_tensor_rprop (its CPU default): `tensors` is list(params, grads, prevs,
// step_sizes, steps), `numbers` c(etaminus, etaplus, step_size_min, step_size_max), `flags`
// c(maximize). PyTorch's masked assignments (sign[sign.gt(0)] = etaplus) are masked fills, one
// after the other: a NaN sign stays NaN.
extern "C" SEXP C_rprop_update(SEXP tensors, SEXP numbers, SEXP flags) {
  AMPKIT_R_BEGIN
  UpdateArgs a("C_rprop_update", tensors, {"params", "grads", "prev", "step_size", "step"}, numbers,
               4, flags, 1);
  const double etaminus = a.numbers[0], etaplus = a.numbers[1];
  const double step_size_min = a.numbers[2], step_size_max = a.numbers[3];
  const bool maximize = a.flag(0);
  const auto& params = a.list(0);
  const auto& grads = a.list(1);
  const auto& prevs = a.list(2);
  const auto& step_sizes = a.list(3);
  const auto& steps = a.list(4);
  at::NoGradGuard no_grad;
  for (size_t i = 0; i < a.n; ++i) {
    at::Tensor grad = maximize ? grads[i].neg() : grads[i];
    steps[i].add_(1);
    grad = as_real(grad);
    const at::Tensor prev = as_real(prevs[i]);
    const at::Tensor step_size = as_real(step_sizes[i]);
    const at::Tensor sign = grad.mul(prev).sign();
    sign.masked_fill_(sign.gt(0), etaplus);
    sign.masked_fill_(sign.lt(0), etaminus);
    sign.masked_fill_(sign.eq(0), 1);
    step_size.mul_(sign).clamp_(step_size_min, step_size_max);
    // Where the sign flipped, no step, and the gradient is remembered as 0.
    grad = grad.masked_fill(sign.eq(etaminus), 0);
    as_real(params[i]).addcmul_(grad.sign(), step_size, -1);
    prev.copy_(grad);
  }
  return R_NilValue;
  AMPKIT_R_END
}

// PyTorch's _single_tensor_asgd (its CPU default): `tensors` is list(params, grads, axs, etas,
// mus, steps), `numbers` c(lr, lambda, alpha, t0, weight_decay), `flags` c(maximize). eta and mu
// are read back (host reads, as PyTorch's) and written from the step count in double precision,
// as Python's floats, into their float32 tensors.
extern "C" SEXP C_asgd_update(SEXP tensors, SEXP numbers, SEXP flags) {
  AMPKIT_R_BEGIN
  UpdateArgs a("C_asgd_update", tensors, {"params", "grads", "ax", "eta", "mu", "step"}, numbers, 5,
               flags, 1);
  const double lr = a.numbers[0], lambd = a.numbers[1], alpha = a.numbers[2];
  const double t0 = a.numbers[3], weight_decay = a.numbers[4];
  const bool maximize = a.flag(0);
  const auto& params = a.list(0);
  const auto& grads = a.list(1);
  const auto& axs = a.list(2);
  const auto& etas = a.list(3);
  const auto& mus = a.list(4);
  const auto& steps = a.list(5);
  at::NoGradGuard no_grad;
  for (size_t i = 0; i < a.n; ++i) {
    at::Tensor grad = as_real(maximize ? grads[i].neg() : grads[i]);
    const at::Tensor param = as_real(params[i]);
    const at::Tensor ax = as_real(axs[i]);
    steps[i].add_(1);
    if (weight_decay != 0) grad = grad.add(param, weight_decay);
    const double eta = etas[i].item<double>();
    param.mul_(py_float(1 - lambd * eta));
    param.add_(grad, -eta);
    if (mus[i].item<double>() != 1) {
      ax.add_(param.sub(ax).mul_(mus[i]));
    } else {
      ax.copy_(param);
    }
    const double step = steps[i].item<double>();
    etas[i].fill_(lr / std::pow(1 + lambd * lr * step, alpha));
    mus[i].fill_(1 / std::max(1.0, step - t0));
  }
  return R_NilValue;
  AMPKIT_R_END
}

// PyTorch's Adadelta (its per-tensor arithmetic, as ATen's foreach ops over the group):
// `tensors` is list(params, grads, square_avgs, acc_deltas, steps), `numbers` c(lr, rho, eps,
// weight_decay), `flags` c(maximize, cuda). Complex parameters as PyTorch's default on the
// device steps them (see C_foreach_adam): on the CPU, decayed and updated as complex numbers,
// the averages computed on pairs of reals; on CUDA, pairs of reals throughout.
extern "C" SEXP C_adadelta_update(SEXP tensors, SEXP numbers, SEXP flags) {
  AMPKIT_R_BEGIN
  UpdateArgs a("C_adadelta_update", tensors, {"params", "grads", "square_avg", "acc_delta", "step"},
               numbers, 4, flags, 2);
  const double lr = a.numbers[0], rho = a.numbers[1], eps = a.numbers[2];
  const double weight_decay = a.numbers[3];
  const bool maximize = a.flag(0), cuda = a.flag(1);
  auto params = a.list(0);
  auto grads = a.list(1);
  const auto square_avgs = as_real(a.list(2));
  const auto acc_deltas = as_real(a.list(3));
  const auto& steps = a.list(4);
  if (cuda) {
    params = as_real(params);
    grads = as_real(grads);
  }
  at::NoGradGuard no_grad;
  at::_foreach_add_(steps, 1.0);
  if (maximize) grads = at::_foreach_neg(grads);
  if (weight_decay != 0) grads = at::_foreach_add(grads, params, weight_decay);
  grads = as_real(grads);
  mul_by(square_avgs, rho, cuda);
  at::_foreach_addcmul_(square_avgs, grads, grads, 1 - rho);
  auto std = at::_foreach_add(square_avgs, eps);
  at::_foreach_sqrt_(std);
  auto deltas = at::_foreach_add(acc_deltas, eps);
  at::_foreach_sqrt_(deltas);
  at::_foreach_div_(deltas, std);
  at::_foreach_mul_(deltas, grads);
  mul_by(acc_deltas, rho, cuda);
  at::_foreach_addcmul_(acc_deltas, deltas, deltas, 1 - rho);
  for (size_t i = 0; i < a.n; ++i) {
    if (params[i].is_complex()) deltas[i] = at::view_as_complex(deltas[i]);
  }
  at::_foreach_add_(params, deltas, -lr);
  return R_NilValue;
  AMPKIT_R_END
}

}  // namespace ampkit_r
