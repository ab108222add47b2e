// `self$name` in a module's methods (R/nn-module.R's `$.nn_Module`), the lookup every forward makes
// for each of its parameters and submodules: in C, as R's own primitives would do it, because as R
// code (.subset2 after .subset2) it cost more than the tensor op it feeds. And nn_sequential()'s
// chain of forwards, which lets go of each layer's output once no R code can reach it. No libtorch
// here.
#define R_NO_REMAP
#include <R.h>
#include <Rinternals.h>

#include <cstring>

#include "entries.h"
#include "native_layers.h"

namespace ampkit_r {
// Declared here: ampkit_r.h brings ATen, this file none.
SEXP package_namespace();           // errors.cpp
void release_unreferenced(SEXP x);  // values.cpp
}  // namespace ampkit_r

namespace {

// A binding of an environment's own frame as .subset2() reads it (an active binding called, a
// promise forced), or R_UnboundValue.
SEXP frame_value(SEXP env, SEXP symbol) {
  SEXP value = Rf_findVarInFrame(env, symbol);
  if (TYPEOF(value) == PROMSXP) {
    PROTECT(value);
    value = Rf_eval(value, env);
    UNPROTECT(1);
  }
  return value;
}

// The element of a named list called `name` (the first, as .subset2), or R_UnboundValue.
SEXP element_named(SEXP list, SEXP name) {
  if (TYPEOF(list) != VECSXP) return R_UnboundValue;
  SEXP names = Rf_getAttrib(list, R_NamesSymbol);
  if (TYPEOF(names) != STRSXP) return R_UnboundValue;
  const char* wanted = CHAR(name);
  for (R_xlen_t i = 0; i < XLENGTH(names); ++i) {
    SEXP n = STRING_ELT(names, i);
    // CHARSXPs are cached: one pointer stands for one spelling in one encoding.
    if (n == name || (n != NA_STRING && std::strcmp(CHAR(n), wanted) == 0)) {
      return VECTOR_ELT(list, i);
    }
  }
  return R_UnboundValue;
}

// C_module_lookup's own part, on an instance (an R6 object) and a name (a CHARSXP).
SEXP module_field(SEXP instance, SEXP text) {
  static SEXP enclos_sym = Rf_install(".__enclos_env__");
  static SEXP private_sym = Rf_install("private");
  static SEXP tables[] = {Rf_install("parameters_"), Rf_install("buffers_"),
                          Rf_install("modules_")};
  SEXP enclos = Rf_findVarInFrame(instance, enclos_sym);
  if (TYPEOF(enclos) == ENVSXP) {
    SEXP priv = Rf_findVarInFrame(enclos, private_sym);
    if (TYPEOF(priv) == ENVSXP) {
      for (SEXP table : tables) {
        SEXP found = element_named(Rf_findVarInFrame(priv, table), text);
        if (found != R_UnboundValue && found != R_NilValue) return found;
      }
    }
  }
  SEXP value = frame_value(instance, Rf_installTrChar(text));
  return value == R_UnboundValue ? R_NilValue : value;
}

// The built-in layers whose forward the chain runs without R: the expression of each one's forward
// as the package made it (C_native_layers, at load). An instance whose forward has that expression
// runs the package's forward: not a subclass's own, nor a hook's wrapper, nor a precision policy's
// (each a function of its own). The expression, not the body: R's compiler gives each instance's
// forward a body of its own when it first runs, and keeps the expression it compiled.
SEXP native_exprs[2] = {nullptr, nullptr};
long long native_calls = 0;  // forwards the chain ran without R (read by the tests)

// The layer's forward run without R, or nullptr where the R forward is to run (see
// native_layer_forward(): its arguments or an error from libtorch).
SEXP native_forward(SEXP instance, SEXP forward, SEXP input) {
  if (TYPEOF(forward) != CLOSXP || TYPEOF(instance) != ENVSXP) return nullptr;
  SEXP expr = R_ClosureExpr(forward);
  SEXP out = nullptr;
  if (expr == native_exprs[0]) {
    // A symbol's name lives as long as the symbol: for ever.
    static SEXP weight = PRINTNAME(Rf_install("weight"));
    static SEXP bias = PRINTNAME(Rf_install("bias"));
    SEXP w = PROTECT(module_field(instance, weight));
    SEXP b = PROTECT(module_field(instance, bias));
    out = ampkit_r::native_layer_forward(ampkit_r::NativeLayer::Linear, input, w, b);
    UNPROTECT(2);
  } else if (expr == native_exprs[1]) {
    // nnf_relu(input, .subset2(self, "inplace")): in place is R's to run.
    static SEXP inplace_sym = Rf_install("inplace");
    SEXP inplace = frame_value(instance, inplace_sym);
    if (TYPEOF(inplace) != LGLSXP || XLENGTH(inplace) != 1 || LOGICAL(inplace)[0] != FALSE) {
      return nullptr;
    }
    out =
        ampkit_r::native_layer_forward(ampkit_r::NativeLayer::Relu, input, R_NilValue, R_NilValue);
  }
  if (out != nullptr) native_calls += 1;
  return out;
}

}  // namespace

