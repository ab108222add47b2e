#' @include nnf.R
NULL

# R torch's distributions (torch.distributions' twins): R6 classes over libtorch's ops. The
# sampling ops are PyTorch's, called in PyTorch's order, so that torch_manual_seed(k) gives the
# draws torch.distributions gives after torch.manual_seed(k). R torch's conventions hold: a
# number given as a parameter is a 1-element tensor (batch_shape 1), event_shape is NULL for
# univariate distributions, and categorical values are 1-based.

# ---- helpers ---------------------------------------------------------------------------------

dist_error <- function(message, call = NULL) abort(message, call, class = "value_error")

# A shape given by the user (NULL, list(), a vector, a tensor): an integer vector.
as_shape <- function(x, name = "sample_shape") {
  if (inherits(x, "torch_tensor")) x <- as_array(x)
  if (is.list(x)) x <- unlist(x)
  if (is.null(x)) {
    return(integer())
  }
  if (!is_sizes(x)) {
    dist_error(sprintf("`%s` must be non-negative whole numbers, got %s.", name, describe(x)))
  }
  as.integer(x)
}
is_sizes <- function(x) is.numeric(x) && !anyNA(x) && all(x == trunc(x) & x >= 0)

# A parameter as a tensor: numbers become tensors of the first tensor parameter's dtype and
# device (the default dtype when there is none), as R torch's broadcast_all() does; then all are
# broadcast to one shape.
broadcast_params <- function(values, names) {
  is_tensor <- vapply(values, inherits, TRUE, what = "torch_tensor")
  for (i in which(!is_tensor)) {
    if (!is_numbers(values[[i]])) {
      dist_error(sprintf("`%s` must be a tensor or numbers, got %s.", names[[i]],
                         describe(values[[i]])))
    }
  }
  like <- if (any(is_tensor)) values[[which(is_tensor)[[1L]]]]
  dtype <- if (is.null(like)) torch_get_default_dtype() else like$dtype
  device <- if (!is.null(like)) like$device
  values[!is_tensor] <- lapply(values[!is_tensor], function(v) {
    torch_tensor(v, dtype = dtype, device = device)
  })
  if (length(values) == 1L) values else torch_broadcast_tensors(values)
}
is_numbers <- function(v) (is.numeric(v) || is.logical(v)) && length(v) && !anyNA(v)

# A parameter R torch takes as a tensor (categorical, multivariate normal); numbers (a vector,
# a matrix) become a tensor of the default dtype.
arg_tensor <- function(x, name) {
  if (is.numeric(x) && length(x) && !anyNA(x)) {
    return(torch_tensor(x, dtype = torch_get_default_dtype()))
  }
  if (!inherits(x, "torch_tensor")) {
    dist_error(sprintf("`%s` must be a tensor, got %s.", name, describe(x)))
  }
  x
}

# A value to score (log_prob, cdf): numbers become a tensor like the parameter `like`.
as_value <- function(value, like) {
  if (inherits(value, "torch_tensor")) {
    return(value)
  }
  if (!(is.numeric(value) || is.logical(value)) || !length(value)) {
    dist_error(sprintf("`value` must be a tensor or numbers, got %s.", describe(value)))
  }
  torch_tensor(value, dtype = like$dtype, device = like$device)
}

shape_str <- function(x) if (length(x)) paste(x, collapse = "x") else "()"

# N(0, 1) draws as torch.distributions' _standard_normal(): normal_() on new memory.
standard_normal <- function(shape, dtype, device) {
  torch_empty(shape, dtype = dtype, device = device)$normal_()
}

clamp_probs <- function(probs) {
  eps <- torch_finfo(probs$dtype)$eps
  probs$clamp(min = eps, max = 1 - eps)
}

# Probabilities <-> logits; binary: log odds, otherwise: log probabilities along the last dim.
probs_to_logits <- function(probs, is_binary = FALSE) {
  p <- clamp_probs(probs)
  if (is_binary) torch_log(p) - torch_log1p(-p) else torch_log(p)
}
logits_to_probs <- function(logits, is_binary = FALSE) {
  if (is_binary) torch_sigmoid(logits) else nnf_softmax(logits, dim = -1)
}

# ---- constraints -----------------------------------------------------------------------------

# A region a parameter or value must lie in; $check() gives a bool tensor, one per event.
Constraint <- R6::R6Class( # nolint: object_name_linter. (R torch's name)
  "torch_Constraint",
  lock_objects = FALSE,
  public = list(
    event_dim = 0L,
    # What the error messages say the rule is.
    rule = "",
    check = function(value) {
      abort("`check()` is not implemented for this constraint.", class = "not_implemented_error")
    },
    print = function(...) {
      cat(class(self)[[1L]], if (nzchar(self$rule)) paste0(" (", self$rule, ")"), "\n", sep = "")
      invisible(self)
    }
  )
)

