# R's operators and math functions on tensors (S3 group generics Ops, Math, Summary), with
# tensors or R values on either side. R values cross as PyTorch's scalars (one number: doubles
# as floats, integers as ints, logicals as bools) or as tensors (several values), so type
# promotion is PyTorch's for Python scalars.

# Operator -> (torch.Tensor's method with the tensor on the left, with the tensor on the right).
ops_methods <- list(
  `+` = c("__add__", "__radd__"), `-` = c("__sub__", "__rsub__"),
  `*` = c("__mul__", "__rmul__"), `/` = c("__truediv__", "__rtruediv__"),
  `^` = c("__pow__", "__rpow__"), `%%` = c("__mod__", "__rmod__"),
  `%/%` = c("__floordiv__", "__rfloordiv__"),
  `==` = c("__eq__", "__eq__"), `!=` = c("__ne__", "__ne__"),
  `<` = c("__lt__", "__gt__"), `>` = c("__gt__", "__lt__"),
  `<=` = c("__le__", "__ge__"), `>=` = c("__ge__", "__le__"),
  `&` = c("logical_and", "logical_and"), `|` = c("logical_or", "logical_or")
)

# An R operand for PyTorch: a tensor's Python tensor, one value as a Python scalar, several as a
# tensor (R torch's dtype rules) on the other operand's device.
ops_operand <- function(x, other, op) {
  if (is_torch_tensor(x)) {
    return(tpy(x))
  }
  values <- is.numeric(x) || is.logical(x)
  if (values && length(x) == 1L && is.null(dim(x))) {
    return(x)
  }
  if (values && length(x) > 1L) {
    return(tpy(torch_tensor(x, device = tpy(other)$device)))
  }
  abort(sprintf("`%s` takes tensors and R numbers or logicals, got %s.", op, describe(x)),
        class = "value_error")
}

#' Operators and math functions on tensors
#'
#' Arithmetic (`+`, `-`, `*`, `/`, `^`, `%%`, `%/%`), comparison (`==`,
#' `!=`, `<`, `>`, `<=`, `>=`, giving boolean tensors) and logic (`&`, `|`,
#' `!`) work between tensors and between a tensor and R numbers or logicals
#' on either side (`x * 2`, `1 - x`, `x > 0`); one R number is a scalar in
#' PyTorch's type promotion, several become a tensor. R's math functions
#' (`exp()`, `log()`, `sqrt()`, `abs()`, `sin()`, `floor()`, `round()`, ...)
#' and summaries (`sum()`, `max()`, `min()`, `prod()`, `mean()`, `any()`,
#' `all()`) give tensors.
#' @param e1,e2 Tensors or R values (one of them a tensor).
#' @param x A tensor.
#' @param ... For `Math`: `log()`'s `base`, `round()`'s `digits`. For
#'   `Summary`: tensors and values to summarise together.
#' @param na.rm Unused (tensors have no `NA`).
#' @return A tensor.
#' @name tensor-ops
#' @examples
#' if (ampkit_available()) {
#'   x <- torch_tensor(c(1, 2, 3))
#'   x * 2
#'   1 - x
#'   x > 1.5
#'   (x > 1) & (x < 3)
#'   exp(x)
#'   sum(x)
#' }
NULL

#' @rdname tensor-ops
#' @export
Ops.torch_tensor <- function(e1, e2) {
  op <- get(".Generic")
  if (missing(e2)) {
    py <- tpy(e1)
    return(new_torch_tensor(call_python(switch(op,
      `-` = tensor_method("neg")(py),
      `+` = py,
      `!` = tensor_method("logical_not")(py),
      abort(sprintf("`%s` needs two operands.", op), class = "value_error")
    ), sys.call())))
  }
  if (op == "!") {
    return(new_torch_tensor(call_python(tensor_method("logical_not")(tpy(e1)), sys.call())))
  }
  methods <- ops_methods[[op]]
  if (is_torch_tensor(e1)) {
    self <- tpy(e1)
    other <- ops_operand(e2, e1, op)
    f <- tensor_method(methods[[1L]])
  } else {
    self <- tpy(e2)
    other <- ops_operand(e1, e2, op)
    f <- tensor_method(methods[[2L]])
  }
  if ((op == "&" || op == "|") && !inherits(other, "python.builtin.object")) {
    other <- torch_fn("tensor")(other, device = self$device)
  }
  result <- call_python(f(self, other), sys.call())
  new_torch_tensor(result)
}

