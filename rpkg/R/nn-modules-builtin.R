# R torch's built-in layers and losses: each is PyTorch's own module (or a subclass in
# inst/python/ampkit_r_nn.py where R torch counts from 1), inside an nn_module of R torch's
# class name. Sizes may be R doubles; they must be whole numbers.

# One whole number (a size, a count) as an R integer, which reticulate hands over as a Python int.
int_arg <- function(x, name, null_ok = FALSE) { # nolint: cyclocomp_linter.
  if (null_ok && is.null(x)) {
    return(NULL)
  }
  if (!is.numeric(x) || length(x) != 1L || is.na(x) || x != trunc(x) || !is.finite(x)) {
    abort(sprintf("`%s` must be a whole number, got %s.", name, describe(x)),
          class = "value_error")
  }
  as.integer(x)
}

# A whole number or a vector of them (kernel sizes, strides): an int or a Python list of ints.
int_or_ints_arg <- function(x, name, null_ok = FALSE, strings = character()) { # nolint: cyclocomp_linter, line_length_linter.
  if (null_ok && is.null(x)) {
    return(NULL)
  }
  if (is.character(x) && length(x) == 1L && x %in% strings) {
    return(x)
  }
  if (!is.numeric(x) || length(x) == 0L || anyNA(x) || any(x != trunc(x))) {
    extra <- if (length(strings)) paste0(" (or one of ", paste0("\"", strings, "\"",
                                                                 collapse = ", "), ")") else ""
    abort(sprintf("`%s` must be a whole number or a vector of them%s, got %s.", name, extra,
                  describe(x)), class = "value_error")
  }
  if (length(x) == 1L) as.integer(x) else as.list(as.integer(x))
}

num_arg <- function(x, name, null_ok = FALSE) {
  if (null_ok && is.null(x)) {
    return(NULL)
  }
  arg_number(x, name)
}

reduction_arg <- function(reduction) {
  if (!is.character(reduction) || length(reduction) != 1L ||
      !reduction %in% c("mean", "sum", "none")) {
    abort(sprintf("`reduction` must be one of \"mean\", \"sum\" or \"none\", got %s.",
                  describe(reduction)), class = "value_error")
  }
  reduction
}

tensor_arg <- function(x, name, null_ok = TRUE) {
  if (null_ok && is.null(x)) {
    return(NULL)
  }
  if (!is_torch_tensor(x)) {
    abort(sprintf("`%s` must be a tensor, got %s.", name, describe(x)), class = "value_error")
  }
  unwrap(x)
}

# A 1-based class label or index argument as PyTorch's (one less; NULL stays NULL).
one_based_arg <- function(x, name, null_ok = TRUE) {
  if (null_ok && is.null(x)) {
    return(NULL)
  }
  int_arg(x, name) - 1L
}

#' Linear, convolution and pooling layers
#'
#' R torch's `nn_linear()`, `nn_conv1d()`, `nn_conv2d()`, `nn_max_pool2d()`,
#' `nn_avg_pool2d()` and `nn_adaptive_avg_pool2d()`, PyTorch's `Linear`,
#' `Conv1d`, `Conv2d`, `MaxPool2d`, `AvgPool2d` and `AdaptiveAvgPool2d` inside.
#' Sizes may be given as R numbers (`nn_linear(10, 32)`); vectors for
#' two-dimensional sizes.
#' `nn_linear(in, out)$weight` is `out x in`, initialized from torch's generator
#' as in R torch and PyTorch (so [torch_manual_seed()] gives their weights).
#'
#' @param in_features,out_features Input and output sizes.
#' @param bias Whether to learn an additive bias.
#' @param in_channels,out_channels Channels of input and output.
#' @param kernel_size,stride,padding,dilation Window sizes (a number or two);
#'   `padding` may also be `"same"` or `"valid"`; `stride = NULL` in pooling
#'   means `kernel_size`.
#' @param groups Blocked connections from input to output channels.
#' @param padding_mode `"zeros"`, `"reflect"`, `"replicate"` or `"circular"`.
#' @param return_indices Also return the (1-based) indices of the maxima.
#' @param ceil_mode Use ceiling instead of floor for the output shape.
#' @return A module.
#' @name nn_layers
#' @examples
#' if (ampkit_available()) {
#'   torch_manual_seed(1)
#'   fc <- nn_linear(10, 32)
#'   class(fc)
#'   fc(torch_randn(4, 10))$shape
#'   conv <- nn_conv2d(1, 4, kernel_size = 3, padding = 1)
#'   pool <- nn_max_pool2d(2)
#'   pool(conv(torch_randn(2, 1, 8, 8)))$shape
#' }
NULL

