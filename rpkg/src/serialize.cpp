// torch_save()/torch_load(): R values in PyTorch's own file format, through libtorch's pickler
// (torch::jit::pickle_save/pickle_load write and read what Python's torch.save/torch.load do for
// tensors, dicts, lists, numbers and strings). R's side: a tensor is a tensor, a named list an
// ordered dict with string keys, an unnamed list a list, a number a float, an integer an int, a
// flag a bool, a string a str, NULL None.
#include <torch/csrc/jit/serialization/pickle.h>

#include <cstring>
#include <string>
#include <vector>

#include "ampkit_r.h"

namespace ampkit_r {
namespace {

c10::IValue ivalue_of(SEXP x, const std::string& where) {
  if (Rf_isNull(x)) return c10::IValue();
  if (is_tensor(x)) return tensor_of(x, where.c_str());
  if (TYPEOF(x) == VECSXP) {
    SEXP names = Rf_getAttrib(x, R_NamesSymbol);
    if (!Rf_isNull(names)) {
      c10::impl::GenericDict dict(c10::StringType::get(), c10::AnyType::get());
      for (R_xlen_t i = 0; i < XLENGTH(x); ++i) {
        const std::string key = CHAR(STRING_ELT(names, i));
        dict.insert(key, ivalue_of(VECTOR_ELT(x, i), where + "$" + key));
      }
      return dict;
    }
    c10::impl::GenericList list(c10::AnyType::get());
    for (R_xlen_t i = 0; i < XLENGTH(x); ++i) {
      list.push_back(ivalue_of(VECTOR_ELT(x, i), where + "[[" + std::to_string(i + 1) + "]]"));
    }
    return list;
  }
  if (Rf_xlength(x) == 1 && Rf_isNull(Rf_getAttrib(x, R_DimSymbol))) {
    switch (TYPEOF(x)) {
      case REALSXP:
        return REAL(x)[0];
      case INTSXP:
        return static_cast<int64_t>(INTEGER(x)[0]);
      case LGLSXP:
        return static_cast<bool>(LOGICAL(x)[0]);
      case STRSXP:
        return std::string(Rf_translateCharUTF8(STRING_ELT(x, 0)));
      default:
        break;
    }
  }
  if (TYPEOF(x) == REALSXP || TYPEOF(x) == INTSXP || TYPEOF(x) == LGLSXP) {
    // A vector of numbers: a list of them (PyTorch's optimizer options such as betas).
    c10::impl::GenericList list(c10::AnyType::get());
    for (R_xlen_t i = 0; i < XLENGTH(x); ++i) {
      if (TYPEOF(x) == REALSXP) list.push_back(REAL(x)[i]);
      if (TYPEOF(x) == INTSXP) list.push_back(static_cast<int64_t>(INTEGER(x)[i]));
      if (TYPEOF(x) == LGLSXP) list.push_back(static_cast<bool>(LOGICAL(x)[i]));
    }
    return list;
  }
  value_error("`" + where + "` cannot be saved: it is " + describe(x) +
              " (tensors, lists, numbers, flags, strings and NULL can).");
}

SEXP r_of(const c10::IValue& v) {
  if (v.isNone()) return R_NilValue;
  if (v.isTensor()) return make_tensor(v.toTensor());
  if (v.isDouble()) return Rf_ScalarReal(v.toDouble());
  if (v.isInt()) return Rf_ScalarReal(static_cast<double>(v.toInt()));
  if (v.isBool()) return Rf_ScalarLogical(v.toBool());
  if (v.isString()) return Rf_mkString(v.toStringRef().c_str());
  if (v.isGenericDict()) {
    const auto dict = v.toGenericDict();
    SEXP out = PROTECT(Rf_allocVector(VECSXP, static_cast<R_xlen_t>(dict.size())));
    SEXP names = PROTECT(Rf_allocVector(STRSXP, static_cast<R_xlen_t>(dict.size())));
    R_xlen_t i = 0;
    for (const auto& entry : dict) {
      const c10::IValue& key = entry.key();
      std::string text = key.isString() ? key.toStringRef()
                         : key.isInt()  ? std::to_string(key.toInt())
                                        : key.tagKind();
      SET_STRING_ELT(names, i, Rf_mkCharCE(text.c_str(), CE_UTF8));
      SET_VECTOR_ELT(out, i, r_of(entry.value()));
      ++i;
    }
    Rf_setAttrib(out, R_NamesSymbol, names);
    UNPROTECT(2);
    return out;
  }
  if (v.isList() || v.isTuple() || v.isTensorList() || v.isIntList() || v.isDoubleList() ||
      v.isBoolList()) {
    std::vector<c10::IValue> items;
    if (v.isTuple()) {
      const auto& e = v.toTupleRef().elements();
      items.assign(e.begin(), e.end());
    } else {
      items = v.toListRef().vec();
    }
    SEXP out = PROTECT(Rf_allocVector(VECSXP, static_cast<R_xlen_t>(items.size())));
    for (size_t i = 0; i < items.size(); ++i) {
      SET_VECTOR_ELT(out, static_cast<R_xlen_t>(i), r_of(items[i]));
    }
    UNPROTECT(1);
    return out;
  }
  throw Error("value_error", "the file holds a " + v.tagKind() + ", which has no R value.");
}

}  // namespace

// The bytes of PyTorch's format for `x` (a raw vector).
extern "C" SEXP C_pickle_save(SEXP x) {
  AMPKIT_R_BEGIN
  const std::vector<char> bytes = torch::jit::pickle_save(ivalue_of(x, "obj"));
  SEXP out = PROTECT(Rf_allocVector(RAWSXP, static_cast<R_xlen_t>(bytes.size())));
  if (!bytes.empty()) std::memcpy(RAW(out), bytes.data(), bytes.size());
  UNPROTECT(1);
  return out;
  AMPKIT_R_END
}

extern "C" SEXP C_pickle_load(SEXP raw) {
  AMPKIT_R_BEGIN
  std::vector<char> bytes(static_cast<size_t>(XLENGTH(raw)));
  if (!bytes.empty()) std::memcpy(bytes.data(), RAW(raw), bytes.size());
  return r_of(torch::jit::pickle_load(bytes));
  AMPKIT_R_END
}

}  // namespace ampkit_r
