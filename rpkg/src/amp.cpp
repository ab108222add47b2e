// AMP from R straight into the core: autocast regions (with_autocast, local_autocast,
// set_autocast) and the grad scaler's state machine. The R side (R/autocast.R, R/grad_scaler.R)
// only converts arguments; every rule is the core's.
//
// A region is entered with C_autocast_enter, which returns the core's token in an external
// pointer (with the core's warning, if the request was turned into a disabled region, as its
// attribute "warning"); C_autocast_exit closes it (the core refuses a token closed twice, out of
// order or on another thread). A scaler is the core's GradScaler in an external pointer; an
// optimizer's parameters are a ParamList, made once per optimizer and reset when they change.
#include <ATen/core/Tensor.h>

#include <map>
#include <string>

#include "ampkit/autocast.h"
#include "ampkit/grad_scaler.h"
#include "ampkit/scaler_checkpoint.h"
#include "ampkit/scaler_settings.h"
#include "ampkit_r.h"

namespace ampkit_r {
namespace {

SEXP token_tag = nullptr;
SEXP scaler_tag = nullptr;
SEXP params_tag = nullptr;

template <class T>
void finalize(SEXP x) {
  auto* p = static_cast<T*>(R_ExternalPtrAddr(x));
  if (p == nullptr) return;
  R_ClearExternalPtr(x);
  delete p;
}

template <class T>
T* object_of(SEXP x, SEXP tag, const char* what) {
  if (TYPEOF(x) != EXTPTRSXP || R_ExternalPtrTag(x) != tag || R_ExternalPtrAddr(x) == nullptr) {
    value_error(std::string("expected ") + what + ", got " + describe(x) + ".");
  }
  return static_cast<T*>(R_ExternalPtrAddr(x));
}

template <class T>
SEXP make_object(T* p, SEXP tag) {
  SEXP x = PROTECT(R_MakeExternalPtr(p, tag, R_NilValue));
  R_RegisterCFinalizerEx(x, finalize<T>, TRUE);
  UNPROTECT(1);
  return x;
}

ampkit::GradScaler& scaler_of(SEXP x) {
  return *object_of<ampkit::GradScaler>(x, scaler_tag, "an ampkit scaler");
}
ampkit::ParamList& params_of(SEXP x) {
  return *object_of<ampkit::ParamList>(x, params_tag, "an optimizer's parameter list");
}

std::string string_of(SEXP x, const char* arg) {
  if (TYPEOF(x) != STRSXP || XLENGTH(x) != 1 || STRING_ELT(x, 0) == NA_STRING) {
    value_error(std::string("`") + arg + "` must be a string such as \"cpu\" or \"cuda\", got " +
                describe(x) + ".");
  }
  return CHAR(STRING_ELT(x, 0));
}

// R values at the border of the settings table: NULL, a flag, a number (whole numbers stay
// doubles: the table's rows judge them), a string; anything else is "another kind".
ampkit::SettingValue setting_of(SEXP v) {
  if (Rf_isNull(v)) return std::monostate{};
  if (Rf_xlength(v) == 1 && !OBJECT(v)) {
    switch (TYPEOF(v)) {
      case LGLSXP:
        if (LOGICAL(v)[0] != NA_LOGICAL) return static_cast<bool>(LOGICAL(v)[0]);
        break;
      case INTSXP:
        if (INTEGER(v)[0] != NA_INTEGER) return static_cast<double>(INTEGER(v)[0]);
        break;
      case REALSXP:
        return REAL(v)[0];
      case STRSXP:
        if (STRING_ELT(v, 0) != NA_STRING) return std::string(CHAR(STRING_ELT(v, 0)));
        break;
      default:
        break;
    }
  }
  return ampkit::OtherKind{describe(v)};
}

SEXP r_setting(const ampkit::SettingValue& v) {
  return std::visit(
      [](const auto& x) -> SEXP {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, std::monostate>) {
          return R_NilValue;
        } else if constexpr (std::is_same_v<T, bool>) {
          return Rf_ScalarLogical(x);
        } else if constexpr (std::is_same_v<T, int64_t>) {
          return Rf_ScalarInteger(static_cast<int>(x));
        } else if constexpr (std::is_same_v<T, double>) {
          return Rf_ScalarReal(x);
        } else if constexpr (std::is_same_v<T, std::string>) {
          return Rf_mkString(x.c_str());
        } else {
          return Rf_mkString(x.name.c_str());
        }
      },
      v);
}

std::map<std::string, ampkit::SettingValue> settings_map(SEXP list) {
  std::map<std::string, ampkit::SettingValue> out;
  SEXP names = Rf_getAttrib(list, R_NamesSymbol);
  for (R_xlen_t i = 0; i < Rf_xlength(list); ++i) {
    out[CHAR(STRING_ELT(names, i))] = setting_of(VECTOR_ELT(list, i));
  }
  return out;
}

SEXP named_list(const std::vector<std::pair<std::string, ampkit::SettingValue>>& entries) {
  const auto n = static_cast<R_xlen_t>(entries.size());
  SEXP out = PROTECT(Rf_allocVector(VECSXP, n));
  SEXP names = PROTECT(Rf_allocVector(STRSXP, n));
  for (R_xlen_t i = 0; i < n; ++i) {
    SET_STRING_ELT(names, i, Rf_mkChar(entries[i].first.c_str()));
    SET_VECTOR_ELT(out, i, r_setting(entries[i].second));
  }
  Rf_setAttrib(out, R_NamesSymbol, names);
  UNPROTECT(2);
  return out;
}

SEXP tensor_or_null(const at::Tensor& t) { return t.defined() ? make_tensor(t) : R_NilValue; }

}  // namespace