#' @rdname nn_layers
#' @export
nn_linear <- nn_module(
  "nn_linear",
  initialize = function(in_features, out_features, bias = TRUE) {
    self$.set_py(call_python(torch_nn()$Linear(
      int_arg(in_features, "in_features"), int_arg(out_features, "out_features"),
      bias = arg_flag(bias, "bias")), call = NULL))
    self$in_features <- in_features
    self$out_feature <- out_features # R torch's field name
  },
  reset_parameters = function() {
    private$py_$reset_parameters()
    invisible(NULL)
  },
  forward = function(input) private$.forward_py(input)
)

#' @rdname nn_layers
#' @export
nn_conv2d <- nn_module(
  "nn_conv2d",
  initialize = function(in_channels, out_channels, kernel_size, stride = 1, padding = 0,
                        dilation = 1, groups = 1, bias = TRUE, padding_mode = "zeros") {
    self$.set_py(call_python(torch_nn()$Conv2d(
      int_arg(in_channels, "in_channels"), int_arg(out_channels, "out_channels"),
      int_or_ints_arg(kernel_size, "kernel_size"), stride = int_or_ints_arg(stride, "stride"),
      padding = int_or_ints_arg(padding, "padding", strings = c("same", "valid")),
      dilation = int_or_ints_arg(dilation, "dilation"), groups = int_arg(groups, "groups"),
      bias = arg_flag(bias, "bias"), padding_mode = arg_string(padding_mode, "padding_mode",
                                                                example = "such as \"zeros\"")),
      call = NULL))
  },
  forward = function(input) private$.forward_py(input)
)

#' @rdname nn_layers
#' @export
nn_max_pool2d <- nn_module(
  "nn_max_pool2d",
  initialize = function(kernel_size, stride = NULL, padding = 0, dilation = 1,
                        return_indices = FALSE, ceil_mode = FALSE) {
    self$return_indices <- arg_flag(return_indices, "return_indices")
    self$.set_py(call_python(torch_nn()$MaxPool2d(
      int_or_ints_arg(kernel_size, "kernel_size"),
      stride = int_or_ints_arg(stride, "stride", null_ok = TRUE),
      padding = int_or_ints_arg(padding, "padding"),
      dilation = int_or_ints_arg(dilation, "dilation"), return_indices = self$return_indices,
      ceil_mode = arg_flag(ceil_mode, "ceil_mode")), call = NULL))
  },
  forward = function(input) {
    out <- private$.forward_py(input)
    if (self$return_indices) {
      out[[2L]] <- new_torch_tensor(unwrap(out[[2L]])$add(1L))
    }
    out
  }
)

#' @rdname nn_layers
#' @export
nn_conv1d <- nn_module(
  "nn_conv1d",
  initialize = function(in_channels, out_channels, kernel_size, stride = 1, padding = 0,
                        dilation = 1, groups = 1, bias = TRUE, padding_mode = "zeros") {
    self$.set_py(call_python(torch_nn()$Conv1d(
      int_arg(in_channels, "in_channels"), int_arg(out_channels, "out_channels"),
      int_or_ints_arg(kernel_size, "kernel_size"), stride = int_or_ints_arg(stride, "stride"),
      padding = int_or_ints_arg(padding, "padding", strings = c("same", "valid")),
      dilation = int_or_ints_arg(dilation, "dilation"), groups = int_arg(groups, "groups"),
      bias = arg_flag(bias, "bias"), padding_mode = arg_string(padding_mode, "padding_mode",
                                                                example = "such as \"zeros\"")),
      call = NULL))
  },
  forward = function(input) private$.forward_py(input)
)