constraint_class <- function(name, rule, check, fields = list(), init = NULL, event_dim = 0L) {
  public <- c(list(event_dim = event_dim, rule = rule, check = check), fields)
  if (!is.null(init)) public$initialize <- init
  R6::R6Class(name, inherit = Constraint, lock_objects = FALSE, public = public)
}

.Dependent <- constraint_class( # nolint: object_name_linter. (R torch's name)
  "torch_Dependent", "depends on other parameters", function(value) {
    dist_error("Cannot determine validity of a dependent constraint.")
  }
)
is_dependent <- function(x) inherits(x, "torch_Dependent")

.Real <- constraint_class( # nolint: object_name_linter. (R torch's name)
  "torch_Real", "real, not NaN", function(value) value == value
)
.Boolean <- constraint_class( # nolint: object_name_linter. (R torch's name)
  "torch_Boolean", "0 or 1", function(value) (value == 0) | (value == 1)
)

bound_init2 <- function(lower_bound, upper_bound) {
  self$lower_bound <- lower_bound
  self$upper_bound <- upper_bound
  self$rule <- sprintf(self$rule, format(lower_bound), format(upper_bound))
}

.GreaterThan <- constraint_class( # nolint: object_name_linter. (R torch's name)
  "torch_GreaterThan", "> %s", function(value) value > self$lower_bound,
  list(lower_bound = NULL), function(lower_bound) {
    self$lower_bound <- lower_bound
    self$rule <- sprintf(self$rule, format(lower_bound))
  }
)
.GreaterThanEq <- constraint_class( # nolint: object_name_linter. (R torch's name)
  "torch_GreaterThanEq", ">= %s", function(value) value >= self$lower_bound,
  list(lower_bound = NULL), function(lower_bound) {
    self$lower_bound <- lower_bound
    self$rule <- sprintf(self$rule, format(lower_bound))
  }
)
.LessThan <- constraint_class( # nolint: object_name_linter. (R torch's name)
  "torch_LessThan", "< %s", function(value) value < self$upper_bound,
  list(upper_bound = NULL), function(upper_bound) {
    self$upper_bound <- upper_bound
    self$rule <- sprintf(self$rule, format(upper_bound))
  }
)
.Interval <- constraint_class( # nolint: object_name_linter. (R torch's name)
  "torch_Interval", "in [%s, %s]",
  function(value) (value >= self$lower_bound) & (value <= self$upper_bound),
  list(lower_bound = NULL, upper_bound = NULL), bound_init2
)
.HalfOpenInterval <- constraint_class( # nolint: object_name_linter. (R torch's name)
  "torch_HalfOpenInterval", "in [%s, %s)",
  function(value) (value >= self$lower_bound) & (value < self$upper_bound),
  list(lower_bound = NULL, upper_bound = NULL), bound_init2
)
.IntegerGreaterThan <- constraint_class( # nolint: object_name_linter. (R torch's name)
  "torch_IntegerGreaterThan", "whole numbers >= %s",
  function(value) (value %% 1 == 0) & (value >= self$lower_bound),
  list(lower_bound = NULL), function(lower_bound) {
    self$lower_bound <- lower_bound
    self$rule <- sprintf(self$rule, format(lower_bound))
  }
)
.IntegerInterval <- constraint_class( # nolint: object_name_linter. (R torch's name)
  "torch_IntegerInterval", "whole numbers in [%s, %s]",
  function(value) (value %% 1 == 0) & (value >= self$lower_bound) & (value <= self$upper_bound),
  list(lower_bound = NULL, upper_bound = NULL), bound_init2
)

# A constraint on the last `reinterpreted_batch_ndims` dims taken together: every element holds.
.IndependentConstraint <- constraint_class( # nolint: object_name_linter. (R torch's name)
  "torch_IndependentConstraint", "",
  function(value) {
    result <- self$base_constraint$check(value)
    n <- self$reinterpreted_batch_ndims
    if (result$dim() < n) {
      dist_error(sprintf("The value must have at least %d dimensions, got %d.",
                         self$base_constraint$event_dim + n, value$dim()))
    }
    keep <- utils::head(result$shape, result$dim() - n)
    result$reshape(c(keep, -1L))$all(dim = -1)
  },
  list(base_constraint = NULL, reinterpreted_batch_ndims = NULL),
  function(base_constraint, reinterpreted_batch_ndims) {
    self$base_constraint <- base_constraint
    self$reinterpreted_batch_ndims <- reinterpreted_batch_ndims
    self$event_dim <- base_constraint$event_dim + reinterpreted_batch_ndims
    self$rule <- base_constraint$rule
  }
)

