// libtorch's and the core's exceptions as R conditions, raised once the C++ frames are gone.
//
// An exception caught by an entry (guarded_call, ampkit_r.h) is kept here (its R class, message and
// the core's error kind), then signal_kept_error() calls the package's R function
// signal_native_error(), which raises it with R torch's classes (rpkg/R/errors.R: the one place
// conditions are built). An R error met while C++ ran R code (eval_protected) is resumed unchanged.
#include "ampkit/errors.h"

#include <c10/util/Exception.h>

#include <csetjmp>
#include <string>

#include "ampkit/grad_scaler.h"
#include "ampkit_r.h"

namespace ampkit_r {
namespace {

struct Kept {
  bool pending = false;
  bool r_unwind = false;  // an R condition met in eval_protected: resume it
  std::string r_class;
  std::string message;
  std::string core_type;  // the core's error kind ("StateError", ...), "" for libtorch's
};
Kept kept;

// The continuation token of R_UnwindProtect, made once.
SEXP unwind_token() {
  static SEXP token = [] {
    SEXP t = R_MakeUnwindCont();
    R_PreserveObject(t);
    return t;
  }();
  return token;
}

struct RUnwind {};

// libtorch writes "<message>\nException raised from ... (most recent call first):\n<frames>" in
// some builds: R users get the message alone.
std::string without_backtrace(const c10::Error& e) {
  std::string text = e.what_without_backtrace();
  const auto at = text.find("\nException raised from");
  if (at != std::string::npos) text.erase(at);
  // A failed check's location and condition ("[enforce fail at alloc_cpu.cpp:127] err == 0. "):
  // C++ for an R user; the sentence after it says what failed.
  if (text.rfind("[enforce fail at ", 0) == 0) {
    const auto end = text.find(". ", text.find(']'));
    if (end != std::string::npos) text.erase(0, end + 2);
  }
  return text;
}

void keep(const std::string& r_class, const std::string& message,
          const std::string& core_type = "") {
  kept.pending = true;
  kept.r_unwind = false;
  kept.r_class = r_class;
  kept.message = message;
  kept.core_type = core_type;
}

}  // namespace

SEXP package_namespace() {
  static SEXP ns = [] {  // kept by R's registry of namespaces
    SEXP name = PROTECT(Rf_mkString("ampkit"));
    SEXP env = R_FindNamespace(name);
    UNPROTECT(1);
    return env;
  }();
  return ns;
}

// CUDA's out-of-memory error, or the CPU allocator's failure, which libtorch raises as a failed
// check (a plain c10::Error), not as an OutOfMemoryError.
bool out_of_memory(const c10::Error& e) {
  if (dynamic_cast<const c10::OutOfMemoryError*>(&e) != nullptr) return true;
  const std::string text = e.what_without_backtrace();  // alloc_cpu.cpp's two wordings
  return text.find("can't allocate memory") != std::string::npos ||
         text.find("not enough memory") != std::string::npos;
}

void value_error(const std::string& message) { throw Error("value_error", message); }
void type_error(const std::string& message) { throw Error("type_error", message); }

void keep_error(std::exception_ptr error) noexcept {
  try {
    std::rethrow_exception(error);
  } catch (const RUnwind&) {
    kept.pending = true;
    kept.r_unwind = true;
  } catch (const Error& e) {
    keep(e.r_class, e.message);
  } catch (const ampkit::ScaleCollapseError& e) {
    keep("ampkit_scale_collapse", e.what(), "ScaleCollapseError");
  } catch (const ampkit::DeviceStringError& e) {
    keep("value_error", e.what(), "DeviceStringError");
  } catch (const ampkit::ArgumentError& e) {
    keep("value_error", e.what(), "ArgumentError");
  } catch (const ampkit::ArgumentTypeError& e) {
    keep("type_error", e.what(), "ArgumentTypeError");
  } catch (const ampkit::StateError& e) {
    keep("runtime_error", e.what(), "StateError");
  } catch (const c10::ValueError& e) {
    keep("value_error", without_backtrace(e));
  } catch (const c10::IndexError& e) {
    keep("index_error", without_backtrace(e));
  } catch (const c10::TypeError& e) {
    keep("type_error", without_backtrace(e));
  } catch (const c10::NotImplementedError& e) {
    keep("not_implemented_error", without_backtrace(e));
  } catch (const c10::Error& e) {
    keep(out_of_memory(e) ? "torch_out_of_memory" : "runtime_error", without_backtrace(e));
  } catch (const std::bad_alloc&) {
    keep("torch_out_of_memory", "out of memory");
  } catch (const std::exception& e) {
    std::string message = e.what();
    if (message.empty()) message = python_error_message();  // torch's python_error
    keep("runtime_error", message.empty() ? "an error without a message" : message);
  } catch (...) {
    keep("runtime_error", "unknown C++ exception");
  }
}

// The warnings of the entries that ended, not yet issued (R's thread only).
std::vector<std::string> pending_warnings;

void WarningCollector::process(const c10::Warning& warning) { messages_.push_back(warning.msg()); }

WarningCollector::~WarningCollector() {
  for (auto& m : messages_) pending_warnings.push_back(std::move(m));
}

SEXP finish_call(SEXP result) {
  if (!pending_warnings.empty()) {
    // R objects first, the C++ buffer emptied: issuing them may longjmp (options(warn = 2)).
    SEXP messages = PROTECT(Rf_allocVector(STRSXP, static_cast<R_xlen_t>(pending_warnings.size())));
    for (size_t i = 0; i < pending_warnings.size(); ++i) {
      SET_STRING_ELT(messages, static_cast<R_xlen_t>(i),
                     Rf_mkCharCE(pending_warnings[i].c_str(), CE_UTF8));
    }
    pending_warnings.clear();
    pending_warnings.shrink_to_fit();
    if (result != nullptr) PROTECT(result);
    SEXP call = PROTECT(Rf_lang2(Rf_install("signal_native_warnings"), messages));
    Rf_eval(call, package_namespace());
    UNPROTECT(result != nullptr ? 3 : 2);
  }
  if (result == nullptr) return signal_kept_error();
  return result;
}

SEXP signal_kept_error() {
  if (!kept.pending) Rf_error("ampkit: no error to signal");  // a bug: never reached
  kept.pending = false;
  if (kept.r_unwind) R_ContinueUnwind(unwind_token());
  // Everything the R call needs is an R object before the longjmp: no C++ object is alive.
  SEXP r_class = PROTECT(Rf_mkString(kept.r_class.c_str()));
  SEXP message = PROTECT(Rf_mkCharCE(kept.message.c_str(), CE_UTF8));
  SEXP message_string = PROTECT(Rf_ScalarString(message));
  SEXP core_type = PROTECT(Rf_mkString(kept.core_type.c_str()));
  SEXP fn = PROTECT(Rf_install("signal_native_error"));
  SEXP call = PROTECT(Rf_lang4(fn, r_class, message_string, core_type));
  Rf_eval(call, package_namespace());
  UNPROTECT(6);
  Rf_error("ampkit: signal_native_error returned");  // never reached
}

namespace {
struct EvalData {
  SEXP call;
  SEXP env;
};
SEXP do_eval(void* data) {
  auto* d = static_cast<EvalData*>(data);
  return Rf_eval(d->call, d->env);
}
// R calls this when an R condition unwinds out of do_eval, before it jumps on: jump back into
// eval_protected instead (R resumes the jump later, R_ContinueUnwind with the token), so that
// the C++ frames in between unwind as C++ frames (their destructors run: guards, locks).
void on_jump(void* buffer, Rboolean jump) {
  if (jump) std::longjmp(*static_cast<std::jmp_buf*>(buffer), 1);
}
}  // namespace

SEXP eval_protected(SEXP call, SEXP env) {
  EvalData data{call, env};
  std::jmp_buf buffer;
  if (setjmp(buffer) != 0) throw RUnwind{};
  SEXP result = R_UnwindProtect(do_eval, &data, on_jump, &buffer, unwind_token());
  // R keeps the result in the token (its CAR) until the next call: a region's value, a loss and
  // the autograd graph behind it, would stay alive after the R objects that held it were gone.
  // The caller protects the result, as any R call's.
  SETCAR(unwind_token(), R_NilValue);
  return result;
}

std::string describe(SEXP x) {
  // quote(x): a call or a symbol given as the value would be evaluated as an argument
  SEXP quoted = PROTECT(Rf_lang2(Rf_install("quote"), x));
  SEXP call = PROTECT(Rf_lang2(Rf_install("describe"), quoted));
  SEXP text = PROTECT(eval_protected(call, package_namespace()));
  std::string out = Rf_isString(text) && Rf_length(text) == 1
                        ? std::string(Rf_translateCharUTF8(STRING_ELT(text, 0)))
                        : std::string("a value");
  UNPROTECT(3);
  return out;
}

}  // namespace ampkit_r