#' @rdname nn_layers
#' @param count_include_pad Whether average pooling counts the zero padding.
#' @param divisor_override A divisor to use instead of the window's size.
#' @export
nn_avg_pool2d <- nn_module(
  "nn_avg_pool2d",
  initialize = function(kernel_size, stride = NULL, padding = 0, ceil_mode = FALSE,
                        count_include_pad = TRUE, divisor_override = NULL) {
    self$.set_py(call_python(torch_nn()$AvgPool2d(
      int_or_ints_arg(kernel_size, "kernel_size"),
      stride = int_or_ints_arg(stride, "stride", null_ok = TRUE),
      padding = int_or_ints_arg(padding, "padding"), ceil_mode = arg_flag(ceil_mode, "ceil_mode"),
      count_include_pad = arg_flag(count_include_pad, "count_include_pad"),
      divisor_override = int_arg(divisor_override, "divisor_override", null_ok = TRUE)),
      call = NULL))
  },
  forward = function(input) private$.forward_py(input)
)

#' @rdname nn_layers
#' @param output_size The output's height and width (a number or two).
#' @export
nn_adaptive_avg_pool2d <- nn_module(
  "nn_adaptive_avg_pool2d",
  initialize = function(output_size) {
    self$.set_py(call_python(torch_nn()$AdaptiveAvgPool2d(
      int_or_ints_arg(output_size, "output_size")), call = NULL))
  },
  forward = function(input) private$.forward_py(input)
)

#' Activation and dropout layers
#'
#' R torch's `nn_relu()`, `nn_relu6()`, `nn_leaky_relu()`, `nn_elu()`,
#' `nn_celu()`, `nn_silu()`, `nn_softplus()`, `nn_gelu()`, `nn_tanh()`,
#' `nn_sigmoid()`, `nn_softmax()`, `nn_log_softmax()`, `nn_identity()`,
#' `nn_dropout()` and `nn_dropout2d()` (PyTorch's modules inside). `dim` is 1-based as in R torch.
#'
#' @param inplace Whether to operate in place.
#' @param approximate `"none"` or `"tanh"`.
#' @param p Probability of an element to be zeroed.
#' @param dim The dimension (1-based; negative counts from the end).
#' @param ... Ignored (`nn_identity()` takes any arguments, as in R torch).
#' @return A module.
#' @name nn_activations
#' @examples
#' if (ampkit_available()) {
#'   x <- torch_randn(2, 3)
#'   nn_relu()(x)
#'   nn_softmax(dim = 2)(x)$sum(dim = 2)
#'   drop <- nn_dropout(p = 0.5)
#'   drop$eval()
#'   torch_equal(drop(x), x)
#' }
NULL

#' @rdname nn_activations
#' @export
nn_relu <- nn_module(
  "nn_relu",
  initialize = function(inplace = FALSE) {
    self$.set_py(torch_nn()$ReLU(inplace = arg_flag(inplace, "inplace")))
  },
  forward = function(input) private$.forward_py(input)
)

#' @rdname nn_activations
#' @export
nn_gelu <- nn_module(
  "nn_gelu",
  initialize = function(approximate = "none") {
    self$.set_py(call_python(torch_nn()$GELU(
      approximate = arg_string(approximate, "approximate", example = "such as \"none\" or \"tanh\"")
    ), call = NULL))
  },
  forward = function(input) private$.forward_py(input)
)

#' @rdname nn_activations
#' @export
nn_tanh <- nn_module(
  "nn_tanh",
  initialize = function() self$.set_py(torch_nn()$Tanh()),
  forward = function(input) private$.forward_py(input)
)

#' @rdname nn_activations
#' @export
nn_sigmoid <- nn_module(
  "nn_sigmoid",
  initialize = function() self$.set_py(torch_nn()$Sigmoid()),
  forward = function(input) private$.forward_py(input)
)

#' @rdname nn_activations
#' @export
nn_relu6 <- nn_module(
  "nn_relu6",
  initialize = function(inplace = FALSE) {
    self$.set_py(torch_nn()$ReLU6(inplace = arg_flag(inplace, "inplace")))
  },
  forward = function(input) private$.forward_py(input)
)

