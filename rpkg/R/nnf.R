# R torch's functional layers (nnf_*), over the generated ops: R torch's arguments and defaults,
# class targets and dims counted from 1, reductions by name.

# A reduction by name as libtorch's enum (at::Reduction: None 0, Mean 1, Sum 2).
reduction_enum <- function(reduction) {
  # switch() first: every loss call comes here, and arg_choice() costs a few calls more.
  if (is.character(reduction) && length(reduction) == 1L) {
    code <- switch(reduction, none = 0L, mean = 1L, sum = 2L)
    if (!is.null(code)) {
      return(code)
    }
  }
  arg_choice(reduction, "reduction", c("mean", "sum", "none"))
}

#' Functional layers and losses
#'
#' R torch's `nnf_*` functions: the computation of a layer without its
#' parameters. Dimensions count from 1 (`dim = -1` is the last); class targets
#' of the classification losses are 1-based class numbers (an int64 tensor),
#' as in R torch. `reduction` is `"mean"`, `"sum"` or `"none"`.
#'
#' @param input A tensor.
#' @param target The target tensor.
#' @param weight,bias Weights and bias (or `NULL`).
#' @param dim A dimension (1-based).
#' @param dtype The result's dtype, or `NULL`.
#' @param reduction `"mean"`, `"sum"` or `"none"`.
#' @param ignore_index A (1-based) class to ignore; negative: none.
#' @param label_smoothing Label smoothing, in `[0, 1]`.
#' @param pos_weight Weight of positive examples.
#' @param p,training,inplace Dropout's probability, mode and in-place flag;
#'   `p`: `nnf_multi_margin_loss()`'s exponent (1 or 2), the norm's degree of
#'   `nnf_pairwise_distance()`, `nnf_pdist()` and `nnf_triplet_margin_loss()`.
#' @param approximate `"none"` or `"tanh"` (gelu).
#' @param negative_slope,alpha,beta,threshold,min_val,max_val Activation parameters.
#' @param stride,padding,dilation,groups,kernel_size,ceil_mode Convolution and
#'   pooling parameters.
#' @param count_include_pad,divisor_override,output_size Pooling parameters.
#' @param normalized_shape,eps,momentum,running_mean,running_var Normalization parameters;
#'   `eps`: also the small value that keeps distances and the Poisson loss's
#'   logarithm finite.
#' @param padding_idx,max_norm,norm_type,scale_grad_by_freq,sparse Embedding parameters.
#' @param offsets `nnf_embedding_bag()` with a 1-D `input`: where each bag
#'   starts in `input`, counted from 0 as in R torch (a 2-D `input` is one bag
#'   per row, and takes no offsets).
#' @param mode `nnf_embedding_bag()`: `"sum"`, `"mean"` or `"max"`.
#' @param per_sample_weights `nnf_embedding_bag()`: a weight per entry of
#'   `input` (mode `"sum"` only), or `NULL`.
#' @param include_last_offset `nnf_embedding_bag()`: `offsets` ends with the
#'   length of `input` (one more entry than bags).
#' @param start_dim,end_dim `nnf_flatten()`'s dims.
#' @param tensor `nnf_one_hot()`: (1-based) classes, an integer tensor.
#' @param num_classes `nnf_one_hot()`: the number of classes (`-1`: the largest).
#' @param delta,margin Loss parameters.
#' @param return_indices `nnf_max_pool2d()`: also return the (1-based) positions
#'   of the maxima, as `list(output, indices)`.
#' @return A tensor.
#' @name nnf
#' @examples
#' x <- torch_randn(4, 3)
#' nnf_relu(x)
#' nnf_hardswish(x)
#' nnf_cosine_similarity(x, torch_randn(4, 3))
#' nnf_softmax(x, dim = 2)
#' nnf_cross_entropy(x, torch_tensor(c(1L, 3L, 2L, 1L)))
#' nnf_mse_loss(x, torch_zeros(4, 3))
#' nnf_multi_margin_loss(x, torch_tensor(c(1L, 3L, 2L, 1L)))
#' nnf_embedding_bag(torch_tensor(rbind(c(1L, 2L), c(4L, 3L))), torch_randn(5, 2))
NULL

