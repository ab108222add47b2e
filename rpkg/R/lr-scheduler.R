# R torch's learning-rate schedulers over torch.optim.lr_scheduler: lr_step(), lr_lambda(),
# lr_one_cycle(), each with `$step()`.

lr_scheduler_class <- R6::R6Class(
  classname = "lr_scheduler",
  lock_objects = FALSE,
  public = list(
    initialize = function(py, optimizer, verbose = FALSE) {
      private$py_ <- py
      private$verbose <- arg_flag(verbose, "verbose")
      self$optimizer <- optimizer
    },
    step = function() {
      with_python_warnings(call_python(nn_py()$scheduler_step(private$py_), call = NULL))
      if (private$verbose) {
        lrs <- self$get_last_lr()
        for (i in seq_along(lrs)) {
          message(sprintf("Adjusting learning rate of group %d to %.4e.", i, lrs[[i]]))
        }
      }
      invisible(NULL)
    },
    get_last_lr = function() {
      as.numeric(unlist(reticulate::py_to_r(private$py_$get_last_lr())))
    },
    state_dict = function() {
      state <- reticulate::py_to_r(nn_py()$scheduler_state(private$py_))
      state
    },
    load_state_dict = function(state_dict) {
      if (!is.list(state_dict) || is.null(names(state_dict))) {
        abort(sprintf("`state_dict` must be a scheduler's state dict (a named list), got %s.",
                      describe(state_dict)), class = "value_error")
      }
      call_python(private$py_$load_state_dict(r_to_py_tree(state_dict)), call = NULL)
      invisible(self)
    }
  ),
  private = list(py_ = NULL, verbose = FALSE),
  active = list(
    last_epoch = function() reticulate::py_to_r(private$py_$last_epoch)
  )
)

#' @export
unwrap.lr_scheduler <- function(x) { # nolint: object_name_linter.
  .subset2(x, ".__enclos_env__")$private$py_
}

new_scheduler <- function(classname, py, optimizer, verbose = FALSE) {
  cls <- scheduler_classes[[classname]]
  if (is.null(cls)) {
    cls <- R6::R6Class(classname = classname, inherit = lr_scheduler_class, lock_objects = FALSE)
    scheduler_classes[[classname]] <- cls
  }
  cls$new(py, optimizer, verbose)
}

scheduler_classes <- new.env(parent = emptyenv())

optimizer_arg <- function(optimizer) {
  if (!inherits(optimizer, "torch_optimizer")) {
    abort(sprintf("`optimizer` must be a torch_optimizer (such as optim_sgd()), got %s.",
                  describe(optimizer)), class = "value_error")
  }
  unwrap(optimizer)
}

#' Learning-rate schedulers
#'
#' R torch's `lr_step()` (multiply the learning rate by `gamma` every
#' `step_size` epochs), `lr_lambda()` (the initial learning rate times
#' `lr_lambda(epoch)`, an R function of the epoch counted from 0) and
#' `lr_one_cycle()` (the 1cycle policy), over PyTorch's `StepLR`, `LambdaLR`
#' and `OneCycleLR`. Call `$step()` after each epoch (after each batch for
#' `lr_one_cycle()`); `$get_last_lr()` gives the learning rates, one per
#' parameter group. Classes `c("lr_step", "lr_scheduler")` etc.
#'
#' @param optimizer An optimizer ([optim_sgd()], ...).
#' @param step_size Epochs between decays.
#' @param gamma Decay factor.
#' @param last_epoch The index of the last epoch (`-1`: start).
#' @param lr_lambda A function of the epoch (or a list of them, one per group)
#'   giving a factor of the initial learning rate.
#' @param verbose Whether `$step()` reports the new learning rates (messages).
#' @param max_lr Upper learning rate (one number, or one per group).
#' @param total_steps,epochs,steps_per_epoch The cycle's length: `total_steps`,
#'   or `epochs * steps_per_epoch`.
#' @param pct_start Fraction of the cycle spent increasing the rate.
#' @param anneal_strategy `"cos"` or `"linear"`.
#' @param cycle_momentum,base_momentum,max_momentum Cycle the momentum (or
#'   Adam's first beta) inversely to the rate, between these values.
#' @param div_factor,final_div_factor Initial rate `max_lr / div_factor`,
#'   final rate the initial one `/ final_div_factor`.
#' @return A scheduler.
#' @name lr_schedulers
#' @examples
#' if (ampkit_available()) {
#'   opt <- optim_sgd(nn_linear(2, 1)$parameters, lr = 1)
#'   sched <- lr_step(opt, step_size = 2, gamma = 0.5)
#'   for (epoch in 1:4) {
#'     opt$step()
#'     sched$step()
#'   }
#'   opt$param_groups[[1]]$lr
#'   sched2 <- lr_lambda(optim_sgd(nn_linear(2, 1)$parameters, lr = 1),
#'                       function(epoch) 0.9^epoch)
#' }
NULL

