# Shared by the test files: skip without Python, torch as the oracle for autocast state.
# Python's torch is imported with reticulate's conversions: an R tensor given to it is the same
# torch.Tensor there, and a tensor it returns comes back as an R tensor (ampkit's interop);
# import_torch_py() keeps its results Python objects, for the tests that need those.

skip_if_no_ampkit <- function() {
  if (!ampkit_available()) {
    reason <- tryCatch({
      ampkit:::python_modules()
      "unknown reason"
    }, error = function(e) strsplit(conditionMessage(e), "\n", fixed = TRUE)[[1L]][3L])
    testthat::skip(paste0("the Python module ampkit cannot be imported (", trimws(reason), "); ",
                "set RETICULATE_PYTHON to the Python that `make setup` built (.venv/bin/python)"))
  }
}

import_torch <- function() reticulate::import("torch")
import_torch_py <- function() reticulate::import("torch", convert = FALSE)

# PyTorch's name of a tensor's dtype ("torch.bfloat16"), as Python reads it from the same tensor
# (an R tensor is handed to Python without a copy).
py_dtype <- function(x) reticulate::py_str(reticulate::r_to_py(x)$dtype)

# The classes of an error raised by ampkit's C++ core: R torch's class for its kind, then
# ampkit's.
core_error_classes <- function(r_class) {
  c(r_class, "ampkit_core_error", "ampkit_error", "rlang_error", "error", "condition")
}

# The part of a state_dict() that torch.amp has (its keys asked of torch.amp itself), to compare
# ampkit's state, which adds keys of its own, with torch.amp's.
torch_amp_part <- function(state) {
  state[names(import_torch()$amp$GradScaler("cpu")$state_dict())]
}

# The autocast state on the CPU, as torch itself reads it.
cpu_state <- function() {
  t <- import_torch()
  list(
    enabled = t$is_autocast_enabled("cpu"),
    dtype = reticulate::py_str(t$get_autocast_dtype("cpu")),
    cache = t$is_autocast_cache_enabled()
  )
}

# Runs `code` inside an outer region that is not torch's default state (float16, cache off),
# so that "restored" cannot pass by falling back to the defaults.
with_outer_region <- function(code) {
  outer <- set_autocast("cpu", dtype = "float16", cache_enabled = FALSE)
  on.exit(unset_autocast(outer))
  code
}

outer_state <- list(enabled = TRUE, dtype = "torch.float16", cache = FALSE)

# reticulate 1.28 keeps its own "interrupt pending" flag after R has handled a SIGINT, and turns
# the next Python exception into an R interrupt. Raise one Python exception to consume it, so
# that the tests after an interrupt test see ordinary errors.
drain_reticulate_interrupt <- function() {
  tryCatch(reticulate::py_eval("1/0"), interrupt = function(e) NULL, error = function(e) NULL)
  invisible()
}

# The message of the Python exception `expr` raises (the reference for R's error messages).
python_error_message <- function(expr) {
  tryCatch({
    expr
    NA_character_
  }, error = function(e) reticulate::py_last_error()$value)
}
