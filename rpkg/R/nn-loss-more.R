#' @include nn-layers.R nnf.R
NULL

# R torch's margin, ranking, triplet and Poisson losses over libtorch's operators (class targets
# 1-based, as in R torch), and its area-under-min(FPR, FNR) loss and the triplet loss with a
# distance of the user's, composed from tensor operations.

#' @rdname nnf
#' @param input1,input2 The two inputs: of `nnf_bilinear()`, and the batches
#'   compared by `nnf_cosine_embedding_loss()` (rows) and
#'   `nnf_margin_ranking_loss()`.
#' @export
nnf_multilabel_margin_loss <- function(input, target, reduction = "mean") {
  check_tensor(input, "input")
  # 1-based classes; a negative entry (-1) ends a row's list of classes, as in PyTorch.
  torch_multilabel_margin_loss(input, target, reduction_enum(reduction))
}

#' @rdname nnf
#' @export
nnf_multi_margin_loss <- function(input, target, p = 1, margin = 1, weight = NULL,
                                  reduction = "mean") {
  check_tensor(input, "input")
  torch_multi_margin_loss(input, target, margin_power(p), margin, weight,
                          reduction_enum(reduction))
}

#' @rdname nnf
#' @export
nnf_cosine_embedding_loss <- function(input1, input2, target, margin = 0, reduction = "mean") {
  pair_margin_loss(torch_cosine_embedding_loss, input1, input2, target, margin, reduction)
}

# A loss of two inputs against a target with a margin (libtorch's cosine embedding and margin
# ranking losses take the same arguments): the arguments checked, then the op.
pair_margin_loss <- function(op, input1, input2, target, margin, reduction) {
  check_tensor(input1, "input1")
  check_tensor(input2, "input2")
  check_tensor(target, "target")
  op(input1, input2, target, arg_number(margin, "margin"), reduction_enum(reduction))
}

# multi_margin_loss's exponent: libtorch knows 1 and 2 only.
margin_power <- function(p) {
  if (!is.numeric(p) || length(p) != 1L || is.na(p) || !p %in% c(1, 2)) {
    abort(sprintf("`p` must be 1 or 2 (only p == 1 or p == 2 are supported), got %s.",
                  describe(p)), class = "value_error")
  }
  as.integer(p)
}

#' @rdname nnf
#' @export
nnf_area_under_min_fpr_fnr <- function(input, target) {
  check_tensor(input, "input")
  check_tensor(target, "target")
  if (input$numel() != target$numel()) {
    abort(sprintf("`target` must have as many elements as `input` (%d), got %d.",
                  input$numel(), target$numel()), class = "value_error")
  }
  # Every prediction is one example (the loss ranks them all): flattened, as the authors' code
  # does. The positive class is the largest label (2 of the levels 1 and 2, or TRUE).
  pred <- input$reshape(-1L)
  label <- target$reshape(-1L)
  positive <- label == label$max()
  negative <- positive$logical_not()
  n_pos <- positive$sum()
  n_neg <- negative$sum()
  if (as.logical(n_pos == 0L) || as.logical(n_neg == 0L)) {
    # One class only: no ROC curve, zero loss (still a function of `input` for autograd).
    return(torch_sum(input * 0))
  }
  # Thresholds in increasing order: -prediction, the predictions in decreasing order.
  order <- torch_argsort(pred, descending = TRUE)
  thresh <- -pred[order]
  rate_dtype <- pred$dtype
  # At each sorted position: the false positive rate with the threshold just above it (negatives
  # at or before it), and the false negative rate with it just below (positives at or after it).
  fp_after <- negative[order]$to(dtype = rate_dtype)$cumsum(1L) / n_neg
  fn_before <- positive[order]$to(dtype = rate_dtype)$flip(1L)$cumsum(1L)$flip(1L) / n_pos
  # Tied thresholds are one point of the curve: its last position for the false positives, its
  # first for the false negatives.
  distinct <- thresh$diff(dim = 1L) != 0
  last_one <- torch_ones(1L, dtype = torch_bool(), device = pred$device)
  fp_end <- torch_cat(list(distinct, last_one))
  fn_start <- torch_cat(list(last_one, distinct))
  uniq_thresh <- thresh[fp_end]
  uniq_fp <- fp_after[fp_end]
  uniq_fn <- fn_before[fn_start]
  n <- uniq_thresh$size(1L)
  if (n < 2L) {
    return(torch_sum(input * 0))
  }
  # Between two consecutive thresholds both rates are constant: the area is min(FPR, FNR) times
  # the interval's width, summed.
  min_rate <- torch_minimum(uniq_fp[1:(n - 1L)], uniq_fn[2:n])
  torch_sum(min_rate * uniq_thresh$diff(dim = 1L))
}

