# R torch's functional layers (nnf_*), over the generated ops: R torch's arguments and defaults,
# class targets and dims counted from 1, reductions by name.

# A reduction by name as libtorch's enum (at::Reduction: None 0, Mean 1, Sum 2).
reduction_enum <- function(reduction) {
  switch(arg_choice(reduction, "reduction", c("mean", "sum", "none")),
         none = 0L, mean = 1L, sum = 2L)
}

arg_choice <- function(x, name, choices) {
  if (!is.character(x) || length(x) != 1L || !x %in% choices) {
    abort(sprintf("`%s` must be one of %s, got %s.", name,
                  paste0("\"", choices, "\"", collapse = ", "), describe(x)),
          class = "value_error")
  }
  x
}

# R torch's ignore_index: a 1-based class (>= 1 loses 1); negative ones (the default -100) stay.
ignore_index_arg <- function(ignore_index) {
  ignore_index <- whole_number(ignore_index, "ignore_index")
  if (ignore_index == 0) {
    abort("`ignore_index` is 1-based (the first class is 1), but found 0.", class = "value_error")
  }
  if (ignore_index > 0) ignore_index - 1L else ignore_index
}

#' Functional layers and losses
#'
#' R torch's `nnf_*` functions: the computation of a layer without its
#' parameters. Dimensions count from 1 (`dim = -1` is the last); class targets
#' of the classification losses are 1-based class numbers (an int64 tensor),
#' as in R torch. `reduction` is `"mean"`, `"sum"` or `"none"`.
#'
#' @param input,self A tensor.
#' @param target The target tensor.
#' @param weight,bias Weights and bias (or `NULL`).
#' @param dim A dimension (1-based).
#' @param dtype The result's dtype, or `NULL`.
#' @param reduction `"mean"`, `"sum"` or `"none"`.
#' @param ignore_index A (1-based) class to ignore; negative: none.
#' @param label_smoothing Label smoothing, in `[0, 1]`.
#' @param pos_weight Weight of positive examples.
#' @param p,training,inplace Dropout's probability, mode and in-place flag.
#' @param approximate `"none"` or `"tanh"` (gelu).
#' @param negative_slope,alpha,beta,threshold,min_val,max_val Activation parameters.
#' @param stride,padding,dilation,groups,kernel_size,ceil_mode,count_include_pad,divisor_override,output_size
#'   Convolution and pooling parameters.
#' @param normalized_shape,eps,momentum,running_mean,running_var Normalization parameters.
#' @param padding_idx,max_norm,norm_type,scale_grad_by_freq,sparse Embedding parameters.
#' @param start_dim,end_dim `nnf_flatten()`'s dims.
#' @param num_classes `nnf_one_hot()`: the number of classes (`-1`: the largest + 1).
#' @param delta,margin Loss parameters.
#' @return A tensor.
#' @name nnf
#' @examples
#' x <- torch_randn(4, 3)
#' nnf_relu(x)
#' nnf_softmax(x, dim = 2)
#' nnf_cross_entropy(x, torch_tensor(c(1L, 3L, 2L, 1L)))
#' nnf_mse_loss(x, torch_zeros(4, 3))
NULL

#' @rdname nnf
#' @export
nnf_linear <- function(input, weight, bias = NULL) torch_linear(input, weight, bias)

#' @rdname nnf
#' @export
nnf_relu <- function(input, inplace = FALSE) {
  if (isTRUE(inplace)) torch_relu_(input) else torch_relu(input)
}

#' @rdname nnf
#' @export
nnf_relu6 <- function(input, inplace = FALSE) torch_hardtanh(input, 0, 6)

#' @rdname nnf
#' @export
nnf_leaky_relu <- function(input, negative_slope = 0.01, inplace = FALSE) {
  torch_leaky_relu(input, negative_slope)
}

#' @rdname nnf
#' @export
nnf_elu <- function(input, alpha = 1, inplace = FALSE) torch_elu(input, alpha)

#' @rdname nnf
#' @export
nnf_celu <- function(input, alpha = 1, inplace = FALSE) torch_celu(input, alpha)

#' @rdname nnf
#' @export
nnf_gelu <- function(input, approximate = "none") torch_gelu(input, approximate)

