// Registration of the package's .Call entry points (R_registerRoutines): R reaches them as the
// native symbol objects `C_<name>` in the namespace (useDynLib(ampkit, .registration = TRUE)).
#define R_NO_REMAP
#include <R.h>
#include <R_ext/Rdynload.h>
#include <Rinternals.h>

#define AMPKIT_OP_REGISTRY 1
#include "ops_entries.h"
#undef AMPKIT_OP_REGISTRY

#include "entries.h"

namespace {
const R_CallMethodDef call_entries[] = {
#define AMPKIT_OP_REGISTRY 2
#include "ops_entries.h"
#undef AMPKIT_OP_REGISTRY
#define AMPKIT_ENTRY(name, n) {#name, (DL_FUNC)&name, n},
    AMPKIT_ENTRIES
#undef AMPKIT_ENTRY
    {nullptr, nullptr, 0}};
}  // namespace

extern "C" void R_init_ampkit(DllInfo* dll) {
  R_registerRoutines(dll, nullptr, call_entries, nullptr, nullptr);
  R_useDynamicSymbols(dll, FALSE);
  R_forceSymbols(dll, TRUE);
}