#' @rdname nn_layers
#' @export
nn_multilabel_margin_loss <- nn_module(
  "nn_multilabel_margin_loss",
  inherit = nn_loss,
  initialize = function(reduction = "mean") {
    self$reduction <- arg_choice(reduction, "reduction", c("mean", "sum", "none"))
  },
  forward = function(input, target) nnf_multilabel_margin_loss(input, target, self$reduction)
)

#' @rdname nn_layers
#' @export
nn_cosine_embedding_loss <- nn_module(
  "nn_cosine_embedding_loss",
  inherit = nn_loss,
  initialize = function(margin = 0, reduction = "mean") {
    self$margin <- arg_number(margin, "margin")
    self$reduction <- arg_choice(reduction, "reduction", c("mean", "sum", "none"))
  },
  forward = function(input1, input2, target) {
    nnf_cosine_embedding_loss(input1, input2, target, self$margin, self$reduction)
  }
)

#' @rdname nn_layers
#' @export
nn_multi_margin_loss <- nn_module(
  "nn_multi_margin_loss",
  inherit = nn_loss,
  initialize = function(p = 1, margin = 1, weight = NULL, reduction = "mean") {
    self$p <- margin_power(p)
    self$margin <- arg_number(margin, "margin")
    self$reduction <- arg_choice(reduction, "reduction", c("mean", "sum", "none"))
    if (!is.null(weight)) {
      if (!is_torch_tensor(weight)) weight <- torch_tensor(weight)
      if (weight$dim() != 1L) {
        abort(sprintf("`weight` must be NULL or a 1-D tensor (one weight per class), got %d-D.",
                      weight$dim()), class = "value_error")
      }
      # A buffer, as R torch's weighted losses hold it: it follows $to() and the state dict.
      self$weight <- nn_buffer(weight)
    } else {
      self$weight <- NULL
    }
  },
  forward = function(input, target) {
    nnf_multi_margin_loss(input, target, self$p, self$margin, self$weight, self$reduction)
  }
)

#' @rdname nn_layers
#' @export
nn_aum_loss <- nn_module(
  "nn_aum_loss",
  inherit = nn_loss,
  initialize = function() self$reduction <- "mean",
  forward = function(input, target) nnf_area_under_min_fpr_fnr(input, target)
)

# ---- the ranking, triplet and Poisson losses -----------------------------------------------------

#' @rdname nnf
#' @param anchor,positive,negative `nnf_triplet_margin_loss()`: the batches of
#'   vectors compared.
#' @param swap `nnf_triplet_margin_loss()`: use the distance between the
#'   positive and the negative when it is the smaller (distance swap).
#' @param log_input,full `nnf_poisson_nll_loss()`: `input` is the log of the
#'   rate (`exp(input) - target * input`), not the rate; add Stirling's
#'   approximation of the log factorial.
#' @export
nnf_margin_ranking_loss <- function(input1, input2, target, margin = 0, reduction = "mean") {
  pair_margin_loss(torch_margin_ranking_loss, input1, input2, target, margin, reduction)
}

#' @rdname nnf
#' @export
nnf_triplet_margin_loss <- function(anchor, positive, negative, margin = 1, p = 2, eps = 1e-6,
                                    swap = FALSE, reduction = "mean") {
  check_tensor(anchor, "anchor")
  check_tensor(positive, "positive")
  check_tensor(negative, "negative")
  torch_triplet_margin_loss(anchor, positive, negative, arg_number(margin, "margin"),
                            arg_number(p, "p"), arg_number(eps, "eps"), arg_flag(swap, "swap"),
                            reduction_enum(reduction))
}

#' @rdname nnf
#' @export
nnf_poisson_nll_loss <- function(input, target, log_input = TRUE, full = FALSE, eps = 1e-8,
                                 reduction = "mean") {
  check_tensor(input, "input")
  check_tensor(target, "target")
  torch_poisson_nll_loss(input, target, arg_flag(log_input, "log_input"), arg_flag(full, "full"),
                         arg_number(eps, "eps"), reduction_enum(reduction))
}

#' @rdname nn_layers
#' @param swap,log_input,full Losses' settings (see [nnf_triplet_margin_loss()],
#'   [nnf_poisson_nll_loss()]).
#' @export
nn_margin_ranking_loss <- nn_module(
  "nn_margin_ranking_loss",
  inherit = nn_loss,
  initialize = function(margin = 0, reduction = "mean") {
    super$initialize(reduction)
    self$margin <- arg_number(margin, "margin")
  },
  forward = function(input1, input2, target) {
    nnf_margin_ranking_loss(input1, input2, target, self$margin, self$reduction)
  }
)

