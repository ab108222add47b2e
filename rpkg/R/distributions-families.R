#' @include distributions.R
NULL

# The distributions of R torch's article and tests, each as torch.distributions computes it.

Normal <- R6::R6Class( # nolint: object_name_linter.
  "torch_Normal",
  inherit = ExponentialFamily,
  lock_objects = FALSE,
  public = list(
    has_rsample = TRUE,
    loc = NULL,
    scale = NULL,
    initialize = function(loc, scale, validate_args = NULL) {
      p <- broadcast_params(list(loc, scale), c("loc", "scale"))
      self$loc <- p[[1L]]
      self$scale <- p[[2L]]
      super$initialize(self$loc$shape, validate_args = validate_args)
    },
    expand = function(batch_shape, .instance = NULL) {
      batch_shape <- as_shape(batch_shape, "batch_shape")
      private$.expanded(Normal, list(self$loc$expand(batch_shape), self$scale$expand(batch_shape)))
    },
    sample = function(sample_shape = NULL) {
      shape <- self$.extended_shape(sample_shape)
      with_no_grad(torch_normal(self$loc$expand(shape), self$scale$expand(shape)))
    },
    rsample = function(sample_shape = NULL) {
      shape <- self$.extended_shape(sample_shape)
      eps <- standard_normal(shape, self$loc$dtype, self$loc$device)
      self$loc + eps * self$scale
    },
    log_prob = function(value) {
      value <- as_value(value, self$loc)
      if (self$.validate_args) self$.validate_sample(value)
      var <- self$scale^2
      -((value - self$loc)^2) / (2 * var) - self$scale$log() - log(sqrt(2 * pi))
    },
    cdf = function(value) {
      value <- as_value(value, self$loc)
      if (self$.validate_args) self$.validate_sample(value)
      0.5 * (1 + torch_erf((value - self$loc) * self$scale$reciprocal() / sqrt(2)))
    },
    icdf = function(value) {
      value <- as_value(value, self$loc)
      self$loc + self$scale * torch_erfinv(2 * value - 1) * sqrt(2)
    },
    entropy = function() 0.5 + 0.5 * log(2 * pi) + torch_log(self$scale)
  ),
  active = list(
    mean = function() self$loc,
    stddev = function() self$scale,
    variance = function() self$scale$pow(2)
  ),
  private = list(
    .arg_constraints = list(loc = constraint_real, scale = constraint_positive),
    .support = constraint_real,
    .natural_params = function() list(self$loc / self$scale$pow(2), -0.5 * self$scale$pow(-2)),
    .log_normalizer = function(x, y) -0.25 * x$pow(2) / y + 0.5 * torch_log(-pi / y),
    .mean_carrier_measure = function() 0
  )
)