#' @rdname nnf
#' @export
nnf_linear <- function(input, weight, bias = NULL) torch_linear(input, weight, bias)

#' @rdname nnf
#' @export
nnf_bilinear <- function(input1, input2, weight, bias = NULL) {
  check_tensor(input1, "input1")
  check_tensor(input2, "input2")
  torch_bilinear(input1, input2, weight, bias)
}

#' @rdname nnf
#' @export
nnf_relu <- function(input, inplace = FALSE) {
  check_tensor(input, "input")
  if (arg_flag(inplace, "inplace")) torch_relu_(input) else torch_relu(input)
}

#' @rdname nnf
#' @export
nnf_relu6 <- function(input, inplace = FALSE) {
  check_tensor(input, "input")
  if (arg_flag(inplace, "inplace")) torch_hardtanh_(input, 0, 6) else torch_hardtanh(input, 0, 6)
}

#' @rdname nnf
#' @export
nnf_leaky_relu <- function(input, negative_slope = 0.01, inplace = FALSE) {
  check_tensor(input, "input")
  if (arg_flag(inplace, "inplace")) {
    torch_leaky_relu_(input, negative_slope)
  } else {
    torch_leaky_relu(input, negative_slope)
  }
}

#' @rdname nnf
#' @export
nnf_elu <- function(input, alpha = 1, inplace = FALSE) {
  check_tensor(input, "input")
  if (arg_flag(inplace, "inplace")) torch_elu_(input, alpha) else torch_elu(input, alpha)
}

#' @rdname nnf
#' @export
nnf_celu <- function(input, alpha = 1, inplace = FALSE) {
  check_tensor(input, "input")
  if (arg_flag(inplace, "inplace")) torch_celu_(input, alpha) else torch_celu(input, alpha)
}

#' @rdname nnf
#' @export
nnf_gelu <- function(input, approximate = "none") {
  check_tensor(input, "input")
  torch_gelu(input, arg_choice(approximate, "approximate", c("none", "tanh")))
}

#' @rdname nnf
#' @export
nnf_silu <- function(input, inplace = FALSE) {
  check_tensor(input, "input")
  if (arg_flag(inplace, "inplace")) torch_silu_(input) else torch_silu(input)
}

#' @rdname nnf
#' @export
nnf_sigmoid <- function(input) {
  check_tensor(input, "input")
  torch_sigmoid(input)
}

#' @rdname nnf
#' @export
nnf_tanh <- function(input) {
  check_tensor(input, "input")
  torch_tanh(input)
}

#' @rdname nnf
#' @export
nnf_softplus <- function(input, beta = 1, threshold = 20) {
  check_tensor(input, "input")
  torch_softplus(input, beta, threshold)
}

#' @rdname nnf
#' @export
nnf_hardtanh <- function(input, min_val = -1, max_val = 1, inplace = FALSE) {
  check_tensor(input, "input")
  if (arg_flag(inplace, "inplace")) {
    torch_hardtanh_(input, min_val, max_val)
  } else {
    torch_hardtanh(input, min_val, max_val)
  }
}

#' @rdname nnf
#' @export
nnf_softmax <- function(input, dim, dtype = NULL) {
  check_tensor(input, "input")
  check_softmax_dim(if (missing(dim)) NULL else dim)
  torch_softmax(input, dim, as_torch_dtype(dtype))
}

# R torch's softmax takes no implicit dim (PyTorch's is deprecated): it must be given.
check_softmax_dim <- function(dim) {
  if (is.null(dim)) {
    abort("`dim` must be given: the (1-based) dimension to normalize over, e.g. `dim = 2`.",
          class = "value_error")
  }
}

#' @rdname nnf
#' @export
nnf_log_softmax <- function(input, dim = NULL, dtype = NULL) {
  check_tensor(input, "input")
  check_softmax_dim(dim)
  torch_log_softmax(input, dim, as_torch_dtype(dtype))
}

