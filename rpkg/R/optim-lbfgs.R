#' @include optim.R
NULL

# R torch's L-BFGS (optim_lbfgs, with its internal .strong_wolfe and .cubic_interpolate), as
# torch.optim.LBFGS computes it. PyTorch's line search mixes Python floats (losses, the first
# step length) with 0-dim float32 tensors (directional derivatives, and step lengths that come
# out of an interpolation): an expression is computed in double precision or in float32
# depending on which it meets. The helpers below keep each value's kind as PyTorch does and
# compute as Python's operators do on it, so that the steps are PyTorch's to the last bit.

# A Python truth value: a comparison of tensors is read back; NaN compares false.
py_true <- function(x) isTRUE(if (is_torch_tensor(x)) x$item() else x)

py_add <- function(a, b) {
  if (is_torch_tensor(a)) a$add(b) else if (is_torch_tensor(b)) b$add(a) else a + b
}

# A number minus a tensor is torch.rsub (the number cast to the tensor's type): -b + a.
py_sub <- function(a, b) {
  if (is_torch_tensor(a)) a$sub(b) else if (is_torch_tensor(b)) b$neg()$add(a) else a - b
}

py_mul <- function(a, b) {
  if (is_torch_tensor(a)) a$mul(b) else if (is_torch_tensor(b)) b$mul(a) else a * b
}

# A number over a tensor is Tensor.__rtruediv__: the reciprocal times the number.
py_div <- function(a, b) {
  if (is_torch_tensor(a)) a$div(b) else if (is_torch_tensor(b)) b$reciprocal()$mul(a) else a / b
}

py_lt <- function(a, b) {
  if (is_torch_tensor(a)) py_true(a$lt(b)) else if (is_torch_tensor(b)) py_true(b$gt(a)) else
    isTRUE(a < b)
}

py_le <- function(a, b) {
  if (is_torch_tensor(a)) py_true(a$le(b)) else if (is_torch_tensor(b)) py_true(b$ge(a)) else
    isTRUE(a <= b)
}

py_gt <- function(a, b) py_lt(b, a)
py_ge <- function(a, b) py_le(b, a)

py_abs <- function(a) if (is_torch_tensor(a)) a$abs() else abs(a)

# Python's max(a, b) and min(a, b): the first unless the second is strictly beyond it.
py_max <- function(a, b) if (py_gt(b, a)) b else a
py_min <- function(a, b) if (py_lt(b, a)) b else a

# A step length as add()'s alpha (a tensor gives its value).
py_scalar <- function(x) if (is_torch_tensor(x)) x$item() else x

# The minimum of the cubic through (x1, f1) and (x2, f2) with slopes g1 and g2, within the
# bounds (default: between x1 and x2). Ported from torch/optim's polyinterp.lua, as PyTorch.
.cubic_interpolate <- function(x1, f1, g1, x2, f2, g2, bounds = NULL) {
  if (!is.null(bounds)) {
    xmin_bound <- bounds[[1L]]
    xmax_bound <- bounds[[2L]]
  } else if (py_le(x1, x2)) {
    xmin_bound <- x1
    xmax_bound <- x2
  } else {
    xmin_bound <- x2
    xmax_bound <- x1
  }
  # d1 = g1 + g2 - 3 (f1 - f2) / (x1 - x2); d2 = sqrt(d1^2 - g1 g2)
  d1 <- py_sub(py_add(g1, g2), py_div(py_mul(3, py_sub(f1, f2)), py_sub(x1, x2)))
  d2_square <- py_sub(if (is_torch_tensor(d1)) d1$pow(2) else d1^2, py_mul(g1, g2))
  if (py_ge(d2_square, 0)) {
    d2 <- if (is_torch_tensor(d2_square)) d2_square$sqrt() else sqrt(d2_square)
    min_pos <- if (py_le(x1, x2)) {
      py_sub(x2, py_mul(py_sub(x2, x1),
                        py_div(py_sub(py_add(g2, d2), d1), py_add(py_sub(g2, g1), py_mul(2, d2)))))
    } else {
      py_sub(x1, py_mul(py_sub(x1, x2),
                        py_div(py_sub(py_add(g1, d2), d1), py_add(py_sub(g1, g2), py_mul(2, d2)))))
    }
    py_min(py_max(min_pos, xmin_bound), xmax_bound)
  } else {
    py_div(py_add(xmin_bound, xmax_bound), 2)
  }
}

