# autograd_function(): autograd operations written in R, as R torch defines them, over PyTorch's
# torch.autograd.Function (inst/python/ampkit_r_frontend.py: RFunction, whose forward and
# backward call back into R).

#' Autograd functions written in R
#'
#' `autograd_function(forward, backward)` returns a function whose arguments
#' are `forward`'s (after `ctx`), as R torch's does. `forward(ctx, ...)` computes
#' the result from tensors (and other values) and may call
#' `ctx$save_for_backward(...)` (tensors and other R values, named or not),
#' `ctx$mark_dirty(...)`, `ctx$mark_non_differentiable(...)`;
#' `backward(ctx, grad_output, ...)` returns a named list with the gradient of
#' each input that needs one (`ctx$needs_input_grad`), reading what forward
#' saved from `ctx$saved_variables`.
#' @param forward,backward R functions, as described.
#' @return A function.
#' @export
#' @examples
#' if (ampkit_available()) {
#'   exp2 <- autograd_function(
#'     forward = function(ctx, i) {
#'       result <- i$exp()
#'       ctx$save_for_backward(result = result)
#'       result
#'     },
#'     backward = function(ctx, grad_output) {
#'       list(i = grad_output * ctx$saved_variables$result)
#'     }
#'   )
#'   x <- torch_tensor(c(0, 1), requires_grad = TRUE)
#'   exp2(x)$sum()$backward()
#'   x$grad
#' }
autograd_function <- function(forward, backward) {
  force(forward)
  force(backward)
  arg_names <- names(formals(forward))[-1L]
  rlang::new_function(
    args = formals(forward)[-1L],
    body = rlang::expr({
      args <- mget(!!arg_names, envir = environment())
      apply_autograd_function(!!forward, !!backward, args)
    }),
    env = asNamespace("ampkit")
  )
}

#' @rdname autograd_function
#' @param code Code run with autograd's anomaly detection on
#'   (`torch.autograd.detect_anomaly`): a failing backward names the forward
#'   operation that created the failing node.
#' @export
with_detect_anomaly <- function(code) {
  # PyTorch's warning that the mode is on becomes an R warning (class ampkit_warning)
  context <- with_python_warnings(torch_py()$autograd$detect_anomaly(), call = sys.call())
  context$`__enter__`()
  on.exit(context$`__exit__`(NULL, NULL, NULL))
  force(code)
}

# One application: the R forward runs inside PyTorch's Function.apply (which records the graph
# for the tensors among `args`), the R backward when PyTorch differentiates through it.
apply_autograd_function <- function(forward, backward, args) {
  call <- sys.call(-1L)
  is_tensor <- vapply(args, is_torch_tensor, NA)
  needs <- vapply(seq_along(args), function(i) {
    is_tensor[[i]] && isTRUE(args[[i]]$requires_grad)
  }, NA)
  names(needs) <- names(args)
  ctx <- new_autograd_context(as.list(needs))
  returns_list <- FALSE
  py_forward <- function(py_ctx) {
    ctx$py <- py_ctx
    out <- do.call(forward, c(list(ctx), args))
    returns_list <<- is.list(out)
    unwrap(out)
  }
  py_backward <- function(py_ctx, grads) {
    grads <- lapply(py_items(grads), wrap)
    # a forward that returned a list gets its gradients as one list (R torch's rule)
    out <- if (returns_list) backward(ctx, grads) else do.call(backward, c(list(ctx), grads))
    # one gradient (or None) per input, in forward's order
    lapply(names(args), function(name) if (is_torch_tensor(out[[name]])) tpy(out[[name]]))
  }
  tensors <- lapply(seq_along(args), function(i) {
    if (is_tensor[[i]]) tpy(args[[i]]) else NULL
  })
  result <- call_python(fe_helpers()$apply_r_function(py_forward, py_backward, tensors), call)
  out <- wrap(result)
  if (returns_list && is_torch_tensor(out)) list(out) else out
}

# The items of a Python list or tuple (or of an R list, as reticulate may have converted it).
py_items <- function(x) {
  if (!inherits(x, "python.builtin.object")) {
    return(as.list(x))
  }
  lapply(seq_len(reticulate::py_len(x)) - 1L, function(i) reticulate::py_get_item(x, i))
}

new_autograd_context <- function(needs_input_grad) {
  ctx <- new.env(parent = emptyenv())
  ctx$needs_input_grad <- needs_input_grad
  ctx$saved <- list()
  class(ctx) <- "torch_autograd_context"
  ctx
}

#' @export
`$.torch_autograd_context` <- function(x, name) {
  switch(name,
    needs_input_grad = .subset2(x, "needs_input_grad"),
    saved_variables = context_saved(x),
    save_for_backward = function(...) context_save(x, list(...)),
    mark_dirty = function(...) {
      do.call(.subset2(x, "py")$mark_dirty, unname(lapply(list(...), tpy)))
      invisible(NULL)
    },
    mark_non_differentiable = function(...) {
      do.call(.subset2(x, "py")$mark_non_differentiable, unname(lapply(list(...), tpy)))
      invisible(NULL)
    },
    .subset2(x, name)
  )
}

# Tensors go to PyTorch's save_for_backward (its checks of in-place changes included), other R
# values stay in R; saved_variables gives them back in the order and with the names given.
context_save <- function(ctx, values) {
  is_tensor <- vapply(values, is_torch_tensor, NA)
  do.call(.subset2(ctx, "py")$save_for_backward, unname(lapply(values[is_tensor], tpy)))
  assign("saved", values, envir = ctx)
  assign("saved_is_tensor", is_tensor, envir = ctx)
  invisible(NULL)
}

context_saved <- function(ctx) {
  values <- .subset2(ctx, "saved")
  is_tensor <- .subset2(ctx, "saved_is_tensor")
  if (length(values) == 0L) {
    return(values)
  }
  tensors <- lapply(py_items(reticulate::py_get_attr(.subset2(ctx, "py"), "saved_tensors")),
                    wrap)
  values[is_tensor] <- tensors
  values
}
