#' @include optim.R
NULL

# R torch's learning-rate schedulers, in R: each sets its optimizer's groups' `lr` at every
# `$step()` by PyTorch's formula (its closed forms where PyTorch uses them, so that the rates
# agree with PyTorch's to the last bit over the same steps).

#' Learning-rate schedulers
#'
#' R torch's `lr_step()` (multiply the learning rate by `gamma` every
#' `step_size` epochs), `lr_lambda()` (the initial learning rate times
#' `lr_lambda(epoch)`, an R function of the epoch counted from 0),
#' `lr_multiplicative()` (the rate times `lr_lambda(epoch)` at each step),
#' `lr_cosine_annealing()`, `lr_one_cycle()` (the 1cycle policy) and
#' `lr_reduce_on_plateau()` (reduce when a metric stops improving: `$step(metric)`).
#' Call `$step()` after each epoch (after each batch for `lr_one_cycle()`);
#' `$get_last_lr()` gives the learning rates, one per parameter group.
#' Each is a scheduler generator made by [lr_scheduler()], as R torch's are
#' (class `c("lr_step", "lr_scheduler", "lr_scheduler_generator")`; the
#' scheduler it makes `c("lr_step", "lr_scheduler", "R6")`), so a scheduler
#' of one's own may inherit one: `lr_scheduler("mine", inherit = lr_step,
#' get_lr = ...)`. `lr_reduce_on_plateau()`'s scheduler steps on a metric and
#' makes no first step.
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
#' @param T_max,eta_min Cosine annealing's half period and lowest rate.
#' @param mode,factor,patience,threshold,threshold_mode,cooldown,min_lr,eps
#'   `lr_reduce_on_plateau()`'s options (PyTorch's).
#' @return A scheduler.
#' @name lr_schedulers
#' @examples
#' opt <- optim_sgd(nn_linear(2, 1)$parameters, lr = 1)
#' sched <- lr_step(opt, step_size = 2, gamma = 0.5)
#' for (epoch in 1:4) {
#'   opt$step()
#'   sched$step()
#' }
#' opt$param_groups[[1]]$lr
#' sched2 <- lr_lambda(optim_sgd(nn_linear(2, 1)$parameters, lr = 1),
#'                     function(epoch) 0.9^epoch)
#' sched2$get_last_lr()
#' # a step schedule that never goes below 0.2
#' lr_step_floor <- lr_scheduler("lr_step_floor", inherit = lr_step, get_lr = function() {
#'   pmax(super$get_lr(), 0.2)
#' })
#' opt3 <- optim_sgd(nn_linear(2, 1)$parameters, lr = 1)
#' sched3 <- lr_step_floor(opt3, step_size = 1, gamma = 0.5)
#' for (epoch in 1:4) sched3$step()
#' sched3$get_last_lr()
NULL

