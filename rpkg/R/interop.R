# Tensors shared with Python's torch in the same process, with no copy: both sides hold the same
# libtorch tensor (one libtorch in the process). R hands Python a new reference to it
# (C_tensor_share, taken over by ampkit._C.adopt_tensor) and takes Python's the same way
# (ampkit._C.share_tensor, C_tensor_adopt). Through reticulate's conversions, a tensor given to a
# Python function is the same tensor there, and a tensor a Python function returns is an R
# tensor: PyTorch's functions and modules work on R's tensors.

# The Python module ampkit._C (through python_modules(): the package's Python, torch's BLAS).
py_c <- function() {
  c <- .py$c
  if (is.null(c)) {
    python_modules()
    c <- reticulate::import("ampkit._C", convert = FALSE)
    .py$c <- c
  }
  c
}

# A Python tensor (reticulate object) as an R tensor: the same tensor.
py_tensor_to_r <- function(x) {
  address <- reticulate::py_to_r(py_c()$share_tensor(x))
  .Call(C_tensor_adopt, address)
}

# An R tensor, or a Python one (reticulate's conversions do not reach inside dicts) as R's.
as_r_tensor <- function(x) {
  if (inherits(x, "python.builtin.object")) py_tensor_to_r(x) else x
}

# An R tensor as a Python tensor (reticulate object, not converted back): the same tensor.
r_tensor_to_py <- function(x) {
  py_c()$adopt_tensor(.Call(C_tensor_share, x))
}

#' Tensors shared with Python
#'
#' An R tensor given to Python through reticulate (`reticulate::r_to_py(x)`, or
#' as an argument of a Python function) is the same tensor in Python: no copy,
#' and changes in place are seen on both sides; a tensor a Python function
#' returns comes back as an R tensor, the same one. So PyTorch's Python
#' functions and modules can be used on R tensors. This starts Python (the one
#' ampkit was installed against) on first use.
#' @param x A tensor (R's or Python's).
#' @param convert Unused (reticulate's argument).
#' @return `r_to_py()`: a Python tensor; `py_to_r()`: an R tensor.
#' @name tensor-python
#' @examples
#' if (ampkit_available()) {
#'   torch_py <- reticulate::import("torch")
#'   x <- torch_tensor(c(1, 2, 3))
#'   y <- torch_py$mul(x, 2)     # a Python function on an R tensor: an R tensor back
#'   y
#'   x$add_(1)                    # the same tensor on both sides
#'   torch_py$equal(x, torch_tensor(c(2, 3, 4)))
#' }
NULL

# (reticulate is suggested: the usage is written out, as roxygen cannot see these methods'
# generics when reticulate is not loaded.)
#' @rdname tensor-python
#' @usage \method{r_to_py}{torch_tensor}(x, convert = FALSE)
#' @rawNamespace S3method(reticulate::r_to_py, torch_tensor)
r_to_py.torch_tensor <- function(x, convert = FALSE) r_tensor_to_py(x) # nolint: object_name_linter.

#' @rdname tensor-python
#' @usage \method{py_to_r}{torch.Tensor}(x)
#' @rawNamespace S3method(reticulate::py_to_r, torch.Tensor)
py_to_r.torch.Tensor <- function(x) py_tensor_to_r(x) # nolint: object_name_linter.

#' @rdname tensor-python
#' @usage \method{py_to_r}{torch.nn.parameter.Parameter}(x)
#' @rawNamespace S3method(reticulate::py_to_r, torch.nn.parameter.Parameter)
py_to_r.torch.nn.parameter.Parameter <- function(x) py_tensor_to_r(x) # nolint: object_name_linter.

# A Python state dict (a dict of tensors, numbers, ...) as an R named list.
py_state_dict_to_r <- function(x) {
  out <- reticulate::py_to_r(x)
  convert <- function(v) {
    if (inherits(v, "python.builtin.object")) v <- reticulate::py_to_r(v)
    if (is.list(v)) lapply(v, convert) else v
  }
  convert(out)
}