Bernoulli <- R6::R6Class( # nolint: object_name_linter.
  "torch_Bernoulli",
  inherit = ExponentialFamily,
  lock_objects = FALSE,
  public = list(
    has_enumerate_support = TRUE,
    initialize = function(probs = NULL, logits = NULL, validate_args = NULL) {
      if (is.null(probs) == is.null(logits)) {
        dist_error("Exactly one of `probs` or `logits` must be given.")
      }
      private$.given <- if (is.null(probs)) "logits" else "probs"
      if (!is.null(probs)) {
        private$.probs <- broadcast_params(list(probs), "probs")[[1L]]
      } else {
        private$.logits <- broadcast_params(list(logits), "logits")[[1L]]
      }
      super$initialize(private$.param()$shape, validate_args = validate_args)
    },
    expand = function(batch_shape, .instance = NULL) {
      batch_shape <- as_shape(batch_shape, "batch_shape")
      params <- if (!is.null(private$.probs)) {
        list(probs = private$.probs$expand(batch_shape))
      } else {
        list(logits = private$.logits$expand(batch_shape))
      }
      private$.expanded(Bernoulli, params)
    },
    sample = function(sample_shape = NULL) {
      shape <- self$.extended_shape(sample_shape)
      with_no_grad(torch_bernoulli(self$probs$expand(shape)))
    },
    log_prob = function(value) {
      value <- as_value(value, private$.param())
      if (self$.validate_args) self$.validate_sample(value)
      b <- torch_broadcast_tensors(list(self$logits, value))
      -nnf_binary_cross_entropy_with_logits(b[[1L]], b[[2L]], reduction = "none")
    },
    entropy = function() {
      nnf_binary_cross_entropy_with_logits(self$logits, self$probs, reduction = "none")
    },
    enumerate_support = function(expand = TRUE) {
      p <- private$.param()
      values <- torch_tensor(c(0, 1), dtype = p$dtype, device = p$device)
      values <- values$view(c(-1L, rep(1L, length(self$batch_shape))))
      if (arg_flag(expand, "expand")) values <- values$expand(c(-1L, self$batch_shape))
      values
    }
  ),
  active = list(
    # The parameter not given is computed once from the other (PyTorch's lazy_property).
    probs = function() {
      if (is.null(private$.probs)) private$.probs <- logits_to_probs(private$.logits, TRUE)
      private$.probs
    },
    logits = function() {
      if (is.null(private$.logits)) private$.logits <- probs_to_logits(private$.probs, TRUE)
      private$.logits
    },
    param_shape = function() private$.param()$shape,
    mean = function() self$probs,
    variance = function() self$probs * (1 - self$probs)
  ),
  private = list(
    .probs = NULL,
    .logits = NULL,
    .given = NULL,
    .param = function() if (!is.null(private$.probs)) private$.probs else private$.logits,
    .has_param = function(p) p == private$.given,
    .arg_constraints = list(probs = constraint_unit_interval, logits = constraint_real),
    .support = constraint_boolean,
    .natural_params = function() list(torch_logit(self$probs)),
    .log_normalizer = function(x) torch_log1p(torch_exp(x)),
    .mean_carrier_measure = function() 0
  )
)