# R's Math group -> torch's function names (those whose names differ or take arguments are
# handled in Math.torch_tensor).
math_names <- c(
  abs = "abs", sign = "sign", sqrt = "sqrt", ceiling = "ceil", floor = "floor", trunc = "trunc",
  exp = "exp", expm1 = "expm1", log1p = "log1p", log2 = "log2", log10 = "log10",
  cos = "cos", sin = "sin", tan = "tan", cosh = "cosh", sinh = "sinh", tanh = "tanh",
  acos = "acos", asin = "asin", atan = "atan", acosh = "acosh", asinh = "asinh",
  atanh = "atanh", lgamma = "lgamma", digamma = "digamma", cumsum = "cumsum",
  cumprod = "cumprod", cummax = "cummax", cummin = "cummin"
)

#' @rdname tensor-ops
#' @export
Math.torch_tensor <- function(x, ...) {
  op <- get(".Generic")
  py <- tpy(x)
  call <- sys.call()
  result <- switch(op,
    log = {
      args <- list(...)
      out <- call_python(tensor_method("log")(py), call)
      if (length(args) > 0L) {
        out <- call_python(tensor_method("__truediv__")(out, log(args[[1L]])), call)
      }
      out
    },
    round = {
      digits <- list(...)$digits %||% (if (length(list(...))) list(...)[[1L]] else 0)
      call_python(tensor_method("round")(py, decimals = as.integer(digits)), call)
    },
    cumsum = , cumprod = call_python(tensor_method(op)(py, 0L), call),
    cummax = , cummin = reticulate::py_get_item(call_python(tensor_method(op)(py, 0L), call), 0L),
    {
      name <- math_names[op]
      if (is.na(name)) {
        abort(sprintf("`%s()` is not available for tensors.", op), call,
              class = "not_implemented_error")
      }
      call_python(tensor_method(name)(py), call)
    }
  )
  new_torch_tensor(result)
}

#' @rdname tensor-ops
#' @export
Summary.torch_tensor <- function(..., na.rm = FALSE) { # nolint: object_name_linter.
  op <- get(".Generic")
  call <- sys.call()
  args <- list(...)
  if (!is.null(args$dim) && op %in% c("sum", "prod")) {
    # R torch: sum(x, dim = 1), prod(x, dim = 1, keepdim = TRUE)
    return(args[[1L]][[op]](dim = args$dim, keepdim = isTRUE(args$keepdim)))
  }
  args$keepdim <- NULL
  parts <- lapply(args, function(a) {
    t <- if (is_torch_tensor(a)) a else torch_tensor(a)
    tpy(t)$flatten()
  })
  torch <- torch_py()
  flat <- if (length(parts) == 1L) parts[[1L]] else call_python(torch$cat(parts), call)
  result <- switch(op,
    sum = flat$sum(), prod = flat$prod(), max = flat$max(), min = flat$min(),
    any = flat$any(), all = flat$all(),
    range = torch$stack(list(flat$min(), flat$max())),
    abort(sprintf("`%s()` is not available for tensors.", op), call,
          class = "not_implemented_error")
  )
  new_torch_tensor(result)
}

# `%*%` dispatches on S3 classes from R 4.3 on (as in R torch, registered only there).
#' @rawNamespace if (getRversion() >= "4.3.0") S3method("%*%", torch_tensor)
`%*%.torch_tensor` <- function(x, y) { # nolint: object_name_linter.
  if (!is_torch_tensor(y)) {
    y <- torch_tensor(y, device = tpy(x)$device)
  }
  if (!is_torch_tensor(x)) {
    x <- torch_tensor(x, device = tpy(y)$device)
  }
  torch_matmul(x, y)
}

#' @rdname tensor-ops
#' @export
mean.torch_tensor <- function(x, ...) {
  x$mean(...)
}