extern "C" SEXP C_amp_init() {
  token_tag = Rf_install("ampkit_autocast_token");
  scaler_tag = Rf_install("ampkit_grad_scaler");
  params_tag = Rf_install("ampkit_param_list");
  return R_NilValue;
}

// ---- autocast ---------------------------------------------------------------------------------

namespace {

// The R arguments of a region as the core's request (the core resolves and judges them).
ampkit::AutocastRequest request_of(SEXP device_type, SEXP dtype, SEXP enabled, SEXP cache_enabled) {
  std::optional<at::ScalarType> type;
  if (!Rf_isNull(dtype)) type = dtype_or_name_of(dtype, "dtype");
  std::optional<bool> cache;
  if (!Rf_isNull(cache_enabled)) {  // NULL: autocast's default
    if (TYPEOF(cache_enabled) != LGLSXP || Rf_xlength(cache_enabled) != 1 ||
        LOGICAL(cache_enabled)[0] == NA_LOGICAL) {
      value_error("`cache_enabled` must be TRUE, FALSE or NULL, got " + describe(cache_enabled) +
                  ".");
    }
    cache = LOGICAL(cache_enabled)[0] == TRUE;
  }
  return ampkit::resolve_autocast(string_of(device_type, "device_type"), type,
                                  flag_of(enabled, "enabled"), cache);
}

// A region open while with_autocast's code runs; closed on the way out when the code ended with an
// R condition, an interrupt or a jump (return(), break), which reach here as C++ exceptions. It
// unwinds: a region the code opened and left open (set_autocast()) closes with it, so autocast
// is never left on by an error.
struct OpenRegion {
  ampkit::AutocastToken token;
  ~OpenRegion() {
    if (!token.active()) return;
    try {
      ampkit::unwind_autocast(token);
    } catch (...) {  // cannot happen on R's one thread; a destructor must not throw
    }
  }
};

}  // namespace

extern "C" SEXP C_autocast_enter(SEXP device_type, SEXP dtype, SEXP enabled, SEXP cache_enabled) {
  AMPKIT_R_BEGIN
  const ampkit::AutocastRequest request = request_of(device_type, dtype, enabled, cache_enabled);
  auto* token = new ampkit::AutocastToken(ampkit::enter_autocast(request));
  SEXP x = PROTECT(make_object(token, token_tag));
  if (!request.warning.empty()) {
    Rf_setAttrib(x, Rf_install("warning"), Rf_mkString(request.warning.c_str()));
  }
  UNPROTECT(1);
  return x;
  AMPKIT_R_END
}

// with_autocast(): enters the region, evaluates `code` (the promise in with_autocast's frame
// `env`), exits. One call from R and no on.exit(): the region's lifetime is this C++ frame.
extern "C" SEXP C_with_autocast(SEXP env, SEXP device_type, SEXP dtype, SEXP enabled,
                                SEXP cache_enabled) {
  AMPKIT_R_BEGIN
  const ampkit::AutocastRequest request = request_of(device_type, dtype, enabled, cache_enabled);
  OpenRegion region{ampkit::enter_autocast(request)};
  if (!request.warning.empty()) {
    // warn_region(message, sys.call()): sys.call() in `env` is the user's call of with_autocast.
    SEXP message = PROTECT(Rf_mkString(request.warning.c_str()));
    SEXP user_call = PROTECT(Rf_lang1(Rf_install("sys.call")));
    SEXP call = PROTECT(Rf_lang3(Rf_install("warn_region"), message, user_call));
    eval_protected(call, env);  // under options(warn = 2) an error: the region closes
    UNPROTECT(3);
  }
  SEXP value = eval_protected(Rf_install("code"), env);
  // Not in the destructor: an inner region the code left open is an error the user sees. The
  // exit allocates nothing in R, so `value` needs no protection.
  ampkit::exit_autocast(region.token);
  return value;
  AMPKIT_R_END
}