Categorical <- R6::R6Class( # nolint: object_name_linter.
  "torch_Categorical",
  inherit = Distribution,
  lock_objects = FALSE,
  public = list(
    has_enumerate_support = TRUE,
    initialize = function(probs = NULL, logits = NULL, validate_args = NULL) {
      if (is.null(probs) == is.null(logits)) {
        dist_error("Exactly one of `probs` or `logits` must be given.")
      }
      private$.given <- if (is.null(probs)) "logits" else "probs"
      if (!is.null(probs)) {
        probs <- arg_tensor(probs, "probs")
        if (probs$dim() < 1L) dist_error("`probs` must be at least one-dimensional.")
        # Normalized along the last dim, as PyTorch does.
        private$.probs <- probs / probs$sum(-1, keepdim = TRUE)
      } else {
        logits <- arg_tensor(logits, "logits")
        if (logits$dim() < 1L) dist_error("`logits` must be at least one-dimensional.")
        private$.logits <- logits - logits$logsumexp(dim = -1, keepdim = TRUE)
      }
      shape <- private$.param()$shape
      private$.num_events <- utils::tail(shape, 1L)
      super$initialize(utils::head(shape, -1L), validate_args = validate_args)
    },
    expand = function(batch_shape, .instance = NULL) {
      shape <- c(as_shape(batch_shape, "batch_shape"), private$.num_events)
      params <- if (!is.null(private$.probs)) {
        list(probs = private$.probs$expand(shape))
      } else {
        list(logits = private$.logits$expand(shape))
      }
      private$.expanded(Categorical, params)
    },
    # Values are 1-based (R torch's torch_multinomial()): PyTorch's draws plus 1.
    sample = function(sample_shape = NULL) {
      sample_shape <- as_shape(sample_shape)
      probs_2d <- self$probs$reshape(c(-1L, private$.num_events))
      draws <- torch_multinomial(probs_2d, prod(sample_shape), replacement = TRUE)$t()
      draws$reshape(self$.extended_shape(sample_shape))
    },
    log_prob = function(value) {
      # R numbers as they are (a long tensor of 1.5 was 1, past the support check), where the
      # probabilities are
      if (is.numeric(value)) value <- torch_tensor(value, device = self$logits$device)
      if (self$.validate_args) self$.validate_sample(value)
      value <- value$to(dtype = torch_long())$unsqueeze(-1)
      b <- torch_broadcast_tensors(list(value, self$logits))
      index <- b[[1L]][.., 1, drop = FALSE]
      b[[2L]]$gather(-1, index)$squeeze(-1)
    },
    entropy = function() {
      logits <- torch_clamp(self$logits, min = torch_finfo(self$logits$dtype)$min)
      -(logits * self$probs)$sum(-1)
    },
    enumerate_support = function(expand = TRUE) {
      values <- torch_tensor(seq_len(private$.num_events), dtype = torch_long(),
                             device = private$.param()$device)
      values <- values$view(c(-1L, rep(1L, length(self$batch_shape))))
      if (arg_flag(expand, "expand")) values <- values$expand(c(-1L, self$batch_shape))
      values
    }
  ),
  active = list(
    probs = function() {
      if (is.null(private$.probs)) private$.probs <- logits_to_probs(private$.logits)
      private$.probs
    },
    logits = function() {
      if (is.null(private$.logits)) private$.logits <- probs_to_logits(private$.probs)
      private$.logits
    },
    param_shape = function() private$.param()$shape,
    mean = function() {
      torch_full(self$.extended_shape(), NaN, dtype = self$probs$dtype, device = self$probs$device)
    },
    variance = function() {
      torch_full(self$.extended_shape(), NaN, dtype = self$probs$dtype, device = self$probs$device)
    },
    # 1..K along the last dim of the parameters.
    support = function() .IntegerInterval$new(1, private$.num_events)
  ),
  private = list(
    .probs = NULL,
    .logits = NULL,
    .given = NULL,
    .num_events = NULL,
    .param = function() if (!is.null(private$.probs)) private$.probs else private$.logits,
    .has_param = function(p) p == private$.given,
    .arg_constraints = list(probs = constraint_simplex, logits = constraint_real_vector)
  )
)

Gamma <- R6::R6Class( # nolint: object_name_linter.
  "torch_Gamma",
  inherit = ExponentialFamily,
  lock_objects = FALSE,
  public = list(
    has_rsample = TRUE,
    concentration = NULL,
    rate = NULL,
    initialize = function(concentration, rate, validate_args = NULL) {
      p <- broadcast_params(list(concentration, rate), c("concentration", "rate"))
      self$concentration <- p[[1L]]
      self$rate <- p[[2L]]
      super$initialize(self$concentration$shape, validate_args = validate_args)
    },
    expand = function(batch_shape, .instance = NULL) {
      batch_shape <- as_shape(batch_shape, "batch_shape")
      private$.expanded(Gamma, list(self$concentration$expand(batch_shape),
                                    self$rate$expand(batch_shape)))
    },
    # Differentiable in concentration through libtorch's _standard_gamma gradient.
    rsample = function(sample_shape = NULL) {
      shape <- self$.extended_shape(sample_shape)
      value <- torch__standard_gamma(self$concentration$expand(shape)) / self$rate$expand(shape)
      # In place on the same memory (as PyTorch): no draw is exactly 0.
      value$detach()$clamp_(min = torch_finfo(value$dtype)$tiny)
      value
    },
    log_prob = function(value) {
      value <- as_value(value, self$rate)
      if (self$.validate_args) self$.validate_sample(value)
      torch_xlogy(self$concentration, self$rate) +
        torch_xlogy(self$concentration - 1, value) -
        self$rate * value - torch_lgamma(self$concentration)
    },
    cdf = function(value) {
      value <- as_value(value, self$rate)
      if (self$.validate_args) self$.validate_sample(value)
      torch_special_gammainc(self$concentration, self$rate * value)
    },
    entropy = function() {
      self$concentration - torch_log(self$rate) + torch_lgamma(self$concentration) +
        (1 - self$concentration) * torch_digamma(self$concentration)
    }
  ),
  active = list(
    mean = function() self$concentration / self$rate,
    variance = function() self$concentration / self$rate$pow(2)
  ),
  private = list(
    .arg_constraints = list(concentration = constraint_positive, rate = constraint_positive),
    .support = constraint_nonnegative,
    .natural_params = function() list(self$concentration - 1, -self$rate),
    .log_normalizer = function(x, y) torch_lgamma(x + 1) + (x + 1) * torch_log(-y$reciprocal()),
    .mean_carrier_measure = function() 0
  )
)