#' @rdname nnf
#' @export
nnf_dropout <- function(input, p = 0.5, training = TRUE, inplace = FALSE) {
  check_probability(p)
  if (arg_flag(inplace, "inplace")) {
    torch_dropout_(input, p, training)
  } else {
    torch_dropout(input, p, training)
  }
}

#' @rdname nnf
#' @export
nnf_dropout2d <- function(input, p = 0.5, training = TRUE, inplace = FALSE) {
  check_probability(p)
  check_tensor(input, "input")
  # PyTorch's and R torch's warnings: dropout2d drops channels of (N, C, H, W) or (C, H, W).
  rank <- input$dim()
  warn_channel_dropout_rank(rank, 2L)
  if (rank == 3L) {
    rlang::warn(paste0(
      "dropout2d: Received a 3D input to dropout2d and assuming that channel-wise 1D dropout ",
      "behavior is desired - input is interpreted as shape (N, C, L), where C is the channel ",
      "dim. This behavior will change in a future release to interpret the input as one without ",
      "a batch dimension, i.e. shape (C, H, W). To maintain the 1D channel-wise dropout ",
      "behavior, please switch to using dropout1d instead."), class = "ampkit_warning")
  }
  if (arg_flag(inplace, "inplace")) {
    torch_feature_dropout_(input, p, training)
  } else {
    torch_feature_dropout(input, p, training)
  }
}

#' @rdname nnf
#' @export
nnf_dropout3d <- function(input, p = 0.5, training = TRUE, inplace = FALSE) {
  check_probability(p)
  check_tensor(input, "input")
  inplace <- arg_flag(inplace, "inplace")
  # PyTorch's: channels of (N, C, D, H, W), or of (C, D, H, W) taken as one batch of one.
  rank <- input$dim()
  warn_channel_dropout_rank(rank, 3L)
  batched <- rank == 5L
  if (!batched) input <- if (inplace) input$unsqueeze_(1) else input$unsqueeze(1)
  out <- if (inplace) {
    torch_feature_dropout_(input, p, training)
  } else {
    torch_feature_dropout(input, p, training)
  }
  if (!batched) out <- if (inplace) out$squeeze_(1) else out$squeeze(1)
  out
}

#' @rdname nnf
#' @export
nnf_alpha_dropout <- function(input, p = 0.5, training = FALSE, inplace = FALSE) {
  check_probability(p)
  check_tensor(input, "input")
  training <- arg_flag(training, "training")
  if (arg_flag(inplace, "inplace")) {
    torch_alpha_dropout_(input, p, training)
  } else {
    torch_alpha_dropout(input, p, training)
  }
}

# PyTorch's (and R torch's) warning when channel dropout over `spatial` dimensions is given an
# input of another rank than (C, spatial...) or (N, C, spatial...).
warn_channel_dropout_rank <- function(rank, spatial) {
  if (rank %in% (spatial + 1:2)) {
    return(invisible())
  }
  name <- sprintf("dropout%dd", spatial)
  rlang::warn(paste0(
    name, ": Received a ", rank, "-D input to ", name, ", which is deprecated and will ",
    "result in an error in a future release. To retain the behavior and silence this warning, ",
    "please use dropout instead. Note that ", name, " exists to provide channel-wise dropout on ",
    "inputs with ", spatial, " spatial dimensions, a channel dimension, and an optional batch ",
    "dimension (i.e. ", spatial + 1L, "D or ", spatial + 2L, "D inputs)."),
    class = "ampkit_warning")
}

check_probability <- function(p) {
  if (!is.numeric(p) || length(p) != 1L || is.na(p)) {
    abort(sprintf("`p` must be a number, got %s.", describe(p)), class = "value_error")
  }
  if (p < 0 || p > 1) {
    abort(sprintf("dropout probability has to be between 0 and 1, but got %s", describe(p)),
          class = "value_error")
  }
}

#' @rdname nnf
#' @export
nnf_conv1d <- function(input, weight, bias = NULL, stride = 1, padding = 0, dilation = 1,
                       groups = 1) {
  torch_conv1d(input, weight, bias, stride, padding, dilation, groups)
}

