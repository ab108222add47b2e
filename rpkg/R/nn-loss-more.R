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

#' @rdname nnf
#' @param log_probs,input_lengths,target_lengths,blank,zero_infinity
#'   For `nnf_ctc_loss()`, the log-probabilities (time by batch by classes),
#'   the lengths of the inputs and of the targets (whole numbers, one a
#'   sequence), the blank's class and whether infinite losses (inputs too short
#'   for their targets) count as zero. As in R torch, the class numbers in `targets` and `blank` are
#'   PyTorch's: 0 is the blank by default and the other classes are 1 to C - 1.
#' @param targets For `nnf_ctc_loss()`, the target sequences: a (batch, longest
#'   target) matrix of classes, or their concatenation.
#' @export
nnf_ctc_loss <- function(log_probs, targets, input_lengths, target_lengths, blank = 0,
                         reduction = "mean", zero_infinity = FALSE) {
  check_tensor(log_probs, "log_probs")
  check_tensor(targets, "targets")
  torch_ctc_loss(log_probs, targets, lengths_arg(input_lengths, "input_lengths"),
                 lengths_arg(target_lengths, "target_lengths"), whole_number(blank, "blank"),
                 reduction_enum(reduction), arg_flag(zero_infinity, "zero_infinity"))
}

# CTC's lengths: a tensor (libtorch checks it holds integers) or R's whole numbers.
lengths_arg <- function(x, name) if (is_torch_tensor(x)) x else whole_numbers(x, name)

#' @rdname nn_layers
#' @param blank,zero_infinity `nn_ctc_loss()`: the blank's class (0 by
#'   default) and whether infinite losses count as zero (see [nnf_ctc_loss()]).
#' @export
nn_ctc_loss <- nn_module(
  "nn_ctc_loss",
  inherit = nn_loss,
  initialize = function(blank = 0, reduction = "mean", zero_infinity = FALSE) {
    super$initialize(reduction)
    self$blank <- whole_number(blank, "blank")
    self$zero_infinity <- arg_flag(zero_infinity, "zero_infinity")
  },
  forward = function(log_probs, targets, input_lengths, target_lengths) {
    nnf_ctc_loss(log_probs, targets, input_lengths, target_lengths, self$blank, self$reduction,
                 self$zero_infinity)
  }
)

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

# PyTorch's checks of an adaptive softmax's input and target shapes.
check_adaptive_input <- function(input, target) {
  check_tensor(input, "input")
  check_tensor(target, "target")
  wanted <- target$dim() + 1L # the input's rank for this target's
  if (target$dim() > 1L) {
    abort("0D or 1D target tensor expected, multi-target not supported", class = "runtime_error")
  }
  if (target$dim() == 1L && input$size(1) != target$size(1)) {
    abort("Input and target should have the same size in the batch dimension.",
          class = "runtime_error")
  }
  if (input$dim() != wanted) {
    abort(sprintf("%dD target tensor expects %dD input tensors, but found inputs with size %s",
                  target$dim(), wanted, paste(input$shape, collapse = "x")),
          class = "runtime_error")
  }
}