#' @rdname nn_activations
#' @param negative_slope The slope for negative inputs.
#' @export
nn_leaky_relu <- nn_module(
  "nn_leaky_relu",
  initialize = function(negative_slope = 0.01, inplace = FALSE) {
    self$.set_py(torch_nn()$LeakyReLU(negative_slope = arg_number(negative_slope,
                                                                 "negative_slope"),
                                      inplace = arg_flag(inplace, "inplace")))
  },
  forward = function(input) private$.forward_py(input)
)

#' @rdname nn_activations
#' @param alpha The ELU / CELU scale for negative inputs.
#' @export
nn_elu <- nn_module(
  "nn_elu",
  initialize = function(alpha = 1, inplace = FALSE) {
    self$.set_py(torch_nn()$ELU(alpha = arg_number(alpha, "alpha"),
                                inplace = arg_flag(inplace, "inplace")))
  },
  forward = function(input) private$.forward_py(input)
)

#' @rdname nn_activations
#' @export
nn_celu <- nn_module(
  "nn_celu",
  initialize = function(alpha = 1, inplace = FALSE) {
    self$.set_py(torch_nn()$CELU(alpha = arg_number(alpha, "alpha"),
                                 inplace = arg_flag(inplace, "inplace")))
  },
  forward = function(input) private$.forward_py(input)
)

#' @rdname nn_activations
#' @export
nn_silu <- nn_module(
  "nn_silu",
  initialize = function(inplace = FALSE) {
    self$.set_py(torch_nn()$SiLU(inplace = arg_flag(inplace, "inplace")))
  },
  forward = function(input) private$.forward_py(input)
)

#' @rdname nn_activations
#' @param beta,threshold Softplus's sharpness and the input above which it is linear.
#' @export
nn_softplus <- nn_module(
  "nn_softplus",
  initialize = function(beta = 1, threshold = 20) {
    self$.set_py(torch_nn()$Softplus(beta = arg_number(beta, "beta"),
                                     threshold = arg_number(threshold, "threshold")))
  },
  forward = function(input) private$.forward_py(input)
)

#' @rdname nn_activations
#' @export
nn_identity <- nn_module(
  "nn_identity",
  initialize = function(...) self$.set_py(torch_nn()$Identity()),
  forward = function(input) private$.forward_py(input)
)

#' @rdname nn_activations
#' @export
nn_softmax <- nn_module(
  "nn_softmax",
  initialize = function(dim) {
    self$.set_py(torch_nn()$Softmax(dim = as_py_dim(dim)))
  },
  forward = function(input) private$.forward_py(input)
)

#' @rdname nn_activations
#' @export
nn_log_softmax <- nn_module(
  "nn_log_softmax",
  initialize = function(dim) {
    self$.set_py(torch_nn()$LogSoftmax(dim = as_py_dim(dim)))
  },
  forward = function(input) private$.forward_py(input)
)

#' @rdname nn_activations
#' @export
nn_dropout2d <- nn_module(
  "nn_dropout2d",
  initialize = function(p = 0.5, inplace = FALSE) {
    self$.set_py(call_python(torch_nn()$Dropout2d(p = arg_number(p, "p"),
                                                  inplace = arg_flag(inplace, "inplace")),
                             call = NULL))
  },
  forward = function(input) private$.forward_py(input)
)

#' @rdname nn_activations
#' @export
nn_dropout <- nn_module(
  "nn_dropout",
  initialize = function(p = 0.5, inplace = FALSE) {
    self$.set_py(call_python(torch_nn()$Dropout(p = arg_number(p, "p"),
                                                inplace = arg_flag(inplace, "inplace")),
                             call = NULL))
  },
  forward = function(input) private$.forward_py(input)
)