# nolint start: object_name_linter.
LRScheduler <- R6::R6Class(
  "lr_scheduler",
  lock_objects = FALSE,
  public = list(
    optimizer = NULL,
    last_epoch = -1L,
    base_lrs = NULL,
    verbose = FALSE,
    # R torch's field of the last rates (PyTorch's `_last_lr`), kept in the state dict.
    .last_lr = NULL,
    initialize = function(optimizer, last_epoch = -1, verbose = FALSE) {
      check_optimizer(optimizer)
      self$optimizer <- optimizer
      self$verbose <- verbose
      last_epoch <- whole_number(last_epoch, "last_epoch")
      for (i in seq_along(optimizer$param_groups)) {
        # PyTorch's setdefault: a scheduler made before (lr_one_cycle's own) keeps its value.
        if (is.null(optimizer$param_groups[[i]]$initial_lr)) {
          if (last_epoch != -1L) {
            abort(sprintf(paste0("param 'initial_lr' is not specified in param_groups[[%d]] when ",
                                 "resuming a scheduler with last_epoch >= 0."), i),
                  class = "value_error")
          }
          optimizer$param_groups[[i]]$initial_lr <- optimizer$param_groups[[i]]$lr
        }
      }
      self$base_lrs <- vapply(optimizer$param_groups, function(g) g$initial_lr, 0)
      self$last_epoch <- last_epoch
      # The initial step sets the first rates; it is not reported (verbose reports adjustments).
      # It is PyTorch's _initial_step: schedulers that scale the current rates leave them as they
      # are then, also when resuming (last_epoch >= 0).
      private$initial <- TRUE
      self$step()
      private$initial <- FALSE
    },
    get_lr = function() abort("A scheduler must define get_lr().", class = "not_implemented_error"),
    get_last_lr = function() self$.last_lr,
    step = function() {
      self$last_epoch <- self$last_epoch + 1L
      lrs <- self$get_lr()
      for (i in seq_along(self$optimizer$param_groups)) {
        self$optimizer$param_groups[[i]]$lr <- lrs[[i]]
      }
      self$.last_lr <- group_lrs(self)
      if (isTRUE(self$verbose) && !private$initial) {
        message(sprintf("Adjusting learning rate of group %d to %.4e.", seq_along(lrs), lrs))
      }
      invisible(self)
    },
    state_dict = function() {
      fields <- setdiff(ls(self), c("optimizer", ".__enclos_env__", "clone", "initialize",
                                    ls(LRScheduler$public_methods)))
      out <- mget(fields, envir = self)
      # ls() leaves out `.last_lr` (a dot name): get_last_lr() of a loaded scheduler needs it.
      c(out[!vapply(out, is.function, NA)], list(.last_lr = self$.last_lr))
    },
    load_state_dict = function(state_dict) {
      # A state dict read back by torch_load() has lists where R had vectors (PyTorch's format):
      # the rates (base_lrs, .last_lr) are vectors again.
      for (name in names(state_dict)) assign(name, unlist_numbers(state_dict[[name]]), envir = self)
      invisible(self)
    }
  ),
  private = list(initial = FALSE)
)
# nolint end

#' Define a learning-rate scheduler
#'
#' R torch's `lr_scheduler()`: a new scheduler class from the methods given in
#' `...`: `get_lr()`, which returns the learning rates of the optimizer's
#' groups for the epoch `self$last_epoch` (the groups' current rates are
#' `self$optimizer$param_groups[[i]]$lr`, their initial ones `self$base_lrs`),
#' and, for options of its own, an `initialize()` ending with
#' `super$initialize(optimizer, last_epoch, verbose)`. The scheduler has the
#' others' `$step()`, `$get_last_lr()`, `$state_dict()` and
#' `$load_state_dict()`.
#'
#' @param classname The scheduler's class name.
#' @param inherit The class (or a scheduler generator made by `lr_scheduler()`)
#'   to inherit from.
#' @param ... Public fields and methods (for `print()` of a generator: unused).
#' @param parent_env The environment the methods are defined in.
#' @return A scheduler generator (class `c(classname, "lr_scheduler",
#'   "lr_scheduler_generator")`): a function with `initialize`'s arguments that
#'   returns the scheduler.
#' @export
#' @examples
#' lr_halve <- lr_scheduler(
#'   "lr_halve",
#'   initialize = function(optimizer, every = 2, last_epoch = -1) {
#'     self$every <- every
#'     super$initialize(optimizer, last_epoch)
#'   },
#'   get_lr = function() {
#'     lrs <- vapply(self$optimizer$param_groups, function(g) g$lr, 0)
#'     if (self$last_epoch > 0 && self$last_epoch %% self$every == 0) lrs / 2 else lrs
#'   }
#' )
#' opt <- optim_sgd(nn_linear(2, 1)$parameters, lr = 1)
#' sched <- lr_halve(opt)
#' for (epoch in 1:4) sched$step()
#' sched$get_last_lr()
#' lr_halve
lr_scheduler <- function(classname = NULL, inherit = LRScheduler, ...,
                         parent_env = parent.frame()) {
  if (inherits(inherit, "lr_scheduler_generator")) inherit <- attr(inherit, "scheduler")
  if (!inherits(inherit, "R6ClassGenerator")) {
    abort(sprintf("`inherit` must be a scheduler class or generator, got %s.", describe(inherit)),
          class = "value_error")
  }
  made <- r6_subclass(classname, inherit, list(...), NULL, NULL, parent_env)
  structure(made$new, scheduler = made$class,
            class = c(classname, "lr_scheduler", "lr_scheduler_generator"))
}

