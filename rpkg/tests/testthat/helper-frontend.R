# Shared by the front end's tests (test-frontend-tensor.R, -index.R, -ops.R): PyTorch itself,
# reached through reticulate, is the oracle.

# The Python module torch (convert = FALSE: results stay Python objects).
py_torch <- function() reticulate::import("torch", convert = FALSE)

# A front-end tensor's Python tensor, and a Python tensor as a front-end tensor.
py_of <- function(x) ampkit:::unwrap(x)
as_fe <- function(py) ampkit:::wrap(py)

# A Python tensor's values in row-major order, as PyTorch lists them (tolist(), not ampkit's
# conversion), and the same for an R array, to compare the two.
py_values <- function(py) {
  py <- py$detach()$cpu()
  if (reticulate::py_to_r(py$is_floating_point())) py <- py$double()
  unlist(reticulate::py_to_r(py$flatten()$tolist()))
}
row_major <- function(a) {
  if (is.null(dim(a))) as.vector(a) else as.vector(aperm(a, rev(seq_along(dim(a)))))
}

# `x` (a front-end tensor) has the values and shape of the Python tensor `py`.
expect_same_as_torch <- function(x, py, tolerance = 0) {
  testthat::expect_s3_class(x, "torch_tensor")
  builtins <- reticulate::import_builtins(convert = FALSE)
  shape <- as.integer(unlist(reticulate::py_to_r(builtins$list(py$shape))))
  testthat::expect_equal(dim(x), shape)
  testthat::expect_identical(x$dtype$.type(), as_fe(py$dtype)$.type())
  testthat::expect_equal(row_major(as_array(x)), py_values(py), tolerance = tolerance)
}

# An R integer vector as a Python list of ints (for PyTorch's own calls).
ints <- function(...) as.list(as.integer(c(...)))