# Positive definite matrices: symmetric (PyTorch's first test: a Cholesky factorization reads the
# lower triangle only, so [[2, 5], [0, 2]] passed), and a Cholesky factorization exists. R torch
# keeps a leading dim of 1.
.PositiveDefinite <- constraint_class( # nolint: object_name_linter. (R torch's name)
  "torch_PositiveDefinite", "positive definite",
  function(value) {
    symmetric <- torch_isclose(value, value$transpose(-2L, -1L), atol = 1e-6)$all(-1L)$all(-1L)
    if (!as.logical(symmetric$all()$item())) {
      return(symmetric$unsqueeze(1L))
    }
    torch_linalg_cholesky_ex(value)[[2L]]$eq(0)$unsqueeze(1L)
  },
  event_dim = 2L
)
# Lower triangular with a positive diagonal.
.LowerCholesky <- constraint_class( # nolint: object_name_linter. (R torch's name)
  "torch_LowerCholesky", "lower triangular with a positive diagonal",
  function(value) {
    batch <- utils::head(value$shape, -2L)
    lower <- (value$tril() == value)$reshape(c(batch, -1L))$all(dim = -1)
    positive <- (value$diagonal(dim1 = -2, dim2 = -1) > 0)$all(dim = -1)
    lower & positive
  },
  event_dim = 2L
)
# Non-negative and summing to 1 along the last dim.
.Simplex <- constraint_class( # nolint: object_name_linter. (R torch's name)
  "torch_Simplex", "non-negative and summing to 1 along the last dimension",
  function(value) torch_all(value >= 0, dim = -1) & ((value$sum(dim = -1) - 1)$abs() < 1e-6),
  event_dim = 1L
)

constraint_dependent <- .Dependent$new()
constraint_boolean <- .Boolean$new()
constraint_real <- .Real$new()
constraint_real_vector <- .IndependentConstraint$new(constraint_real, 1L)
constraint_positive <- .GreaterThan$new(0)
constraint_nonnegative <- .GreaterThanEq$new(0)
constraint_nonnegative_integer <- .IntegerGreaterThan$new(0)
constraint_positive_integer <- .IntegerGreaterThan$new(1)
constraint_unit_interval <- .Interval$new(0, 1)
constraint_positive_definite <- .PositiveDefinite$new()
constraint_lower_cholesky <- .LowerCholesky$new()
constraint_simplex <- .Simplex$new()
# Generators: constraint_less_than$new(1), constraint_interval$new(0, 1), ...
constraint_greater_than <- .GreaterThan
constraint_greater_than_eq <- .GreaterThanEq
constraint_less_than <- .LessThan
constraint_interval <- .Interval
constraint_half_open_interval <- .HalfOpenInterval
constraint_integer_interval <- .IntegerInterval

# ---- base classes ----------------------------------------------------------------------------