#' @rdname nnf
#' @export
nnf_conv2d <- function(input, weight, bias = NULL, stride = 1, padding = 0, dilation = 1,
                       groups = 1) {
  torch_conv2d(input, weight, bias, stride, padding, dilation, groups)
}

#' @rdname nnf
#' @export
nnf_max_pool2d <- function(input, kernel_size, stride = kernel_size, padding = 0, dilation = 1,
                           ceil_mode = FALSE, return_indices = FALSE) {
  if (!arg_flag(return_indices, "return_indices")) {
    return(torch_max_pool2d(input, kernel_size, stride, padding, dilation, ceil_mode))
  }
  # The output and the (1-based, as R torch's) positions of the maxima in each flattened plane.
  torch_max_pool2d_with_indices(input, kernel_size, stride, padding, dilation, ceil_mode)
}

#' @rdname nnf
#' @export
nnf_avg_pool2d <- function(input, kernel_size, stride = NULL, padding = 0, ceil_mode = FALSE,
                           count_include_pad = TRUE, divisor_override = NULL) {
  torch_avg_pool2d(input, kernel_size, stride, padding, ceil_mode, count_include_pad,
                   divisor_override)
}

#' @rdname nnf
#' @export
nnf_adaptive_avg_pool2d <- function(input, output_size) {
  # NA keeps the input's size, as the other adaptive pools (adaptive_size()).
  torch_adaptive_avg_pool2d(input, adaptive_size(output_size, input, 2L))
}

#' @rdname nnf
#' @export
nnf_batch_norm <- function(input, running_mean, running_var, weight = NULL, bias = NULL,
                           training = FALSE, momentum = 0.1, eps = 1e-5) {
  if (isTRUE(training)) {
    # PyTorch's check (F.batch_norm): one value per channel has no variance to normalize by, and
    # libtorch would return ~0 for it without a word
    size <- meta(input, "shape")
    if (length(size) >= 2L && prod(size[-2L]) == 1) {
      abort(sprintf("Expected more than 1 value per channel when training, got input size [%s]",
                    paste(size, collapse = ", ")), class = "value_error")
    }
  }
  torch_batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps,
                   FALSE)
}

#' @rdname nnf
#' @export
nnf_layer_norm <- function(input, normalized_shape, weight = NULL, bias = NULL, eps = 1e-5) {
  torch_layer_norm(input, normalized_shape, weight, bias, eps)
}

#' @rdname nnf
#' @export
nnf_embedding <- function(input, weight, padding_idx = NULL, max_norm = NULL, norm_type = 2,
                          scale_grad_by_freq = FALSE, sparse = FALSE) {
  # R torch's padding_idx is 1-based (a negative one counts from the end); libtorch's 0-based,
  # -1 for none.
  padding <- if (is.null(padding_idx)) -1L else one_based_row(padding_idx, weight)
  if (!is.null(max_norm)) {
    with_no_grad(torch_embedding_renorm_(weight, input, max_norm, norm_type))
  }
  torch_embedding(weight, input, padding, scale_grad_by_freq, sparse)
}