# The strong Wolfe line search of optim_lbfgs(line_search_fn = "strong_wolfe") (PyTorch's
# _strong_wolfe, ported from torch/optim's lswolfe.lua; internal, as in R torch): a step length
# `t` along the direction `d` from `x`. `obj_func(x, t, d)` returns list(loss at x + t d (a
# number), gradient there (a flat tensor)); `f`, `g` and `gtd` are the loss, gradient and
# directional derivative at `x`. Returns list(f_new, g_new, t, ls_func_evals).
.strong_wolfe <- function(obj_func, x, t, d, f, g, gtd, c1 = 1e-4, c2 = 0.9,
                          tolerance_change = 1e-9, max_ls = 25) {
  d_norm <- d$abs()$max()
  g <- g$clone(memory_format = torch_contiguous_format())
  ret <- obj_func(x, t, d)
  f_new <- ret[[1L]]
  g_new <- ret[[2L]]
  ls_func_evals <- 1
  gtd_new <- g_new$dot(d)
  # Armijo's bound at step t: f + c1 t gtd (computed as Python does, left to right).
  armijo <- function(t) py_add(f, py_mul(py_mul(c1, t), gtd))

  # Bracketing phase: an interval that holds a point satisfying the strong Wolfe conditions.
  t_prev <- 0
  f_prev <- f
  g_prev <- g
  gtd_prev <- gtd
  done <- FALSE
  ls_iter <- 0
  bracket <- NULL
  while (ls_iter < max_ls) {
    if (py_gt(f_new, armijo(t)) || (ls_iter > 1 && py_ge(f_new, f_prev))) {
      bracket <- list(t_prev, t)
      bracket_f <- list(f_prev, f_new)
      bracket_g <- list(g_prev, g_new$clone(memory_format = torch_contiguous_format()))
      bracket_gtd <- list(gtd_prev, gtd_new)
      break
    }
    if (py_le(py_abs(gtd_new), py_mul(-c2, gtd))) {
      bracket <- list(t)
      bracket_f <- list(f_new)
      bracket_g <- list(g_new)
      done <- TRUE
      break
    }
    if (py_ge(gtd_new, 0)) {
      bracket <- list(t_prev, t)
      bracket_f <- list(f_prev, f_new)
      bracket_g <- list(g_prev, g_new$clone(memory_format = torch_contiguous_format()))
      bracket_gtd <- list(gtd_prev, gtd_new)
      break
    }
    # Interpolate within [t + 0.01 (t - t_prev), 10 t].
    min_step <- py_add(t, py_mul(0.01, py_sub(t, t_prev)))
    max_step <- py_mul(t, 10)
    tmp <- t
    t <- .cubic_interpolate(t_prev, f_prev, gtd_prev, t, f_new, gtd_new,
                            bounds = list(min_step, max_step))
    t_prev <- tmp
    f_prev <- f_new
    g_prev <- g_new$clone(memory_format = torch_contiguous_format())
    gtd_prev <- gtd_new
    ret <- obj_func(x, t, d)
    f_new <- ret[[1L]]
    g_new <- ret[[2L]]
    ls_func_evals <- ls_func_evals + 1
    gtd_new <- g_new$dot(d)
    ls_iter <- ls_iter + 1
  }
  if (ls_iter == max_ls) {
    bracket <- list(0, t)
    bracket_f <- list(f, f_new)
    bracket_g <- list(g, g_new)
  }

  # Zoom phase: shrink the bracket to a point satisfying the conditions.
  insuf_progress <- FALSE
  pos <- function() if (py_le(bracket_f[[1L]], bracket_f[[length(bracket_f)]])) 1:2 else 2:1
  lh <- pos()
  while (!done && ls_iter < max_ls) {
    if (py_lt(py_mul(py_abs(py_sub(bracket[[2L]], bracket[[1L]])), d_norm), tolerance_change)) {
      break
    }
    t <- .cubic_interpolate(bracket[[1L]], bracket_f[[1L]], bracket_gtd[[1L]],
                            bracket[[2L]], bracket_f[[2L]], bracket_gtd[[2L]])
    # Too close to an end of the bracket (twice, or beyond it): move 0.1 of its length inside.
    b_max <- py_max(bracket[[1L]], bracket[[2L]])
    b_min <- py_min(bracket[[1L]], bracket[[2L]])
    eps <- py_mul(0.1, py_sub(b_max, b_min))
    if (py_lt(py_min(py_sub(b_max, t), py_sub(t, b_min)), eps)) {
      if (insuf_progress || py_ge(t, b_max) || py_le(t, b_min)) {
        t <- if (py_lt(py_abs(py_sub(t, b_max)), py_abs(py_sub(t, b_min)))) {
          py_sub(b_max, eps)
        } else {
          py_add(b_min, eps)
        }
        insuf_progress <- FALSE
      } else {
        insuf_progress <- TRUE
      }
    } else {
      insuf_progress <- FALSE
    }
    ret <- obj_func(x, t, d)
    f_new <- ret[[1L]]
    g_new <- ret[[2L]]
    ls_func_evals <- ls_func_evals + 1
    gtd_new <- g_new$dot(d)
    ls_iter <- ls_iter + 1
    low <- lh[[1L]]
    high <- lh[[2L]]
    if (py_gt(f_new, armijo(t)) || py_ge(f_new, bracket_f[[low]])) {
      # Not a sufficient decrease, or not below the lowest point: the new high end.
      bracket[high] <- list(t)
      bracket_f[high] <- list(f_new)
      bracket_g[high] <- list(g_new$clone(memory_format = torch_contiguous_format()))
      bracket_gtd[high] <- list(gtd_new)
      lh <- pos()
    } else {
      if (py_le(py_abs(gtd_new), py_mul(-c2, gtd))) {
        done <- TRUE
      } else if (py_ge(py_mul(gtd_new, py_sub(bracket[[high]], bracket[[low]])), 0)) {
        # The old low end becomes the high end.
        bracket[high] <- bracket[low]
        bracket_f[high] <- bracket_f[low]
        bracket_g[high] <- bracket_g[low]
        bracket_gtd[high] <- bracket_gtd[low]
      }
      bracket[low] <- list(t)
      bracket_f[low] <- list(f_new)
      bracket_g[low] <- list(g_new$clone(memory_format = torch_contiguous_format()))
      bracket_gtd[low] <- list(gtd_new)
    }
  }
  low <- lh[[1L]]
  list(bracket_f[[low]], bracket_g[[low]], bracket[[low]], ls_func_evals)
}

