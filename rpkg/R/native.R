# The compiled layer (rpkg/src): loaded at library(ampkit), before anything runs.
#
# libtorch goes into the process with RTLD_DEEPBIND first (the loader, src/loader): R's own BLAS
# is already loaded, and libtorch's float32 products would otherwise bind to it. Then the
# package's library, which links that libtorch and ampkit's core; its entry points are bound in
# the namespace as `C_<name>` (their addresses: the fastest form .Call takes).
.native <- new.env(parent = emptyenv())

load_native <- function(libname, pkgname) {
  ns <- topenv(parent.frame())
  libs <- file.path(libname, pkgname, "libs")
  loader <- dyn.load(file.path(libs, paste0("ampkit_loader", .Platform$dynlib.ext)))
  torch_lib <- readLines(system.file("torch_lib_dir", package = pkgname, lib.loc = libname))
  torch_libs <- file.path(torch_lib, c("libc10.so", "libtorch_cpu.so", "libtorch.so"))
  cuda <- file.path(torch_lib, c("libc10_cuda.so", "libtorch_cuda.so"))
  .Call(getNativeSymbolInfo("load_deepbind", loader)$address,
        c(torch_libs, cuda[file.exists(cuda)]))
  dll <- library.dynam(pkgname, pkgname, libname)
  routines <- getDLLRegisteredRoutines(dll)$.Call
  for (name in names(routines)) {
    assign(name, routines[[name]]$address, envir = ns)
  }
  .native$dll <- dll
  .Call(C_values_init, c("torch_tensor", "R7"), c("torch_dtype", "R7"), c("torch_device", "R7"),
        c("torch_generator", "R7"))
  .Call(C_op_table, op_table)
  .Call(C_amp_init)
  .Call(C_autograd_init)
  invisible()
}