#' Normalization, embedding and reshaping layers
#'
#' R torch's `nn_batch_norm1d()`, `nn_batch_norm2d()`, `nn_layer_norm()`,
#' `nn_embedding()` and `nn_flatten()`. As in R torch, `nn_embedding()` takes
#' 1-based indices (`1..num_embeddings`) and a 1-based `padding_idx`, and
#' `nn_flatten()` 1-based dims (`start_dim = 2` keeps the batch dimension).
#'
#' @param num_features Number of features or channels.
#' @param eps Added to the variance for numerical stability.
#' @param momentum Running statistics' momentum (`NULL`: cumulative average).
#' @param affine Whether to learn a scale and shift.
#' @param track_running_stats Whether to keep running mean and variance.
#' @param normalized_shape The trailing shape to normalize over.
#' @param elementwise_affine Whether to learn a scale and shift per element.
#' @param num_embeddings,embedding_dim Size of the dictionary and of each
#'   embedding vector.
#' @param padding_idx A 1-based index whose embedding is not trained
#'   (`NULL`: none).
#' @param max_norm,norm_type Renormalize embeddings whose norm exceeds
#'   `max_norm`.
#' @param scale_grad_by_freq,sparse As in PyTorch.
#' @param .weight Optional initial weights (`num_embeddings x embedding_dim`).
#' @param start_dim,end_dim The (1-based) dims to flatten.
#' @return A module.
#' @name nn_normalization
#' @examples
#' if (ampkit_available()) {
#'   bn <- nn_batch_norm1d(3)
#'   bn(torch_randn(8, 3))$shape
#'   names(bn$state_dict())
#'   emb <- nn_embedding(10, 2, padding_idx = 1)
#'   emb(torch_tensor(c(1L, 10L)))
#'   nn_flatten()(torch_randn(2, 3, 4))$shape
#' }
NULL

# The batch norms' initialize (`python_name`: PyTorch's class).
batch_norm_py <- function(python_name, num_features, eps, momentum, affine,
                          track_running_stats) {
  batch_norm <- do.call("$", list(torch_nn(), python_name))
  call_python(batch_norm(
    int_arg(num_features, "num_features"), eps = arg_number(eps, "eps"),
    momentum = num_arg(momentum, "momentum", null_ok = TRUE),
    affine = arg_flag(affine, "affine"),
    track_running_stats = arg_flag(track_running_stats, "track_running_stats")),
    call = NULL)
}

#' @rdname nn_normalization
#' @export
nn_batch_norm1d <- nn_module(
  "nn_batch_norm1d",
  initialize = function(num_features, eps = 1e-5, momentum = 0.1, affine = TRUE,
                        track_running_stats = TRUE) {
    self$.set_py(batch_norm_py("BatchNorm1d", num_features, eps, momentum, affine,
                               track_running_stats))
  },
  forward = function(input) private$.forward_py(input)
)

#' @rdname nn_normalization
#' @export
nn_batch_norm2d <- nn_module(
  "nn_batch_norm2d",
  initialize = function(num_features, eps = 1e-5, momentum = 0.1, affine = TRUE,
                        track_running_stats = TRUE) {
    self$.set_py(batch_norm_py("BatchNorm2d", num_features, eps, momentum, affine,
                               track_running_stats))
  },
  forward = function(input) private$.forward_py(input)
)

#' @rdname nn_normalization
#' @export
nn_layer_norm <- nn_module(
  "nn_layer_norm",
  initialize = function(normalized_shape, eps = 1e-5, elementwise_affine = TRUE) {
    shape <- int_or_ints_arg(normalized_shape, "normalized_shape")
    self$.set_py(call_python(torch_nn()$LayerNorm(
      if (is.list(shape)) shape else list(shape), eps = arg_number(eps, "eps"),
      elementwise_affine = arg_flag(elementwise_affine, "elementwise_affine")), call = NULL))
  },
  forward = function(input) private$.forward_py(input)
)

#' @rdname nn_normalization
#' @export
nn_embedding <- nn_module(
  "nn_embedding",
  initialize = function(num_embeddings, embedding_dim, padding_idx = NULL, max_norm = NULL,
                        norm_type = 2, scale_grad_by_freq = FALSE, sparse = FALSE,
                        .weight = NULL) {
    n <- int_arg(num_embeddings, "num_embeddings")
    padding <- int_arg(padding_idx, "padding_idx", null_ok = TRUE)
    if (!is.null(padding)) {
      if (padding == 0L || abs(padding) > n) {
        abort(sprintf(paste0("`padding_idx` must be an index of the embedding (1 to %d, or ",
                             "negative from the end), got %d."), n, padding),
              class = "value_error")
      }
      padding <- if (padding > 0L) padding - 1L else padding
    }
    self$.set_py(call_python(nn_py()$OneBasedEmbedding(
      n, int_arg(embedding_dim, "embedding_dim"), padding_idx = padding,
      max_norm = num_arg(max_norm, "max_norm", null_ok = TRUE),
      norm_type = arg_number(norm_type, "norm_type"),
      scale_grad_by_freq = arg_flag(scale_grad_by_freq, "scale_grad_by_freq"),
      sparse = arg_flag(sparse, "sparse"), `_weight` = tensor_arg(.weight, ".weight")),
      call = NULL))
  },
  forward = function(input) private$.forward_py(input)
)