extern "C" SEXP C_autocast_exit(SEXP token) {
  AMPKIT_R_BEGIN
  ampkit::exit_autocast(*object_of<ampkit::AutocastToken>(token, token_tag, "an autocast token"));
  return R_NilValue;
  AMPKIT_R_END
}

// The end of local_autocast()'s frame: the region closes with any region opened inside it and
// left open (by an error on its way, or by the code), as with_autocast's does on an error.
extern "C" SEXP C_autocast_unwind(SEXP token) {
  AMPKIT_R_BEGIN
  ampkit::unwind_autocast(*object_of<ampkit::AutocastToken>(token, token_tag, "an autocast token"));
  return R_NilValue;
  AMPKIT_R_END
}

extern "C" SEXP C_autocast_token_open(SEXP token) {
  AMPKIT_R_BEGIN
  return Rf_ScalarLogical(
      object_of<ampkit::AutocastToken>(token, token_tag, "an autocast token")->active());
  AMPKIT_R_END
}

extern "C" SEXP C_autocast_state(SEXP device_type) {
  AMPKIT_R_BEGIN
  const c10::DeviceType type = ampkit::autocast_device_type(string_of(device_type, "device_type"));
  const ampkit::AutocastState s = ampkit::current_autocast_state(type);
  SEXP out = PROTECT(Rf_allocVector(VECSXP, 3));
  SET_VECTOR_ELT(out, 0, Rf_ScalarLogical(s.enabled));
  SET_VECTOR_ELT(out, 1, make_dtype(s.dtype));
  SET_VECTOR_ELT(out, 2, Rf_ScalarLogical(s.cache_enabled));
  UNPROTECT(1);
  return out;
  AMPKIT_R_END
}

// ---- grad scaler ------------------------------------------------------------------------------

extern "C" SEXP C_scaler_new(SEXP device, SEXP options, SEXP allow_fp16_grads) {
  AMPKIT_R_BEGIN
  const auto settings = ampkit::settings_from_options(settings_map(options));
  auto* scaler = new ampkit::GradScaler(string_of(device, "device"), settings,
                                        LOGICAL(allow_fp16_grads)[0] == TRUE);
  return make_object(scaler, scaler_tag);
  AMPKIT_R_END
}

extern "C" SEXP C_scaler_option_defaults() {
  AMPKIT_R_BEGIN
  return named_list(ampkit::option_defaults());
  AMPKIT_R_END
}

extern "C" SEXP C_scaler_options(SEXP scaler) {
  AMPKIT_R_BEGIN
  const ampkit::ScalerState state{scaler_of(scaler).settings(), {}};
  std::vector<std::pair<std::string, ampkit::SettingValue>> out;
  for (const auto& e : ampkit::scaler_table()) {
    if (e.option) out.emplace_back(e.name, e.get(state));
  }
  return named_list(out);
  AMPKIT_R_END
}

extern "C" SEXP C_scaler_info(SEXP scaler) {
  AMPKIT_R_BEGIN
  ampkit::GradScaler& s = scaler_of(scaler);
  SEXP out = PROTECT(Rf_allocVector(VECSXP, 4));
  SET_VECTOR_ELT(out, 0, Rf_ScalarLogical(s.is_enabled()));
  SET_VECTOR_ELT(out, 1, Rf_mkString(s.device().c_str()));
  SET_VECTOR_ELT(out, 2, Rf_mkString(s.warning().c_str()));
  SET_VECTOR_ELT(out, 3, Rf_ScalarReal(static_cast<double>(s.host_reads())));
  UNPROTECT(1);
  return out;
  AMPKIT_R_END
}

extern "C" SEXP C_scaler_scale(SEXP scaler, SEXP x) {
  AMPKIT_R_BEGIN
  ampkit::GradScaler& s = scaler_of(scaler);
  if (!s.is_enabled()) return x;
  return make_tensor(s.scale(tensor_of(x, "outputs")));
  AMPKIT_R_END
}

