#' @include ops.R
NULL

# The help page of the class-target losses (generated: tools/rgen/rules.py counts their targets
# from 1, as R torch does) and R torch's one-hot encoding, over the generated `.torch_one_hot`.

#' Class-target operators and shape broadcasting
#'
#' R torch's `torch_multi_margin_loss()` and `torch_multilabel_margin_loss()`
#' (the operators under [nnf_multi_margin_loss()] and
#' [nnf_multilabel_margin_loss()]) take 1-based class targets;
#' `torch_one_hot()` encodes 1-based classes (as [nnf_one_hot()]).
#' `torch_broadcast_shapes()` gives the shape that tensors of the given shapes
#' broadcast to (an error when they do not), without making tensors.
#'
#' @param self A tensor: the scores (`(N, C)` or `(C)`), or the classes
#'   (`torch_one_hot()`, an integer tensor).
#' @param target The 1-based classes: one per row (`torch_multi_margin_loss()`),
#'   or per row a list of classes ended by `-1` (`torch_multilabel_margin_loss()`).
#' @param p The exponent (1 or 2).
#' @param margin The margin.
#' @param weight A weight per class, or `NULL`.
#' @param reduction libtorch's reduction code: [torch_reduction_mean()],
#'   [torch_reduction_sum()] or [torch_reduction_none()].
#' @param num_classes The number of classes (`-1`: the largest class in `self`).
#' @param ... Shapes (integer vectors).
#' @return A tensor; `torch_broadcast_shapes()`: an integer vector.
#' @name torch_class_ops
#' @aliases torch_multi_margin_loss torch_multilabel_margin_loss
#' @usage torch_multi_margin_loss(self, target, p = 1L, margin = 1L, weight = NULL,
#'   reduction = 1L)
#'
#' torch_multilabel_margin_loss(self, target, reduction = 1L)
#' @examples
#' scores <- torch_randn(3, 4)
#' torch_multi_margin_loss(scores, torch_tensor(c(1L, 4L, 2L)))
#' torch_multilabel_margin_loss(scores, torch_tensor(rbind(c(1L, 3L, -1L, -1L),
#'                                                         c(4L, -1L, -1L, -1L),
#'                                                         c(2L, 1L, 3L, 4L))))
#' torch_one_hot(torch_tensor(c(1L, 3L)))
#' torch_broadcast_shapes(c(2, 1), c(1, 3))
NULL

#' @rdname torch_class_ops
#' @export
torch_one_hot <- function(self, num_classes = -1L) {
  .torch_one_hot(one_based_tensor(self, "self"), num_classes)
}

#' @rdname torch_class_ops
#' @export
torch_broadcast_shapes <- function(...) {
  shapes <- rlang::list2(...)
  shapes <- lapply(seq_along(shapes), function(i) {
    shape <- whole_numbers(shapes[[i]], sprintf("..%d", i))
    if (any(shape < 0L)) {
      abort(sprintf("`..%d` must be a shape (sizes >= 0), got %s.", i, describe(shapes[[i]])),
            class = "value_error")
    }
    shape
  })
  rank <- max(0L, lengths(shapes))
  out <- rep(1L, rank)
  for (shape in shapes) {
    # Aligned at the last dimension; a size 1 stretches to the other one.
    at <- seq_len(length(shape)) + rank - length(shape)
    for (k in seq_along(shape)) {
      size <- shape[[k]]
      if (size == 1L) next
      if (out[[at[[k]]]] != 1L && out[[at[[k]]]] != size) {
        abort(sprintf(paste0("Shape mismatch: objects cannot be broadcast to a single shape: ",
                             "%s against %s."),
                      paste0("(", paste(shape, collapse = ", "), ")"),
                      paste0("(", paste(out, collapse = ", "), ")")), class = "runtime_error")
      }
      out[[at[[k]]]] <- size
    }
  }
  out
}

#' Call a torch_ function by name
#'
#' R torch's `call_torch_function()`: calls the function `name` (a `torch_`
#' function of the package, exported or not: the generated surface has one
#' for each of libtorch's operators, such as `torch_tanh_backward()`) with
#' the arguments in `...` (`!!!` splices a list). The functions that are not
#' exported have no help page and may change with libtorch; a warning says so
#' unless `quiet = TRUE`. They follow the same conventions as the exported
#' ones (dims and positions counted from 1).
#'
#' @param name The function's name, starting with `"torch_"`.
#' @param ... Its arguments.
#' @param quiet `TRUE` leaves out the warning.
#' @return What the function returns.
#' @export
#' @examples
#' x <- torch_randn(4, requires_grad = TRUE)
#' y <- torch_tanh(x)
#' y$backward(torch_ones_like(x))
#' # tanh's derivative from the output, as autograd computes it
#' g <- call_torch_function("torch_tanh_backward", torch_ones_like(y), y, quiet = TRUE)
#' torch_equal(g, x$grad)
call_torch_function <- function(name, ..., quiet = FALSE) {
  name <- arg_string(name, "name", example = "such as \"torch_tanh_backward\"")
  if (!startsWith(name, "torch_")) {
    abort("Only functions prefixed with 'torch_' are available from this function.",
          class = "value_error")
  }
  ns <- asNamespace("ampkit")
  if (!exists(name, envir = ns, inherits = FALSE) || !is.function(ns[[name]])) {
    abort(sprintf(paste0("No function named %s can be found. Please check your spelling and ",
                         "that the desired function exists."), name), class = "value_error")
  }
  if (!isTRUE(quiet)) {
    warning(paste0("call_torch_function() allows access to unexported functions, please use ",
                   "with caution: they have no help page and may change or go with libtorch. ",
                   "Set quiet = TRUE to silence this warning."), call. = FALSE)
  }
  do.call(ns[[name]], rlang::list2(...), quote = TRUE)
}

# R torch's internal wrappers of ops that have R rules (tools/rgen/rules.py's WRAPPED), under the
# names its tests call (not exported, as in R torch): the positions of the maxima returned from 1,
# as nnf_max_pool2d() does. (The losses' class targets and `ignore_index`, which R torch wraps
# too, are counted from 1 by the generated torch_nll_loss() and torch_cross_entropy_loss().)
torch_max_pool1d_with_indices <- function(self, kernel_size, stride = NULL, padding = 0,
                                          dilation = 1, ceil_mode = FALSE) {
  one_based_indices(.torch_max_pool1d_with_indices(self, kernel_size, stride, padding, dilation,
                                                   ceil_mode))
}

torch_max_pool2d_with_indices <- function(self, kernel_size, stride = NULL, padding = 0,
                                          dilation = 1, ceil_mode = FALSE) {
  one_based_indices(.torch_max_pool2d_with_indices(self, kernel_size, stride, padding, dilation,
                                                   ceil_mode))
}

torch_max_pool3d_with_indices <- function(self, kernel_size, stride = NULL, padding = 0,
                                          dilation = 1, ceil_mode = FALSE) {
  one_based_indices(.torch_max_pool3d_with_indices(self, kernel_size, stride, padding, dilation,
                                                   ceil_mode))
}