Chi2 <- R6::R6Class( # nolint: object_name_linter.
  "torch_Chi2",
  inherit = Gamma,
  lock_objects = FALSE,
  public = list(
    initialize = function(df, validate_args = NULL) {
      df <- broadcast_params(list(df), "df")[[1L]]
      super$initialize(0.5 * df, 0.5, validate_args = validate_args)
    },
    expand = function(batch_shape, .instance = NULL) {
      batch_shape <- as_shape(batch_shape, "batch_shape")
      private$.expanded(Chi2, list(self$df$expand(batch_shape)))
    }
  ),
  active = list(
    df = function() self$concentration * 2
  ),
  private = list(
    .arg_constraints = list(df = constraint_positive)
  )
)

Poisson <- R6::R6Class( # nolint: object_name_linter.
  "torch_Poisson",
  inherit = ExponentialFamily,
  lock_objects = FALSE,
  public = list(
    rate = NULL,
    initialize = function(rate, validate_args = NULL) {
      self$rate <- broadcast_params(list(rate), "rate")[[1L]]
      super$initialize(self$rate$shape, validate_args = validate_args)
    },
    expand = function(batch_shape, .instance = NULL) {
      batch_shape <- as_shape(batch_shape, "batch_shape")
      private$.expanded(Poisson, list(self$rate$expand(batch_shape)))
    },
    sample = function(sample_shape = NULL) {
      shape <- self$.extended_shape(sample_shape)
      with_no_grad(torch_poisson(self$rate$expand(shape)))
    },
    log_prob = function(value) {
      value <- as_value(value, self$rate)
      if (self$.validate_args) self$.validate_sample(value)
      b <- torch_broadcast_tensors(list(self$rate, value))
      b[[2L]]$xlogy(b[[1L]]) - b[[1L]] - (b[[2L]] + 1)$lgamma()
    }
  ),
  active = list(
    mean = function() self$rate,
    variance = function() self$rate
  ),
  private = list(
    .arg_constraints = list(rate = constraint_nonnegative),
    .support = constraint_nonnegative_integer,
    .natural_params = function() list(torch_log(self$rate)),
    .log_normalizer = function(x) torch_exp(x)
  )
)

# L^-1 (x) squared and summed over the event dim, for a lower triangular L: the squared
# Mahalanobis distance. libtorch's triangular solve broadcasts L's batch dims over x's.
batch_mahalanobis <- function(l, x) {
  sol <- torch_linalg_solve_triangular(l, x$unsqueeze(-1), upper = FALSE)
  sol$squeeze(-1)$pow(2)$sum(-1)
}

# The lower Cholesky factor of P^-1, from the Cholesky factor of P with its order flipped.
precision_to_scale_tril <- function(p) {
  lf <- torch_linalg_cholesky(torch_flip(p, c(-2L, -1L)))
  l_inv <- torch_transpose(torch_flip(lf, c(-2L, -1L)), -2L, -1L)
  id <- torch_eye(utils::tail(p$shape, 1L), dtype = p$dtype, device = p$device)
  torch_linalg_solve_triangular(l_inv, id, upper = FALSE)
}

