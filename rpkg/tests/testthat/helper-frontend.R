# Shared by the front end's tests (test-frontend-tensor.R, -index.R, -ops.R, -autograd.R):
# PyTorch itself, reached through reticulate, is the oracle.

# The Python module torch (convert = FALSE: results stay Python objects). R tensors given to its
# functions arrive there as the same torch.Tensor (no copy).
py_torch <- function() reticulate::import("torch", convert = FALSE)

# A front-end tensor as a Python tensor (the same tensor, not a copy), and a Python tensor as a
# front-end tensor (the same tensor).
py_of <- function(x) reticulate::r_to_py(x)
as_fe <- function(py) ampkit:::py_tensor_to_r(py)

# `x` as a Python tensor, whether it is an R tensor or already a Python one.
as_py_tensor <- function(x) if (inherits(x, "torch_tensor")) py_of(x) else x

# A PyTorch dtype's name as libtorch (and R torch's `$.type()`) writes it: torch.float32 -> Float.
libtorch_dtype_name <- function(py_dtype) {
  names <- c(
    float32 = "Float", float64 = "Double", float16 = "Half", bfloat16 = "BFloat16",
    int64 = "Long", int32 = "Int", int16 = "Short", int8 = "Char", uint8 = "Byte",
    bool = "Bool", complex64 = "ComplexFloat", complex128 = "ComplexDouble",
    complex32 = "ComplexHalf"
  )
  py_name <- sub("^torch\\.", "", reticulate::py_str(py_dtype))
  name <- names[py_name]
  if (is.na(name)) stop("no libtorch name known for the PyTorch dtype ", py_name)
  unname(name)
}

# A Python tensor's values in row-major order, as PyTorch lists them (tolist(), not ampkit's
# conversion), and the same for an R array, to compare the two.
py_values <- function(py) {
  py <- as_py_tensor(py)$detach()$cpu()
  if (reticulate::py_to_r(py$is_floating_point())) py <- py$double()
  unlist(reticulate::py_to_r(py$flatten()$tolist()))
}
row_major <- function(a) {
  if (is.null(dim(a))) as.vector(a) else as.vector(aperm(a, rev(seq_along(dim(a)))))
}

# `x` (a front-end tensor) has the values, shape and dtype of the PyTorch tensor `py` (a Python
# tensor, or the R tensor a converting Python call returned).
expect_same_as_torch <- function(x, py, tolerance = 0) {
  testthat::expect_s3_class(x, "torch_tensor")
  py <- as_py_tensor(py)
  builtins <- reticulate::import_builtins(convert = FALSE)
  shape <- as.integer(unlist(reticulate::py_to_r(builtins$list(py$shape))))
  testthat::expect_equal(dim(x), shape)
  testthat::expect_identical(x$dtype$.type(), libtorch_dtype_name(py$dtype))
  testthat::expect_equal(row_major(as_array(x)), py_values(py), tolerance = tolerance)
}

# An R integer vector as a Python list of ints (for PyTorch's own calls).
ints <- function(...) as.list(as.integer(c(...)))

# ---- the oracle's helpers, shared by the front end's test files ----------------------------------

pt <- function() py_torch()

# A tensor as Python's: an R tensor becomes the same tensor in Python (py_of()); other values
# as they are.
to_py <- function(x) if (inherits(x, "torch_tensor")) reticulate::r_to_py(x) else x

# TRUE when two tensors (R's or Python's) are equal in shape, dtype and every element.
same_tensor <- function(a, b) {
  a <- to_py(a)
  b <- to_py(b)
  identical(reticulate::py_str(a$dtype), reticulate::py_str(b$dtype)) &&
    reticulate::py_to_r(pt()$equal(a, b))
}

expect_same_tensor <- function(a, b) testthat::expect_true(same_tensor(a, b))

# Calls a Python callable (a torch module) on arguments (R tensors arrive as the same tensors).
pycall <- function(f, ...) reticulate::py_call(f, ...)

# Copies an R module's state (parameters and persistent buffers) into a PyTorch module of the
# same structure: PyTorch's load_state_dict() on R's tensors, shared with Python.
load_into_torch <- function(py_module, r_module, strict = TRUE) {
  sd <- r_module$state_dict()
  py_sd <- reticulate::py_dict(names(sd), unname(lapply(sd, to_py)), convert = FALSE)
  py_module$load_state_dict(py_sd, strict = strict)
  invisible(py_module)
}