#' Adaptive log-softmax
#'
#' `nn_adaptive_log_softmax_with_loss()` is PyTorch's
#' `AdaptiveLogSoftmaxWithLoss` (Grave et al., "Efficient softmax
#' approximation for GPUs"): the frequent classes, 1 to `cutoffs[1]`, are
#' scored by a head layer; the others are split into clusters at the
#' following cutoffs (classes `cutoffs[i] + 1` to `cutoffs[i + 1]`, the last
#' ending at `n_classes`), each scored by a smaller projection that the head
#' reaches through one output per cluster. R torch exports the name but its
#' module is not implemented; this one gives PyTorch's numbers, with classes
#' counted from 1.
#'
#' Calling the module on `input` (`(N, in_features)`, or one example) and
#' `target` (`N` classes, or one) gives a list: `output`, the log-probability
#' of each target class, and `loss`, the mean negative log-likelihood.
#' `$log_prob(input)` gives the log-probabilities of every class (`(N,
#' n_classes)`); `$predict(input)` the most probable class of each row.
#'
#' @param in_features The number of features of an input.
#' @param n_classes The number of classes.
#' @param cutoffs Increasing whole numbers from 1 to `n_classes - 1`: the
#'   last class of the head's shortlist, then of each cluster but the last.
#' @param div_value Each cluster's projection is `div_value` times smaller
#'   than the previous one's (the first: `in_features / div_value`).
#' @param head_bias Whether the head layer has a bias.
#' @return A module (class `nn_adaptive_log_softmax_with_loss`).
#' @export
#' @examples
#' torch_manual_seed(1)
#' asm <- nn_adaptive_log_softmax_with_loss(16, n_classes = 20, cutoffs = c(5, 12))
#' x <- torch_randn(4, 16)
#' out <- asm(x, torch_tensor(c(1L, 7L, 15L, 20L)))
#' out$loss
#' asm$log_prob(x)$exp()$sum(dim = 2) # each row sums to 1
#' asm$predict(x)
nn_adaptive_log_softmax_with_loss <- nn_module(
  "nn_adaptive_log_softmax_with_loss",
  initialize = function(in_features, n_classes, cutoffs, div_value = 4, head_bias = FALSE) {
    in_features <- whole_number(in_features, "in_features")
    n_classes <- whole_number(n_classes, "n_classes")
    cutoffs <- whole_numbers(cutoffs, "cutoffs")
    if (!length(cutoffs)) {
      abort("`cutoffs` should be a sequence of length larger than 0", class = "value_error")
    }
    if (is.unsorted(cutoffs, strictly = TRUE) || min(cutoffs) <= 0 ||
          max(cutoffs) > n_classes - 1) {
      abort(paste0("`cutoffs` should be a sequence of unique, positive integers sorted in an ",
                   "increasing order, where each value is between 1 and n_classes-1"),
            class = "value_error")
    }
    self$in_features <- in_features
    self$n_classes <- n_classes
    self$cutoffs <- c(cutoffs, n_classes)
    self$div_value <- arg_number(div_value, "div_value")
    self$head_bias <- arg_flag(head_bias, "head_bias")
    self$shortlist_size <- self$cutoffs[[1]]
    self$n_clusters <- length(self$cutoffs) - 1L
    self$head_size <- self$shortlist_size + self$n_clusters
    self$head <- nn_linear(in_features, self$head_size, bias = self$head_bias)
    self$tail <- nn_module_list(lapply(seq_len(self$n_clusters), function(i) {
      hsz <- as.integer(in_features %/% (self$div_value^i))
      nn_sequential(nn_linear(in_features, hsz, bias = FALSE),
                    nn_linear(hsz, self$cutoffs[[i + 1]] - self$cutoffs[[i]], bias = FALSE))
    }))
  },
  reset_parameters = function() {
    self$head$reset_parameters()
    for (i in seq_len(self$n_clusters)) {
      self$tail[[i]][[1]]$reset_parameters()
      self$tail[[i]][[2]]$reset_parameters()
    }
  },
  forward = function(input, target) {
    check_adaptive_input(input, target)
    batched <- target$dim() > 0L
    if (!batched) {
      input <- input$unsqueeze(1)
      target <- target$unsqueeze(1)
    }
    # PyTorch's steps, on 0-based classes (`t0`); positions R's, 1-based.
    t0 <- target - 1L
    n <- target$size(1)
    output <- input$new_zeros(n)
    head_class <- target$new_empty(n) # each row's class among the head's outputs, 0-based
    bounds <- c(0L, self$cutoffs) # integers: class numbers stay long
    used <- 0
    for (i in seq_len(length(bounds) - 1L)) {
      mask <- (t0 >= bounds[[i]]) & (t0 < bounds[[i + 1L]])
      rows <- mask$nonzero()$squeeze()
      if (rows$numel() == 0) next
      if (i == 1L) {
        head_class$index_copy_(1, rows, t0[mask])
      } else {
        relative <- t0[mask] - bounds[[i]]
        cluster <- self$tail[[i - 1L]](input$index_select(1, rows))
        head_class$index_fill_(1, rows, self$shortlist_size + i - 2L)
        local <- nnf_log_softmax(cluster, dim = 2)$gather(2, (relative + 1L)$unsqueeze(2))
        output$index_copy_(1, rows, local$squeeze(2))
      }
      used <- used + rows$numel()
    }
    if (used != n) {
      abort(sprintf("Target values should be in [1, %d], but values in range [%s, %s] were found.",
                    self$n_classes, target$min()$item(), target$max()$item()),
            class = "runtime_error")
    }
    head_logprob <- nnf_log_softmax(self$head(input), dim = 2)
    output <- output + head_logprob$gather(2, (head_class + 1L)$unsqueeze(2))$squeeze()
    loss <- (-output)$mean()
    if (!batched) output <- output$squeeze(1)
    list(output = output, loss = loss)
  },
  full_log_prob = function(input, head_output) {
    out <- input$new_empty(c(head_output$size(1), self$n_classes))
    head_logprob <- nnf_log_softmax(head_output, dim = 2)
    out[, 1:self$shortlist_size] <- head_logprob[, 1:self$shortlist_size]
    for (i in seq_len(self$n_clusters)) {
      cluster <- nnf_log_softmax(self$tail[[i]](input), dim = 2)
      columns <- (self$cutoffs[[i]] + 1):self$cutoffs[[i + 1]]
      out[, columns] <- cluster + head_logprob[, self$shortlist_size + i]$unsqueeze(2)
    }
    out
  },
  log_prob = function(input) self$full_log_prob(input, self$head(input)),
  predict = function(input) {
    head_output <- self$head(input)
    output <- torch_argmax(head_output, dim = 2)
    outside <- output > self$shortlist_size
    if (!outside$any()$item()) {
      return(output)
    }
    if (outside$all()$item()) {
      return(torch_argmax(self$full_log_prob(input, head_output), dim = 2))
    }
    output[outside] <- torch_argmax(self$full_log_prob(input[outside, ], head_output[outside, ]),
                                    dim = 2)
    output
  }
)