// Parameters, buffers, submodules (private$parameters_, buffers_, modules_), then the instance's
// own fields and methods; NULL when none has the name (a parameter registered as NULL, such as a
// missing bias, reads as NULL all the same). Anything but a module and one name (a generator, a
// submodule's number) goes to R's module_lookup_other().
extern "C" SEXP C_module_lookup(SEXP instance, SEXP name) {
  static SEXP module_sym = Rf_install("module");
  // The callable a user holds (a function with the instance as its attribute "module"), or a
  // generator (its R6 class generator).
  if (TYPEOF(instance) == CLOSXP) instance = Rf_getAttrib(instance, module_sym);
  if (TYPEOF(instance) != ENVSXP || TYPEOF(name) != STRSXP || XLENGTH(name) != 1 ||
      Rf_inherits(instance, "R6ClassGenerator")) {
    static SEXP other = Rf_install("module_lookup_other");
    SEXP call = PROTECT(Rf_lang3(other, instance, name));
    SEXP value = Rf_eval(call, ampkit_r::package_namespace());
    UNPROTECT(1);
    return value;
  }
  return module_field(instance, STRING_ELT(name, 0));
}

// nn_sequential()'s forward: each module's forward on the output of the one before, the callable
// a user holds as its own forward (an R module's forward called directly, one R call fewer a
// layer). As each output is passed on, the output before it is let go of at once where no R code
// holds it any more: no one can reach a layer's output inside the chain but the next layer, and
// left to R's collector each one held its memory (after backward too) until the next collection:
// in the seeds' MLP the hidden layers' outputs were half the bytes that brought its collections
// (on a GPU 16-22% of R's step: bench/results/gpu/2026-11-27-late-nvidia-h200), and with the
// ReLUs' outputs (saved by autograd, so not counted) most of what R held past its use.
// "No R code holds it" is R's own reference count (release_unreferenced()): the chain binds the
// value in an environment of its own for the call `forward(input)`, and rebinds it; R drops the
// callee's references (its argument's promise) when the callee's environment was not kept. A layer
// that kept its input (in a field, a list, a kept closure, an attribute) holds a counted
// reference, and the output stays to the collector. The chain's input (the caller's) and its result
// are never let go.
extern "C" SEXP C_module_chain(SEXP modules, SEXP input) {
  static SEXP module_sym = Rf_install("module");
  static SEXP forward_sym = Rf_install("forward");
  static SEXP input_sym = Rf_install("input");
  if (TYPEOF(modules) != VECSXP) Rf_error("`modules` must be a list of modules.");
  SEXP env = PROTECT(R_NewEnv(R_BaseEnv, FALSE, 0));
  SEXP call = PROTECT(Rf_lang2(forward_sym, input_sym));
  SEXP current = input;
  PROTECT_INDEX at;
  PROTECT_WITH_INDEX(current, &at);
  Rf_defineVar(input_sym, current, env);
  for (R_xlen_t i = 0; i < XLENGTH(modules); ++i) {
    SEXP m = VECTOR_ELT(modules, i);
    SEXP instance = Rf_getAttrib(m, module_sym);
    SEXP forward = m;
    if (instance != R_NilValue) {
      forward = TYPEOF(instance) == ENVSXP ? frame_value(instance, forward_sym) : R_NilValue;
      if (forward == R_UnboundValue) forward = R_NilValue;
    }
    SEXP out = native_forward(instance, forward, current);
    if (out == nullptr) {
      Rf_defineVar(forward_sym, forward, env);
      out = Rf_eval(call, env);
    }
    PROTECT(out);
    Rf_defineVar(input_sym, out, env);
    Rf_defineVar(forward_sym, R_NilValue, env);
    if (current != input && current != out) ampkit_r::release_unreferenced(current);
    REPROTECT(current = out, at);
    UNPROTECT(1);
  }
  UNPROTECT(3);
  return current;
}