#' @rdname nnf
#' @export
nnf_embedding_bag <- function(input, weight, offsets = NULL, max_norm = NULL, norm_type = 2,
                              scale_grad_by_freq = FALSE, mode = "mean", sparse = FALSE,
                              per_sample_weights = NULL, include_last_offset = FALSE,
                              padding_idx = NULL) {
  check_tensor(input, "input")
  check_tensor(weight, "weight")
  mode_enum <- switch(arg_choice(mode, "mode", c("sum", "mean", "max")),
                      sum = 0L, mean = 1L, max = 2L)
  check_bag_options(input, weight, mode, scale_grad_by_freq, sparse, per_sample_weights)
  if (input$dim() == 2L) {
    # Each row is a bag of the same length: the offsets are where the rows start.
    if (!is.null(offsets)) {
      abort("`offsets` must be NULL when `input` is 2-D (each row is a bag).",
            class = "value_error")
    }
    offsets <- torch_arange(0, input$numel() - 1L, input$size(2L), dtype = torch_long(),
                            device = input$device)
    include_last_offset <- FALSE
    input <- input$reshape(-1L)
    if (!is.null(per_sample_weights)) per_sample_weights <- per_sample_weights$reshape(-1L)
  } else if (is.null(offsets) || !is_torch_tensor(offsets) || offsets$dim() != 1L) {
    abort("`offsets` must be a 1-D tensor when `input` is 1-D.", class = "value_error")
  }
  if (!is.null(max_norm)) {
    with_no_grad(torch_embedding_renorm_(weight, input, max_norm, norm_type))
  }
  # `input` is 1-based (the generated op makes it libtorch's); offsets are positions in `input`
  # counted from 0, as R torch passes them (its 2-D case computes them so); padding_idx 1-based.
  args <- list(weight, input, offsets, scale_grad_by_freq, mode_enum, sparse, per_sample_weights,
               include_last_offset)
  if (!is.null(padding_idx)) args <- c(args, list(one_based_row(padding_idx, weight)))
  do.call(torch_embedding_bag, args)[[1L]]
}

# PyTorch's checks of F.embedding_bag's arguments, in R's words.
check_bag_options <- function(input, weight, mode, scale_grad_by_freq, sparse,
                              per_sample_weights) {
  if (!input$dim() %in% c(1L, 2L)) {
    abort(sprintf("`input` must be a 1-D or 2-D tensor, got %d-D.", input$dim()),
          class = "value_error")
  }
  if (weight$dim() != 2L) {
    abort(sprintf("`weight` must be a 2-D tensor (num_embeddings, embedding_dim), got %d-D.",
                  weight$dim()), class = "value_error")
  }
  if (mode == "max" && (arg_flag(scale_grad_by_freq, "scale_grad_by_freq") ||
                          arg_flag(sparse, "sparse"))) {
    abort("mode \"max\" supports neither `scale_grad_by_freq` nor `sparse`.",
          class = "value_error")
  }
  if (is.null(per_sample_weights)) {
    return(invisible())
  }
  if (!identical(dim(per_sample_weights), dim(input))) {
    abort(sprintf("`per_sample_weights` (%s) must have the shape of `input` (%s).",
                  paste(dim(per_sample_weights), collapse = ", "),
                  paste(dim(input), collapse = ", ")), class = "value_error")
  }
  if (mode != "sum") {
    abort(sprintf("`per_sample_weights` is only supported with mode \"sum\", got \"%s\".",
                  mode), class = "value_error")
  }
}

one_based_row <- function(index, weight) {
  index <- whole_number(index, "padding_idx")
  n <- weight$size(1L)
  if (index == 0L || index > n || index < -n) {
    abort(sprintf("`padding_idx` must be within the %d rows of `weight` (1-based), got %d.", n,
                  index), class = "value_error")
  }
  if (index > 0L) index - 1L else n + index
}

#' @rdname nnf
#' @export
nnf_flatten <- function(input, start_dim = 2, end_dim = -1) {
  torch_flatten(input, start_dim = start_dim, end_dim = end_dim)
}

#' @rdname nnf
#' @export
nnf_one_hot <- function(tensor, num_classes = -1) {
  .torch_one_hot(one_based_tensor(tensor, "tensor"), num_classes)
}

#' @rdname nnf
#' @export
nnf_mse_loss <- function(input, target, reduction = "mean") {
  check_same_size(input, target)
  torch_mse_loss(input, target, reduction_enum(reduction))
}

#' @rdname nnf
#' @export
nnf_l1_loss <- function(input, target, reduction = "mean") {
  check_same_size(input, target)
  torch_l1_loss(input, target, reduction_enum(reduction))
}

#' @rdname nnf
#' @export
nnf_smooth_l1_loss <- function(input, target, reduction = "mean", beta = 1) {
  torch_smooth_l1_loss(input, target, reduction_enum(reduction), beta)
}