#' @rdname lr_schedulers
#' @export
lr_step <- function(optimizer, step_size, gamma = 0.1, last_epoch = -1) {
  py <- call_python(torch_py()$optim$lr_scheduler$StepLR(
    optimizer_arg(optimizer), step_size = int_arg(step_size, "step_size"),
    gamma = arg_number(gamma, "gamma"), last_epoch = int_arg(last_epoch, "last_epoch")),
    call = NULL)
  new_scheduler("lr_step", py, optimizer)
}

#' @rdname lr_schedulers
#' @export
lr_lambda <- function(optimizer, lr_lambda, last_epoch = -1, verbose = FALSE) {
  to_py <- function(f) {
    if (!is.function(f)) {
      abort(sprintf("`lr_lambda` must be a function of the epoch (or a list of them), got %s.",
                    describe(f)), class = "value_error")
    }
    reticulate::r_to_py(function(epoch) as.double(f(epoch)), convert = TRUE)
  }
  fns <- if (is.function(lr_lambda)) to_py(lr_lambda) else lapply(lr_lambda, to_py)
  py <- call_python(torch_py()$optim$lr_scheduler$LambdaLR(
    optimizer_arg(optimizer), lr_lambda = fns, last_epoch = int_arg(last_epoch, "last_epoch")),
    call = NULL)
  new_scheduler("lr_lambda", py, optimizer, verbose)
}

#' @rdname lr_schedulers
#' @export
lr_one_cycle <- function(optimizer, max_lr, total_steps = NULL, epochs = NULL,
                         steps_per_epoch = NULL, pct_start = 0.3, anneal_strategy = "cos",
                         cycle_momentum = TRUE, base_momentum = 0.85, max_momentum = 0.95,
                         div_factor = 25, final_div_factor = 10000, last_epoch = -1,
                         verbose = FALSE) {
  numbers <- function(x, name) {
    if (!is.numeric(x) || length(x) == 0L || anyNA(x)) {
      abort(sprintf("`%s` must be a number or one per parameter group, got %s.", name,
                    describe(x)), class = "value_error")
    }
    if (length(x) == 1L) as.double(x) else as.list(as.double(x))
  }
  if (!is.character(anneal_strategy) || length(anneal_strategy) != 1L ||
      !anneal_strategy %in% c("cos", "linear")) {
    abort(sprintf("`anneal_strategy` must be \"cos\" or \"linear\", got %s.",
                  describe(anneal_strategy)), class = "value_error")
  }
  py <- call_python(torch_py()$optim$lr_scheduler$OneCycleLR(
    optimizer_arg(optimizer), max_lr = numbers(max_lr, "max_lr"),
    total_steps = int_arg(total_steps, "total_steps", null_ok = TRUE),
    epochs = int_arg(epochs, "epochs", null_ok = TRUE),
    steps_per_epoch = int_arg(steps_per_epoch, "steps_per_epoch", null_ok = TRUE),
    pct_start = arg_number(pct_start, "pct_start"), anneal_strategy = anneal_strategy,
    cycle_momentum = arg_flag(cycle_momentum, "cycle_momentum"),
    base_momentum = numbers(base_momentum, "base_momentum"),
    max_momentum = numbers(max_momentum, "max_momentum"),
    div_factor = arg_number(div_factor, "div_factor"),
    final_div_factor = arg_number(final_div_factor, "final_div_factor"),
    last_epoch = int_arg(last_epoch, "last_epoch")), call = NULL)
  new_scheduler("lr_one_cycle", py, optimizer, verbose)
}