extern "C" SEXP C_param_list(SEXP params, SEXP names) {
  AMPKIT_R_BEGIN
  std::vector<at::Tensor> tensors;
  for (R_xlen_t i = 0; i < Rf_xlength(params); ++i) {
    tensors.push_back(tensor_of(VECTOR_ELT(params, i), "params"));
  }
  std::vector<std::string> labels;
  for (R_xlen_t i = 0; i < Rf_xlength(names); ++i) labels.emplace_back(CHAR(STRING_ELT(names, i)));
  return make_object(new ampkit::ParamList(std::move(tensors), std::move(labels)), params_tag);
  AMPKIT_R_END
}

extern "C" SEXP C_param_list_reset(SEXP list, SEXP params, SEXP names) {
  AMPKIT_R_BEGIN
  std::vector<at::Tensor> tensors;
  for (R_xlen_t i = 0; i < Rf_xlength(params); ++i) {
    tensors.push_back(tensor_of(VECTOR_ELT(params, i), "params"));
  }
  std::vector<std::string> labels;
  for (R_xlen_t i = 0; i < Rf_xlength(names); ++i) labels.emplace_back(CHAR(STRING_ELT(names, i)));
  params_of(list).reset(std::move(tensors), std::move(labels));
  return R_NilValue;
  AMPKIT_R_END
}

// The core's names for an optimizer's parameters: `given` a list of character vectors (NULL
// where a group has none), `sizes` the groups' sizes, `optimizer` counted from 0.
extern "C" SEXP C_param_names(SEXP given, SEXP sizes, SEXP optimizer) {
  AMPKIT_R_BEGIN
  std::vector<std::vector<std::string>> names;
  for (R_xlen_t g = 0; g < Rf_xlength(given); ++g) {
    SEXP group = VECTOR_ELT(given, g);
    std::vector<std::string> these;
    if (TYPEOF(group) == STRSXP) {
      for (R_xlen_t i = 0; i < XLENGTH(group); ++i) these.emplace_back(CHAR(STRING_ELT(group, i)));
    }
    names.push_back(std::move(these));
  }
  std::vector<size_t> counts;
  for (R_xlen_t g = 0; g < Rf_xlength(sizes); ++g)
    counts.push_back(static_cast<size_t>(REAL(sizes)[g]));
  const auto out = ampkit::param_names(names, counts, Rf_asInteger(optimizer));
  SEXP r = PROTECT(Rf_allocVector(STRSXP, static_cast<R_xlen_t>(out.size())));
  for (size_t i = 0; i < out.size(); ++i)
    SET_STRING_ELT(r, static_cast<R_xlen_t>(i), Rf_mkChar(out[i].c_str()));
  UNPROTECT(1);
  return r;
  AMPKIT_R_END
}

extern "C" SEXP C_scaler_unscale(SEXP scaler, SEXP params) {
  AMPKIT_R_BEGIN
  scaler_of(scaler).unscale_(params_of(params));
  return R_NilValue;
  AMPKIT_R_END
}

extern "C" SEXP C_scaler_may_step(SEXP scaler, SEXP params) {
  AMPKIT_R_BEGIN
  return Rf_ScalarLogical(scaler_of(scaler).may_step(params_of(params)));
  AMPKIT_R_END
}

extern "C" SEXP C_scaler_mark_stepped(SEXP scaler, SEXP params) {
  AMPKIT_R_BEGIN
  scaler_of(scaler).mark_stepped(params_of(params));
  return R_NilValue;
  AMPKIT_R_END
}

extern "C" SEXP C_scaler_check_can_step(SEXP scaler, SEXP params) {
  AMPKIT_R_BEGIN
  scaler_of(scaler).check_can_step(params_of(params));
  return R_NilValue;
  AMPKIT_R_END
}

// The sync-free path of fused optimizers: list(grad_scale, found_inf).
extern "C" SEXP C_scaler_fused_step_args(SEXP scaler, SEXP params, SEXP existing) {
  AMPKIT_R_BEGIN
  std::optional<at::Tensor> given;
  if (!Rf_isNull(existing)) given = tensor_of(existing, "grad_scale");
  const ampkit::FusedStepArgs args = scaler_of(scaler).fused_step_args(params_of(params), given);
  SEXP out = PROTECT(Rf_allocVector(VECSXP, 2));
  SET_VECTOR_ELT(out, 0, args.grad_scale ? make_tensor(*args.grad_scale) : R_NilValue);
  SET_VECTOR_ELT(out, 1, make_tensor(args.found_inf));
  UNPROTECT(1);
  return out;
  AMPKIT_R_END
}

