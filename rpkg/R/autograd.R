# Autograd from R (rpkg/src/autograd.cpp): grad mode, backward, autograd_grad, hooks, the graph's
# nodes and autograd functions written in R. R code that libtorch calls back (hooks, an R
# function's backward) always runs on R's main thread.

#' Gradient recording
#'
#' `with_no_grad()` runs code without recording operations for autograd (as
#' in an optimizer's step); `with_enable_grad()` with recording on.
#' `local_no_grad()` and `local_enable_grad()` do the same until the calling
#' function (or `.env`) exits.
#' @param code Code to run.
#' @param .env The environment whose exit restores the mode.
#' @return `with_*()`: the value of `code`.
#' @name with_no_grad
#' @examples
#' x <- torch_tensor(1, requires_grad = TRUE)
#' y <- with_no_grad(x * 2)
#' y$requires_grad
NULL

#' @rdname with_no_grad
#' @param enabled `autograd_set_grad_mode()` (which returns the mode it replaced,
#'   invisibly): `TRUE` to record operations from
#'   now on, `FALSE` not to (until set again).
#' @export
autograd_set_grad_mode <- function(enabled) {
  invisible(.Call(C_grad_mode, arg_flag(enabled, "enabled")))
}

#' @rdname with_no_grad
#' @export
with_no_grad <- function(code) {
  before <- .Call(C_grad_mode, FALSE)
  on.exit(.Call(C_grad_mode, before))
  force(code)
}

#' @rdname with_no_grad
#' @export
with_enable_grad <- function(code) {
  before <- .Call(C_grad_mode, TRUE)
  on.exit(.Call(C_grad_mode, before))
  force(code)
}

#' @rdname with_no_grad
#' @export
local_no_grad <- function(.env = parent.frame()) {
  before <- .Call(C_grad_mode, FALSE)
  withr::defer(.Call(C_grad_mode, before), envir = .env)
  invisible()
}

#' @rdname with_no_grad
#' @export
local_enable_grad <- function(.env = parent.frame()) {
  before <- .Call(C_grad_mode, TRUE)
  withr::defer(.Call(C_grad_mode, before), envir = .env)
  invisible()
}

#' Backward passes
#'
#' `autograd_backward()` (and `x$backward()`) accumulates into `$grad` the
#' gradients of `tensors` with respect to the leaves of their graph;
#' `autograd_grad()` returns the gradients of `outputs` with respect to
#' `inputs` without touching `$grad`. Both are libtorch's own.
#' @param tensors,outputs A tensor or a list of tensors.
#' @param grad_tensors,grad_outputs The gradients to start from (a tensor, a
#'   list, or `NULL` for ones; needed for non-scalar outputs).
#' @param retain_graph Keep the graph for another backward pass.
#' @param create_graph Record the backward pass itself (higher-order
#'   gradients).
#' @param inputs The tensors to differentiate with respect to (`NULL`: every
#'   leaf, for `autograd_backward()`).
#' @param allow_unused Return `NULL`... an undefined gradient for inputs the
#'   outputs do not depend on instead of an error.
#' @return `autograd_backward()`: `NULL`, invisibly. `autograd_grad()`: a list
#'   of tensors.
#' @name autograd_backward
#' @examples
#' x <- torch_tensor(c(1, 2), requires_grad = TRUE)
#' y <- (x^2)$sum()
#' autograd_grad(y, x, retain_graph = TRUE)  # keeps the graph for backward()
#' y$backward()
#' x$grad
NULL

#' @rdname autograd_backward
#' @export
autograd_backward <- function(tensors, grad_tensors = NULL, retain_graph = create_graph,
                              create_graph = FALSE, inputs = NULL) {
  .Call(C_backward, as_tensor_list(tensors), as_tensor_list(grad_tensors),
        if (is.null(retain_graph)) NULL else arg_flag(retain_graph, "retain_graph"),
        arg_flag(create_graph, "create_graph"), as_tensor_list(inputs))
  invisible(NULL)
}

#' @rdname autograd_backward
#' @export
autograd_grad <- function(outputs, inputs, grad_outputs = NULL, retain_graph = create_graph,
                          create_graph = FALSE, allow_unused = FALSE) {
  outs <- as_tensor_list(outputs)
  ins <- as_tensor_list(inputs)
  if (length(outs) != length(as_tensor_list(grad_outputs)) && !is.null(grad_outputs)) {
    abort(sprintf("`grad_outputs` must have one tensor per output (%d), got %d.", length(outs),
                  length(as_tensor_list(grad_outputs))), class = "value_error")
  }
  .Call(C_autograd_grad, outs, ins, as_tensor_list(grad_outputs),
        if (is.null(retain_graph)) NULL else arg_flag(retain_graph, "retain_graph"),
        arg_flag(create_graph, "create_graph"), arg_flag(allow_unused, "allow_unused"))
}

