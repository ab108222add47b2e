// Built-in layers whose forward nn_sequential()'s chain (modules.cpp) calls without R, and the
// call (ops.cpp). No ATen here: modules.cpp includes none.
#pragma once
#define R_NO_REMAP
#include <Rinternals.h>

namespace ampkit_r {

enum class NativeLayer { Linear, Relu };

// The layer's op on `input` (and, for Linear, `weight` and `bias`, NULL for none), as its R
// forward calls it; nullptr where the R forward is to run instead (ops.cpp).
SEXP native_layer_forward(NativeLayer layer, SEXP input, SEXP weight, SEXP bias);

}  // namespace ampkit_r