#' @rdname lr_scheduler
#' @param x A scheduler generator, to print.
#' @export
print.lr_scheduler_generator <- function(x, ...) {
  cat(sprintf("<%s> scheduler generator: %s(%s)\n", class(x)[[1L]], class(x)[[1L]],
              paste(names(formals(unclass(x))), collapse = ", ")))
  invisible(x)
}

group_lrs <- function(self) vapply(self$optimizer$param_groups, function(g) g$lr, 0)

check_optimizer <- function(optimizer) {
  if (!is_optimizer(optimizer)) {
    abort(sprintf("`optimizer` must be a torch_optimizer (such as optim_sgd()), got %s.",
                  describe(optimizer)), class = "value_error")
  }
}

# The built-in schedulers are generators made by lr_scheduler(), as R torch's are: a scheduler of
# one's own may inherit one (lr_scheduler("mine", inherit = lr_step, get_lr = ...)). Each one's
# initialize() checks its options (in R's words) and ends with LRScheduler's, which makes the
# first step. get_lr() methods are R6 methods: `self` and `super` are bound by R6.
# nolint start: object_usage_linter, object_name_linter.

#' @rdname lr_schedulers
#' @export
lr_step <- lr_scheduler(
  "lr_step",
  initialize = function(optimizer, step_size, gamma = 0.1, last_epoch = -1) {
    self$step_size <- positive_whole(step_size, "step_size")
    self$gamma <- arg_number(gamma, "gamma")
    super$initialize(optimizer, last_epoch)
  },
  get_lr = function() {
    if (self$last_epoch == 0 || self$last_epoch %% self$step_size != 0) {
      return(group_lrs(self))
    }
    group_lrs(self) * self$gamma
  }
)

lambda_list <- function(lr_lambda, n) {
  fns <- if (is.function(lr_lambda)) rep(list(lr_lambda), n) else lr_lambda
  if (length(fns) != n || !all(vapply(fns, is.function, NA))) {
    abort(sprintf(paste0("`lr_lambda` must be a function of the epoch (or a list of them, one ",
                         "per group), got %s."), describe(lr_lambda)), class = "value_error")
  }
  fns
}

# lr_lambda's and lr_multiplicative's initialize(): a function of the epoch per group (R6 binds
# `self` and `super` in the method it copies).
lambda_initialize <- function(optimizer, lr_lambda, last_epoch = -1, verbose = FALSE) {
  check_optimizer(optimizer)
  self$lr_lambdas <- lambda_list(lr_lambda, length(optimizer$param_groups))
  super$initialize(optimizer, last_epoch, verbose)
}

#' @rdname lr_schedulers
#' @export
lr_lambda <- lr_scheduler(
  "lr_lambda",
  initialize = lambda_initialize,
  get_lr = function() {
    vapply(seq_along(self$base_lrs), function(i) {
      self$base_lrs[[i]] * as.numeric(self$lr_lambdas[[i]](self$last_epoch))
    }, 0)
  }
)

#' @rdname lr_schedulers
#' @export
lr_multiplicative <- lr_scheduler(
  "lr_multiplicative",
  initialize = lambda_initialize,
  get_lr = function() {
    lrs <- group_lrs(self)
    if (private$initial) {
      return(lrs)
    }
    vapply(seq_along(lrs), function(i) {
      lrs[[i]] * as.numeric(self$lr_lambdas[[i]](self$last_epoch))
    }, 0)
  }
)