# nolint start: object_name_linter, object_usage_linter.
OptimLbfgs <- R6::R6Class(
  "optim_lbfgs",
  inherit = Optimizer,
  lock_objects = FALSE,
  public = list(
    initialize = function(params, defaults) {
      super$initialize(params, defaults)
      if (length(self$param_groups) != 1L) {
        abort("LBFGS doesn't support per-parameter options (parameter groups)",
              class = "value_error")
      }
    },
    step = function(closure) {
      if (missing(closure) || !is.function(closure)) {
        abort(paste0("`closure` must be a function that re-evaluates the model and returns ",
                     "the loss (L-BFGS evaluates it several times per step)."),
              class = "value_error")
      }
      with_no_grad(private$lbfgs_step(closure))
    }
  ),
  private = list(
    params = function() self$param_groups[[1L]]$params,
    evaluate = function(closure) with_enable_grad(closure()),
    # The gradients as one flat tensor (zeros for a parameter without one).
    flat_grad = function() {
      torch_cat(lapply(private$params(), function(p) {
        g <- p$grad
        if (is.null(g) || is_undefined_tensor(g)) p$new_zeros(p$numel()) else g$view(-1)
      }), dim = 1L)
    },
    add_grad = function(step_size, update) {
      alpha <- py_scalar(step_size)
      offset <- 1L
      for (p in private$params()) {
        n <- p$numel()
        p$add_(update$narrow(1L, offset, n)$view_as(p), alpha = alpha)
        offset <- offset + n
      }
    },
    # Loss and gradient at x + t d, the parameters then put back to x.
    directional_evaluate = function(closure, x, t, d) {
      private$add_grad(t, d)
      loss <- as_loss(private$evaluate(closure))
      flat_grad <- private$flat_grad()
      params <- private$params()
      for (i in seq_along(params)) params[[i]]$copy_(x[[i]])
      list(loss, flat_grad)
    },
    lbfgs_step = function(closure) {
      group <- self$param_groups[[1L]]
      lr <- group$lr
      max_iter <- group$max_iter
      max_eval <- group$max_eval
      tolerance_grad <- group$tolerance_grad
      tolerance_change <- group$tolerance_change
      history_size <- group$history_size
      first <- private$params()[[1L]]
      # L-BFGS's state is global; PyTorch keeps it as the first parameter's.
      state <- self$state$get(first)
      if (is.null(state$func_evals)) state$func_evals <- 0
      if (is.null(state$n_iter)) state$n_iter <- 0
      on.exit(self$state$set(first, state))

      orig_loss <- private$evaluate(closure)
      loss <- as_loss(orig_loss)
      current_evals <- 1
      state$func_evals <- state$func_evals + 1
      flat_grad <- private$flat_grad()
      if (py_le(flat_grad$abs()$max(), tolerance_grad)) {
        return(orig_loss)
      }
      d <- state$d
      t <- state$t
      old_dirs <- state$old_dirs
      old_stps <- state$old_stps
      ro <- state$ro
      h_diag <- state$H_diag
      prev_flat_grad <- state$prev_flat_grad
      prev_loss <- state$prev_loss

      n_iter <- 0
      while (n_iter < max_iter) {
        n_iter <- n_iter + 1
        state$n_iter <- state$n_iter + 1
        # The descent direction: the gradient's negative at first, then the L-BFGS two-loop
        # recursion over the history.
        if (state$n_iter == 1) {
          d <- flat_grad$neg()
          old_dirs <- list()
          old_stps <- list()
          ro <- list()
          h_diag <- 1
        } else {
          y <- flat_grad$sub(prev_flat_grad)
          s <- d$mul(t)
          ys <- y$dot(s)
          if (py_gt(ys, 1e-10)) {
            if (length(old_dirs) == history_size) {
              old_dirs <- old_dirs[-1L]
              old_stps <- old_stps[-1L]
              ro <- ro[-1L]
            }
            old_dirs <- c(old_dirs, list(y))
            old_stps <- c(old_stps, list(s))
            ro <- c(ro, list(py_div(1, ys)))
            h_diag <- ys$div(y$dot(y))
          }
          num_old <- length(old_dirs)
          if (is.null(state$al)) state$al <- vector("list", history_size)
          al <- state$al
          q <- flat_grad$neg()
          for (i in rev(seq_len(num_old))) {
            al[[i]] <- old_stps[[i]]$dot(q)$mul(ro[[i]])
            q$add_(old_dirs[[i]], alpha = -al[[i]]$item())
          }
          d <- r <- torch_mul(q, h_diag)
          for (i in seq_len(num_old)) {
            be_i <- old_dirs[[i]]$dot(r)$mul(ro[[i]])
            r$add_(old_stps[[i]], alpha = al[[i]]$sub(be_i)$item())
          }
          state$al <- al
        }
        if (is.null(prev_flat_grad)) {
          prev_flat_grad <- flat_grad$clone(memory_format = torch_contiguous_format())
        } else {
          prev_flat_grad$copy_(flat_grad)
        }
        prev_loss <- loss

        # The step length: min(1, 1 / |g|_1) lr at the first iteration, then lr.
        t <- if (state$n_iter == 1) {
          py_mul(py_min(1, py_div(1, flat_grad$abs()$sum())), lr)
        } else {
          lr
        }
        gtd <- flat_grad$dot(d)
        if (py_gt(gtd, -tolerance_change)) break

        ls_func_evals <- 0
        if (!is.null(group$line_search_fn)) {
          x_init <- lapply(private$params(),
                           function(p) p$clone(memory_format = torch_contiguous_format()))
          obj_func <- function(x, t, d) private$directional_evaluate(closure, x, t, d)
          ret <- .strong_wolfe(obj_func, x_init, t, d, loss, flat_grad, gtd,
                               max_ls = max_eval - current_evals)
          loss <- ret[[1L]]
          flat_grad <- ret[[2L]]
          t <- ret[[3L]]
          ls_func_evals <- ret[[4L]]
          private$add_grad(t, d)
          opt_cond <- py_le(flat_grad$abs()$max(), tolerance_grad)
        } else {
          private$add_grad(t, d)
          opt_cond <- FALSE
          if (n_iter != max_iter) {
            # Re-evaluated but at the last iteration (of no use in a stochastic setting).
            loss <- as_loss(private$evaluate(closure))
            flat_grad <- private$flat_grad()
            opt_cond <- py_le(flat_grad$abs()$max(), tolerance_grad)
            ls_func_evals <- 1
          }
        }
        current_evals <- current_evals + ls_func_evals
        state$func_evals <- state$func_evals + ls_func_evals

        if (n_iter == max_iter || current_evals >= max_eval || opt_cond) break
        # Lack of progress.
        if (py_le(d$mul(t)$abs()$max(), tolerance_change)) break
        if (isTRUE(abs(loss - prev_loss) < tolerance_change)) break
      }
      state$d <- d
      state$t <- t
      state$old_dirs <- old_dirs
      state$old_stps <- old_stps
      state$ro <- ro
      state$H_diag <- h_diag
      state$prev_flat_grad <- prev_flat_grad
      state$prev_loss <- prev_loss
      orig_loss
    }
  )
)
# nolint end

