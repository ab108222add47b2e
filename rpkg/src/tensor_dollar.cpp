// `x$name` on a tensor (R's `$.torch_tensor`, rpkg/R/tensor.R): a field's value, or a method
// bound to `x`. In C because it is on every `x$view(...)`, `x$sum(...)` of a training step: in R
// the lookup and a wrapper `function(...) method(x, ...)` cost two closure calls and the forwarding
// of `...`, as much again as the op itself.
//
// A bound method is the method's own function with `self` taken out of its formals and bound in
// an environment of its own (whose parent is the method's): the call `x$view(-1, 64)` is then
// one call of the method's compiled body, its arguments matched by R as the method declares them.
// Only R's API: no libtorch here (a translation unit that includes ATen costs the build ~30 s).
#define R_NO_REMAP
#include <R.h>
#include <Rinternals.h>
#include <Rversion.h>

#include <initializer_list>

namespace {

SEXP fields = nullptr;   // environment: name -> function(self), R torch's active fields
SEXP methods = nullptr;  // environment: name -> function(self, ...), generated and written
SEXP missing = nullptr;  // function(name): the error for a name that is neither

SEXP bind_self(SEXP method, SEXP x) {
  static SEXP self_sym = Rf_install("self");
#if R_VERSION >= R_Version(4, 5, 0)
  SEXP env = PROTECT(R_NewEnv(R_ClosureEnv(method), FALSE, 1));
  Rf_defineVar(self_sym, x, env);
  SEXP bound = R_mkClosure(CDR(R_ClosureFormals(method)), R_ClosureBody(method), env);
#else
  SEXP env = PROTECT(R_NewEnv(CLOENV(method), FALSE, 1));
  Rf_defineVar(self_sym, x, env);
  SEXP bound = PROTECT(Rf_allocSExp(CLOSXP));
  SET_FORMALS(bound, CDR(FORMALS(method)));
  SET_BODY(bound, BODY(method));
  SET_CLOENV(bound, env);
  UNPROTECT(1);
#endif
  UNPROTECT(1);
  return bound;
}

SEXP call1(SEXP f, SEXP arg) {
  SEXP call = PROTECT(Rf_lang2(f, arg));
  SEXP value = Rf_eval(call, R_BaseEnv);
  UNPROTECT(1);
  return value;
}

}  // namespace

// At load (build_tensor_methods()): the two tables and the error. Every method's first formal is
// `self` (checked there).
extern "C" SEXP C_tensor_dollar_init(SEXP field_table, SEXP method_table, SEXP not_found) {
  for (SEXP* slot : {&fields, &methods, &missing}) {
    if (*slot != nullptr) R_ReleaseObject(*slot);
  }
  fields = field_table;
  methods = method_table;
  missing = not_found;
  for (SEXP value : {fields, methods, missing}) R_PreserveObject(value);
  return R_NilValue;
}

// Fields first (R torch's active fields: `x$shape`), then methods; `name` is the string R's `$`
// dispatch passes.
extern "C" SEXP C_tensor_dollar(SEXP x, SEXP name) {
  if (TYPEOF(name) != STRSXP || XLENGTH(name) != 1 || methods == nullptr) {
    return call1(missing, name);
  }
  SEXP symbol = Rf_installTrChar(STRING_ELT(name, 0));
  SEXP field = Rf_findVarInFrame3(fields, symbol, TRUE);
  if (TYPEOF(field) == CLOSXP) return call1(field, x);
  SEXP method = Rf_findVarInFrame3(methods, symbol, TRUE);
  if (TYPEOF(method) != CLOSXP) return call1(missing, name);
  return bind_self(method, x);
}