// update(): the core's warning ("" when none); update(new_scale): a number or a tensor.
extern "C" SEXP C_scaler_update(SEXP scaler, SEXP new_scale) {
  AMPKIT_R_BEGIN
  ampkit::GradScaler& s = scaler_of(scaler);
  if (Rf_isNull(new_scale)) return Rf_mkString(s.update().c_str());
  if (is_tensor(new_scale)) {
    s.update(tensor_of(new_scale, "new_scale"));
  } else {
    s.update(number_of(new_scale, "new_scale"));
  }
  return Rf_mkString("");
  AMPKIT_R_END
}

extern "C" SEXP C_scaler_step_was_skipped(SEXP scaler, SEXP params) {
  AMPKIT_R_BEGIN
  ampkit::GradScaler& s = scaler_of(scaler);
  return Rf_ScalarLogical(s.step_was_skipped(Rf_isNull(params) ? nullptr : &params_of(params)));
  AMPKIT_R_END
}

extern "C" SEXP C_scaler_get_scale(SEXP scaler) {
  AMPKIT_R_BEGIN
  return Rf_ScalarReal(scaler_of(scaler).get_scale());
  AMPKIT_R_END
}

extern "C" SEXP C_scaler_scale_tensor(SEXP scaler) {
  AMPKIT_R_BEGIN
  return tensor_or_null(scaler_of(scaler).scale_tensor());
  AMPKIT_R_END
}

extern "C" SEXP C_scaler_stats(SEXP scaler) {
  AMPKIT_R_BEGIN
  const ampkit::ScalerStats s = scaler_of(scaler).stats();
  return named_list({{"steps", s.steps},
                     {"skipped_steps", s.skipped_steps},
                     {"consecutive_skipped_steps", s.consecutive_skipped_steps},
                     {"scale", s.scale}});
  AMPKIT_R_END
}

extern "C" SEXP C_scaler_overflow_report(SEXP scaler) {
  AMPKIT_R_BEGIN
  const auto report = scaler_of(scaler).overflow_report();
  const auto n = static_cast<R_xlen_t>(report.size());
  SEXP name = PROTECT(Rf_allocVector(STRSXP, n));
  SEXP inf = PROTECT(Rf_allocVector(REALSXP, n));
  SEXP nan = PROTECT(Rf_allocVector(REALSXP, n));
  for (R_xlen_t i = 0; i < n; ++i) {
    SET_STRING_ELT(name, i, Rf_mkChar(report[i].name.c_str()));
    REAL(inf)[i] = static_cast<double>(report[i].inf);
    REAL(nan)[i] = static_cast<double>(report[i].nan);
  }
  SEXP out = PROTECT(Rf_allocVector(VECSXP, 3));
  SET_VECTOR_ELT(out, 0, name);
  SET_VECTOR_ELT(out, 1, inf);
  SET_VECTOR_ELT(out, 2, nan);
  UNPROTECT(4);
  return out;
  AMPKIT_R_END
}

extern "C" SEXP C_scaler_state_dict(SEXP scaler) {
  AMPKIT_R_BEGIN
  return named_list(ampkit::to_state_dict(scaler_of(scaler).state_dict()));
  AMPKIT_R_END
}

extern "C" SEXP C_scaler_load_state_dict(SEXP scaler, SEXP state) {
  AMPKIT_R_BEGIN
  ampkit::GradScaler& s = scaler_of(scaler);
  // Disabled, it loads nothing (torch.amp's): its own state dict, empty, is refused otherwise.
  if (!s.is_enabled()) return R_NilValue;
  s.load_state_dict(ampkit::from_state_dict(settings_map(state), s.state_dict()));
  return R_NilValue;
  AMPKIT_R_END
}

// The factors: `which` is "growth_factor", "backoff_factor" or "growth_interval"; `value` NULL
// reads, a number sets (judged by the core).
extern "C" SEXP C_scaler_factor(SEXP scaler, SEXP which, SEXP value) {
  AMPKIT_R_BEGIN
  ampkit::GradScaler& s = scaler_of(scaler);
  const std::string name = string_of(which, "which");
  if (!Rf_isNull(value)) {
    const double v = number_of(value, name == "growth_interval" ? "new_interval" : "new_factor");
    if (name == "growth_factor") s.set_growth_factor(v);
    if (name == "backoff_factor") s.set_backoff_factor(v);
    if (name == "growth_interval") s.set_growth_interval(v);
  }
  if (name == "growth_factor") return Rf_ScalarReal(s.growth_factor());
  if (name == "backoff_factor") return Rf_ScalarReal(s.backoff_factor());
  return Rf_ScalarInteger(static_cast<int>(s.growth_interval()));  // an int, as torch.amp's
  AMPKIT_R_END
}

}  // namespace ampkit_r