Distribution <- R6::R6Class( # nolint: object_name_linter.
  "torch_Distribution",
  lock_objects = FALSE,
  public = list(
    .validate_args = FALSE,
    has_rsample = FALSE,
    has_enumerate_support = FALSE,
    initialize = function(batch_shape = NULL, event_shape = NULL, validate_args = NULL) {
      private$.batch_shape <- as_shape(batch_shape, "batch_shape")
      private$.event_shape <- if (length(event_shape)) as_shape(event_shape, "event_shape")
      if (!is.null(validate_args)) {
        self$.validate_args <- arg_flag(validate_args, "validate_args")
      }
      if (self$.validate_args) private$.check_params()
    },
    expand = function(batch_shape, .instance = NULL) private$.not_implemented("expand"),
    sample = function(sample_shape = NULL) {
      with_no_grad(self$rsample(sample_shape))
    },
    rsample = function(sample_shape = NULL) {
      abort(sprintf("%s is not reparameterizable: it has no `rsample()`; use `sample()`.",
                    private$.name()), class = c("not_implemented_error", "value_error"))
    },
    log_prob = function(value) private$.not_implemented("log_prob"),
    cdf = function(value) private$.not_implemented("cdf"),
    icdf = function(value) private$.not_implemented("icdf"),
    enumerate_support = function(expand = TRUE) private$.not_implemented("enumerate_support"),
    entropy = function() private$.not_implemented("entropy"),
    perplexity = function() torch_exp(self$entropy()),
    .extended_shape = function(sample_shape = NULL) {
      c(as_shape(sample_shape), self$batch_shape, self$event_shape)
    },
    # The checks validate_args = TRUE adds to log_prob() and cdf(): a tensor whose right-most
    # dims are event_shape, broadcastable with batch_shape + event_shape, within the support.
    .validate_sample = function(value) {
      if (!inherits(value, "torch_tensor")) {
        dist_error("`value` must be a tensor.")
      }
      actual <- value$shape
      event <- self$event_shape
      n_event <- length(event)
      if (length(actual) < n_event || !identical(as.integer(utils::tail(actual, n_event)),
                                                 as.integer(event))) {
        dist_error(sprintf("The right-most dims of `value` (shape %s) must be event_shape %s.",
                           shape_str(actual), shape_str(event)))
      }
      expected <- c(self$batch_shape, event)
      k <- min(length(actual), length(expected))
      a <- utils::tail(actual, k)
      e <- utils::tail(expected, k)
      if (any(a != 1 & e != 1 & a != e)) {
        dist_error(sprintf(
          "`value` (shape %s) is not broadcastable with batch_shape + event_shape (%s).",
          shape_str(actual), shape_str(expected)
        ))
      }
      if (!as_array(self$support$check(value)$all())) {
        dist_error(sprintf("`value` must be within the support of %s (%s).", private$.name(),
                           self$support$rule))
      }
      invisible(value)
    },
    print = function(...) {
      params <- names(private$.arg_constraints)
      shown <- character()
      for (p in params) {
        if (!private$.has_param(p)) next
        v <- tryCatch(self[[p]], error = function(e) NULL)
        if (!inherits(v, "torch_tensor")) next
        txt <- if (v$numel() <= 6L) {
          paste(format(signif(as.vector(as_array(v$detach()$cpu())), 4L)), collapse = " ")
        } else {
          paste0("a tensor of shape ", shape_str(v$shape))
        }
        shown <- c(shown, paste0(p, ": ", txt))
      }
      cat(class(self)[[1L]], " (", paste(shown, collapse = ", "), ")\n", sep = "")
      invisible(self)
    }
  ),
  active = list(
    batch_shape = function() private$.batch_shape,
    event_shape = function() private$.event_shape,
    arg_constraints = function() private$.arg_constraints,
    support = function() private$.support,
    mean = function() private$.not_implemented("mean"),
    variance = function() private$.not_implemented("variance"),
    stddev = function() self$variance$sqrt()
  ),
  private = list(
    .batch_shape = integer(),
    .event_shape = NULL,
    .arg_constraints = list(),
    .support = NULL,
    .name = function() sub("^torch_", "", class(self)[[1L]]),
    .not_implemented = function(what) {
      abort(sprintf("`%s` is not implemented for %s.", what, private$.name()),
            class = "not_implemented_error")
    },
    # validate_args = TRUE: each parameter given must satisfy its constraint (PyTorch's check).
    .check_params = function() {
      for (p in names(private$.arg_constraints)) {
        constraint <- private$.arg_constraints[[p]]
        if (is_dependent(constraint) || !private$.has_param(p)) next
        v <- self[[p]]
        if (!inherits(v, "torch_tensor")) next
        if (!as_array(constraint$check(v)$all())) {
          dist_error(sprintf("`%s` of %s must be %s; some of its values are not.", p,
                             private$.name(), constraint$rule))
        }
      }
    },
    .has_param = function(p) TRUE,
    # A copy of this distribution with its batch dims expanded: `params` are the expanded
    # parameters, given to the class's own constructor (which checks nothing again).
    .expanded = function(generator, params) {
      new <- do.call(generator$new, c(params, list(validate_args = FALSE)))
      new$.validate_args <- self$.validate_args
      new
    }
  )
)

# Exponential family members: the generic entropy by the Bregman divergence of the log
# normalizer (Nielsen & Nock), PyTorch's ExponentialFamily.entropy().
ExponentialFamily <- R6::R6Class( # nolint: object_name_linter.
  "torch_ExponentialFamily",
  inherit = Distribution,
  lock_objects = FALSE,
  public = list(
    entropy = function() {
      nparams <- lapply(private$.natural_params(), function(x) x$detach()$requires_grad_())
      lg_normal <- do.call(private$.log_normalizer, nparams)
      gradients <- autograd_grad(lg_normal$sum(), nparams, create_graph = TRUE)
      result <- -private$.mean_carrier_measure() + lg_normal
      for (i in seq_along(nparams)) {
        result <- result - nparams[[i]] * gradients[[i]]
      }
      result
    }
  ),
  private = list(
    .natural_params = function() private$.not_implemented(".natural_params"),
    .log_normalizer = function(...) private$.not_implemented(".log_normalizer"),
    .mean_carrier_measure = function() private$.not_implemented(".mean_carrier_measure")
  )
)
