# Which Python ampkit uses. The package records the Python it was installed against:
# tools/install_rpkg.sh sets AMPKIT_PYTHON while R CMD INSTALL evaluates this file, and the value
# is kept in the installed package (no ~/.Renviron, nothing global). RETICULATE_PYTHON, when set,
# wins; a recorded Python that is gone is said so in the "unavailable" error, not at
# library(ampkit). The choice is made at library(ampkit), before anything starts Python, so that a
# `reticulate::import("torch")` right after it gets the same Python; it is this R process's
# setting (and its children's), nothing written to disk. Machines set up before this kept a
# RETICULATE_PYTHON line in ~/.Renviron, which still wins: remove it there.
installed_python <- Sys.getenv("AMPKIT_PYTHON")

# Asks reticulate for the recorded Python, before it starts one, unless the user chose one: as
# RETICULATE_PYTHON in this R process's environment (and its children's), which reticulate reads
# first (use_python() would still look for a project's own Python in the working directory, and
# warn about poetry in a checkout of ampkit).
prefer_installed_python <- function() {
  if (nzchar(Sys.getenv("RETICULATE_PYTHON")) || !nzchar(installed_python) ||
      !file.exists(installed_python) || python_running()) {
    return(invisible(FALSE))
  }
  Sys.setenv(RETICULATE_PYTHON = installed_python)
  invisible(TRUE)
}

# A line for the "unavailable" error when the recorded Python no longer exists.
installed_python_note <- function() {
  if (nzchar(installed_python) && !file.exists(installed_python)) {
    paste0("  ampkit was installed against ", installed_python, ", which no longer exists: ",
           "reinstall it (make setup) or set RETICULATE_PYTHON.\n")
  } else {
    ""
  }
}
