// R torch's indexing: x[...] and x[...] <- value (R/indexing.R evaluates the arguments; this file
// turns each into libtorch's TensorIndex, R torch's way).
//
// Per argument: missing is the whole dimension; a number is 1-based (negative: from the end, -1
// the last; NA or a fraction is an error), its dimension dropped unless drop = FALSE; NULL
// (newaxis) adds a dimension;
// `..` is the ellipsis; a slice (a:b, a:b:s, built by R/indexing.R) keeps its dimension, its end
// inclusive; a numeric vector, a logical vector or a long/bool tensor is a vector index.
// Vector indices apply one dimension at a time, as R's do (x[c(1, 2), c(1, 3)] is a 2x2 block, not
// numpy's pairs): the index is cut after each vector index and the pieces applied in turn.
// Assignment with at most one vector index is libtorch's index_put_; with several, each dimension's
// positions become an index tensor shaped to broadcast against the others (an outer product), so
// that every combination is assigned, as R does.
#include <ATen/TensorIndexing.h>
#include <ATen/core/grad_mode.h>
#include <ATen/ops/any.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/eq.h>
#include <ATen/ops/ge.h>
#include <ATen/ops/sub.h>

#include <algorithm>
#include <functional>
#include <iterator>
#include <limits>

#include "ampkit_r.h"