#' @rdname lr_schedulers
#' @export
lr_cosine_annealing <- lr_scheduler(
  "lr_cosine_annealing",
  initialize = function(optimizer, T_max, eta_min = 0, last_epoch = -1, verbose = FALSE) {
    self$T_max <- arg_number(T_max, "T_max")
    if (!(is.finite(self$T_max) && self$T_max > 0)) {
      abort(sprintf("`T_max` must be a positive, finite number, got %s.", describe(T_max)),
            class = "value_error")
    }
    self$eta_min <- arg_number(eta_min, "eta_min")
    super$initialize(optimizer, last_epoch, verbose)
  },
  get_lr = function() {
    lrs <- group_lrs(self)
    e <- self$last_epoch
    if (private$initial) {
      return(lrs)
    }
    if ((e - 1 - self$T_max) %% (2 * self$T_max) == 0) {
      return(lrs + (self$base_lrs - self$eta_min) * (1 - cos(pi / self$T_max)) / 2)
    }
    (1 + cos(pi * e / self$T_max)) / (1 + cos(pi * (e - 1) / self$T_max)) *
      (lrs - self$eta_min) + self$eta_min
  }
)

#' @rdname lr_schedulers
#' @export
lr_one_cycle <- lr_scheduler(
  "lr_one_cycle",
  initialize = function(optimizer, max_lr, total_steps = NULL, epochs = NULL,
                        steps_per_epoch = NULL, pct_start = 0.3, anneal_strategy = "cos",
                        cycle_momentum = TRUE, base_momentum = 0.85, max_momentum = 0.95,
                        div_factor = 25, final_div_factor = 10000, last_epoch = -1,
                        verbose = FALSE) {
    check_optimizer(optimizer)
    arg_choice(anneal_strategy, "anneal_strategy", c("cos", "linear"))
    total_steps <- cycle_length(total_steps, epochs, steps_per_epoch)
    pct_start <- arg_number(pct_start, "pct_start")
    if (!(pct_start >= 0 && pct_start <= 1)) {  # PyTorch's rule and words
      abort(sprintf("Expected float between 0 and 1 pct_start, but got %s", describe(pct_start)),
            class = "value_error")
    }
    cycle_momentum <- arg_flag(cycle_momentum, "cycle_momentum")
    momentum_key <- if (!is.null(optimizer$defaults$betas)) "betas" else "momentum"
    if (cycle_momentum && momentum_key == "momentum" && is.null(optimizer$defaults$momentum)) {
      abort("optimizer must support momentum with `cycle_momentum` option enabled",
            class = "value_error")
    }
    if (last_epoch == -1) {
      one_cycle_groups(optimizer, max_lr, div_factor, final_div_factor,
                       if (cycle_momentum) momentum_key, base_momentum, max_momentum)
    }
    self$total_steps <- total_steps
    # PyTorch's two phases: up from initial_lr to max_lr, then down to min_lr (momentum
    # inversely).
    self$phases <- list(
      list(end = pct_start * total_steps - 1, start_lr = "initial_lr", end_lr = "max_lr",
           start_m = "max_momentum", end_m = "base_momentum"),
      list(end = total_steps - 1, start_lr = "max_lr", end_lr = "min_lr",
           start_m = "base_momentum", end_m = "max_momentum")
    )
    self$anneal <- if (anneal_strategy == "cos") {
      function(start, end, pct) end + (start - end) / 2 * (cos(pi * pct) + 1)
    } else {
      function(start, end, pct) (end - start) * pct + start
    }
    self$momentum_key <- if (cycle_momentum) momentum_key
    super$initialize(optimizer, last_epoch, verbose)
  },
  get_lr = function() one_cycle_lrs(self)
)

cycle_length <- function(total_steps, epochs, steps_per_epoch) {
  if (!is.null(total_steps)) {
    return(positive_count(total_steps, "total_steps"))
  }
  if (is.null(epochs) || is.null(steps_per_epoch)) {
    abort("You must define either total_steps OR (epochs AND steps_per_epoch)",
          class = "value_error")
  }
  positive_count(epochs, "epochs") * positive_count(steps_per_epoch, "steps_per_epoch")
}

