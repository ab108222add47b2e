# R torch's functional API (nnf_*): torch.nn.functional with R's dims (1-based) and R's class
# labels (1-based) converted at the border.

torch_nnf <- function() {
  mod <- .nn$functional
  if (is.null(mod)) {
    mod <- torch_py()$nn$functional
    .nn$functional <- mod
  }
  mod
}

# torch.nn.functional.<name>(...) on unwrapped arguments, its result wrapped.
nnf_call <- function(name, ...) {
  args <- lapply(list(...), unwrap)
  f <- .nn$nnf[[name]]
  if (is.null(f)) {
    # `$` gives an R function calling the Python one (py_get_attr() gives the object).
    f <- do.call("$", list(torch_nnf(), name))
    .nn$nnf[[name]] <- f
  }
  wrap(call_python(do.call(f, args), call = NULL))
}

# Integer class labels 1..C as PyTorch's 0..C-1 (class probabilities are left as they are).
one_based_target <- function(target) {
  py <- tensor_arg(target, "target", null_ok = FALSE)
  if (isTRUE(reticulate::py_to_r(py$is_floating_point()))) {
    return(py)
  }
  py$sub(1L)
}

#' Activations and dropout, as functions
#'
#' R torch's `nnf_relu()`, `nnf_gelu()`, `nnf_sigmoid()`, `nnf_tanh()`,
#' `nnf_softmax()`, `nnf_log_softmax()` and `nnf_dropout()`. `dim` is 1-based
#' (negative from the end), as in R torch.
#'
#' @param input A tensor.
#' @param inplace Whether to operate in place.
#' @param approximate `"none"` or `"tanh"`.
#' @param dim The dimension (1-based) along which softmax sums to one.
#' @param dtype Optional dtype to cast the input to first.
#' @param p Probability of an element to be zeroed.
#' @param training Apply dropout (`TRUE`) or return the input (`FALSE`).
#' @return A tensor.
#' @name nnf_activations
#' @examples
#' if (ampkit_available()) {
#'   x <- torch_randn(2, 3)
#'   nnf_relu(x)
#'   nnf_softmax(x, dim = 2)$sum(dim = 2)
#'   nnf_log_softmax(x, dim = -1)$exp()$sum(dim = -1)
#'   nnf_dropout(x, p = 0.5, training = FALSE)
#' }
NULL

#' @rdname nnf_activations
#' @export
nnf_relu <- function(input, inplace = FALSE) {
  nnf_call("relu", tensor_arg(input, "input", FALSE), inplace = arg_flag(inplace, "inplace"))
}

#' @rdname nnf_activations
#' @export
nnf_gelu <- function(input, approximate = "none") {
  nnf_call("gelu", tensor_arg(input, "input", FALSE),
           approximate = arg_string(approximate, "approximate", example = "such as \"none\""))
}

#' @rdname nnf_activations
#' @export
nnf_sigmoid <- function(input) {
  nnf_call("sigmoid", tensor_arg(input, "input", FALSE))
}

#' @rdname nnf_activations
#' @export
nnf_tanh <- function(input) {
  nnf_call("tanh", tensor_arg(input, "input", FALSE))
}

#' @rdname nnf_activations
#' @export
nnf_softmax <- function(input, dim, dtype = NULL) {
  if (missing(dim)) {
    abort("`dim` must be given: the (1-based) dimension along which softmax sums to one.",
          class = "value_error")
  }
  nnf_call("softmax", tensor_arg(input, "input", FALSE), dim = as_py_dim(dim),
           dtype = as_py_dtype(dtype))
}

#' @rdname nnf_activations
#' @export
nnf_log_softmax <- function(input, dim = NULL, dtype = NULL) {
  if (is.null(dim)) {
    abort("`dim` must be given: the (1-based) dimension of the classes.", class = "value_error")
  }
  nnf_call("log_softmax", tensor_arg(input, "input", FALSE), dim = as_py_dim(dim),
           dtype = as_py_dtype(dtype))
}

#' @rdname nnf_activations
#' @export
nnf_dropout <- function(input, p = 0.5, training = TRUE, inplace = FALSE) {
  nnf_call("dropout", tensor_arg(input, "input", FALSE), p = arg_number(p, "p"),
           training = arg_flag(training, "training"), inplace = arg_flag(inplace, "inplace"))
}

#' Losses, as functions
#'
#' R torch's `nnf_mse_loss()`, `nnf_l1_loss()`, `nnf_cross_entropy()`,
#' `nnf_nll_loss()`, `nnf_binary_cross_entropy_with_logits()`. The integer
#' class labels of `nnf_cross_entropy()` and `nnf_nll_loss()` are 1-based
#' (`1..C`), as in R torch, and so is `ignore_index`; floating-point targets
#' of `nnf_cross_entropy()` are class probabilities.
#'
#' @param input Predictions (logits for the cross entropies, log-probabilities
#'   for `nnf_nll_loss()`).
#' @param target Targets.
#' @param weight Optional tensor of per-class (or per-element) weights.
#' @param ignore_index A label whose entries are ignored.
#' @param reduction `"mean"`, `"sum"` or `"none"`.
#' @param pos_weight Optional weight of positive examples.
#' @return A tensor.
#' @name nnf_losses
#' @examples
#' if (ampkit_available()) {
#'   logits <- torch_randn(4, 3)
#'   y <- torch_tensor(c(1L, 2L, 3L, 3L))
#'   nnf_cross_entropy(logits, y)
#'   nnf_nll_loss(nnf_log_softmax(logits, dim = 2), y)
#'   nnf_mse_loss(torch_zeros(3), torch_ones(3))
#' }
NULL

#' @rdname nnf_losses
#' @export
nnf_mse_loss <- function(input, target, reduction = "mean") {
  nnf_call("mse_loss", tensor_arg(input, "input", FALSE), tensor_arg(target, "target", FALSE),
           reduction = reduction_arg(reduction))
}

#' @rdname nnf_losses
#' @export
nnf_l1_loss <- function(input, target, reduction = "mean") {
  nnf_call("l1_loss", tensor_arg(input, "input", FALSE), tensor_arg(target, "target", FALSE),
           reduction = reduction_arg(reduction))
}

#' @rdname nnf_losses
#' @export
nnf_cross_entropy <- function(input, target, weight = NULL, ignore_index = -100,
                              reduction = "mean") {
  nnf_call("cross_entropy", tensor_arg(input, "input", FALSE), one_based_target(target),
           weight = tensor_arg(weight, "weight"),
           ignore_index = one_based_arg(ignore_index, "ignore_index", null_ok = FALSE),
           reduction = reduction_arg(reduction))
}

#' @rdname nnf_losses
#' @export
nnf_nll_loss <- function(input, target, weight = NULL, ignore_index = -100,
                         reduction = "mean") {
  nnf_call("nll_loss", tensor_arg(input, "input", FALSE), one_based_target(target),
           weight = tensor_arg(weight, "weight"),
           ignore_index = one_based_arg(ignore_index, "ignore_index", null_ok = FALSE),
           reduction = reduction_arg(reduction))
}

#' @rdname nnf_losses
#' @export
# nolint start: object_length_linter. (R torch's name)
nnf_binary_cross_entropy_with_logits <- function(input, target, weight = NULL,
                                                 reduction = "mean", pos_weight = NULL) {
  nnf_call("binary_cross_entropy_with_logits", tensor_arg(input, "input", FALSE),
           tensor_arg(target, "target", FALSE), weight = tensor_arg(weight, "weight"),
           reduction = reduction_arg(reduction), pos_weight = tensor_arg(pos_weight, "pos_weight"))
}
# nolint end
