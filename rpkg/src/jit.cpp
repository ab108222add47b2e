// TorchScript from R (R torch's jit_trace, jit_compile, jit_save, jit_load): libtorch's tracer
// records the ops an R function runs (every generated op reaches the dispatcher, whose Tracer key
// records it: ops.cpp), libtorch's script compiler compiles TorchScript source, and modules are
// libtorch's torch::jit::Module, saved and loaded in PyTorch's format.
//
// R objects here are external pointers to:
//   ScriptModule    a torch::jit::Module (a handle: copies share the module)
//   ScriptCallable  a function of a compilation unit (a traced or compiled function, which keeps
//                   its unit alive) or a module's method (which keeps its module alive)
//   ScriptUnit      a compilation unit from jit_compile()
// R/jit.R wraps them in R torch's objects (script_function, script_module, script_method).
#include <torch/csrc/jit/api/compilation_unit.h>
#include <torch/csrc/jit/api/function_impl.h>
#include <torch/csrc/jit/api/module.h>
#include <torch/csrc/jit/frontend/tracer.h>
#include <torch/csrc/jit/runtime/graph_executor.h>
#include <torch/csrc/jit/runtime/operator.h>
#include <torch/csrc/jit/serialization/import.h>
#include <torch/jit.h>

#include <cstring>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "ampkit_r.h"