MultivariateNormal <- R6::R6Class( # nolint: object_name_linter.
  "torch_MultivariateNormal",
  inherit = Distribution,
  lock_objects = FALSE,
  public = list(
    has_rsample = TRUE,
    loc = NULL,
    .unbroadcasted_scale_tril = NULL,
    initialize = function(loc, covariance_matrix = NULL, precision_matrix = NULL,
                          scale_tril = NULL, validate_args = NULL) {
      loc <- arg_tensor(loc, "loc")
      if (loc$dim() < 1L) dist_error("`loc` must be at least one-dimensional.")
      given <- c(covariance_matrix = !is.null(covariance_matrix),
                 precision_matrix = !is.null(precision_matrix),
                 scale_tril = !is.null(scale_tril))
      if (sum(given) != 1L) {
        dist_error(paste("Exactly one of `covariance_matrix`, `precision_matrix` or",
                         "`scale_tril` must be given."))
      }
      which <- names(given)[given]
      m <- arg_tensor(list(covariance_matrix = covariance_matrix,
                           precision_matrix = precision_matrix,
                           scale_tril = scale_tril)[[which]], which)
      if (m$dim() < 2L) {
        dist_error(sprintf(
          "`%s` must be at least two-dimensional, with optional leading batch dimensions.", which
        ))
      }
      batch_shape <- torch_broadcast_shapes(utils::head(m$shape, -2L), utils::head(loc$shape, -1L))
      private[[paste0(".", which)]] <- m$expand(c(batch_shape, -1L, -1L))
      self$loc <- loc$expand(c(batch_shape, -1L))
      super$initialize(batch_shape, utils::tail(self$loc$shape, 1L),
                       validate_args = validate_args)
      self$.unbroadcasted_scale_tril <- switch(which,
        scale_tril = m,
        covariance_matrix = torch_linalg_cholesky(m),
        precision_matrix = precision_to_scale_tril(m)
      )
    },
    expand = function(batch_shape, .instance = NULL) {
      batch_shape <- as_shape(batch_shape, "batch_shape")
      n <- self$event_shape
      new <- MultivariateNormal$new(self$loc$expand(c(batch_shape, n)),
                                    scale_tril = self$.unbroadcasted_scale_tril,
                                    validate_args = FALSE)
      new$.validate_args <- self$.validate_args
      new
    },
    rsample = function(sample_shape = NULL) {
      shape <- self$.extended_shape(sample_shape)
      eps <- standard_normal(shape, self$loc$dtype, self$loc$device)
      l <- self$.unbroadcasted_scale_tril
      self$loc + torch_matmul(l, eps$unsqueeze(-1))$squeeze(-1)
    },
    log_prob = function(value) {
      value <- as_value(value, self$loc)
      if (self$.validate_args) self$.validate_sample(value)
      l <- self$.unbroadcasted_scale_tril
      m <- batch_mahalanobis(l, value - self$loc)
      half_log_det <- l$diagonal(dim1 = -2, dim2 = -1)$log()$sum(-1)
      -0.5 * (self$event_shape[[1L]] * log(2 * pi) + m) - half_log_det
    },
    entropy = function() {
      l <- self$.unbroadcasted_scale_tril
      half_log_det <- l$diagonal(dim1 = -2, dim2 = -1)$log()$sum(-1)
      h <- 0.5 * self$event_shape[[1L]] * (1 + log(2 * pi)) + half_log_det
      if (length(self$batch_shape)) h$expand(self$batch_shape) else h
    }
  ),
  active = list(
    scale_tril = function() {
      if (!is.null(private$.scale_tril)) return(private$.scale_tril)
      self$.unbroadcasted_scale_tril$expand(private$.matrix_shape())
    },
    covariance_matrix = function() {
      if (!is.null(private$.covariance_matrix)) return(private$.covariance_matrix)
      l <- self$.unbroadcasted_scale_tril
      torch_matmul(l, l$transpose(-1, -2))$expand(private$.matrix_shape())
    },
    precision_matrix = function() {
      if (!is.null(private$.precision_matrix)) return(private$.precision_matrix)
      torch_cholesky_inverse(self$.unbroadcasted_scale_tril)$expand(private$.matrix_shape())
    },
    mean = function() self$loc,
    variance = function() {
      self$.unbroadcasted_scale_tril$pow(2)$sum(-1)$expand(c(self$batch_shape, self$event_shape))
    }
  ),
  private = list(
    .scale_tril = NULL,
    .covariance_matrix = NULL,
    .precision_matrix = NULL,
    .matrix_shape = function() c(self$batch_shape, self$event_shape, self$event_shape),
    .has_param = function(p) p == "loc" || !is.null(private[[paste0(".", p)]]),
    .arg_constraints = list(
      loc = constraint_real_vector,
      covariance_matrix = constraint_positive_definite,
      precision_matrix = constraint_positive_definite,
      scale_tril = constraint_lower_cholesky
    ),
    .support = constraint_real_vector
  )
)