namespace ampkit_r {

at::Tensor tensor_from_r(SEXP data, std::optional<c10::ScalarType> dtype,
                         const c10::Device& device);

// R torch's 1-based positions in a tensor, made 0-based (ampkit_r.h): positive ones move down by
// one, negative ones (from the end, or an ignore_index) stay; a 0 is `zero`'s error.
at::Tensor zero_based_tensor(const at::Tensor& t, const std::function<void()>& zero) {
  if (t.device().is_cpu() && t.scalar_type() == at::kLong) {
    // One pass over the data, not five ops and a read of their result: a loss's class targets
    // come here at every step (the small conv net's cross-entropy: 62 -> 31 us over its
    // forward).
    const at::Tensor in = t.contiguous();
    at::Tensor out = at::empty_like(in);
    const int64_t* from = in.const_data_ptr<int64_t>();
    int64_t* to = out.mutable_data_ptr<int64_t>();
    for (int64_t i = 0, n = in.numel(); i < n; ++i) {
      if (from[i] == 0) zero();
      to[i] = from[i] > 0 ? from[i] - 1 : from[i];
    }
    return out;
  }
  if (at::any(at::eq(t, 0)).item<bool>()) zero();
  return at::sub(t, at::ge(t, 0).to(t.scalar_type()));
}

namespace {

using at::indexing::Ellipsis;
using at::indexing::None;
using at::indexing::Slice;
using at::indexing::TensorIndex;

constexpr int64_t kEnd = std::numeric_limits<int64_t>::max();

struct Converted {
  TensorIndex index = Slice();
  bool vector_like = false;
  bool scalar = false;    // a number: its dimension dropped (unless drop = FALSE)
  bool fill = false;      // `..`
  bool new_axis = false;  // NULL
};

at::Tensor zero_based_index(const at::Tensor& t) {
  return zero_based_tensor(
      t, [] { throw Error("index_error", "Indexing starts at 1 but found a 0."); });
}

int64_t zero_based_number(double v) {
  if (v == 0) throw Error("index_error", "Indexing in R is 1-based and found a 0.");
  const auto i = static_cast<int64_t>(v);
  return i > 0 ? i - 1 : i;
}

// A slice's start, end or step: a whole number, as a single position is (Inf: to the end), or a
// one-element tensor of one; anything else is an error (NA read as a number failed every
// comparison and selected nothing, a tensor as NA, a fraction was truncated).
double slice_part(SEXP slice, const char* name, double otherwise) {
  SEXP names = Rf_getAttrib(slice, R_NamesSymbol);
  for (R_xlen_t i = 0; i < Rf_xlength(slice); ++i) {
    if (std::string(CHAR(STRING_ELT(names, i))) != name) continue;
    SEXP v = VECTOR_ELT(slice, i);
    if (Rf_isNull(v)) return otherwise;
    const std::string arg = std::string("the slice's ") + name;
    if (is_tensor(v)) {
      const at::Tensor t = tensor_of(v, arg.c_str());
      if (t.numel() == 1 && !t.is_complex() && t.scalar_type() != at::kBool) {
        const double d = t.item<double>();
        if (d == std::trunc(d)) return d;
      }
    } else if (is_integer64(v) && XLENGTH(v) == 1) {
      return static_cast<double>(integer64_at(v, 0, arg.c_str()));
    } else if (is_number(v) && TYPEOF(v) != LGLSXP) {
      const double d = number_of(v, arg.c_str());
      if (std::isinf(d) || d == std::trunc(d)) return d;
    }
    throw Error("value_error", "`" + std::string(name) +
                                   "` of a slice must be a whole number, got " + describe(v) + ".");
  }
  return otherwise;
}

Converted convert(SEXP arg, const c10::Device& device) {
  Converted c;
  if (arg == R_MissingArg) return c;  // the whole dimension
  if (Rf_isNull(arg)) {
    c.index = None;
    c.new_axis = true;
    return c;
  }
  if (Rf_inherits(arg, "fill")) {
    c.index = Ellipsis;
    c.fill = true;
    return c;
  }
  if (Rf_inherits(arg, "slice")) {
    // R torch's slc(): 1-based start; an end of Inf or -1 runs to the end; other negative ends
    // are inclusive.
    const double start = slice_part(arg, "start", 1);
    double end = slice_part(arg, "end", R_PosInf);
    const double step = slice_part(arg, "step", 1);
    int64_t e;
    if (std::isinf(end) || end == -1) {
      e = kEnd;
    } else if (end < -1) {
      e = static_cast<int64_t>(end) + 1;
    } else {
      e = static_cast<int64_t>(end);
    }
    const int64_t s = start > 0 ? static_cast<int64_t>(start) - 1 : static_cast<int64_t>(start);
    c.index = Slice(s, e, static_cast<int64_t>(step));
    return c;
  }
  if (is_tensor(arg)) {
    at::Tensor t = tensor_of(arg, "index");
    if (t.scalar_type() == at::kBool) {
      c.index = t;
      c.vector_like = t.dim() > 0;
      return c;
    }
    if (t.scalar_type() != at::kLong) {
      throw Error("index_error", "Only long and boolean tensors are supported.");
    }
    at::NoGradGuard no_grad;
    c.index = zero_based_index(t);
    c.vector_like = t.dim() > 0;
    // A 0-dim one is a position, as a number is (libtorch selects with it): its dimension goes.
    c.scalar = t.dim() == 0;
    return c;
  }
  if (TYPEOF(arg) == LGLSXP && Rf_xlength(arg) == 1 && LOGICAL(arg)[0] == NA_LOGICAL) {
    value_error("An index is NA: positions are whole numbers, masks TRUE or FALSE.");
  }
  // One number is a position, also with dimensions (matrix(2)), as in R torch.
  if ((TYPEOF(arg) == REALSXP || TYPEOF(arg) == INTSXP) && Rf_xlength(arg) == 1) {
    c.index = zero_based_number(static_cast<double>(whole_number_of(arg, "index")));
    c.scalar = true;
    return c;
  }
  if ((TYPEOF(arg) == REALSXP || TYPEOF(arg) == INTSXP) && Rf_xlength(arg) > 1) {
    whole_numbers_of(arg, "index");
    at::Tensor t = tensor_from_r(arg, at::kLong, device);
    c.index = zero_based_index(t);
    c.vector_like = true;
    return c;
  }
  if (TYPEOF(arg) == LGLSXP && Rf_xlength(arg) > 0) {
    c.index = tensor_from_r(arg, at::kBool, device);
    c.vector_like = true;
    return c;
  }
  throw Error("index_error", "Unsupported index: " + describe(arg) + ".");
}

// The dimensions of the indexed tensor that an index uses up: none for a new axis (NULL) or `..`
// (the others decide its share), every one of a mask's.
int64_t dims_used(const Converted& c) {
  if (c.new_axis || c.fill) return 0;
  if (c.index.is_tensor() && c.index.tensor().scalar_type() == at::kBool) {
    return std::max<int64_t>(c.index.tensor().dim(), 1);
  }
  return 1;
}

std::vector<std::vector<TensorIndex>> pieces_of(SEXP args, bool drop, const c10::Device& device) {
  std::vector<std::vector<TensorIndex>> pieces;
  std::vector<TensorIndex> current;
  int64_t out_dims = 0;  // the result's dimensions made so far
  bool seen_fill = false;
  const R_xlen_t n = Rf_xlength(args);
  std::vector<Converted> converted;
  for (R_xlen_t i = 0; i < n; ++i) converted.push_back(convert(VECTOR_ELT(args, i), device));
  for (R_xlen_t i = 0; i < n; ++i) {
    const Converted& c = converted[static_cast<size_t>(i)];
    current.push_back(c.index);
    if (c.fill) seen_fill = true;
    if (c.scalar && !drop) {
      current.push_back(None);
      ++out_dims;
    } else if (!c.scalar && !c.fill) {
      ++out_dims;
    }
    if (c.vector_like && i < n - 1) {
      if (!seen_fill) {
        current.push_back(Ellipsis);
      } else {  // the dimensions the indices after this one use, whole
        for (R_xlen_t k = i + 1; k < n; ++k) {
          for (int64_t j = dims_used(converted[static_cast<size_t>(k)]); j > 0; --j) {
            current.push_back(Slice());
          }
        }
      }
      pieces.push_back(std::move(current));
      current.clear();
      if (seen_fill) {
        current.push_back(Ellipsis);
      } else {
        for (int64_t k = 0; k < out_dims; ++k) current.push_back(Slice());
      }
    }
  }
  // x[drop = FALSE], no index at all: no piece, x itself (R torch's)
  if (n > 0) pieces.push_back(std::move(current));
  return pieces;
}

// libtorch's index kernel says "dimension 0" of any vector index out of bounds (it indexes the
// flattened dimensions): where a piece's vector index is out of its dimension's bounds, the error
// names that dimension (in libtorch's 0-based words, which R's translation shifts as the rest).
void out_of_bounds_vector(const at::Tensor& t, const std::vector<TensorIndex>& piece) {
  int64_t used = 0;  // the dimensions of `t` the indices other than `..` take
  for (const TensorIndex& e : piece) {
    if (e.is_none() || e.is_ellipsis()) continue;
    used += e.is_tensor() && e.tensor().scalar_type() == at::kBool ? e.tensor().dim() : 1;
  }
  int64_t d = 0;
  for (const TensorIndex& e : piece) {
    if (e.is_ellipsis()) {
      d += std::max<int64_t>(t.dim() - used, 0);
    } else if (e.is_tensor() && e.tensor().scalar_type() == at::kBool) {
      d += e.tensor().dim();
    } else if (e.is_tensor() && e.tensor().dim() > 0 && d < t.dim()) {
      const at::Tensor& p = e.tensor();
      const int64_t size = t.size(d);
      const at::Tensor outside = p.ge(size).logical_or(p.lt(-size));
      if (outside.any().item<bool>()) {
        const int64_t bad = p.masked_select(outside)[0].item<int64_t>();
        throw Error("index_error", "index " + std::to_string(bad) +
                                       " is out of bounds for dimension " + std::to_string(d) +
                                       " with size " + std::to_string(size));
      }
      ++d;
    } else if (!e.is_none()) {
      ++d;
    }
  }
}

// The positions a slice selects along a dimension of `size`, as a long tensor.
at::Tensor slice_positions(const Slice& s, int64_t size, const c10::Device& device) {
  return at::arange(size, at::TensorOptions().dtype(at::kLong).device(device))
      .slice(0, s.start().expect_int(), s.stop().expect_int(), s.step().expect_int());
}

// An assignment's index with several vector indices, as R assigns: every dimension that is not
// dropped by a number gets a long tensor of its positions (slices and missing arguments included),
// the k-th of them shaped [1, ..., n_k, ..., 1] so that together they broadcast to the block of all
// combinations, in the order of the dimensions. Numbers stay numbers (libtorch selects them first).
std::vector<TensorIndex> outer_index(const std::vector<Converted>& converted, const at::Tensor& t) {
  at::NoGradGuard no_grad;
  int64_t consumed = 0;
  for (const Converted& c : converted) consumed += dims_used(c);
  // One entry per dimension of `t`: a number or a 1-d long tensor of positions.
  std::vector<TensorIndex> per_dim;
  auto add_whole = [&](int64_t n) {
    for (int64_t k = 0; k < n; ++k) per_dim.emplace_back(Slice());
  };
  for (const Converted& c : converted) {
    if (c.new_axis) continue;  // a new dimension of size 1: the value broadcasts over it anyway
    if (c.fill) {
      add_whole(std::max<int64_t>(t.dim() - consumed, 0));
      continue;
    }
    if (c.index.is_tensor() && c.index.tensor().scalar_type() == at::kBool) {
      const at::Tensor& mask = c.index.tensor();
      if (mask.dim() > 1) {
        throw Error("index_error",
                    "A mask of several dimensions must be the only vector index of an assignment.");
      }
      // Its positions are those of its TRUEs: a mask shorter than its dimension would write
      // into the first rows only (reading with it is libtorch's error, as here).
      const int64_t d = static_cast<int64_t>(per_dim.size());
      if (mask.dim() == 1 && d < t.dim() && mask.size(0) != t.size(d)) {
        throw Error("index_error", "The mask of dimension " + std::to_string(d + 1) + " has " +
                                       std::to_string(mask.size(0)) + " values for its " +
                                       std::to_string(t.size(d)) + " positions.");
      }
      per_dim.emplace_back(mask.nonzero().squeeze(1));
      continue;
    }
    if (c.scalar && c.index.is_tensor()) {  // a 0-dim position drops its dimension, as a number
      per_dim.emplace_back(c.index.tensor().item<int64_t>());
      continue;
    }
    per_dim.push_back(c.index);
  }
  if (static_cast<int64_t>(per_dim.size()) > t.dim()) {
    throw Error("index_error", "too many indices for tensor of dimension " +
                                   std::to_string(t.dim()) + " (got " +
                                   std::to_string(per_dim.size()) + ")");
  }
  add_whole(t.dim() - static_cast<int64_t>(per_dim.size()));
  // The kept dimensions' positions, in order (numbers drop theirs).
  std::vector<at::Tensor> positions;
  std::vector<int64_t> slot(per_dim.size(), -1);
  int64_t d = 0;
  for (size_t k = 0; k < per_dim.size(); ++k, ++d) {
    const TensorIndex& e = per_dim[k];
    if (e.is_integer()) continue;
    slot[k] = static_cast<int64_t>(positions.size());
    if (e.is_slice()) {
      positions.push_back(slice_positions(e.slice(), t.size(d), t.device()));
    } else {
      positions.push_back(e.tensor().reshape({-1}));
    }
  }
  const int64_t kept = static_cast<int64_t>(positions.size());
  std::vector<TensorIndex> out;
  for (size_t k = 0; k < per_dim.size(); ++k) {
    if (slot[k] < 0) {
      out.push_back(per_dim[k]);
      continue;
    }
    std::vector<int64_t> shape(static_cast<size_t>(kept), 1);
    shape[static_cast<size_t>(slot[k])] = -1;
    out.emplace_back(positions[static_cast<size_t>(slot[k])].reshape(shape));
  }
  return out;
}

}  // namespace

// A tensor of 1-based positions given as the argument `arg` (class targets, indices), 0-based
// for libtorch (R/ops.R, one_based_tensor()).
extern "C" SEXP C_zero_based(SEXP x, SEXP arg) {
  AMPKIT_R_BEGIN
  const std::string name = CHAR(STRING_ELT(arg, 0));
  return make_tensor(zero_based_tensor(tensor_of(x, "x"), [&] { zero_position_error(name); }));
  AMPKIT_R_END
}

// Whether an index argument written in the brackets is taken as written: a number, TRUE/FALSE,
// NULL.
bool written_value(SEXP expr) {
  const int type = TYPEOF(expr);
  return type == NILSXP ||
         ((type == REALSXP || type == INTSXP || type == LGLSXP) && ATTRIB(expr) == R_NilValue);
}

// Whether a name in the brackets is one of the index mask's (R/indexing.R: index_mask()).
bool masked_name(SEXP expr) {
  static const SEXP names[] = {Rf_install("N"), Rf_install("newaxis"), Rf_install("..")};
  return std::find(std::begin(names), std::end(names), expr) != std::end(names);
}

// Whether `expr` is an operand of `:` in the brackets that needs no mask: a number as written, a
// name that is not the mask's, or `-` of either.
bool plain_operand(SEXP expr) {
  if (written_value(expr)) return !Rf_isNull(expr);
  if (TYPEOF(expr) == SYMSXP) return !masked_name(expr);
  static const SEXP minus = Rf_install("-");
  return TYPEOF(expr) == LANGSXP && CAR(expr) == minus && Rf_length(expr) == 2 &&
         plain_operand(CADR(expr));
}

// Whether `expr` is `a:b` (or `a:b:s`, `(a:b):s`) of plain operands: the common slices (x[1:2, ]).
// Decided from the expression alone, before anything is evaluated, so that an expression is
// evaluated once, here or by the mask.
bool plain_colon(SEXP expr) {
  static const SEXP colon = Rf_install(":");
  return TYPEOF(expr) == LANGSXP && CAR(expr) == colon && Rf_length(expr) == 3 &&
         (plain_operand(CADR(expr)) || plain_colon(CADR(expr))) && plain_operand(CADDR(expr));
}

// The value of a plain `a:b` (plain_colon()) in the caller's frame `env`: what the mask's `:`
// (index_colon(), R/indexing.R) makes of it, without making the mask (~10 us). The operands are
// evaluated in `env` as the mask evaluates them (it defines none of their names), `a` first. A
// slice on the left (`a:b:s`, or a name holding one) gets its step from R's own index_colon().
SEXP plain_slice(SEXP expr, SEXP env) {
  SEXP from = PROTECT(plain_colon(CADR(expr)) ? plain_slice(CADR(expr), env)
                                              : eval_protected(CADR(expr), env));
  SEXP to = PROTECT(eval_protected(CADDR(expr), env));
  SEXP out;
  if (Rf_inherits(from, "slice")) {
    static const SEXP index_colon = Rf_install("index_colon");
    SEXP from_q = PROTECT(Rf_lang2(R_QuoteSymbol, from));
    SEXP to_q = PROTECT(Rf_lang2(R_QuoteSymbol, to));
    SEXP call = PROTECT(Rf_lang3(index_colon, from_q, to_q));
    out = eval_protected(call, package_namespace());
    UNPROTECT(3);
  } else {
    // slc(from, to): list(start, end, step = 1L) of class "slice"
    static const char* parts[] = {"start", "end", "step", ""};
    out = PROTECT(Rf_mkNamed(VECSXP, parts));
    SET_VECTOR_ELT(out, 0, from);
    SET_VECTOR_ELT(out, 1, to);
    SET_VECTOR_ELT(out, 2, Rf_ScalarInteger(1));
    Rf_setAttrib(out, R_ClassSymbol, Rf_mkString("slice"));
    UNPROTECT(1);
  }
  UNPROTECT(2);
  return out;
}

// The index arguments of a `[` call, the `...` of the method's frame `env`, evaluated R torch's
// way: a missing one stays the missing argument (the whole dimension); a number, TRUE/FALSE or
// NULL is taken as written, a name as R evaluates it, `a:b` of those a slice; any other
// expression (`N`, `..`, `1:N`) in R's index mask over the caller's frame (index_eval_masked(),
// R/indexing.R). In C: in R, reading the arguments cost more than the indexing (x[1, ] of a 64x64
// tensor).
// `e` of `!!!e` (rlang's splice, which R parses as three `!`), or nullptr.
SEXP spliced(SEXP expr) {
  static const SEXP bang = Rf_install("!");
  for (int k = 0; k < 3; ++k) {
    if (TYPEOF(expr) != LANGSXP || CAR(expr) != bang || Rf_length(expr) != 2) return nullptr;
    expr = CADR(expr);
  }
  return expr;
}

// The elements of a spliced value, each an index argument of its own (a list's elements, a
// vector's one by one).
SEXP splice_elements(SEXP value) {
  if (TYPEOF(value) == VECSXP && !OBJECT(value)) return value;
  const int type = TYPEOF(value);
  if (OBJECT(value) || (type != REALSXP && type != INTSXP && type != LGLSXP)) {
    throw Error("value_error", "`!!!` splices numbers, logicals or a list of indices, got " +
                                   describe(value) + ".");
  }
  const R_xlen_t n = XLENGTH(value);
  SEXP out = PROTECT(Rf_allocVector(VECSXP, n));
  for (R_xlen_t k = 0; k < n; ++k) {
    SEXP one = Rf_allocVector(type, 1);
    SET_VECTOR_ELT(out, k, one);
    if (type == REALSXP) {
      REAL(one)[0] = REAL(value)[k];
    } else if (type == INTSXP) {
      INTEGER(one)[0] = INTEGER(value)[k];
    } else {
      LOGICAL(one)[0] = LOGICAL(value)[k];
    }
  }
  UNPROTECT(1);
  return out;
}

SEXP index_args_of(SEXP env) {
  SEXP dots = Rf_findVarInFrame(env, R_DotsSymbol);
  if (TYPEOF(dots) != DOTSXP) return Rf_allocVector(VECSXP, 0);
  // Each argument's value; a spliced one (`x[!!!positions]`, R torch's) marked, its elements
  // becoming arguments of their own below.
  const R_xlen_t n = Rf_length(dots);
  SEXP values = PROTECT(Rf_allocVector(VECSXP, n));
  std::vector<bool> splice(static_cast<size_t>(n), false);
  static const SEXP masked = Rf_install("index_eval_masked");
  R_xlen_t i = 0;
  for (SEXP cell = dots; cell != R_NilValue; cell = CDR(cell), ++i) {
    SEXP arg = CAR(cell);
    if (arg == R_MissingArg || TYPEOF(arg) != PROMSXP) {
      SET_VECTOR_ELT(values, i, arg);
      continue;
    }
    SEXP expr = R_PromiseExpr(arg);
    SEXP inner = PRENV(arg) == R_NilValue ? nullptr : spliced(expr);
    if (inner != nullptr) {
      SEXP value = PROTECT(eval_protected(inner, PRENV(arg)));
      SET_VECTOR_ELT(values, i, splice_elements(value));
      UNPROTECT(1);
      splice[static_cast<size_t>(i)] = true;
    } else if (written_value(expr)) {
      SET_VECTOR_ELT(values, i, expr);
    } else if ((TYPEOF(expr) == SYMSXP && !masked_name(expr)) || PRENV(arg) == R_NilValue) {
      SET_VECTOR_ELT(values, i, eval_protected(arg, R_BaseEnv));  // forces the promise
    } else if (plain_colon(expr)) {
      SET_VECTOR_ELT(values, i, plain_slice(expr, PRENV(arg)));
    } else {
      SEXP quoted = PROTECT(Rf_lang2(R_QuoteSymbol, expr));
      SEXP call = PROTECT(Rf_lang3(masked, quoted, PRENV(arg)));
      SET_VECTOR_ELT(values, i, eval_protected(call, package_namespace()));
      UNPROTECT(2);
    }
  }
  if (std::find(splice.begin(), splice.end(), true) == splice.end()) {
    UNPROTECT(1);
    return values;
  }
  R_xlen_t total = 0;
  for (R_xlen_t k = 0; k < n; ++k) total += splice[k] ? XLENGTH(VECTOR_ELT(values, k)) : 1;
  SEXP out = PROTECT(Rf_allocVector(VECSXP, total));
  R_xlen_t at = 0;
  for (R_xlen_t k = 0; k < n; ++k) {
    SEXP v = VECTOR_ELT(values, k);
    if (!splice[k]) {
      SET_VECTOR_ELT(out, at++, v);
      continue;
    }
    for (R_xlen_t j = 0; j < XLENGTH(v); ++j) SET_VECTOR_ELT(out, at++, VECTOR_ELT(v, j));
  }
  UNPROTECT(2);
  return out;
}

extern "C" SEXP C_index_args(SEXP env) {
  AMPKIT_R_BEGIN
  return index_args_of(env);
  AMPKIT_R_END
}

extern "C" SEXP C_tensor_index(SEXP x, SEXP env, SEXP drop) {
  AMPKIT_R_BEGIN
  at::Tensor out = tensor_of(x, "x");
  SEXP args = PROTECT(index_args_of(env));
  for (const auto& piece : pieces_of(args, flag_of(drop, "drop"), out.device())) {
    try {
      out = out.index(piece);
    } catch (const c10::IndexError&) {
      out_of_bounds_vector(out, piece);
      throw;
    }
  }
  UNPROTECT(1);
  return make_tensor(std::move(out));
  AMPKIT_R_END
}

extern "C" SEXP C_tensor_index_put(SEXP x, SEXP args, SEXP value) {
  AMPKIT_R_BEGIN
  at::Tensor t = tensor_of(x, "x");
  std::vector<Converted> converted;
  int vectors = 0;
  for (R_xlen_t i = 0; i < Rf_xlength(args); ++i) {
    converted.push_back(convert(VECTOR_ELT(args, i), t.device()));
    vectors += converted.back().vector_like;
  }
  std::vector<TensorIndex> index;
  if (vectors > 1) {
    index = outer_index(converted, t);
  } else {
    for (const Converted& c : converted) index.push_back(c.index);
  }
  if (is_tensor(value)) {
    t.index_put_(index, tensor_of(value, "value"));
  } else if (is_integer64(value) && XLENGTH(value) == 1) {
    t.index_put_(index, c10::Scalar(integer64_at(value, 0, "value")));
  } else if (TYPEOF(value) == REALSXP && XLENGTH(value) == 1 && !OBJECT(value)) {
    t.index_put_(index, REAL(value)[0]);  // NA_real_ is NaN, as in R torch
  } else if (is_number(value)) {
    t.index_put_(index, number_of(value, "value"));
  } else {
    throw Error("value_error",
                "The value assigned must be a tensor or one number, got " + describe(value) + ".");
  }
  return x;
  AMPKIT_R_END
}

}  // namespace ampkit_r