# PyTorch's OneCycleLR rule for its counts, in its words: a positive whole number.
positive_count <- function(x, name) {
  positive_whole(x, name, "Expected positive integer %s, but got %s")
}

# A setting given once or per parameter group (PyTorch's schedulers' rule: one value, or as many
# as the optimizer has groups; a list of numbers, as R torch and PyTorch take, is a vector), as
# one number per group.
per_group <- function(x, name, optimizer) {
  n <- length(optimizer$param_groups)
  x <- unlist_numbers(x)
  if (!is.numeric(x) || anyNA(x) || !length(x) %in% c(1L, n)) {
    rule <- if (n == 1L) "one number" else sprintf("one number or %d (one per parameter group)", n)
    abort(sprintf("`%s` must be %s, got %s.", name, rule, describe(x)), class = "value_error")
  }
  rep_len(as.double(x), n)
}

# The groups' cycle bounds (PyTorch's OneCycleLR.__init__): initial, max and min rates, and the
# momentum (or Adam's first beta) bounds, starting at max_momentum.
one_cycle_groups <- function(optimizer, max_lr, div_factor, final_div_factor, momentum_key,
                             base_momentum, max_momentum) {
  n <- length(optimizer$param_groups)
  max_lrs <- per_group(max_lr, "max_lr", optimizer)
  max_momentums <- per_group(max_momentum, "max_momentum", optimizer)
  base_momentums <- per_group(base_momentum, "base_momentum", optimizer)
  for (i in seq_len(n)) {
    optimizer$param_groups[[i]]$initial_lr <- max_lrs[[i]] / div_factor
    optimizer$param_groups[[i]]$max_lr <- max_lrs[[i]]
    optimizer$param_groups[[i]]$min_lr <- max_lrs[[i]] / div_factor / final_div_factor
    if (!is.null(momentum_key)) {
      optimizer$param_groups[[i]]$max_momentum <- max_momentums[[i]]
      optimizer$param_groups[[i]]$base_momentum <- base_momentums[[i]]
      set_momentum(optimizer, i, momentum_key, max_momentums[[i]])
    }
  }
}

set_momentum <- function(optimizer, i, key, value) {
  if (key == "betas") {
    optimizer$param_groups[[i]]$betas[[1L]] <- value
  } else {
    optimizer$param_groups[[i]]$momentum <- value
  }
}

# PyTorch's OneCycleLR.get_lr(): each group's rate (and momentum) annealed within its phase.
one_cycle_lrs <- function(scheduler) {
  step <- scheduler$last_epoch
  if (step > scheduler$total_steps) {
    abort(sprintf("Tried to step %d times. The specified number of total steps is %d",
                  step, as.integer(scheduler$total_steps)), class = "value_error")
  }
  groups <- scheduler$optimizer$param_groups
  vapply(seq_along(groups), function(i) {
    group <- groups[[i]]
    start_step <- 0
    phases <- scheduler$phases
    for (k in seq_along(phases)) {
      phase <- phases[[k]]
      if (step <= phase$end || k == length(phases)) break
      start_step <- phase$end
    }
    pct <- (step - start_step) / (phase$end - start_step)
    if (!is.null(scheduler$momentum_key)) {
      set_momentum(scheduler$optimizer, i, scheduler$momentum_key,
                   scheduler$anneal(group[[phase$start_m]], group[[phase$end_m]], pct))
    }
    scheduler$anneal(group[[phase$start_lr]], group[[phase$end_lr]], pct)
  }, 0)
}

