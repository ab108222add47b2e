/* Loads libtorch's libraries into R's process with RTLD_DEEPBIND before the package's own
   library (which links them) is loaded: R's reference BLAS is already in the process, and
   libtorch's sgemm_ (every float32 matrix product) would otherwise bind to it: 15-40x slower
   than in Python, and not bit-identical. Kept apart from the package's library because that one
   would load libtorch as a plain dependency, before any of its code could run. */
#include <dlfcn.h>
#include <R.h>
#include <Rinternals.h>
#include <R_ext/Rdynload.h>

static SEXP load_deepbind(SEXP paths) {
  for (R_xlen_t i = 0; i < XLENGTH(paths); i++) {
    const char* path = CHAR(STRING_ELT(paths, i));
    if (!dlopen(path, RTLD_NOW | RTLD_GLOBAL | RTLD_DEEPBIND)) {
      Rf_error("ampkit could not load %s: %s", path, dlerror());
    }
  }
  return R_NilValue;
}

static const R_CallMethodDef entries[] = {{"load_deepbind", (DL_FUNC)&load_deepbind, 1},
                                          {NULL, NULL, 0}};

void R_init_ampkit_loader(DllInfo* dll) {
  R_registerRoutines(dll, NULL, entries, NULL, NULL);
  R_useDynamicSymbols(dll, FALSE);
}
