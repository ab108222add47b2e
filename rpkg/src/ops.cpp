// The generated op surface's one entry: an R call of a generated function (rpkg/R/gen-ops.R)
// becomes a boxed call of libtorch's dispatcher, with R torch's conversions.
//
// The op table (gen-op-table.R, from tools/rgen/generate.py) gives, per op name: its overloads
// (schema names), the R arguments in R order, the 1-based ones, and the ones that choose between
// overloads. On an op's first call each overload is looked up in the dispatcher (an overload this
// libtorch lacks is skipped; an op with none is an error naming it) and planned: for each schema
// argument, where its value is among the R arguments, its kind, its default.
//
// Choosing an overload follows R torch: each choosing argument gets one class from its R value
// and the kinds the overloads expect there (classify(): R torch's priority order), and the first
// overload, in schema order, whose kinds are those classes wins ("Missing" where an overload has
// no such argument).
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>
#include <ATen/ops/linear.h>
#include <ATen/ops/relu.h>
#include <c10/core/Layout.h>
#include <c10/core/MemoryFormat.h>

#include <optional>
#include <string>
#include <vector>

#include "ampkit_r.h"
#include "native_layers.h"

namespace ampkit_r {

at::Tensor tensor_from_r(SEXP data, std::optional<c10::ScalarType> dtype,
                         const c10::Device& device);

namespace {

// What an R value converts to, from the schema argument's declared type.
enum class Kind : uint8_t {
  Tensor,
  TensorList,
  OptionalTensorList,
  Scalar,
  ScalarList,
  Int,
  IntList,
  Float,
  FloatList,
  Bool,
  BoolList,
  String,
  StringList,
  ScalarType,
  Layout,
  Device,
  MemoryFormat,
  Generator,
  Unsupported
};

// The classes of R torch's overload choice (one per Kind, and Missing).
// kNull: a NULL where no kind expected takes one (an optional string or flag): None or nothing.
enum Class : uint8_t { kMissing = 32, kNull = 33 };
uint32_t bit(Kind k) { return 1u << static_cast<unsigned>(k); }

struct ArgPlan {
  int r_pos = -1;  // where the value is among the R arguments; -1: the default
  Kind kind = Kind::Unsupported;
  bool optional = false;
  bool one_based = false;
  std::optional<int> size;  // int[N]: a single number is repeated N times
  std::string name;
  c10::IValue default_value;  // None when the schema has none
  bool has_default = false;
};

struct OverloadPlan {
  c10::OperatorHandle handle;
  std::vector<ArgPlan> args;
  std::vector<int> r_kind;        // per R argument: the Kind expected, or kMissing
  std::vector<bool> r_optional;   // per R argument: may it be None (NULL in R)?
  std::vector<bool> r_defaulted;  // per R argument: may it be left out (the schema's default)?
};

struct Op {
  SEXP entry = R_NilValue;  // the op table's list(...), kept alive by the table
  bool planned = false;
  std::string name;
  std::vector<OverloadPlan> overloads;
  std::vector<bool> dispatch;      // per R argument: does it choose the overload?
  std::vector<uint32_t> expected;  // per R argument: the kinds the overloads expect there
  std::vector<bool> none_default;  // per R argument: None is its default wherever it is
  std::vector<std::string> r_names;
};

SEXP table = nullptr;
std::vector<Op> ops;

std::string str(SEXP strings, R_xlen_t i) { return CHAR(STRING_ELT(strings, i)); }

Kind kind_of(const c10::TypePtr& type, bool* optional) {
  c10::TypePtr t = type;
  *optional = false;
  if (auto opt = t->cast<c10::OptionalType>()) {
    *optional = true;
    t = opt->getElementType();
  }
  switch (t->kind()) {
    case c10::TypeKind::TensorType:
      return Kind::Tensor;
    case c10::TypeKind::NumberType:
      return Kind::Scalar;
    case c10::TypeKind::IntType:
    case c10::TypeKind::SymIntType:
      return Kind::Int;
    case c10::TypeKind::FloatType:
    case c10::TypeKind::SymFloatType:
      return Kind::Float;
    case c10::TypeKind::BoolType:
    case c10::TypeKind::SymBoolType:
      return Kind::Bool;
    case c10::TypeKind::StringType:
      return Kind::String;
    case c10::TypeKind::ScalarTypeType:
      return Kind::ScalarType;
    case c10::TypeKind::LayoutType:
      return Kind::Layout;
    case c10::TypeKind::DeviceObjType:
      return Kind::Device;
    case c10::TypeKind::MemoryFormatType:
      return Kind::MemoryFormat;
    case c10::TypeKind::GeneratorType:
      return Kind::Generator;
    case c10::TypeKind::ListType: {
      const c10::TypePtr element = t->castRaw<c10::ListType>()->getElementType();
      if (auto inner = element->cast<c10::OptionalType>()) {
        if (inner->getElementType()->kind() == c10::TypeKind::TensorType) {
          return Kind::OptionalTensorList;
        }
        return Kind::Unsupported;
      }
      switch (element->kind()) {
        case c10::TypeKind::TensorType:
          return Kind::TensorList;
        case c10::TypeKind::IntType:
        case c10::TypeKind::SymIntType:
          return Kind::IntList;
        case c10::TypeKind::FloatType:
          return Kind::FloatList;
        case c10::TypeKind::BoolType:
          return Kind::BoolList;
        case c10::TypeKind::NumberType:
          return Kind::ScalarList;
        case c10::TypeKind::StringType:
          return Kind::StringList;
        default:
          return Kind::Unsupported;
      }
    }
    default:
      return Kind::Unsupported;
  }
}

void plan(Op& op) {
  SEXP entry = op.entry;
  op.name = str(VECTOR_ELT(entry, 0), 0);
  SEXP overloads = VECTOR_ELT(entry, 1);
  SEXP r_names = VECTOR_ELT(entry, 2);
  SEXP one_based = VECTOR_ELT(entry, 3);
  SEXP dispatch = VECTOR_ELT(entry, 4);
  const R_xlen_t n_r = XLENGTH(r_names);
  for (R_xlen_t i = 0; i < n_r; ++i) op.r_names.push_back(str(r_names, i));
  auto r_position = [&](const std::string& name) -> int {
    // The generator drops a leading "_" from R names.
    std::string bare = name;
    while (!bare.empty() && bare[0] == '_') bare.erase(0, 1);
    for (R_xlen_t i = 0; i < n_r; ++i) {
      if (op.r_names[i] == bare) return static_cast<int>(i);
    }
    return -1;
  };
  auto in = [](SEXP strings, const std::string& name) {
    for (R_xlen_t i = 0; i < XLENGTH(strings); ++i) {
      if (name == CHAR(STRING_ELT(strings, i))) return true;
    }
    return false;
  };
  op.dispatch.assign(static_cast<size_t>(n_r), false);
  for (R_xlen_t i = 0; i < n_r; ++i) op.dispatch[i] = in(dispatch, op.r_names[i]);
  op.expected.assign(static_cast<size_t>(n_r), 0);
  op.none_default.assign(static_cast<size_t>(n_r), true);
  for (R_xlen_t k = 0; k < XLENGTH(overloads); ++k) {
    const std::string full = str(overloads, k);
    const auto dot = full.find('.');
    const std::string name = "aten::" + full.substr(0, dot);
    const std::string overload = dot == std::string::npos ? "" : full.substr(dot + 1);
    auto handle = c10::Dispatcher::singleton().findSchema({name, overload});
    if (!handle) continue;  // an overload this libtorch does not have
    OverloadPlan p{*handle,
                   {},
                   std::vector<int>(static_cast<size_t>(n_r), kMissing),
                   std::vector<bool>(static_cast<size_t>(n_r), false),
                   std::vector<bool>(static_cast<size_t>(n_r), false)};
    bool supported = true;
    for (const c10::Argument& a : handle->schema().arguments()) {
      ArgPlan arg;
      arg.name = a.name();
      arg.r_pos = r_position(a.name());
      arg.kind = kind_of(a.real_type(), &arg.optional);
      arg.one_based = arg.r_pos >= 0 && in(one_based, op.r_names[arg.r_pos]);
      if (a.N()) arg.size = *a.N();
      if (a.default_value()) {
        arg.has_default = true;
        arg.default_value = *a.default_value();
      }
      if (arg.kind == Kind::Unsupported && !arg.has_default) supported = false;
      if (arg.r_pos >= 0) {
        p.r_kind[arg.r_pos] = static_cast<int>(arg.kind);
        p.r_optional[arg.r_pos] = arg.optional;
        p.r_defaulted[arg.r_pos] = arg.has_default;
        if (!arg.has_default || !arg.default_value.isNone()) op.none_default[arg.r_pos] = false;
      }
      p.args.push_back(std::move(arg));
    }
    if (!supported) continue;
    for (R_xlen_t i = 0; i < n_r; ++i) {
      if (p.r_kind[i] != kMissing) op.expected[i] |= bit(static_cast<Kind>(p.r_kind[i]));
    }
    op.overloads.push_back(std::move(p));
  }
  op.planned = true;
}

Op& op_at(SEXP index) {
  const int i = INTEGER(index)[0] - 1;
  if (table == nullptr || i < 0 || i >= static_cast<int>(ops.size())) {
    throw Error("runtime_error", "ampkit: the op table is not loaded (a bug)");
  }
  Op& op = ops[static_cast<size_t>(i)];
  if (!op.planned) plan(op);
  if (op.overloads.empty()) {
    throw Error("runtime_error",
                "`" + op.name + "` is not an operator of the libtorch in use: it has none of " +
                    "the schemas ampkit was generated with.");
  }
  return op;
}

bool is_atomic(SEXP v) {
  switch (TYPEOF(v)) {
    case LGLSXP:
    case INTSXP:
    case REALSXP:
    case CPLXSXP:
    case RAWSXP:
      return true;
    default:
      return false;
  }
}
bool is_numeric(SEXP v) {
  return (TYPEOF(v) == INTSXP || TYPEOF(v) == REALSXP) && (!OBJECT(v) || is_integer64(v));
}
bool has(uint32_t expected, Kind k) { return (expected & bit(k)) != 0; }

// R torch's classification of one R value, given the kinds expected there (its priority order).
int classify(SEXP v, uint32_t expected) {
  if (v == R_MissingArg) return kMissing;
  const bool null = Rf_isNull(v);
  const R_xlen_t n = Rf_xlength(v);
  if (is_tensor(v) && has(expected, Kind::Tensor)) return static_cast<int>(Kind::Tensor);
  if (TYPEOF(v) == STRSXP && has(expected, Kind::String)) return static_cast<int>(Kind::String);
  if (null && has(expected, Kind::Scalar)) return static_cast<int>(Kind::Scalar);
  if (has(expected, Kind::MemoryFormat) && (null || Rf_inherits(v, "torch_memory_format"))) {
    return static_cast<int>(Kind::MemoryFormat);
  }
  if (has(expected, Kind::ScalarType) && (null || is_dtype(v) || TYPEOF(v) == STRSXP)) {
    return static_cast<int>(Kind::ScalarType);
  }
  if (has(expected, Kind::Scalar) && ((is_atomic(v) && n == 1) || is_tensor(v))) {
    return static_cast<int>(Kind::Scalar);
  }
  if (has(expected, Kind::Int) && is_numeric(v) && n == 1) return static_cast<int>(Kind::Int);
  if (has(expected, Kind::Float) && is_numeric(v) && n == 1) return static_cast<int>(Kind::Float);
  if (has(expected, Kind::Tensor) && !null && is_atomic(v)) return static_cast<int>(Kind::Tensor);
  if (has(expected, Kind::IntList) && (is_numeric(v) || TYPEOF(v) == VECSXP || null)) {
    return static_cast<int>(Kind::IntList);
  }
  if (has(expected, Kind::Int) && null) return static_cast<int>(Kind::Int);
  if (has(expected, Kind::FloatList) && (is_numeric(v) || null)) {
    return static_cast<int>(Kind::FloatList);
  }
  if (has(expected, Kind::Float) && null) return static_cast<int>(Kind::Float);
  if (has(expected, Kind::ScalarList) && (is_numeric(v) || TYPEOF(v) == VECSXP)) {
    return static_cast<int>(Kind::ScalarList);
  }
  if (has(expected, Kind::TensorList) &&
      (TYPEOF(v) == VECSXP || is_tensor(v) || null || is_numeric(v))) {
    return static_cast<int>(Kind::TensorList);
  }
  if (has(expected, Kind::Bool) && TYPEOF(v) == LGLSXP && n == 1) {
    return static_cast<int>(Kind::Bool);
  }
  if (has(expected, Kind::BoolList) && TYPEOF(v) == LGLSXP) return static_cast<int>(Kind::BoolList);
  if (has(expected, Kind::Generator) && (null || is_generator(v))) {
    return static_cast<int>(Kind::Generator);
  }
  if (has(expected, Kind::Tensor) && (null || (TYPEOF(v) == VECSXP && n == 1))) {
    return static_cast<int>(Kind::Tensor);
  }
  if (has(expected, Kind::Device) && (null || is_device(v) || TYPEOF(v) == STRSXP)) {
    return static_cast<int>(Kind::Device);
  }
  if (has(expected, Kind::OptionalTensorList) && TYPEOF(v) == VECSXP) {
    return static_cast<int>(Kind::OptionalTensorList);
  }
  if (has(expected, Kind::Layout) && (null || Rf_inherits(v, "torch_layout"))) {
    return static_cast<int>(Kind::Layout);
  }
  return -1;
}

const OverloadPlan& choose(const Op& op, SEXP* args, int n) {
  if (op.overloads.size() == 1) return op.overloads[0];
  int classes[64];
  for (int i = 0; i < n; ++i) {
    classes[i] = kMissing;
    if (!op.dispatch[i]) continue;
    classes[i] = classify(args[i], op.expected[i]);
    if (classes[i] < 0 && Rf_isNull(args[i])) classes[i] = kNull;
    if (classes[i] < 0) {
      value_error("`" + op.r_names[i] + "` of `" + op.name + "` cannot be " + describe(args[i]) +
                  ".");
    }
  }
  // The overload whose kinds are the arguments' classes, an argument not given matching one the
  // overload lacks or has a default for (one given never matches an overload without it: it
  // would be dropped, as std()'s `correction` was by std.dim). Where none is, a second pass: R
  // torch's classification reads a NULL as the first kind expected there (a Scalar before a
  // Tensor), so torch_clamp(x, min = t) found no overload (clamp(Scalar? min, Scalar? max) wants
  // no tensor, clamp.Tensor(Tensor? min, Tensor? max) no Scalar); there a NULL matches any
  // argument that may be None.
  auto matches = [&](const OverloadPlan& p, bool null_is_none) {
    for (int i = 0; i < n; ++i) {
      if (!op.dispatch[i] || p.r_kind[i] == classes[i]) continue;
      if (classes[i] == kMissing && p.r_defaulted[i]) continue;
      // A NULL where None is the default is the argument not given (R's way to pass it on).
      if (p.r_kind[i] == kMissing && op.none_default[i] && Rf_isNull(args[i])) continue;
      if (!(null_is_none && Rf_isNull(args[i]) && p.r_optional[i])) return false;
    }
    return true;
  };
  for (const bool null_is_none : {false, true}) {
    for (const OverloadPlan& p : op.overloads) {
      if (matches(p, null_is_none)) return p;
    }
  }
  for (int i = 0; i < n; ++i) {
    if (classes[i] == kNull) {
      value_error("`" + op.r_names[i] + "` of `" + op.name + "` cannot be NULL here.");
    }
  }
  std::string given;
  for (int i = 0; i < n; ++i) {
    if (op.dispatch[i] && args[i] != R_MissingArg) {
      given += (given.empty() ? "" : ", ") + op.r_names[i];
    }
  }
  value_error("No matching overload for `" + op.name + "` with " +
              (given.empty() ? std::string("no arguments") : "`" + given + "`") + " given.");
}

// ---- R values -> IValues ------------------------------------------------------------------------

// An R torch index tensor: entries >= 1 lose 1 (negative ones count from the end), 0 is an error.
// A mask (bool) is no positions, nor are floating values: cross_entropy's class probabilities
// (a floating index is libtorch's error to give).
at::Tensor one_based_index(const at::Tensor& t, const std::string& arg) {
  if (t.scalar_type() == at::kBool || at::isFloatingType(t.scalar_type()) ||
      at::isComplexType(t.scalar_type())) {
    return t;
  }
  return zero_based_tensor(t, [&] { zero_position_error(arg); });
}

at::Tensor as_tensor(SEXP v, const ArgPlan& a) {
  if (is_tensor(v)) {
    at::Tensor t = tensor_of(v, a.name.c_str());
    return a.one_based ? one_based_index(t, a.name) : t;
  }
  if (Rf_isNull(v) || (TYPEOF(v) == VECSXP && XLENGTH(v) == 0)) return at::Tensor();
  if (TYPEOF(v) == VECSXP && XLENGTH(v) == 1) return as_tensor(VECTOR_ELT(v, 0), a);
  if (!is_atomic(v)) {
    value_error("`" + a.name + "` must be a tensor, got " + describe(v) + ".");
  }
  // R numbers as an index are whole numbers: int64, as R torch's integer indices.
  std::optional<c10::ScalarType> type;
  if (a.one_based && TYPEOF(v) == REALSXP) {
    whole_numbers_of(v, a.name.c_str());
    type = at::kLong;
  }
  at::Tensor t = tensor_from_r(v, type, c10::Device(c10::kCPU));
  return a.one_based ? one_based_index(t, a.name) : t;
}

c10::Scalar as_scalar(SEXP v, const ArgPlan& a) {
  if (is_tensor(v)) return tensor_of(v, a.name.c_str()).item();
  if (Rf_xlength(v) != 1) {
    value_error("`" + a.name + "` must be one number, got " + describe(v) + ".");
  }
  if (is_integer64(v)) return c10::Scalar(integer64_at(v, 0, a.name.c_str()));
  switch (TYPEOF(v)) {
    case INTSXP:
      if (INTEGER(v)[0] == NA_INTEGER) break;
      return c10::Scalar(static_cast<int64_t>(INTEGER(v)[0]));
    case REALSXP:
      return c10::Scalar(REAL(v)[0]);
    case LGLSXP:
      if (LOGICAL(v)[0] == NA_LOGICAL) break;
      return c10::Scalar(static_cast<bool>(LOGICAL(v)[0]));
    case CPLXSXP:
      return c10::Scalar(c10::complex<double>(COMPLEX(v)[0].r, COMPLEX(v)[0].i));
    default:
      break;
  }
  value_error("`" + a.name + "` must be a number, got " + describe(v) + ".");
}

// A tensor's values as int64: whole ones only (a float tensor's 2.9 is no size of 2).
at::Tensor whole_tensor(const at::Tensor& t, const std::string& arg) {
  if (at::isFloatingType(t.scalar_type()) && !t.equal(t.trunc())) {
    value_error("`" + arg + "` must be whole numbers, got a tensor with fractions.");
  }
  return t.to(at::kCPU).to(at::kLong).contiguous();
}

int64_t as_int(SEXP v, const ArgPlan& a) {
  int64_t x;
  if (is_tensor(v)) {
    const at::Tensor t = whole_tensor(tensor_of(v, a.name.c_str()), a.name);
    if (t.numel() != 1) {
      value_error("`" + a.name + "` must be one number, got a tensor of " +
                  std::to_string(t.numel()) + " values.");
    }
    x = t.item<int64_t>();
  } else if (TYPEOF(v) == LGLSXP && XLENGTH(v) == 1 && LOGICAL(v)[0] != NA_LOGICAL) {
    x = LOGICAL(v)[0];
  } else {
    x = whole_number_of(v, a.name.c_str());
  }
  return a.one_based ? zero_based(x, a.name.c_str()) : x;
}

std::vector<int64_t> as_ints(SEXP v, const ArgPlan& a) {
  std::vector<int64_t> out;
  if (TYPEOF(v) == VECSXP) {
    for (R_xlen_t i = 0; i < XLENGTH(v); ++i)
      out.push_back(whole_number_of(VECTOR_ELT(v, i), a.name.c_str()));
  } else if (is_tensor(v)) {
    const at::Tensor t = whole_tensor(tensor_of(v, a.name.c_str()), a.name);
    out.assign(t.const_data_ptr<int64_t>(), t.const_data_ptr<int64_t>() + t.numel());
  } else if (!Rf_isNull(v)) {
    out = whole_numbers_of(v, a.name.c_str());
  }
  if (a.one_based) {
    for (auto& x : out) x = zero_based(x, a.name.c_str());
  }
  if (a.size && out.size() == 1 && *a.size > 1) out.assign(static_cast<size_t>(*a.size), out[0]);
  return out;
}

std::vector<double> as_doubles(SEXP v, const ArgPlan& a) {
  std::vector<double> out;
  if (TYPEOF(v) == VECSXP) {
    for (R_xlen_t i = 0; i < XLENGTH(v); ++i)
      out.push_back(number_of(VECTOR_ELT(v, i), a.name.c_str()));
  } else if (is_integer64(v)) {
    for (R_xlen_t i = 0; i < XLENGTH(v); ++i) {
      out.push_back(static_cast<double>(integer64_at(v, i, a.name.c_str())));
    }
  } else if (TYPEOF(v) == REALSXP) {
    out.assign(REAL(v), REAL(v) + XLENGTH(v));
  } else if (TYPEOF(v) == INTSXP) {
    for (R_xlen_t i = 0; i < XLENGTH(v); ++i) out.push_back(INTEGER(v)[i]);
  } else if (!Rf_isNull(v)) {
    value_error("`" + a.name + "` must be numbers, got " + describe(v) + ".");
  }
  return out;
}

bool as_bool(SEXP v, const ArgPlan& a) {
  if ((TYPEOF(v) == LGLSXP || is_numeric(v)) && XLENGTH(v) == 1) {
    const int b = Rf_asLogical(v);
    if (b != NA_LOGICAL) return b != 0;
  }
  value_error("`" + a.name + "` must be TRUE or FALSE, got " + describe(v) + ".");
}

std::string as_string(SEXP v, const ArgPlan& a) {
  if (TYPEOF(v) != STRSXP || XLENGTH(v) != 1 || STRING_ELT(v, 0) == NA_STRING) {
    value_error("`" + a.name + "` must be a string, got " + describe(v) + ".");
  }
  return Rf_translateCharUTF8(STRING_ELT(v, 0));
}

c10::ScalarType as_dtype(SEXP v, const ArgPlan& a) { return dtype_or_name_of(v, a.name.c_str()); }

int as_enum(SEXP v, const ArgPlan& a, const char* cls, const char* example) {
  if (TYPEOF(v) == INTSXP && XLENGTH(v) == 1 && Rf_inherits(v, cls)) return INTEGER(v)[0];
  value_error("`" + a.name + "` must be " + example + ", got " + describe(v) + ".");
}

c10::IValue to_ivalue(SEXP v, const ArgPlan& a) {
  const bool null = Rf_isNull(v) || v == R_MissingArg;
  if (null && a.has_default) return a.default_value;
  if (null && a.optional) return c10::IValue();
  switch (a.kind) {
    case Kind::Tensor: {
      at::Tensor t = as_tensor(v, a);
      if (!t.defined() && a.optional) return c10::IValue();
      return t;
    }
    case Kind::TensorList: {
      std::vector<at::Tensor> out;
      if (TYPEOF(v) == VECSXP) {
        for (R_xlen_t i = 0; i < XLENGTH(v); ++i) {
          SEXP e = VECTOR_ELT(v, i);
          if (Rf_isNull(e)) {  // no tensor (PyTorch's TypeError for a None in a tensor list)
            value_error("`" + a.name + "` must be a list of tensors, got NULL at position " +
                        std::to_string(i + 1) + ".");
          }
          out.push_back(as_tensor(e, a));
        }
      } else if (!null) {
        out.push_back(as_tensor(v, a));
      }
      return out;
    }
    case Kind::OptionalTensorList: {
      c10::List<std::optional<at::Tensor>> out;
      if (TYPEOF(v) == VECSXP) {
        for (R_xlen_t i = 0; i < XLENGTH(v); ++i) {
          SEXP e = VECTOR_ELT(v, i);
          if (Rf_isNull(e)) {
            out.push_back(std::nullopt);
          } else {
            out.push_back(as_tensor(e, a));
          }
        }
      } else if (!null) {
        out.push_back(as_tensor(v, a));
      }
      return out;
    }
    case Kind::Scalar:
      return as_scalar(v, a);
    case Kind::ScalarList: {
      std::vector<c10::Scalar> out;
      for (double d : as_doubles(v, a)) out.emplace_back(d);
      return out;
    }
    case Kind::Int:
      if (!null && Rf_xlength(v) == 0 && a.optional) return c10::IValue();
      return as_int(v, a);
    case Kind::IntList:
      if (!null && Rf_xlength(v) == 0 && a.optional) return c10::IValue();
      return as_ints(v, a);
    case Kind::Float:
      return number_of(v, a.name.c_str());
    case Kind::FloatList:
      return as_doubles(v, a);
    case Kind::Bool:
      return as_bool(v, a);
    case Kind::BoolList: {
      if (TYPEOF(v) != LGLSXP) {
        value_error("`" + a.name + "` must be TRUE/FALSE values, got " + describe(v) + ".");
      }
      c10::List<bool> out;
      for (R_xlen_t i = 0; i < XLENGTH(v); ++i) {
        if (LOGICAL(v)[i] == NA_LOGICAL) value_error("`" + a.name + "` must not hold NA.");
        out.push_back(LOGICAL(v)[i] == TRUE);
      }
      return out;
    }
    case Kind::String:
      return as_string(v, a);
    case Kind::StringList: {
      if (TYPEOF(v) != STRSXP) {
        value_error("`" + a.name + "` must be strings, got " + describe(v) + ".");
      }
      std::vector<std::string> out;
      for (R_xlen_t i = 0; i < XLENGTH(v); ++i) {
        if (STRING_ELT(v, i) == NA_STRING) value_error("`" + a.name + "` must not hold NA.");
        out.emplace_back(Rf_translateCharUTF8(STRING_ELT(v, i)));
      }
      return out;
    }
    case Kind::ScalarType:
      return as_dtype(v, a);
    case Kind::Layout:
      return static_cast<c10::Layout>(
          as_enum(v, a, "torch_layout", "a torch_layout such as torch_strided()"));
    case Kind::Device:
      return device_of(v, a.name.c_str());
    case Kind::MemoryFormat:
      return static_cast<c10::MemoryFormat>(as_enum(
          v, a, "torch_memory_format", "a torch_memory_format such as torch_contiguous_format()"));
    case Kind::Generator:
      if (!is_generator(v)) {
        value_error("`" + a.name + "` must be a torch_generator or NULL, got " + describe(v) + ".");
      }
      return generator_of(v);
    case Kind::Unsupported:
      break;
  }
  value_error("`" + a.name + "` has a type R cannot give.");
}

// ---- IValues -> R values ------------------------------------------------------------------------

SEXP from_ivalue(c10::IValue v, SEXP* args, int n);

SEXP tensor_result(at::Tensor t, SEXP* args, int n) {
  // An in-place op returns its own input: the same R object, as R torch returns it.
  if (t.defined()) {
    for (int i = 0; i < n; ++i) {
      if (is_tensor(args[i]) && R_ExternalPtrAddr(args[i]) == t.unsafeGetTensorImpl())
        return args[i];
    }
  }
  return make_tensor(std::move(t));
}

SEXP list_of(std::vector<c10::IValue> values, SEXP* args, int n) {
  SEXP out = PROTECT(Rf_allocVector(VECSXP, static_cast<R_xlen_t>(values.size())));
  for (size_t i = 0; i < values.size(); ++i) {
    SET_VECTOR_ELT(out, static_cast<R_xlen_t>(i), from_ivalue(std::move(values[i]), args, n));
  }
  UNPROTECT(1);
  return out;
}

SEXP from_ivalue(c10::IValue v, SEXP* args, int n) {
  if (v.isTensor()) return tensor_result(std::move(v).toTensor(), args, n);
  if (v.isNone()) return R_NilValue;
  if (v.isBool()) return Rf_ScalarLogical(v.toBool());
  if (v.isInt()) return Rf_ScalarReal(static_cast<double>(v.toInt()));
  if (v.isSymInt())
    return Rf_ScalarReal(static_cast<double>(v.toSymInt().guard_int(__FILE__, __LINE__)));
  if (v.isDouble()) return Rf_ScalarReal(v.toDouble());
  if (v.isTensorList() || v.isList() || v.isTuple()) {
    // The elements are copied out and `v` let go before they become R objects, so that a fresh
    // result is held once (the garbage collector's share counts it: values.cpp).
    std::vector<c10::IValue> items;
    if (v.isTensorList()) {
      for (const at::Tensor& t : v.toTensorVector()) items.emplace_back(t);
    } else if (v.isList()) {
      items = v.toListRef().vec();
    } else {
      const auto& elements = v.toTupleRef().elements();
      items.assign(elements.begin(), elements.end());
    }
    v = c10::IValue();
    return list_of(std::move(items), args, n);
  }
  if (v.isScalar()) {
    const c10::Scalar s = v.toScalar();
    if (s.isBoolean()) return Rf_ScalarLogical(s.toBool());
    if (s.isIntegral(false)) return r_int64(s.toLong());
    if (s.isComplex()) {
      const c10::complex<double> z = s.toComplexDouble();
      Rcomplex c;  // members, not braces: R >= 4.3 made Rcomplex a union
      c.r = z.real();
      c.i = z.imag();
      return Rf_ScalarComplex(c);
    }
    return Rf_ScalarReal(s.toDouble());
  }
  if (v.isString()) return Rf_mkString(v.toStringRef().c_str());
  if (v.isGenerator()) return R_NilValue;
  throw Error("runtime_error", "ampkit: a result of type " + v.tagKind() + " has no R value.");
}

// ---- the call
// ------------------------------------------------------------------------------------

void fill(torch::jit::Stack& stack, const Op& op, const OverloadPlan& p, SEXP* args) {
  stack.clear();
  stack.reserve(p.args.size());
  for (const ArgPlan& a : p.args) {
    if (a.r_pos < 0 || args[a.r_pos] == R_MissingArg) {  // not an R argument, or not given
      if (!a.has_default && !a.optional) {
        value_error("`" + op.name + "` needs `" + a.name + "`" +
                    (a.r_pos < 0 ? ", which R cannot give." : "."));
      }
      stack.push_back(a.has_default ? a.default_value : c10::IValue());
    } else {
      stack.push_back(to_ivalue(args[a.r_pos], a));
    }
  }
}

SEXP call_op(SEXP index, SEXP* args, int n) {
  Op& op = op_at(index);
  const OverloadPlan& p = choose(op, args, n);
  torch::jit::Stack stack;
  fill(stack, op, p, args);
  try {
    p.handle.callBoxed(stack);
  } catch (const c10::Error& e) {
    // Tensors R has dropped but not yet collected may hold the memory: collect, then retry once;
    // not an op that writes to its arguments, which may have written part of its result before
    // the allocation failed (`_foreach_add_()` adds tensor by tensor): run again, it would write
    // that part twice.
    if (!out_of_memory(e) || p.handle.schema().is_mutable()) throw;
    stack.clear();
    collect_garbage();
    fill(stack, op, p, args);
    p.handle.callBoxed(stack);
  }
  if (stack.empty()) return R_NilValue;
  if (stack.size() == 1) return from_ivalue(std::move(stack[0]), args, n);
  return list_of(std::move(stack), args, n);
}

}  // namespace

extern "C" SEXP C_op_table(SEXP entries) {
  AMPKIT_R_BEGIN
  if (table != nullptr) R_ReleaseObject(table);
  table = entries;
  R_PreserveObject(table);
  ops.clear();
  ops.resize(static_cast<size_t>(XLENGTH(entries)));
  for (R_xlen_t i = 0; i < XLENGTH(entries); ++i) ops[i].entry = VECTOR_ELT(entries, i);
  return R_NilValue;
  AMPKIT_R_END
}

// The op's overloads this libtorch has, as schema strings (for documentation and tests).
extern "C" SEXP C_op_schemas(SEXP index) {
  AMPKIT_R_BEGIN
  Op& op = op_at(index);
  SEXP out = PROTECT(Rf_allocVector(STRSXP, static_cast<R_xlen_t>(op.overloads.size())));
  for (size_t i = 0; i < op.overloads.size(); ++i) {
    std::ostringstream text;
    text << op.overloads[i].handle.schema();
    SET_STRING_ELT(out, static_cast<R_xlen_t>(i), Rf_mkChar(text.str().c_str()));
  }
  UNPROTECT(1);
  return out;
  AMPKIT_R_END
}

// A built-in layer's forward, called by nn_sequential()'s chain without R (modules.cpp): the op its
// R forward calls, with the same arguments, through the same dispatcher (autocast, autograd), so
// the same result bit for bit. nullptr where the R forward is to run instead: an argument that is
// not a live tensor (tensor_of()'s error) or an error from libtorch, which the R forward then
// raises in R's words.
SEXP native_layer_forward(NativeLayer layer, SEXP input, SEXP weight, SEXP bias) {
  at::Tensor out;
  try {
    const at::Tensor x = tensor_of(input, "input");
    if (layer == NativeLayer::Relu) {
      out = at::relu(x);
    } else {
      std::optional<at::Tensor> b;
      if (bias != R_NilValue) b = tensor_of(bias, "bias");
      out = at::linear(x, tensor_of(weight, "weight"), b);
    }
  } catch (const std::exception&) {
    return nullptr;
  }
  return make_tensor(std::move(out));
}

// C_op0 .. C_op32: the entry of every generated function, by its number of R arguments.
#include "ops_entries.h"

}  // namespace ampkit_r