MixtureSameFamily <- R6::R6Class( # nolint: object_name_linter.
  "torch_MixtureSameFamily",
  inherit = Distribution,
  lock_objects = FALSE,
  public = list(
    initialize = function(mixture_distribution, component_distribution, validate_args = NULL) {
      if (!inherits(mixture_distribution, "torch_Categorical")) {
        dist_error(sprintf("`mixture_distribution` must be a distr_categorical(), got %s.",
                           describe(mixture_distribution)))
      }
      if (!inherits(component_distribution, "torch_Distribution")) {
        dist_error(sprintf("`component_distribution` must be a distribution, got %s.",
                           describe(component_distribution)))
      }
      private$.mixture <- mixture_distribution
      private$.component <- component_distribution
      mdbs <- mixture_distribution$batch_shape
      cbs <- component_distribution$batch_shape
      if (!length(cbs)) {
        dist_error("`component_distribution` must have a batch dimension indexing components.")
      }
      cdbs <- utils::head(cbs, -1L)
      k <- min(length(mdbs), length(cdbs))
      a <- utils::tail(mdbs, k)
      b <- utils::tail(cdbs, k)
      if (any(a != 1 & b != 1 & a != b)) {
        dist_error(sprintf(paste(
          "`mixture_distribution`'s batch_shape (%s) must be compatible with",
          "`component_distribution`'s batch_shape less its last dim (%s)."
        ), shape_str(mdbs), shape_str(cdbs)))
      }
      km <- utils::tail(mixture_distribution$logits$shape, 1L)
      kc <- utils::tail(cbs, 1L)
      if (km != kc) {
        dist_error(sprintf(paste(
          "`mixture_distribution` has %d components, but the last dim of",
          "`component_distribution`'s batch_shape is %d."
        ), km, kc))
      }
      private$.num_component <- km
      event_shape <- component_distribution$event_shape
      private$.event_ndims <- length(event_shape)
      super$initialize(cdbs, event_shape, validate_args = validate_args)
    },
    expand = function(batch_shape, .instance = NULL) {
      batch_shape <- as_shape(batch_shape, "batch_shape")
      new <- MixtureSameFamily$new(
        private$.mixture$expand(batch_shape),
        private$.component$expand(c(batch_shape, private$.num_component)),
        validate_args = FALSE
      )
      new$.validate_args <- self$.validate_args
      new
    },
    cdf = function(value) {
      value <- private$.pad(as_value(value, private$.mixture$probs))
      cdf_x <- private$.component$cdf(value)
      torch_sum(cdf_x * private$.mixture$probs, dim = -1)
    },
    log_prob = function(value) {
      value <- as_value(value, private$.mixture$probs)
      if (self$.validate_args) self$.validate_sample(value)
      log_prob_x <- private$.component$log_prob(private$.pad(value))
      log_mix_prob <- torch_log_softmax(private$.mixture$logits, dim = -1)
      torch_logsumexp(log_prob_x + log_mix_prob, dim = -1)
    },
    # PyTorch's order of draws: the component indices first, then every component's sample.
    sample = function(sample_shape = NULL) {
      sample_shape <- as_shape(sample_shape)
      with_no_grad({
        gather_dim <- length(sample_shape) + length(self$batch_shape) + 1L
        es <- self$event_shape
        mix_sample <- private$.mixture$sample(sample_shape)
        mix_shape <- mix_sample$shape
        comp_samples <- private$.component$sample(sample_shape)
        index <- mix_sample$reshape(c(mix_shape, rep(1L, length(es) + 1L)))
        index <- index$`repeat`(c(rep(1L, length(mix_shape)), 1L, es))
        torch_gather(comp_samples, gather_dim, index)$squeeze(gather_dim)
      })
    }
  ),
  active = list(
    mixture_distribution = function() private$.mixture,
    component_distribution = function() private$.component,
    support = function() private$.component$support,
    mean = function() {
      probs <- private$.pad_mixture_dims(private$.mixture$probs)
      torch_sum(probs * private$.component$mean, dim = -1 - private$.event_ndims)
    },
    variance = function() {
      probs <- private$.pad_mixture_dims(private$.mixture$probs)
      d <- -1 - private$.event_ndims
      mean_cond_var <- torch_sum(probs * private$.component$variance, dim = d)
      var_cond_mean <- torch_sum(
        probs * (private$.component$mean - private$.pad(self$mean))$pow(2), dim = d
      )
      mean_cond_var + var_cond_mean
    }
  ),
  private = list(
    .mixture = NULL,
    .component = NULL,
    .num_component = NULL,
    .event_ndims = 0L,
    .pad = function(x) x$unsqueeze(-1 - private$.event_ndims),
    .pad_mixture_dims = function(x) {
      dist_ndims <- length(self$batch_shape)
      cat_ndims <- length(private$.mixture$batch_shape)
      pad <- if (cat_ndims == 1L) 0L else dist_ndims - cat_ndims
      xs <- x$shape
      x$reshape(c(utils::head(xs, -1L), rep(1L, pad), utils::tail(xs, 1L),
                  rep(1L, private$.event_ndims)))
    }
  )
)