namespace ampkit_r {
namespace {

using torch::jit::CompilationUnit;
using torch::jit::Function;
using torch::jit::Module;
using torch::jit::Stack;

// The unit that holds traced functions and the classes of modules made from R modules (R torch
// keeps one such unit for the session as well).
std::shared_ptr<CompilationUnit>& session_unit() {
  static auto unit = std::make_shared<CompilationUnit>();
  return unit;
}

// ---- the pointers ------------------------------------------------------------------------------

struct ScriptModule {
  Module module;
};

struct ScriptCallable {
  std::shared_ptr<CompilationUnit> unit;  // a function: its unit
  Function* function = nullptr;
  std::optional<Module> module;  // a method: its module and name
  std::string method;
};

struct ScriptUnit {
  std::shared_ptr<CompilationUnit> unit;
};

template <typename T>
void finalize(SEXP x) {
  delete static_cast<T*>(R_ExternalPtrAddr(x));
  R_ClearExternalPtr(x);
}

template <typename T>
SEXP wrap(T* value, const char* cls) {
  SEXP x = PROTECT(R_MakeExternalPtr(value, Rf_install(cls), R_NilValue));
  R_RegisterCFinalizerEx(x, finalize<T>, TRUE);
  Rf_setAttrib(x, R_ClassSymbol, Rf_mkString(cls));
  UNPROTECT(1);
  return x;
}

template <typename T>
T& unwrap(SEXP x, const char* cls, const char* what) {
  if (TYPEOF(x) != EXTPTRSXP || R_ExternalPtrTag(x) != Rf_install(cls) ||
      R_ExternalPtrAddr(x) == nullptr) {
    value_error(std::string("Expected ") + what + ", got " + describe(x) + ".");
  }
  return *static_cast<T*>(R_ExternalPtrAddr(x));
}

Module& module_of(SEXP x) {
  return unwrap<ScriptModule>(x, "ampkit_script_module", "a script module").module;
}

SEXP make_module(Module module) {
  return wrap(new ScriptModule{std::move(module)}, "ampkit_script_module");
}

std::string string_of(SEXP x, const char* arg) {
  if (TYPEOF(x) != STRSXP || XLENGTH(x) != 1 || STRING_ELT(x, 0) == NA_STRING) {
    value_error(std::string("`") + arg + "` must be a string, got " + describe(x) + ".");
  }
  return CHAR(STRING_ELT(x, 0));
}

// ---- R values <-> IValues ----------------------------------------------------------------------

bool has_names(SEXP x) {
  SEXP names = Rf_getAttrib(x, R_NamesSymbol);
  if (names == R_NilValue || XLENGTH(x) == 0) return false;
  for (R_xlen_t i = 0; i < XLENGTH(names); ++i) {
    if (STRING_ELT(names, i) == NA_STRING || CHAR(STRING_ELT(names, i))[0] == '\0') return false;
  }
  return true;
}

// The one type of `items` (a tensor's is Tensor, without its shape); nullptr when two of them
// have none in common.
c10::TypePtr common_type(const std::vector<c10::IValue>& items) {
  c10::TypePtr type;
  for (const c10::IValue& item : items) {
    c10::TypePtr t = item.isTensor() ? c10::TensorType::get() : c10::unshapedType(item.type());
    if (!type) {
      type = t;
    } else if (auto unified = c10::unifyTypes(type, t)) {
      type = *unified;
    } else {
      return nullptr;
    }
  }
  return type ? type : c10::TensorType::get();
}

// An R atomic vector (not one value) as TorchScript's typed list: List[int], List[float],
// List[bool] or List[str], as R torch passes them.
c10::IValue list_of_vector(SEXP x) {
  const R_xlen_t n = XLENGTH(x);
  switch (TYPEOF(x)) {
    case INTSXP: {
      c10::List<int64_t> out;
      for (R_xlen_t i = 0; i < n; ++i) {
        if (INTEGER(x)[i] == NA_INTEGER) value_error("TorchScript's integers have no NA.");
        out.push_back(INTEGER(x)[i]);
      }
      return out;
    }
    case REALSXP: {
      c10::List<double> out;
      for (R_xlen_t i = 0; i < n; ++i) out.push_back(REAL(x)[i]);
      return out;
    }
    case LGLSXP: {
      c10::List<bool> out;
      for (R_xlen_t i = 0; i < n; ++i) {
        if (LOGICAL(x)[i] == NA_LOGICAL) value_error("TorchScript's flags have no NA.");
        out.push_back(LOGICAL(x)[i] != 0);
      }
      return out;
    }
    case STRSXP: {
      c10::List<std::string> out;
      for (R_xlen_t i = 0; i < n; ++i) {
        if (STRING_ELT(x, i) == NA_STRING) value_error("TorchScript's strings have no NA.");
        out.push_back(CHAR(STRING_ELT(x, i)));
      }
      return out;
    }
    default:
      return c10::IValue();
  }
}

// An R value as TorchScript takes it: a tensor; a list (a jit_tuple(), or one whose elements have
// no type in common: a tuple; a named list: a dict with string keys); a number, flag or string of
// length 1 (jit_scalar() marks one); another vector of them: a typed list; NULL.
c10::IValue ivalue_of(SEXP x) {
  if (is_tensor(x)) return tensor_of(x, "x");
  if (x == R_NilValue) return c10::IValue();
  if (TYPEOF(x) == VECSXP) {
    std::vector<c10::IValue> items;
    for (R_xlen_t i = 0; i < XLENGTH(x); ++i) items.push_back(ivalue_of(VECTOR_ELT(x, i)));
    if (Rf_inherits(x, "jit_tuple")) return c10::ivalue::Tuple::create(std::move(items));
    const c10::TypePtr type = common_type(items);
    if (has_names(x)) {
      if (!type) {
        value_error(
            "A named list is a TorchScript dict, whose values are of one type; got values of "
            "types that have none in common.");
      }
      SEXP names = Rf_getAttrib(x, R_NamesSymbol);
      c10::impl::GenericDict dict(c10::StringType::get(), type);
      for (size_t i = 0; i < items.size(); ++i) {
        dict.insert_or_assign(std::string(CHAR(STRING_ELT(names, i))), items[i]);
      }
      return dict;
    }
    // list(tensor, list(tensor)), list(tensor, 2L): a tuple, as R torch passes them
    if (!type) return c10::ivalue::Tuple::create(std::move(items));
    bool tensors = true;
    for (const c10::IValue& item : items) tensors = tensors && item.isTensor();
    if (tensors) {
      c10::List<at::Tensor> list;
      for (const c10::IValue& item : items) list.push_back(item.toTensor());
      return list;
    }
    c10::impl::GenericList list(type);
    for (c10::IValue& item : items) list.push_back(std::move(item));
    return list;
  }
  // (only vectors have a length: an environment or a function is refused below)
  if (Rf_isVectorAtomic(x) && (!OBJECT(x) || Rf_inherits(x, "jit_scalar"))) {
    const R_xlen_t n = XLENGTH(x);
    if (TYPEOF(x) == LGLSXP && n == 1 && LOGICAL(x)[0] != NA_LOGICAL) return LOGICAL(x)[0] != 0;
    if (TYPEOF(x) == INTSXP && n == 1 && INTEGER(x)[0] != NA_INTEGER) {
      return static_cast<int64_t>(INTEGER(x)[0]);
    }
    if (TYPEOF(x) == REALSXP && n == 1) return REAL(x)[0];
    if (TYPEOF(x) == STRSXP && n == 1 && STRING_ELT(x, 0) != NA_STRING) {
      return std::string(CHAR(STRING_ELT(x, 0)));
    }
    if (n != 1 && !Rf_inherits(x, "jit_scalar")) {
      c10::IValue list = list_of_vector(x);
      if (!list.isNone()) return list;
    }
  }
  value_error(
      "TorchScript takes tensors, lists of them, and numbers, flags or strings (one, or a "
      "vector as a list); got " +
      describe(x) + ".");
}

SEXP r_value_of(const c10::IValue& v);

SEXP r_list_of(const std::vector<c10::IValue>& items) {
  SEXP out = PROTECT(Rf_allocVector(VECSXP, static_cast<R_xlen_t>(items.size())));
  for (size_t i = 0; i < items.size(); ++i) {
    SET_VECTOR_ELT(out, static_cast<R_xlen_t>(i), r_value_of(items[i]));
  }
  UNPROTECT(1);
  return out;
}

// An R list of `values` named `names` (a dict's keys, a class's constants).
SEXP named_list_of(const std::vector<c10::IValue>& values, const std::vector<std::string>& names) {
  SEXP out = PROTECT(r_list_of(values));
  SEXP r_names = PROTECT(Rf_allocVector(STRSXP, static_cast<R_xlen_t>(names.size())));
  for (size_t i = 0; i < names.size(); ++i) {
    SET_STRING_ELT(r_names, static_cast<R_xlen_t>(i), Rf_mkChar(names[i].c_str()));
  }
  Rf_setAttrib(out, R_NamesSymbol, r_names);
  UNPROTECT(2);
  return out;
}

// TorchScript's value in R: tuples and lists become lists, dicts named lists.
SEXP r_value_of(const c10::IValue& v) {
  if (v.isTensor()) return make_tensor(v.toTensor());
  if (v.isNone()) return R_NilValue;
  if (v.isBool()) return Rf_ScalarLogical(v.toBool());
  if (v.isInt()) {
    const int64_t i = v.toInt();
    if (i > INT32_MIN && i <= INT32_MAX) return Rf_ScalarInteger(static_cast<int>(i));
    return Rf_ScalarReal(static_cast<double>(i));
  }
  if (v.isDouble()) return Rf_ScalarReal(v.toDouble());
  if (v.isString()) return Rf_mkString(v.toStringRef().c_str());
  if (v.isTensorList()) {
    std::vector<c10::IValue> items;
    for (const at::Tensor& t : v.toTensorVector()) items.emplace_back(t);
    return r_list_of(items);
  }
  if (v.isList()) return r_list_of(v.toListRef().vec());
  if (v.isTuple()) {
    const auto& elements = v.toTupleRef().elements();
    return r_list_of(std::vector<c10::IValue>(elements.begin(), elements.end()));
  }
  if (v.isGenericDict()) {
    std::vector<c10::IValue> values;
    std::vector<std::string> keys;
    for (const auto& entry : v.toGenericDict()) {
      const c10::IValue& key = entry.key();
      if (key.isString()) {
        keys.push_back(key.toStringRef());
      } else if (key.isInt()) {
        keys.push_back(std::to_string(key.toInt()));
      } else {
        keys.push_back(key.tagKind());
      }
      values.push_back(entry.value());
    }
    return named_list_of(values, keys);
  }
  if (v.isModule()) return make_module(Module(v.toObject()));
  throw Error("runtime_error",
              "A TorchScript value of type " + v.type()->repr_str() + " has no R value.");
}

// The traced inputs handed to the R function keep the names of the R inputs they came from (a
// named jit_tuple() is a tuple, which has no names).
void copy_names(SEXP to, SEXP from) {
  if (TYPEOF(to) != VECSXP || TYPEOF(from) != VECSXP || XLENGTH(to) != XLENGTH(from)) return;
  SEXP names = Rf_getAttrib(from, R_NamesSymbol);
  if (names != R_NilValue) Rf_setAttrib(to, R_NamesSymbol, names);
  for (R_xlen_t i = 0; i < XLENGTH(to); ++i) copy_names(VECTOR_ELT(to, i), VECTOR_ELT(from, i));
}

Stack stack_of(SEXP args) {
  if (TYPEOF(args) != VECSXP) value_error("`args` must be a list, got " + describe(args) + ".");
  Stack stack;
  for (R_xlen_t i = 0; i < XLENGTH(args); ++i) stack.push_back(ivalue_of(VECTOR_ELT(args, i)));
  return stack;
}

std::string graph_text(const std::shared_ptr<torch::jit::Graph>& graph) {
  std::ostringstream out;
  out << *graph;
  return out.str();
}

// A module of its own for a traced function, its graph as `forward` (how a function is saved:
// PyTorch saves modules only).
Module module_for_function(const ScriptCallable& fn) {
  Module module(c10::QualifiedName("__torch__.PlaceholderModule"), session_unit(), true);
  module.register_attribute("training", c10::BoolType::get(), true);
  auto graph = torch::jit::toGraphFunction(*fn.function).graph()->copy();
  graph->insertInput(0, "self")->setType(module._ivalue()->type());
  auto* method = module._ivalue()->compilation_unit()->create_function(
      c10::QualifiedName(*module.type()->name(), "forward"), graph);
  module.type()->addMethod(method);
  return module;
}

SEXP raw_of(const std::string& bytes) {
  SEXP out = PROTECT(Rf_allocVector(RAWSXP, static_cast<R_xlen_t>(bytes.size())));
  if (!bytes.empty()) std::memcpy(RAW(out), bytes.data(), bytes.size());
  UNPROTECT(1);
  return out;
}

void save_module(const Module& module, SEXP path, bool mobile, std::string* bytes) {
  if (bytes != nullptr) {
    std::ostringstream out;
    if (mobile) {
      module._save_for_mobile(out);
    } else {
      module.save(out);
    }
    *bytes = out.str();
    return;
  }
  const std::string file = string_of(path, "path");
  if (mobile) {
    module._save_for_mobile(file);
  } else {
    module.save(file);
  }
}

SEXP named_tensors(const std::vector<std::pair<std::string, at::Tensor>>& items) {
  SEXP out = PROTECT(Rf_allocVector(VECSXP, static_cast<R_xlen_t>(items.size())));
  SEXP names = PROTECT(Rf_allocVector(STRSXP, static_cast<R_xlen_t>(items.size())));
  for (size_t i = 0; i < items.size(); ++i) {
    SET_VECTOR_ELT(out, static_cast<R_xlen_t>(i), make_tensor(items[i].second));
    SET_STRING_ELT(names, static_cast<R_xlen_t>(i), Rf_mkChar(items[i].first.c_str()));
  }
  Rf_setAttrib(out, R_NamesSymbol, names);
  UNPROTECT(2);
  return out;
}

SEXP strings_of(const std::vector<std::string>& items) {
  SEXP out = PROTECT(Rf_allocVector(STRSXP, static_cast<R_xlen_t>(items.size())));
  for (size_t i = 0; i < items.size(); ++i) {
    SET_STRING_ELT(out, static_cast<R_xlen_t>(i), Rf_mkChar(items[i].c_str()));
  }
  UNPROTECT(1);
  return out;
}

// A schema as R torch describes it: list(name, arguments = named list of type kinds, returns).
SEXP schema_info(const c10::FunctionSchema& schema) {
  auto kinds = [](const std::vector<c10::Argument>& args, bool named) {
    SEXP out = PROTECT(Rf_allocVector(VECSXP, static_cast<R_xlen_t>(args.size())));
    std::vector<std::string> names;
    for (size_t i = 0; i < args.size(); ++i) {
      SET_VECTOR_ELT(out, static_cast<R_xlen_t>(i),
                     Rf_mkString(c10::typeKindToString(args[i].type()->kind())));
      names.push_back(args[i].name());
    }
    if (named) Rf_setAttrib(out, R_NamesSymbol, strings_of(names));
    UNPROTECT(1);
    return out;
  };
  SEXP out = PROTECT(Rf_allocVector(VECSXP, 3));
  SET_VECTOR_ELT(out, 0, Rf_mkString(schema.name().c_str()));
  SET_VECTOR_ELT(out, 1, kinds(schema.arguments(), true));
  SET_VECTOR_ELT(out, 2, kinds(schema.returns(), false));
  Rf_setAttrib(out, R_NamesSymbol, strings_of({"name", "arguments", "returns"}));
  UNPROTECT(1);
  return out;
}

std::vector<std::shared_ptr<torch::jit::Operator>> operators_for(SEXP name) {
  auto ops = torch::jit::getAllOperatorsFor(c10::Symbol::fromQualString(string_of(name, "name")));
  if (ops.empty()) value_error("No operator named " + string_of(name, "name") + ".");
  return ops;
}

// Whether `v` can be the argument `type` (an int where a SymInt is expected too).
bool fits(const c10::IValue& v, const c10::TypePtr& type) {
  if (auto optional = type->cast<c10::OptionalType>()) {
    return v.isNone() || fits(v, optional->getElementType());
  }
  if (type->kind() == c10::TypeKind::SymIntType) return v.isInt();
  if (auto list = type->cast<c10::ListType>()) {
    if (list->getElementType()->kind() == c10::TypeKind::SymIntType) {
      return v.isIntList() || (v.isList() && v.toListRef().empty());
    }
  }
  return v.type()->isSubtypeOf(*type);
}

}  // namespace

// Traces `fn` (an R function of one argument, the list of inputs) on `inputs` (an R list). With
// `module` (a script module holding the R module's tensors), the graph becomes the module's
// method `name`, reading the module's parameters and buffers as attributes; without, a function.
extern "C" SEXP C_jit_trace(SEXP fn, SEXP inputs, SEXP strict, SEXP module, SEXP name) {
  AMPKIT_R_BEGIN
  const std::string method_name = string_of(name, "name");
  const bool strict_mode = flag_of(strict, "strict");
  Module* self = module == R_NilValue ? nullptr : &module_of(module);
  Stack stack = stack_of(inputs);
  auto traced_fn = [&](Stack traced) -> Stack {
    SEXP args = PROTECT(r_list_of(traced));
    copy_names(args, inputs);
    SEXP call = PROTECT(Rf_lang2(fn, args));
    SEXP out = PROTECT(eval_protected(call, R_GlobalEnv));
    Stack result{ivalue_of(out)};
    UNPROTECT(3);
    return result;
  };
  auto lookup = [](const at::Tensor&) { return std::string(); };
  auto traced = torch::jit::tracer::trace(std::move(stack), traced_fn, lookup, strict_mode,
                                          /*force_outplace=*/false, self);
  auto graph = traced.first->graph;
  if (self == nullptr) {
    auto unit = session_unit();
    Function* function = unit->create_function(c10::QualifiedName(method_name), graph, true);
    return wrap(new ScriptCallable{unit, function, std::nullopt, ""}, "ampkit_script_callable");
  }
  auto owner = self->_ivalue()->compilation_unit();
  auto* method =
      owner->create_function(c10::QualifiedName(*self->type()->name(), method_name), graph);
  self->type()->addMethod(method);
  return R_NilValue;
  AMPKIT_R_END
}

// Calls a traced or compiled function or a module's method on an R list of arguments.
// Arguments given by name are passed by name where the function's schema has that name; a traced
// function's inputs have none (libtorch's default schema for a graph calls them "argument_0",
// "argument_1", ...), and names are read by position there, as R torch reads every name. A name
// that is no argument of a named schema is an error.
extern "C" SEXP C_jit_call(SEXP callable, SEXP args) {
  AMPKIT_R_BEGIN
  ScriptCallable& c =
      unwrap<ScriptCallable>(callable, "ampkit_script_callable", "a script function");
  Stack given = stack_of(args);
  std::optional<torch::jit::Method> method;
  if (c.module) method = c.module->get_method(c.method);
  const c10::FunctionSchema& schema =
      method ? method->function().getSchema() : c.function->getSchema();
  bool named_schema = false;
  for (size_t i = 0; i < schema.arguments().size(); ++i) {
    const std::string& name = schema.arguments()[i].name();
    if (name != "self" && name != "argument_" + std::to_string(i)) named_schema = true;
  }
  SEXP names = Rf_getAttrib(args, R_NamesSymbol);
  Stack stack;
  torch::jit::Kwargs kwargs;
  for (size_t i = 0; i < given.size(); ++i) {
    const char* name = names == R_NilValue ? "" : CHAR(STRING_ELT(names, static_cast<R_xlen_t>(i)));
    if (name[0] == '\0' || !named_schema) {
      stack.push_back(std::move(given[i]));
    } else if (schema.argumentIndexWithName(name)) {
      kwargs.emplace(name, std::move(given[i]));
    } else {
      value_error("`" + std::string(name) + "` is not an argument of " + schema.name() +
                  "(): " + c10::toString(schema) + ".");
    }
  }
  c10::IValue out;
  if (method) {
    out = (*method)(std::move(stack), kwargs);
  } else {
    out = (*c.function)(std::move(stack), kwargs);
  }
  return r_value_of(out);
  AMPKIT_R_END
}

// A function's or method's graph as text; `last` TRUE: the optimized graph of the last run.
extern "C" SEXP C_jit_graph(SEXP callable, SEXP last) {
  AMPKIT_R_BEGIN
  if (flag_of(last, "last")) {
    auto graph = torch::jit::lastExecutedOptimizedGraph();
    if (!graph) return R_NilValue;
    return Rf_mkString(graph_text(graph).c_str());
  }
  ScriptCallable& c =
      unwrap<ScriptCallable>(callable, "ampkit_script_callable", "a script function");
  if (c.module) return Rf_mkString(graph_text(c.module->get_method(c.method).graph()).c_str());
  return Rf_mkString(graph_text(torch::jit::toGraphFunction(*c.function).graph()).c_str());
  AMPKIT_R_END
}

// Saves a traced function as a module whose forward is the function (`path` NULL: the bytes).
extern "C" SEXP C_jit_function_save(SEXP callable, SEXP path, SEXP mobile) {
  AMPKIT_R_BEGIN
  ScriptCallable& c =
      unwrap<ScriptCallable>(callable, "ampkit_script_callable", "a script function");
  if (c.module) value_error("Only traced functions are saved this way, not methods.");
  std::string bytes;
  save_module(module_for_function(c), path, flag_of(mobile, "mobile"),
              path == R_NilValue ? &bytes : nullptr);
  if (path == R_NilValue) return raw_of(bytes);
  return R_NilValue;
  AMPKIT_R_END
}

// A new, empty module of class `name` (made unique), in training mode `training`.
extern "C" SEXP C_jit_module_new(SEXP name, SEXP training) {
  AMPKIT_R_BEGIN
  Module module(c10::QualifiedName("__torch__." + string_of(name, "name")), session_unit(), true);
  module.register_attribute("training", c10::BoolType::get(), flag_of(training, "training"));
  return make_module(std::move(module));
  AMPKIT_R_END
}

// Registers a parameter, buffer or submodule (`kind`) under `name`.
extern "C" SEXP C_jit_module_register(SEXP module, SEXP kind, SEXP name, SEXP value) {
  AMPKIT_R_BEGIN
  Module& m = module_of(module);
  const std::string k = string_of(kind, "kind");
  const std::string n = string_of(name, "name");
  if (k == "module") {
    m.register_module(n, module_of(value));
  } else {
    at::Tensor t = tensor_of(value, "tensor");
    if (k == "parameter") {
      m.register_parameter(n, t, false);
    } else {
      m.register_buffer(n, t);
    }
  }
  return R_NilValue;
  AMPKIT_R_END
}

// What a module holds: "parameters", "buffers" (named lists of tensors, recursively or not),
// "children" (named list of modules), "methods" (names), "training" (a flag).
extern "C" SEXP C_jit_module_info(SEXP module, SEXP what, SEXP recurse) {
  AMPKIT_R_BEGIN
  Module& m = module_of(module);
  const std::string w = string_of(what, "what");
  const bool deep = flag_of(recurse, "recurse");
  if (w == "parameters" || w == "buffers") {
    std::vector<std::pair<std::string, at::Tensor>> items;
    if (w == "parameters") {
      for (const auto& p : m.named_parameters(deep)) items.emplace_back(p.name, p.value);
    } else {
      for (const auto& b : m.named_buffers(deep)) items.emplace_back(b.name, b.value);
    }
    return named_tensors(items);
  }
  if (w == "children") {
    std::vector<std::pair<std::string, Module>> children;
    for (const auto& c : m.named_children()) children.emplace_back(c.name, c.value);
    SEXP out = PROTECT(Rf_allocVector(VECSXP, static_cast<R_xlen_t>(children.size())));
    SEXP names = PROTECT(Rf_allocVector(STRSXP, static_cast<R_xlen_t>(children.size())));
    for (size_t i = 0; i < children.size(); ++i) {
      SET_VECTOR_ELT(out, static_cast<R_xlen_t>(i), make_module(children[i].second));
      SET_STRING_ELT(names, static_cast<R_xlen_t>(i), Rf_mkChar(children[i].first.c_str()));
    }
    Rf_setAttrib(out, R_NamesSymbol, names);
    UNPROTECT(2);
    return out;
  }
  if (w == "methods") {
    std::vector<std::string> names;
    for (const auto& method : m.get_methods()) names.push_back(method.name());
    SEXP out = PROTECT(Rf_allocVector(STRSXP, static_cast<R_xlen_t>(names.size())));
    for (size_t i = 0; i < names.size(); ++i) {
      SET_STRING_ELT(out, static_cast<R_xlen_t>(i), Rf_mkChar(names[i].c_str()));
    }
    UNPROTECT(1);
    return out;
  }
  if (w == "constants") {  // a module's __constants__, by name (R torch's `$name`)
    const auto& type = m.type();
    std::vector<c10::IValue> values;
    std::vector<std::string> names;
    for (size_t i = 0; i < type->numConstants(); ++i) {
      names.push_back(type->getConstantName(i));
      values.push_back(type->getConstant(i));
    }
    return named_list_of(values, names);
  }
  if (w == "training") return Rf_ScalarLogical(m.is_training());
  if (w == "class") return Rf_mkString(m.type()->name()->qualifiedName().c_str());
  value_error(
      "`what` must be one of \"parameters\", \"buffers\", \"children\", \"methods\", "
      "\"constants\", \"training\", \"class\".");
  AMPKIT_R_END
}

// R torch's add_constant(): a constant of the module's class, seen by its methods compiled after.
extern "C" SEXP C_jit_module_add_constant(SEXP module, SEXP name, SEXP value) {
  AMPKIT_R_BEGIN
  module_of(module).type()->addConstant(string_of(name, "name"), ivalue_of(value));
  return R_NilValue;
  AMPKIT_R_END
}

extern "C" SEXP C_jit_module_train(SEXP module, SEXP mode) {
  AMPKIT_R_BEGIN
  module_of(module).train(flag_of(mode, "mode"));
  return R_NilValue;
  AMPKIT_R_END
}

// The module's method `name` (NULL when it has none).
extern "C" SEXP C_jit_module_method(SEXP module, SEXP name) {
  AMPKIT_R_BEGIN
  Module& m = module_of(module);
  const std::string n = string_of(name, "name");
  if (!m.find_method(n)) return R_NilValue;
  return wrap(new ScriptCallable{nullptr, nullptr, m, n}, "ampkit_script_callable");
  AMPKIT_R_END
}

// Saves a module to `path` (NULL: returns the bytes); `mobile`: the lite interpreter's format.
extern "C" SEXP C_jit_module_save(SEXP module, SEXP path, SEXP mobile) {
  AMPKIT_R_BEGIN
  std::string bytes;
  save_module(module_of(module), path, flag_of(mobile, "mobile"),
              path == R_NilValue ? &bytes : nullptr);
  if (path == R_NilValue) return raw_of(bytes);
  return R_NilValue;
  AMPKIT_R_END
}

// Loads a module from a file path or a raw vector of its bytes.
extern "C" SEXP C_jit_load(SEXP source) {
  AMPKIT_R_BEGIN
  if (TYPEOF(source) == RAWSXP) {
    std::istringstream in(std::string(reinterpret_cast<const char*>(RAW(source)), XLENGTH(source)));
    return make_module(torch::jit::load(in));
  }
  return make_module(torch::jit::load(string_of(source, "path")));
  AMPKIT_R_END
}

// Compiles TorchScript source; C_jit_unit_function finds its functions by name.
extern "C" SEXP C_jit_compile(SEXP source) {
  AMPKIT_R_BEGIN
  auto unit = torch::jit::compile(string_of(source, "source"));
  return wrap(new ScriptUnit{unit}, "ampkit_script_unit");
  AMPKIT_R_END
}

// The unit's function `name` (NULL when none); `name` NULL: the names of its functions.
extern "C" SEXP C_jit_unit_function(SEXP unit, SEXP name) {
  AMPKIT_R_BEGIN
  ScriptUnit& u = unwrap<ScriptUnit>(unit, "ampkit_script_unit", "a compilation unit");
  if (name == R_NilValue) {
    std::vector<std::string> names;
    for (Function* f : u.unit->get_functions()) names.push_back(f->name());
    SEXP out = PROTECT(Rf_allocVector(STRSXP, static_cast<R_xlen_t>(names.size())));
    for (size_t i = 0; i < names.size(); ++i) {
      SET_STRING_ELT(out, static_cast<R_xlen_t>(i), Rf_mkChar(names[i].c_str()));
    }
    UNPROTECT(1);
    return out;
  }
  Function* f = u.unit->find_function(c10::QualifiedName(string_of(name, "name")));
  if (f == nullptr) return R_NilValue;
  return wrap(new ScriptCallable{u.unit, f, std::nullopt, ""}, "ampkit_script_callable");
  AMPKIT_R_END
}

// The names of all operators TorchScript knows (one per overload).
extern "C" SEXP C_jit_operators(SEXP name) {
  AMPKIT_R_BEGIN
  if (name != R_NilValue) {
    auto ops = operators_for(name);
    SEXP out = PROTECT(Rf_allocVector(VECSXP, static_cast<R_xlen_t>(ops.size())));
    for (size_t i = 0; i < ops.size(); ++i) {
      SET_VECTOR_ELT(out, static_cast<R_xlen_t>(i), schema_info(ops[i]->schema()));
    }
    UNPROTECT(1);
    return out;
  }
  std::vector<std::string> names;
  for (const auto& op : torch::jit::getAllOperators()) names.push_back(op->schema().name());
  return strings_of(names);
  AMPKIT_R_END
}

// Runs operator `name` on a stack (an R list), with its first overload whose arguments the
// stack's values fit (missing trailing arguments take their defaults); the stack's values after.
extern "C" SEXP C_jit_execute(SEXP name, SEXP args) {
  AMPKIT_R_BEGIN
  auto ops = operators_for(name);
  Stack given = stack_of(args);
  bool graph_only = false;
  for (const auto& op : ops) {
    const auto& arguments = op->schema().arguments();
    if (given.size() > arguments.size()) continue;
    Stack stack = given;
    bool ok = true;
    for (size_t i = 0; i < arguments.size() && ok; ++i) {
      if (i < given.size()) {
        ok = fits(given[i], arguments[i].type());
      } else if (arguments[i].default_value()) {
        stack.push_back(*arguments[i].default_value());
      } else {
        ok = false;
      }
    }
    // Some operators run only as a node of a graph (prim::ConstantChunk, fusion groups): they
    // have no operation to call here (calling it crashed).
    if (!ok) continue;
    if (!op->hasOperation()) {
      graph_only = true;
      continue;
    }
    op->getOperation()(stack);
    return r_list_of(std::vector<c10::IValue>(stack.begin(), stack.end()));
  }
  if (graph_only) {
    value_error(string_of(name, "name") +
                " runs only as a node of a TorchScript graph; it cannot be called by itself.");
  }
  std::string types;
  for (const c10::IValue& v : given) types += (types.empty() ? "" : ", ") + v.type()->repr_str();
  value_error("No overload of " + string_of(name, "name") + " takes (" + types + ").");
  AMPKIT_R_END
}

}  // namespace ampkit_r