#' @rdname nnf
#' @export
nnf_huber_loss <- function(input, target, reduction = "mean", delta = 1) {
  torch_huber_loss(input, target, reduction_enum(reduction), delta)
}

# PyTorch warns when a loss broadcasts its target (a likely mistake); as an R warning here.
check_same_size <- function(input, target) {
  if (!identical(.Call(C_tensor_meta, input, "shape"), .Call(C_tensor_meta, target, "shape"))) {
    rlang::warn(sprintf(paste0(
      "Using a target size (%s) that is different to the input size (%s). This will likely ",
      "lead to incorrect results due to broadcasting. Please ensure they have the same size."),
      paste(dim(target), collapse = ", "), paste(dim(input), collapse = ", ")),
      class = "ampkit_warning")
  }
}

#' @rdname nnf
#' @export
nnf_binary_cross_entropy <- function(input, target, weight = NULL, reduction = "mean") {
  torch_binary_cross_entropy(input, target, weight, reduction_enum(reduction))
}

#' @rdname nnf
#' @export
# nolint start: object_length_linter. (R torch's name)
nnf_binary_cross_entropy_with_logits <- function(input, target, weight = NULL,
                                                 reduction = "mean", pos_weight = NULL) {
  torch_binary_cross_entropy_with_logits(input, target, weight, pos_weight,
                                         reduction_enum(reduction))
}
# nolint end

#' @rdname nnf
#' @export
nnf_cross_entropy <- function(input, target, weight = NULL, ignore_index = -100,
                              reduction = "mean", label_smoothing = 0) {
  torch_cross_entropy_loss(input, target, weight, reduction_enum(reduction), ignore_index,
                           label_smoothing)
}

#' @rdname nnf
#' @export
nnf_nll_loss <- function(input, target, weight = NULL, ignore_index = -100,
                         reduction = "mean") {
  torch_nll_loss_nd(input, target, weight, reduction_enum(reduction), ignore_index)
}

#' @rdname nnf
#' @export
nnf_kl_div <- function(input, target, reduction = "mean") {
  reduction <- arg_choice(reduction, "reduction", c("mean", "batchmean", "sum", "none"))
  if (reduction == "mean") {
    # PyTorch's and R torch's warning: "mean" is not the KL divergence's own average.
    rlang::warn(paste0(
      "reduction: 'mean' divides the total loss by both the batch size and the support size. ",
      "'batchmean' divides only by the batch size, and aligns with the KL div math definition. ",
      "'mean' will be changed to behave the same as 'batchmean' in the next major release."),
      class = "ampkit_warning")
  }
  if (reduction != "batchmean") {
    return(torch_kl_div(input, target, reduction_enum(reduction)))
  }
  # PyTorch's batchmean: the sum divided by the first dimension (the whole sum for a scalar).
  total <- torch_kl_div(input, target, reduction_enum("sum"))
  if (input$dim() == 0L) total else total / input$size(1L)
}

#' @rdname nnf
#' @export
nnf_hinge_embedding_loss <- function(input, target, margin = 1, reduction = "mean") {
  torch_hinge_embedding_loss(input, target, margin, reduction_enum(reduction))
}

#' @rdname nnf
#' @export
nnf_soft_margin_loss <- function(input, target, reduction = "mean") {
  torch_soft_margin_loss(input, target, reduction_enum(reduction))
}

#' @rdname nnf
#' @export
nnf_multilabel_soft_margin_loss <- function(input, target, weight = NULL, reduction = "mean") {
  # PyTorch's own composition (torch.nn.functional.multilabel_soft_margin_loss): a logistic
  # loss per class, averaged over the classes (the last dimension), then reduced.
  loss <- -(target * torch_log_sigmoid(input) + (1 - target) * torch_log_sigmoid(-input))
  if (!is.null(weight)) loss <- loss * weight
  loss <- torch_mean(loss, dim = -1L)
  switch(arg_choice(reduction, "reduction", c("mean", "sum", "none")),
         none = loss, mean = torch_mean(loss), sum = torch_sum(loss))
}