#' Probability distributions
#'
#' R torch's distributions (PyTorch's `torch.distributions`): objects with methods to draw
#' samples and to score values. Sampling calls libtorch's generators in PyTorch's order, so that
#' after `torch_manual_seed(k)` the draws are those of `torch.distributions` after
#' `torch.manual_seed(k)`. A number given as a parameter becomes a 1-element tensor, so the
#' distribution's `batch_shape` is `1`.
#'
#' Each distribution has the methods `$sample(sample_shape)` (draws, without gradient),
#' `$rsample(sample_shape)` (reparameterized draws that carry gradients, for
#' `distr_normal()`, `distr_gamma()`, `distr_chi2()` and `distr_multivariate_normal()`),
#' `$log_prob(value)`, `$entropy()`, `$expand(batch_shape)`, and the fields `$mean`,
#' `$variance`, `$stddev`, `$batch_shape`, `$event_shape` (`NULL` for univariate ones) and
#' `$support`. `distr_normal()`, `distr_gamma()`, `distr_chi2()` and
#' `distr_mixture_same_family()` have `$cdf(value)`; `distr_bernoulli()` and
#' `distr_categorical()` have `$enumerate_support(expand)`. A sample has shape
#' `c(sample_shape, batch_shape, event_shape)`.
#'
#' `distr_categorical()`'s values are 1-based, as R torch's `torch_multinomial()`: categories
#' `1, ..., K` where `K` is the size of the last dim of `probs` or `logits`.
#'
#' @param loc Mean: numbers or a tensor (a vector, with optional leading batch dims, for
#'   `distr_multivariate_normal()`).
#' @param scale Standard deviation: positive numbers or a tensor.
#' @param probs Probabilities: of `1` for `distr_bernoulli()` (in `[0, 1]`); of each category
#'   along the last dim for `distr_categorical()` (non-negative, normalized to sum to 1). Give
#'   `probs` or `logits`, not both.
#' @param logits Log-odds of `1` (`distr_bernoulli()`) or unnormalized log probabilities along
#'   the last dim (`distr_categorical()`).
#' @param concentration Shape (alpha) of the Gamma distribution: positive.
#' @param rate Rate: of the Gamma distribution (1 / scale, positive); of the Poisson
#'   distribution (non-negative).
#' @param df Degrees of freedom of the Chi-squared distribution: positive.
#' @param covariance_matrix,precision_matrix,scale_tril The multivariate normal's covariance
#'   matrix, its inverse (both positive definite), or the lower triangular Cholesky factor of
#'   the covariance (positive diagonal), with optional leading batch dims. Give exactly one.
#' @param mixture_distribution A `distr_categorical()` choosing the component: its number of
#'   categories is the last dim of `component_distribution`'s `batch_shape`.
#' @param component_distribution A distribution whose last batch dim indexes the components.
#' @param validate_args `TRUE` to check the parameters against their constraints when the
#'   distribution is made, and values given to `$log_prob()` and `$cdf()` against the
#'   support; `NULL` (the default) or `FALSE` not to check.
#' @return A distribution: an R6 object of class `torch_Distribution` (`torch_Normal`,
#'   `torch_Bernoulli`, `torch_Categorical`, `torch_Gamma`, `torch_Chi2`, `torch_Poisson`,
#'   `torch_MultivariateNormal`, `torch_MixtureSameFamily`).
#' @examples
#' torch_manual_seed(1)
#' n <- distr_normal(loc = 0, scale = 1)
#' n$sample(3)
#' n$log_prob(c(0, 2, 4))
#' b <- distr_bernoulli(probs = torch_tensor(c(0.25, 0.5, 0.75)))
#' b$sample(2)
#' b$entropy()
#' distr_categorical(probs = torch_tensor(c(0.2, 0.3, 0.5)))$sample(4)
#' g <- distr_gamma(concentration = 2, rate = 3)
#' g$mean
#' distr_chi2(df = torch_tensor(c(1, 2)))$log_prob(torch_tensor(c(0.5, 1)))
#' distr_poisson(rate = 4)$sample(2)
#' m <- distr_multivariate_normal(torch_zeros(2), covariance_matrix = torch_eye(2))
#' m$log_prob(m$sample(2))
#' gmm <- distr_mixture_same_family(
#'   distr_categorical(torch_ones(3)),
#'   distr_normal(torch_tensor(c(-2, 0, 2)), torch_tensor(c(1, 0.5, 1)))
#' )
#' gmm$sample(5)
#' gmm$cdf(torch_tensor(0))
#' @name distributions
NULL