#' @rdname nn_normalization
#' @export
nn_flatten <- nn_module(
  "nn_flatten",
  initialize = function(start_dim = 2, end_dim = -1) {
    self$.set_py(torch_nn()$Flatten(as_py_dim(start_dim, "start_dim"),
                                    as_py_dim(end_dim, "end_dim")))
  },
  forward = function(input) private$.forward_py(input)
)

#' Loss modules
#'
#' R torch's `nn_mse_loss()`, `nn_l1_loss()`, `nn_cross_entropy_loss()`,
#' `nn_nll_loss()`, `nn_bce_with_logits_loss()` and `nn_bce_loss()`. Integer
#' class labels of `nn_cross_entropy_loss()` and `nn_nll_loss()` are 1-based
#' (`1..C`), as in R torch; `ignore_index` is a label in the same terms.
#'
#' @param reduction `"mean"`, `"sum"` or `"none"`.
#' @param weight Optional tensor of per-class (or per-element) weights.
#' @param ignore_index A target label whose entries are ignored.
#' @param pos_weight Optional weight of positive examples.
#' @return A module called as `loss(input, target)`.
#' @name nn_losses
#' @examples
#' if (ampkit_available()) {
#'   loss <- nn_cross_entropy_loss()
#'   logits <- torch_randn(4, 3)
#'   loss(logits, torch_tensor(c(1L, 3L, 2L, 3L)))
#'   nn_mse_loss()(torch_zeros(3), torch_ones(3))
#' }
NULL

#' @rdname nn_losses
#' @export
nn_mse_loss <- nn_module(
  "nn_mse_loss",
  initialize = function(reduction = "mean") {
    self$.set_py(torch_nn()$MSELoss(reduction = reduction_arg(reduction)))
  },
  forward = function(input, target) private$.forward_py(input, target)
)

#' @rdname nn_losses
#' @export
nn_l1_loss <- nn_module(
  "nn_l1_loss",
  initialize = function(reduction = "mean") {
    self$.set_py(torch_nn()$L1Loss(reduction = reduction_arg(reduction)))
  },
  forward = function(input, target) private$.forward_py(input, target)
)

#' @rdname nn_losses
#' @export
nn_cross_entropy_loss <- nn_module(
  "nn_cross_entropy_loss",
  initialize = function(weight = NULL, ignore_index = -100, reduction = "mean") {
    self$.set_py(call_python(nn_py()$OneBasedCrossEntropyLoss(
      weight = tensor_arg(weight, "weight"), ignore_index = one_based_arg(ignore_index,
                                                                          "ignore_index"),
      reduction = reduction_arg(reduction)), call = NULL))
  },
  forward = function(input, target) private$.forward_py(input, target)
)

#' @rdname nn_losses
#' @export
nn_nll_loss <- nn_module(
  "nn_nll_loss",
  initialize = function(weight = NULL, ignore_index = -100, reduction = "mean") {
    self$.set_py(call_python(nn_py()$OneBasedNLLLoss(
      weight = tensor_arg(weight, "weight"), ignore_index = one_based_arg(ignore_index,
                                                                          "ignore_index"),
      reduction = reduction_arg(reduction)), call = NULL))
  },
  forward = function(input, target) private$.forward_py(input, target)
)

#' @rdname nn_losses
#' @export
nn_bce_with_logits_loss <- nn_module(
  "nn_bce_with_logits_loss",
  initialize = function(weight = NULL, reduction = "mean", pos_weight = NULL) {
    self$.set_py(call_python(torch_nn()$BCEWithLogitsLoss(
      weight = tensor_arg(weight, "weight"), reduction = reduction_arg(reduction),
      pos_weight = tensor_arg(pos_weight, "pos_weight")), call = NULL))
  },
  forward = function(input, target) private$.forward_py(input, target)
)

