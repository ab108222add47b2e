# R torch's installer, where libtorch is PyTorch's. R torch downloads libtorch (and its lantern
# library) at install_torch(); ampkit's compiled layer is built against the libtorch of the torch
# wheel in the Python the package was installed against (tools/install_rpkg.sh records its folder
# in torch_lib_dir), and loads it with the package: there is nothing to download, and scripts
# that call R torch's installer learn where their libtorch is.

# The libtorch in use: its folder, and the version of the torch wheel it came with, read from the
# wheel's version.py (no Python started).
libtorch_in_use <- function() {
  lib_dir <- readLines(system.file("torch_lib_dir", package = "ampkit"))
  version_file <- file.path(dirname(lib_dir), "version.py")
  fields <- if (file.exists(version_file)) readLines(version_file) else character()
  field <- function(name) {
    line <- grep(paste0("^", name, "\\b.*= *'"), fields, value = TRUE)
    if (length(line) == 0L) NA_character_ else sub("^[^']*'([^']*)'.*$", "\\1", line[[1L]])
  }
  list(path = lib_dir, version = field("__version__"), cuda = field("cuda"))
}

# "torch 2.13.0+cpu (/path/to/torch/lib)": the libtorch in use, as the messages name it.
libtorch_named <- function(lib = libtorch_in_use()) sprintf("torch %s (%s)", lib$version, lib$path)

#' Install libtorch (R torch's installer)
#'
#' R torch downloads libtorch when `install_torch()` is called. ampkit uses the
#' libtorch of PyTorch's wheel in the Python it was installed against, loaded
#' with the package, so `install_torch()` downloads nothing: it says which
#' libtorch is in use and returns `TRUE`, and a script written for R torch runs
#' on. To use another libtorch, install that torch into the Python and install
#' ampkit's R package again (`make setup`). `install_torch_sitrep()` reports
#' the installation: R, the package, libtorch, CUDA and Python.
#' `install_torch_from_file()` and `get_install_libs_url()` are errors that say
#' so (R torch's first is deprecated there too).
#'
#' @param reinstall,.inform_restart R torch's; `TRUE` or `FALSE`, no effect
#'   (nothing is downloaded).
#' @param ... R torch's other arguments (its download's settings): ignored.
#' @param verbose Whether `install_torch_sitrep()` prints its report.
#' @param version,type,libtorch,liblantern R torch's arguments.
#' @return `install_torch()`: `TRUE`, invisibly. `install_torch_sitrep()`: the
#'   report, a list of `system`, `package`, `libtorch`, `cuda` and `python`,
#'   invisibly.
#' @export
#' @examples
#' install_torch()
#' report <- install_torch_sitrep(verbose = FALSE)
#' report$libtorch$version
install_torch <- function(reinstall = FALSE, ..., .inform_restart = TRUE) {
  arg_flag(reinstall, "reinstall")
  arg_flag(.inform_restart, ".inform_restart")
  rlang::inform(c(
    sprintf("ampkit uses the libtorch of PyTorch's %s: nothing to download.", libtorch_named()),
    i = paste("To use another libtorch, install that torch into the Python ampkit was installed",
              "against, then install ampkit's R package again (make setup).")
  ))
  invisible(TRUE)
}

#' @rdname install_torch
#' @export
install_torch_sitrep <- function(verbose = TRUE) {
  arg_flag(verbose, "verbose")
  lib <- libtorch_in_use()
  cuda <- cuda_is_available()
  report <- list(
    system = list(r_version = R.version$version.string, platform = R.version$platform),
    package = list(name = "ampkit", version = as.character(utils::packageVersion("ampkit"))),
    libtorch = list(path = lib$path, version = lib$version, built_with_cuda = lib$cuda,
                    threads = torch_get_num_threads()),
    cuda = list(available = cuda, devices = cuda_device_count(),
                runtime = if (cuda) as.character(cuda_runtime_version()) else NA_character_,
                cudnn = backends_cudnn_is_available()),
    python = list(recorded = if (nzchar(installed_python)) installed_python else NA_character_,
                  reticulate_python = Sys.getenv("RETICULATE_PYTHON", NA_character_),
                  running = python_running())
  )
  if (verbose) {
    for (section in names(report)) {
      cat(section, "\n", sep = "")
      values <- vapply(report[[section]], function(v) format(v), character(1))
      cat(sprintf("  %-18s %s\n", names(values), values), sep = "")
    }
  }
  invisible(report)
}

#' @rdname install_torch
#' @export
install_torch_from_file <- function(version = NA, type = NA, libtorch, liblantern, ...) {
  abort(c(
    "install_torch_from_file() installs nothing in ampkit (R torch deprecated it as well).",
    i = sprintf("ampkit uses the libtorch of PyTorch's %s.", libtorch_named())
  ), class = "runtime_error")
}

#' @rdname install_torch
#' @export
get_install_libs_url <- function(version = NA, type = NA) {
  abort(c(
    "ampkit downloads no libraries: there are no URLs to give.",
    i = sprintf("It uses the libtorch of PyTorch's %s.", libtorch_named())
  ), class = "runtime_error")
}