#' @rdname distributions
#' @export
distr_normal <- function(loc, scale, validate_args = NULL) {
  Normal$new(loc, scale, validate_args = validate_args)
}

#' @rdname distributions
#' @export
distr_bernoulli <- function(probs = NULL, logits = NULL, validate_args = NULL) {
  Bernoulli$new(probs, logits, validate_args = validate_args)
}

#' @rdname distributions
#' @export
distr_categorical <- function(probs = NULL, logits = NULL, validate_args = NULL) {
  Categorical$new(probs, logits, validate_args = validate_args)
}

#' @rdname distributions
#' @export
distr_gamma <- function(concentration, rate, validate_args = NULL) {
  Gamma$new(concentration, rate, validate_args = validate_args)
}

#' @rdname distributions
#' @export
distr_chi2 <- function(df, validate_args = NULL) {
  Chi2$new(df, validate_args = validate_args)
}

#' @rdname distributions
#' @export
distr_poisson <- function(rate, validate_args = NULL) {
  Poisson$new(rate, validate_args = validate_args)
}

#' @rdname distributions
#' @export
distr_multivariate_normal <- function(loc, covariance_matrix = NULL, precision_matrix = NULL,
                                      scale_tril = NULL, validate_args = NULL) {
  MultivariateNormal$new(loc, covariance_matrix, precision_matrix, scale_tril,
                         validate_args = validate_args)
}

#' @rdname distributions
#' @export
distr_mixture_same_family <- function(mixture_distribution, component_distribution,
                                      validate_args = NULL) {
  MixtureSameFamily$new(mixture_distribution, component_distribution,
                        validate_args = validate_args)
}