#' @rdname nn_losses
#' @export
nn_bce_loss <- nn_module(
  "nn_bce_loss",
  initialize = function(weight = NULL, reduction = "mean") {
    self$.set_py(call_python(torch_nn()$BCELoss(
      weight = tensor_arg(weight, "weight"), reduction = reduction_arg(reduction)), call = NULL))
  },
  forward = function(input, target) private$.forward_py(input, target)
)

#' Containers: sequential and list of modules
#'
#' `nn_sequential(...)` chains modules (given as arguments, or spliced from a
#' list with `!!!`); submodules are named `"0"`, `"1"`, ... (state-dict keys
#' `"0.weight"`, as in R torch and PyTorch) and indexed from 1:
#' `model[[1]]`, `model[2:3]`, `length(model)`. `nn_module_list(modules)` holds
#' modules in a list (registered, indexed from 1, `$append()`), for forward
#' code that iterates over them.
#'
#' @param ... Modules; `!!!` splices a list of them.
#' @param modules A list of modules.
#' @return A module.
#' @name nn_containers
#' @examples
#' if (ampkit_available()) {
#'   layers <- list(nn_linear(4, 8), nn_relu(), nn_linear(8, 1))
#'   model <- nn_sequential(!!!layers)
#'   length(model)
#'   model[[1]]$weight$shape
#'   names(model$state_dict())
#'   model(torch_randn(3, 4))$shape
#' }
NULL

#' @rdname nn_containers
#' @export
nn_sequential <- nn_module(
  "nn_sequential",
  initialize = function(...) {
    self$.set_py(torch_nn()$Sequential())
    modules <- rlang::list2(...)
    for (i in seq_along(modules)) {
      self$add_module(name = i - 1, module = modules[[i]])
    }
  },
  forward = function(input) private$.forward_py(input)
)

#' @export
length.nn_sequential <- function(x) {
  length(attr(x, "module")$.__enclos_env__$private$modules_)
}

#' @export
`[[.nn_sequential` <- function(x, i) {
  if (is.numeric(i) && length(i) == 1L) {
    children <- attr(x, "module")$.__enclos_env__$private$modules_
    if (is.na(i) || i < 1 || i > length(children)) {
      abort(sprintf("Index %s is out of range: this nn_sequential has %d modules (1 to %d).",
                    describe(i), length(children), length(children)), class = "index_error")
    }
    return(children[[i]])
  }
  NextMethod("[[")
}

#' @export
`[.nn_sequential` <- function(x, i) {
  nn_sequential(!!!lapply(i, function(j) x[[j]]))
}

#' @rdname nn_containers
#' @export
nn_module_list <- nn_module(
  "nn_module_list",
  initialize = function(modules = list()) {
    self$.set_py(torch_nn()$ModuleList())
    for (i in seq_along(modules)) {
      self$add_module(i - 1, modules[[i]])
    }
  },
  append = function(module) {
    self$add_module(length(self$children), module)
    invisible(self)
  },
  insert = function(index, module) {
    index <- int_arg(index, "index")
    n <- length(private$modules_)
    if (index < 1L || index > n + 1L) {
      abort(sprintf("`index` must be between 1 and %d, got %d.", n + 1L, index),
            class = "index_error")
    }
    if (!is_nn_module(module)) {
      abort(sprintf("`module` must be an nn_module, got %s.", describe(module)),
            class = "value_error")
    }
    call_python(private$py_$insert(index - 1L, unwrap(module)), call = NULL)
    modules <- append(unname(private$modules_), list(module), after = index - 1L)
    names(modules) <- as.character(seq_along(modules) - 1L)
    private$modules_ <- modules
    invisible(self)
  },
  extend = function(modules) {
    for (module in modules) {
      self$append(module)
    }
    invisible(self)
  },
  forward = function(...) {
    abort("nn_module_list has no forward: call its modules.", class = "not_implemented_error")
  }
)

#' @export
`[[.nn_module_list` <- `[[.nn_sequential`

#' @export
length.nn_module_list <- length.nn_sequential

#' @export
as.list.nn_module_list <- function(x, ...) {
  attr(x, "module")$.__enclos_env__$private$modules_
}