# The result of an R torch_* call and of PyTorch's function of the same name on the same
# tensors: "same", or what differs. Tuples and R lists are compared element by element; NaN
# equals NaN.
torch_result_outcome <- function(r, p) {
  if (is.list(r)) {
    sequence <- inherits(p, "python.builtin.tuple") || inherits(p, "python.builtin.list")
    if (!sequence || reticulate::py_len(p) != length(r)) {
      return("an R list against a single value or another length")
    }
    outcomes <- vapply(seq_along(r), function(i) {
      torch_result_outcome(r[[i]], reticulate::py_get_item(p, i - 1L))
    }, "")
    return(if (all(outcomes == "same")) "same" else outcomes[outcomes != "same"][[1L]])
  }
  if (!is_torch_tensor(r)) return(value_outcome(r, p))
  if (!inherits(p, "torch.Tensor")) "a tensor against a Python value" else tensor_outcome(r, p)
}

# An R value that is no tensor against Python's (a number: R's integers and doubles alike).
value_outcome <- function(r, p) {
  if (inherits(p, "torch.Tensor")) p <- p$item()
  p <- reticulate::py_to_r(p)
  if (is.numeric(r) && is.numeric(p)) {
    r <- as.double(r)
    p <- as.double(p)
  }
  if (identical(as.vector(r), as.vector(p))) "same" else "values"
}

# One R tensor against one Python tensor: "same" (dtype, shape, every element, NaN equal to
# NaN, -0 not +0), or the first of these that differs.
tensor_outcome <- function(r, p) {
  a <- py_of(r)
  for (field in c("dtype", "shape")) {
    if (reticulate::py_str(a[[field]]) != reticulate::py_str(p[[field]])) return(field)
  }
  equal <- pt()$eq(a, p)
  if (reticulate::py_to_r(a$is_floating_point()) || reticulate::py_to_r(a$is_complex())) {
    equal <- pt()$logical_or(equal, pt()$logical_and(pt()$isnan(a), pt()$isnan(p)))
  }
  if (reticulate::py_to_r(a$is_floating_point())) {
    equal <- pt()$logical_and(equal, pt()$eq(pt()$signbit(a), pt()$signbit(p)))
  }
  if (reticulate::py_to_r(pt()$all(equal)$item())) "same" else "values"
}

# Calls the R function and the Python one that `f()` and `py_f()` give (a method of a fresh copy
# of a tensor, on each side) with `args` (list(r = R's arguments, py = Python's)), each after
# seeding libtorch's generator alike: NA where both fail, else torch_result_outcome()'s word or
# which side failed.
torch_call_outcome <- function(f, py_f, args) {
  torch_manual_seed(7)
  r <- tryCatch(suppressWarnings(do.call(f(), args$r)), error = identity)
  pt()$manual_seed(7L)
  p <- tryCatch(do.call(reticulate::py_call, c(list(py_f()), args$py)), error = identity)
  if (inherits(r, "error") && inherits(p, "error")) return(NA_character_)
  if (inherits(r, "error")) return(paste("R's error:", conditionMessage(r)))
  if (inherits(p, "error")) return("PyTorch's error, R ran")
  torch_result_outcome(r, p)
}

# torch_call_outcome() of each name with a PyTorch twin (`has_twin(name)`) and each case of
# `calls`, named "<name> <case>", but those `on_purpose` lists (by "<name>" or "<name> <case>");
# `call(name, args)` makes the call. Calls that fail on both sides are left out.
surface_outcomes <- function(names, has_twin, call, calls, on_purpose) {
  outcomes <- unlist(lapply(names, function(name) {
    if (!has_twin(name)) return(NULL)
    cases <- Filter(function(case) !any(c(name, paste(name, case)) %in% on_purpose), names(calls))
    if (!length(cases)) return(NULL)
    vapply(setNames(cases, paste(name, cases)), function(case) call(name, calls[[case]]), "")
  }))
  outcomes[!is.na(outcomes)]
}