#' @rdname nnf
#' @export
nnf_silu <- function(input, inplace = FALSE) torch_silu(input)

#' @rdname nnf
#' @export
nnf_sigmoid <- function(input) torch_sigmoid(input)

#' @rdname nnf
#' @export
nnf_tanh <- function(input) torch_tanh(input)

#' @rdname nnf
#' @export
nnf_softplus <- function(input, beta = 1, threshold = 20) torch_softplus(input, beta, threshold)

#' @rdname nnf
#' @export
nnf_hardtanh <- function(input, min_val = -1, max_val = 1, inplace = FALSE) {
  torch_hardtanh(input, min_val, max_val)
}

#' @rdname nnf
#' @export
nnf_softmax <- function(input, dim, dtype = NULL) torch_softmax(input, dim, as_torch_dtype(dtype))

#' @rdname nnf
#' @export
nnf_log_softmax <- function(input, dim = NULL, dtype = NULL) {
  torch_log_softmax(input, dim, as_torch_dtype(dtype))
}

#' @rdname nnf
#' @export
nnf_dropout <- function(input, p = 0.5, training = TRUE, inplace = FALSE) {
  check_probability(p)
  torch_dropout(input, p, training)
}

#' @rdname nnf
#' @export
nnf_dropout2d <- function(input, p = 0.5, training = TRUE, inplace = FALSE) {
  check_probability(p)
  torch_feature_dropout(input, p, training)
}

check_probability <- function(p) {
  if (!is.numeric(p) || length(p) != 1L || is.na(p) || p < 0 || p > 1) {
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
                           ceil_mode = FALSE) {
  torch_max_pool2d(input, kernel_size, stride, padding, dilation, ceil_mode)
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
  torch_adaptive_avg_pool2d(input, output_size)
}

#' @rdname nnf
#' @export
nnf_batch_norm <- function(input, running_mean, running_var, weight = NULL, bias = NULL,
                           training = FALSE, momentum = 0.1, eps = 1e-5) {
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
  padding <- if (is.null(padding_idx)) -1L else whole_number(padding_idx, "padding_idx")
  if (!is.null(max_norm)) {
    with_no_grad(torch_embedding_renorm_(weight, input, max_norm, norm_type))
  }
  torch_embedding(weight, input, padding, scale_grad_by_freq, sparse)
}

#' @rdname nnf
#' @export
nnf_flatten <- function(input, start_dim = 2, end_dim = -1) {
  torch_flatten(input, start_dim = start_dim, end_dim = end_dim)
}

#' @rdname nnf
#' @export
nnf_one_hot <- function(input, num_classes = -1) {
  torch_one_hot(one_based_tensor(input, "input"), num_classes)
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
  if (!identical(dim(input), dim(target))) {
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
nnf_binary_cross_entropy_with_logits <- function(input, target, weight = NULL,
                                                 reduction = "mean", pos_weight = NULL) {
  torch_binary_cross_entropy_with_logits(input, target, weight, pos_weight,
                                         reduction_enum(reduction))
}

#' @rdname nnf
#' @export
nnf_cross_entropy <- function(input, target, weight = NULL, ignore_index = -100,
                              reduction = "mean", label_smoothing = 0) {
  if (!target$is_floating_point()) target <- one_based_tensor(target, "target")
  .torch_cross_entropy_loss(input, target, weight, reduction_enum(reduction),
                            ignore_index_arg(ignore_index), label_smoothing)
}

#' @rdname nnf
#' @export
nnf_nll_loss <- function(input, target, weight = NULL, ignore_index = -100,
                         reduction = "mean") {
  .torch_nll_loss_nd(input, one_based_tensor(target, "target"), weight,
                     reduction_enum(reduction), ignore_index_arg(ignore_index))
}

#' @rdname nnf
#' @export
nnf_kl_div <- function(input, target, reduction = "mean") {
  torch_kl_div(input, target, reduction_enum(reduction))
}

#' @rdname nnf
#' @export
nnf_hinge_embedding_loss <- function(input, target, margin = 1, reduction = "mean") {
  torch_hinge_embedding_loss(input, target, margin, reduction_enum(reduction))
}