#' @rdname lr_schedulers
#' @export
lr_reduce_on_plateau <- lr_scheduler(
  "lr_reduce_on_plateau",
  # No first step: the rates change only on a metric (PyTorch's ReduceLROnPlateau).
  initialize = function(optimizer, mode = "min", factor = 0.1, patience = 10, threshold = 1e-4,
                        threshold_mode = "rel", cooldown = 0, min_lr = 0, eps = 1e-8,
                        verbose = FALSE) {
    check_optimizer(optimizer)
    if (arg_number(factor, "factor") >= 1) abort("Factor should be < 1.0.", class = "value_error")
    self$optimizer <- optimizer
    self$mode <- arg_choice(mode, "mode", c("min", "max"))
    self$factor <- factor
    self$patience <- arg_number(patience, "patience")
    self$threshold <- arg_number(threshold, "threshold")
    self$threshold_mode <- arg_choice(threshold_mode, "threshold_mode", c("rel", "abs"))
    self$cooldown <- arg_number(cooldown, "cooldown")
    self$min_lrs <- per_group(min_lr, "min_lr", optimizer)
    # PyTorch's default_min_lr: one min_lr is widened to groups added later; one per group is not.
    self$default_min_lr <- if (is.numeric(min_lr) && length(min_lr) == 1L) self$min_lrs[[1L]]
    self$eps <- arg_number(eps, "eps")
    self$verbose <- verbose
    self$best <- if (self$mode == "min") Inf else -Inf
    self$num_bad_epochs <- 0
    self$cooldown_counter <- 0
    self$last_epoch <- 0L
    self$.last_lr <- group_lrs(self)
  },
  step = function(metrics) {
    current <- as.numeric(metrics)
    # The new counts are worked out first and kept only once the rates are set: an error (a
    # min_lr per group that does not match the groups) changes nothing.
    best <- self$best
    bad <- self$num_bad_epochs
    cooldown <- self$cooldown_counter
    # A NaN metric compares as not better (PyTorch's): a bad epoch.
    if (isTRUE(self$.is_better(current, best))) {
      best <- current
      bad <- 0
    } else {
      bad <- bad + 1
    }
    if (cooldown > 0) {
      cooldown <- cooldown - 1
      bad <- 0
    }
    if (bad > self$patience) {
      self$min_lrs <- plateau_min_lrs(self)
      reduce_lrs(self$optimizer, self$factor, self$min_lrs, self$eps, self$verbose)
      cooldown <- self$cooldown
      bad <- 0
    }
    self$last_epoch <- self$last_epoch + 1L
    self$best <- best
    self$num_bad_epochs <- bad
    self$cooldown_counter <- cooldown
    self$.last_lr <- group_lrs(self)
    invisible(self)
  },
  .is_better = function(a, best) {
    threshold <- self$threshold
    if (self$threshold_mode == "rel") {
      if (self$mode == "min") a < best * (1 - threshold) else a > best * (threshold + 1)
    } else {
      if (self$mode == "min") a < best - threshold else a > best + threshold
    }
  }
)

# nolint end

# lr_reduce_on_plateau's min_lrs for the optimizer's groups now (groups may have been added since
# it was made): PyTorch's _reduce_lr's rule.
plateau_min_lrs <- function(self) {
  n <- length(self$optimizer$param_groups)
  if (length(self$min_lrs) == n) {
    return(self$min_lrs)
  }
  if (is.null(self$default_min_lr)) {
    abort(sprintf(paste0("`min_lr` was given per parameter group (%d), but the optimizer now has ",
                         "%d groups: set the scheduler's `min_lrs` to one per group."),
                  length(self$min_lrs), n), class = "runtime_error")  # PyTorch's RuntimeError
  }
  rep(self$default_min_lr, n)
}

# PyTorch's ReduceLROnPlateau._reduce_lr.
reduce_lrs <- function(optimizer, factor, min_lrs, eps, verbose) {
  verbose <- arg_flag(verbose, "verbose")
  for (i in seq_along(optimizer$param_groups)) {
    old <- optimizer$param_groups[[i]]$lr
    new <- max(old * factor, min_lrs[[i]])
    if (old - new > eps) {
      optimizer$param_groups[[i]]$lr <- new
      if (verbose) {
        message(sprintf("Reducing learning rate of group %d to %.4e.", i, new))
      }
    }
  }
}