as_tensor_list <- function(x) {
  if (is.null(x)) list() else if (is_torch_tensor(x)) list(x) else as.list(x)
}

# ---- hooks ---------------------------------------------------------------------------------------

# x$register_hook(fn): fn(grad) may return a tensor that replaces the gradient. Returns an object
# whose $remove() removes it.
register_tensor_hook <- function(x, hook) {
  if (!is.function(hook)) {
    abort(sprintf("`hook` must be a function, got %s.", describe(hook)), class = "value_error")
  }
  position <- .Call(C_register_hook, x, hook_wrapper(hook))
  handle <- new.env(parent = emptyenv())
  handle$remove <- function() invisible(.Call(C_remove_hook, x, position))
  class(handle) <- "torch_hook"
  handle
}

# The function C++ keeps (where R's collector cannot see) for as long as the tensor lives: made
# here, its environment holds the user's hook only. One made in register_tensor_hook()'s frame
# would hold the tensor itself, a cycle that kept every tensor with a hook alive.
hook_wrapper <- function(hook) {
  force(hook)
  function(grad) {
    out <- hook(grad)
    if (is_torch_tensor(out)) out else NULL
  }
}

#' @export
print.torch_hook <- function(x, ...) {
  cat("<torch_hook>\n")
  invisible(x)
}

# ---- the graph's nodes ---------------------------------------------------------------------------

node_info <- function(node) .Call(C_node_info, node)

#' @export
`$.autograd_node` <- function(x, name) {
  switch(name,
    name = function() node_info(x)[[1L]],
    next_functions = node_info(x)[[2L]],
    NULL
  )
}

#' @export
print.autograd_node <- function(x, ...) {
  cat(node_info(x)[[1L]], "\n", sep = "")
  invisible(x)
}

# ---- autograd functions written in R -------------------------------------------------------------

#' Autograd functions written in R
#'
#' `autograd_function(forward, backward)` returns a function whose arguments
#' are `forward`'s (after `ctx`), as R torch's does. `forward(ctx, ...)` computes
#' the result from tensors (and other values) and may call
#' `ctx$save_for_backward(...)` (tensors and other R values, named or not),
#' `ctx$mark_dirty(...)`, `ctx$mark_non_differentiable(...)`;
#' `backward(ctx, grad_output, ...)` returns a named list with the gradient of
#' each input that needs one (`ctx$needs_input_grad`), reading what forward
#' saved from `ctx$saved_variables`. backward gets one gradient per argument
#' after `ctx`; the gradients of more outputs than that come as one list in its
#' last argument (all of them for `backward(ctx, grad_output)`), as in R
#' torch. The graph node is libtorch's; the R functions run on R's main
#' thread.
#' @param forward,backward R functions, as described.
#' @param code Code run with libtorch's anomaly detection on: a failing
#'   backward names the forward operation that created the failing node.
#' @return `autograd_function()`: a function. `with_detect_anomaly()`: the
#'   value of `code`.
#' @export
#' @examples
#' exp2 <- autograd_function(
#'   forward = function(ctx, i) {
#'     result <- i$exp()
#'     ctx$save_for_backward(result = result)
#'     result
#'   },
#'   backward = function(ctx, grad_output) {
#'     list(i = grad_output * ctx$saved_variables$result)
#'   }
#' )
#' x <- torch_tensor(c(0, 1), requires_grad = TRUE)
#' exp2(x)$sum()$backward()
#' x$grad
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
#' @export
with_detect_anomaly <- function(code) {
  before <- .Call(C_anomaly_mode, TRUE)
  rlang::warn(paste0("Anomaly Detection has been enabled. This mode will increase the runtime ",
                     "and should be enabled only for debugging."), class = "ampkit_warning")
  on.exit(.Call(C_anomaly_mode, before))
  force(code)
}

# One application. The tensors among `args` are the node's inputs; forward's tensors its
# outputs. The R context (an environment) lives as long as the node.
apply_autograd_function <- function(forward, backward, args) {
  is_tensor <- vapply(args, is_torch_tensor, NA)
  needs <- vapply(seq_along(args), function(i) {
    is_tensor[[i]] && isTRUE(args[[i]]$requires_grad)
  }, NA)
  names(needs) <- names(args)
  ctx <- new_autograd_context(as.list(needs))
  shape <- new.env(parent = emptyenv())
  shape$returns_list <- FALSE
  runners <- autograd_runners(forward, backward, args, is_tensor, shape)
  outputs <- .Call(C_autograd_function_apply, args[is_tensor], runners$forward,
                   runners$backward, ctx)
  if (shape$returns_list) outputs else outputs[[1L]]
}