#' L-BFGS optimizer
#'
#' R torch's `optim_lbfgs()`: the L-BFGS algorithm (after minFunc), as
#' `torch.optim.LBFGS` computes it. `$step(closure)` needs a closure that
#' zeroes the gradients, computes the loss, calls `backward()` on it and
#' returns it; a step runs up to `max_iter` iterations, each along the
#' quasi-Newton direction with a fixed step `lr` or, with
#' `line_search_fn = "strong_wolfe"`, a step found by a strong Wolfe line
#' search. It takes one parameter group. Its state (`opt$state$get(param)` of
#' the first parameter, as in PyTorch) counts `func_evals` and `n_iter` and
#' keeps the history (`old_dirs`, `old_stps`, ...); it needs
#' `param_bytes * (history_size + 1)` bytes.
#'
#' @param params Parameters (a list of tensors), one group.
#' @param lr Learning rate (the step length).
#' @param max_iter Most iterations per `$step()`.
#' @param max_eval Most function evaluations per `$step()` (default
#'   `max_iter * 5 / 4`, rounded down).
#' @param tolerance_grad Stop when the gradient's largest magnitude is at most this.
#' @param tolerance_change Stop when the loss or the parameters change less than this.
#' @param history_size Number of updates kept.
#' @param line_search_fn `NULL` (a fixed step) or `"strong_wolfe"`.
#' @return An optimizer (class `c("optim_lbfgs", "torch_optimizer", "R6")`).
#'   Its `$step(closure)` returns the closure's first loss.
#' @export
#' @examples
#' rosenbrock <- function(x) (1 - x[1])^2 + 5 * (x[2] - x[1]^2)^2
#' x <- torch_tensor(c(-1, 1), requires_grad = TRUE)
#' opt <- optim_lbfgs(x, line_search_fn = "strong_wolfe")
#' calc_loss <- function() {
#'   opt$zero_grad()
#'   value <- rosenbrock(x)
#'   value$backward()
#'   value
#' }
#' for (i in 1:3) opt$step(calc_loss)
#' x
optim_lbfgs <- optimizer_generator(function(params, lr = 1, max_iter = 20, max_eval = NULL,
                                            tolerance_grad = 1e-7, tolerance_change = 1e-9,
                                            history_size = 100, line_search_fn = NULL) {
  max_iter <- whole_number(max_iter, "max_iter")
  if (is.null(max_eval)) max_eval <- (max_iter * 5L) %/% 4L
  if (!is.null(line_search_fn) && !identical(line_search_fn, "strong_wolfe")) {
    abort(sprintf("`line_search_fn` must be NULL or \"strong_wolfe\", got %s.",
                  describe(line_search_fn)), class = "value_error")
  }
  defaults <- list(lr = check_lr(lr), max_iter = max_iter,
                   max_eval = whole_number(max_eval, "max_eval"),
                   tolerance_grad = arg_number(tolerance_grad, "tolerance_grad"),
                   tolerance_change = arg_number(tolerance_change, "tolerance_change"),
                   history_size = positive_whole(history_size, "history_size"),
                   line_search_fn = line_search_fn)
  OptimLbfgs$new(params, defaults)
}, OptimLbfgs)


# A loss as Python's float(): a one-element tensor's value, in double precision.
as_loss <- function(x) if (is_torch_tensor(x)) x$item() else as.double(x)