namespace {

// The private environment of a module (an R6 instance, or the callable a user holds), or nullptr.
SEXP module_private(SEXP m) {
  static SEXP module_sym = Rf_install("module");
  static SEXP enclos_sym = Rf_install(".__enclos_env__");
  static SEXP private_sym = Rf_install("private");
  SEXP instance = TYPEOF(m) == ENVSXP ? m : Rf_getAttrib(m, module_sym);
  if (TYPEOF(instance) != ENVSXP) return nullptr;
  SEXP enclos = Rf_findVarInFrame(instance, enclos_sym);
  if (TYPEOF(enclos) != ENVSXP) return nullptr;
  SEXP priv = Rf_findVarInFrame(enclos, private_sym);
  return TYPEOF(priv) == ENVSXP ? priv : nullptr;
}

// The walk of C_module_tensors: appends (in reverse) to the pairlists `*values` and `*names`, kept
// protected at `at` and `at + 1` (R_alloc'd names: nothing here outlives a jump out of R code, an
// active binding's).
void module_tensors(SEXP priv, SEXP kind, const char* prefix, SEXP* values, SEXP* names,
                    PROTECT_INDEX at) {
  static SEXP modules_sym = Rf_install("modules_");
  auto prefixed = [&](SEXP name) {
    const char* n = name == NA_STRING ? "NA" : Rf_translateCharUTF8(name);
    char* out = R_alloc(std::strlen(prefix) + std::strlen(n) + 1, 1);
    std::strcpy(out, prefix);
    std::strcat(out, n);
    return out;
  };
  R_CheckStack();  // a module registered inside itself: R's error, not a crash
  SEXP modules = PROTECT(frame_value(priv, modules_sym));
  SEXP module_names = PROTECT(Rf_getAttrib(modules, R_NamesSymbol));
  // Submodules by name, as `for (name in names(private$modules_))` walked them (none unnamed).
  if (TYPEOF(modules) == VECSXP && TYPEOF(module_names) == STRSXP) {
    for (R_xlen_t i = 0; i < XLENGTH(modules); ++i) {
      SEXP sub = module_private(VECTOR_ELT(modules, i));
      if (sub == nullptr) continue;
      PROTECT(sub);  // an active binding deeper down may change what holds it
      const char* name = prefixed(STRING_ELT(module_names, i));
      char* sub_prefix = R_alloc(std::strlen(name) + 2, 1);
      std::strcpy(sub_prefix, name);
      std::strcat(sub_prefix, ".");
      module_tensors(sub, kind, sub_prefix, values, names, at);
      UNPROTECT(1);
    }
  }
  SEXP own = PROTECT(frame_value(priv, kind));
  if (TYPEOF(own) == VECSXP) {
    SEXP own_names = Rf_getAttrib(own, R_NamesSymbol);
    for (R_xlen_t i = 0; i < XLENGTH(own); ++i) {
      SEXP value = VECTOR_ELT(own, i);
      if (value == R_NilValue) continue;
      SEXP name = TYPEOF(own_names) == STRSXP ? STRING_ELT(own_names, i) : Rf_mkChar("");
      REPROTECT(*values = Rf_cons(value, *values), at);
      REPROTECT(*names = Rf_cons(Rf_mkCharCE(prefixed(name), CE_UTF8), *names), at + 1);
    }
  }
  UNPROTECT(3);
}

}  // namespace

// A module's tensors of one kind ("parameters_" or "buffers_", its private fields'), its
// submodules' first, named "<submodule>.<name>" (recursively), then its own, NULL entries left
// out: a named list, which R's module_tensors() (R/nn-module.R) makes unique. In C: in R the walk
// cost ~7 us a module (a module's $parameters, its zero_grad()).
extern "C" SEXP C_module_tensors(SEXP priv, SEXP kind) {
  if (TYPEOF(priv) != ENVSXP || TYPEOF(kind) != STRSXP || XLENGTH(kind) != 1) {
    Rf_error("a module's private environment and one field name are needed.");
  }
  SEXP values = R_NilValue, names = R_NilValue;
  PROTECT_INDEX at;
  PROTECT_WITH_INDEX(values, &at);
  PROTECT(names);  // at + 1
  module_tensors(priv, Rf_installTrChar(STRING_ELT(kind, 0)), "", &values, &names, at);
  const int n = Rf_length(values);
  SEXP out = PROTECT(Rf_allocVector(VECSXP, n));
  SEXP out_names = PROTECT(Rf_allocVector(STRSXP, n));
  for (int i = n - 1; i >= 0; --i, values = CDR(values), names = CDR(names)) {
    SET_VECTOR_ELT(out, i, CAR(values));
    SET_STRING_ELT(out_names, i, CAR(names));
  }
  if (n > 0) Rf_setAttrib(out, R_NamesSymbol, out_names);  // none: list(), as c() of none gave
  UNPROTECT(4);
  return out;
}

// Registers the forwards of nn_linear and nn_relu (as the package made them) for the chain to run
// without R; with NULL, reads how many forwards it ran so.
extern "C" SEXP C_native_layers(SEXP linear, SEXP relu) {
  if (Rf_isNull(linear)) return Rf_ScalarReal(static_cast<double>(native_calls));
  SEXP given[] = {linear, relu};
  for (int i = 0; i < 2; ++i) {
    if (TYPEOF(given[i]) != CLOSXP) Rf_error("a layer's forward must be a function.");
    if (native_exprs[i] != nullptr) R_ReleaseObject(native_exprs[i]);
    native_exprs[i] = R_ClosureExpr(given[i]);
    R_PreserveObject(native_exprs[i]);
  }
  return R_NilValue;
}