#' @rdname nn_layers
#' @export
nn_triplet_margin_loss <- nn_module(
  "nn_triplet_margin_loss",
  inherit = nn_loss,
  initialize = function(margin = 1, p = 2, eps = 1e-6, swap = FALSE, reduction = "mean") {
    super$initialize(reduction)
    self$margin <- arg_number(margin, "margin")
    self$p <- arg_number(p, "p")
    self$eps <- arg_number(eps, "eps")
    self$swap <- arg_flag(swap, "swap")
  },
  forward = function(anchor, positive, negative) {
    nnf_triplet_margin_loss(anchor, positive, negative, self$margin, self$p, self$eps, self$swap,
                            self$reduction)
  }
)

#' @rdname nn_layers
#' @export
nn_poisson_nll_loss <- nn_module(
  "nn_poisson_nll_loss",
  inherit = nn_loss,
  initialize = function(log_input = TRUE, full = FALSE, eps = 1e-8, reduction = "mean") {
    super$initialize(reduction)
    self$log_input <- arg_flag(log_input, "log_input")
    self$full <- arg_flag(full, "full")
    self$eps <- arg_number(eps, "eps")
  },
  forward = function(input, target) {
    nnf_poisson_nll_loss(input, target, self$log_input, self$full, self$eps, self$reduction)
  }
)

#' @rdname nnf
#' @param distance_function `nnf_triplet_margin_with_distance_loss()`: an R
#'   function of two batches giving their distances (`NULL`:
#'   [nnf_pairwise_distance()]).
#' @export
nnf_triplet_margin_with_distance_loss <- function(anchor, positive, negative,
                                                  distance_function = NULL, margin = 1,
                                                  swap = FALSE, reduction = "mean") {
  check_tensor(anchor, "anchor")
  check_tensor(positive, "positive")
  check_tensor(negative, "negative")
  dims <- c(anchor$dim(), positive$dim(), negative$dim())
  if (length(unique(dims)) != 1L) {
    abort(sprintf(paste("`anchor`, `positive` and `negative` must have the same number of",
                        "dimensions, got %d, %d and %d."), dims[[1]], dims[[2]], dims[[3]]),
          class = "value_error")
  }
  margin <- positive_margin(margin)
  reduction <- reduction_enum(reduction)
  distance <- distance_function_arg(distance_function) %||% nnf_pairwise_distance
  # PyTorch's steps: the closer of the two negatives with swap, the hinge, the reduction.
  positive_dist <- distance(anchor, positive)
  negative_dist <- distance(anchor, negative)
  if (arg_flag(swap, "swap")) {
    negative_dist <- torch_minimum(negative_dist, distance(positive, negative))
  }
  loss <- torch_clamp_min(margin + positive_dist - negative_dist, 0)
  switch(reduction + 1L, loss, torch_mean(loss), torch_sum(loss))
}

#' @rdname nn_layers
#' @param distance_function `nn_triplet_margin_with_distance_loss()`: an R
#'   function (or module) of two batches giving their distances (`NULL`:
#'   [nn_pairwise_distance()]).
#' @export
nn_triplet_margin_with_distance_loss <- nn_module(
  "nn_triplet_margin_with_distance_loss",
  inherit = nn_loss,
  initialize = function(distance_function = NULL, margin = 1, swap = FALSE, reduction = "mean") {
    super$initialize(reduction)
    self$distance_function <- distance_function_arg(distance_function) %||% nn_pairwise_distance()
    self$margin <- positive_margin(margin)
    self$swap <- arg_flag(swap, "swap")
  },
  forward = function(anchor, positive, negative) {
    nnf_triplet_margin_with_distance_loss(anchor, positive, negative, self$distance_function,
                                          self$margin, self$swap, self$reduction)
  }
)

# The triplet loss's margin: a number > 0 (PyTorch's rule).
positive_margin <- function(margin) {
  margin <- arg_number(margin, "margin")
  if (margin <= 0) {
    abort(sprintf("`margin` must be greater than 0, got %s.", describe(margin)),
          class = "value_error")
  }
  margin
}

# A distance of two batches: an R function (a module is one), or NULL.
distance_function_arg <- function(f) {
  if (!is.null(f) && !is.function(f)) {
    abort(sprintf("`distance_function` must be a function or NULL, got %s.", describe(f)),
          class = "value_error")
  }
  f
}