# The node's two R functions. Made here, not in apply_autograd_function(): the node holds them
# (from C++, where R's collector cannot see), so their environment must not hold the node's
# outputs nor its inputs (a cycle R could never collect: an input marked dirty is an output, and
# every module the user's functions can see would leak). Hence every argument is forced (an
# unforced promise holds the caller's frame, which holds the outputs) and the input tensors are
# not kept: forward gets them from C++.
autograd_runners <- function(forward, backward, args, is_tensor, shape) {
  force(forward)
  force(backward)
  force(is_tensor)
  force(shape)
  arg_names <- names(args)
  others <- args[!is_tensor]
  rm(args)
  list(
    forward = function(r_ctx, pointer, tensors) {
      r_ctx$.pointer <- pointer
      on.exit(r_ctx$.pointer <- NULL)
      given <- vector("list", length(is_tensor))
      names(given) <- arg_names
      given[!is_tensor] <- others
      given[is_tensor] <- tensors
      out <- do.call(forward, c(list(r_ctx), given))
      shape$returns_list <- is.list(out) && !is_torch_tensor(out)
      if (shape$returns_list) unname(out) else list(out)
    },
    backward = function(r_ctx, pointer, grads) {
      r_ctx$.pointer <- pointer
      on.exit(r_ctx$.pointer <- NULL)
      out <- do.call(backward, c(list(r_ctx), spread_gradients(grads, backward)))
      wanted <- arg_names[is_tensor]
      given <- names(out)
      if (is.null(given) && length(out) == length(wanted)) names(out) <- wanted
      lapply(wanted, function(name) if (is_torch_tensor(out[[name]])) out[[name]] else NULL)
    }
  )
}

# R torch's convention (its create_b()): one gradient per argument of backward after `ctx`; with
# more outputs than such arguments, the last argument gets the rest as one list (all of them,
# where backward has one). So one output, even returned in a list, gives a tensor.
spread_gradients <- function(grads, backward) {
  n_args <- length(formals(backward)) - 1L
  if (n_args < 1L || length(grads) <= n_args) {
    return(grads)
  }
  c(grads[seq_len(n_args - 1L)], list(grads[seq.int(n_args, length(grads))]))
}

new_autograd_context <- function(needs_input_grad) {
  ctx <- new.env(parent = emptyenv())
  ctx$needs_input_grad <- needs_input_grad
  ctx$saved <- list()
  ctx$saved_is_tensor <- logical()
  ctx$.pointer <- NULL
  class(ctx) <- "torch_autograd_context"
  ctx
}

context_call <- function(ctx, what, tensors) {
  .Call(C_autograd_context, .subset2(ctx, ".pointer"), what, tensors)
}

#' @export
`$.torch_autograd_context` <- function(x, name) {
  switch(name,
    needs_input_grad = .subset2(x, "needs_input_grad"),
    saved_variables = context_saved(x),
    save_for_backward = function(...) context_save(x, list(...)),
    mark_dirty = function(...) invisible(context_call(x, "mark_dirty", unname(list(...)))),
    mark_non_differentiable = function(...) {
      invisible(context_call(x, "mark_non_differentiable", unname(list(...))))
    },
    .subset2(x, name)
  )
}

#' @export
`$<-.torch_autograd_context` <- function(x, name, value) { # nolint: object_name_linter.
  assign(name, value, envir = x)
  x
}

# Tensors go to libtorch's save_for_backward (its checks of in-place changes included), other R
# values stay in R; saved_variables gives them back in the order and with the names given.
context_save <- function(ctx, values) {
  is_tensor <- vapply(values, is_torch_tensor, NA)
  context_call(ctx, "save_for_backward", unname(values[is_tensor]))
  # Only libtorch keeps the tensors: an R object of a saved output would hold the output's node,
  # which holds this context (a cycle through C++ that R's collector cannot see); libtorch's
  # SavedVariable keeps an output without owning its node.
  values[is_tensor] <- list(NULL)
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
  values[is_tensor] <- context_call(ctx, "saved_variables", NULL)
  values
}

# Whether this code runs on R's main thread (what every R callback libtorch runs must see).
on_r_thread <- function() .Call(C_on_r_thread)
