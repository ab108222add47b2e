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
// optim_adam()'s and optim_adamw()'s unfused step (C_foreach_adam): PyTorch's Python rule, the
// ATen foreach ops R/optim.R ran one by one from R, in the same order (the end of this file).
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

// ---- optim_adam's foreach step
// ---------------------------------------------------------------------

// PyTorch's _multi_tensor_adam (capturable and differentiable off) over one group: `tensors` is
// list(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, steps), `numbers` c(lr, beta1,
// beta2, weight_decay, eps), `flags` c(amsgrad, maximize, decoupled (AdamW), cuda). Each op is the
// one R/optim.R called with the same scalars (doubles), so the step is PyTorch's to the bit; in C
// its ~10 calls cost no R dispatch (~4 us each from R). The step counts are CPU tensors, read
// without a device sync, as PyTorch's.
extern "C" SEXP C_foreach_adam(SEXP tensors, SEXP numbers, SEXP flags) {
  AMPKIT_R_BEGIN
  if (TYPEOF(tensors) != VECSXP || Rf_xlength(tensors) != 6 || TYPEOF(numbers) != REALSXP ||
      Rf_xlength(numbers) != 5 || TYPEOF(flags) != LGLSXP || Rf_xlength(flags) != 4) {
    value_error("C_foreach_adam: expected 6 tensor lists, 5 numbers and 4 flags.");
  }
  const auto params = tensors_of(VECTOR_ELT(tensors, 0), "params");
  auto grads = tensors_of(VECTOR_ELT(tensors, 1), "grads");
  const auto exp_avgs = tensors_of(VECTOR_ELT(tensors, 2), "exp_avgs");
  const auto exp_avg_sqs = tensors_of(VECTOR_ELT(tensors, 3), "exp_avg_sqs");
  const auto max_sqs = tensors_of(VECTOR_ELT(tensors, 4), "max_exp_avg_sqs");
  const auto steps = tensors_of(VECTOR_ELT(tensors, 5), "steps");
  const double lr = REAL(numbers)[0], beta1 = REAL(numbers)[1], beta2 = REAL(numbers)[2];
  const double weight_decay = REAL(numbers)[3], eps = REAL(numbers)[4];
  const bool amsgrad = LOGICAL(flags)[0] == TRUE, maximize = LOGICAL(flags)[1] == TRUE;
  const bool decoupled = LOGICAL(flags)[2] == TRUE, cuda = LOGICAL(flags)[3] == TRUE;
  const size_t n = params.size();
  if (grads.size() != n || exp_avgs.size() != n || exp_avg_sqs.size() != n || steps.size() != n ||
      (amsgrad && max_sqs.size() != n)) {
    value_error("C_foreach_adam: the tensor lists differ in length.");
  }
  at::NoGradGuard no_grad;
  if (maximize) grads = at::_foreach_neg(grads);
  at::_foreach_add_(steps, 1.0);
  if (weight_decay != 0) {
    if (decoupled) {
      at::_foreach_mul_(params, 1 - lr * weight_decay);
    } else {
      grads = at::_foreach_add(grads, params, weight_decay);
    }
  }
  at::_foreach_lerp_(exp_avgs, grads, 1 - beta1);
  at::_foreach_mul_(exp_avg_sqs, beta2);
  at::_foreach_addcmul_(exp_avg_sqs, grads, grads, 1 - beta2);
  std::vector<c10::Scalar> bias2_sqrt;
  std::vector<c10::Scalar> step_size;
  for (const auto& s : steps) {
    const double step = s.item<double>();
    const double bias1 = 1 - std::pow(beta1, step);
    const double bias2 = 1 - std::pow(beta2, step);
    step_size.emplace_back(-(lr / bias1));
    // PyTorch's per-tensor update (its CPU default) takes math.sqrt, its foreach one (its CUDA
    // default) ** 0.5: the formula of the default on this device, to the last bit.
    bias2_sqrt.emplace_back(cuda ? std::pow(bias2, 0.5) : std::sqrt(bias2));
  }
  std::vector<at::Tensor> denom;
  if (amsgrad) {
    at::_foreach_maximum_(max_sqs, exp_avg_sqs);
    denom = at::_foreach_sqrt(max_sqs);
  } else {
    denom = at::_foreach_sqrt(exp_avg_sqs);
  }
  at::_foreach_div_(denom, bias2_sqrt);
  at::_foreach_add_(denom, eps);
  at::_foreach_addcdiv_(params, exp_avgs, denom, step_size);
  return R_NilValue;
  AMPKIT_R_END
}

}  // namespace ampkit_r
