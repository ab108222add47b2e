#' @include nn-module.R
NULL

# R torch's built-in layers and losses, as nn_modules over the nnf_* functions. Parameters are
# initialized as PyTorch's modules initialize them (libtorch's generator, the same draws), so that
# torch_manual_seed() gives PyTorch's and R torch's weights.

#' Initializing parameters
#'
#' R torch's `nn_init_*` functions fill a tensor in place (without recording
#' autograd) and return it: `nn_init_uniform_(x, a, b)`, `nn_init_normal_(x,
#' mean, std)`, `nn_init_constant_(x, val)`, `nn_init_zeros_()`,
#' `nn_init_ones_()`, `nn_init_eye_()`, and the fan-based ones
#' (`nn_init_kaiming_uniform_()`, `nn_init_kaiming_normal_()`,
#' `nn_init_xavier_uniform_()`, `nn_init_xavier_normal_()`), with PyTorch's
#' formulas.
#' @param tensor A tensor.
#' @param a,b Bounds (uniform, and where `nn_init_trunc_normal_()` cuts the
#'   normal); `a`: the negative slope (kaiming).
#' @param mean,std The normal's parameters.
#' @param val A value.
#' @param mode `"fan_in"` or `"fan_out"`.
#' @param nonlinearity The nonlinearity the gain is computed for.
#' @param gain A scaling factor.
#' @return The tensor, invisibly.
#' @name nn_init
#' @examples
#' w <- torch_empty(3, 5)
#' nn_init_xavier_uniform_(w)
#' nn_init_constant_(torch_empty(2), 0.5)
#' nn_init_calculate_gain("leaky_relu", 0.2)
#' nn_init_orthogonal_(torch_empty(3, 5))
#' nn_init_trunc_normal_(torch_empty(4), std = 0.02)
NULL

init_no_grad <- function(code) invisible(with_no_grad(code))

check_tensor <- function(x, name) {
  if (!inherits(x, "torch_tensor")) { # is_torch_tensor()'s rule, one call fewer on the hot path
    abort(sprintf("`%s` must be a tensor, got %s.", name, describe(x)), class = "value_error")
  }
}

#' @rdname nn_init
#' @export
nn_init_uniform_ <- function(tensor, a = 0, b = 1) {
  check_tensor(tensor, "tensor")
  init_no_grad(tensor$uniform_(a, b))
}

#' @rdname nn_init
#' @export
nn_init_normal_ <- function(tensor, mean = 0, std = 1) {
  check_tensor(tensor, "tensor")
  init_no_grad(tensor$normal_(mean, std))
}

#' @rdname nn_init
#' @export
nn_init_constant_ <- function(tensor, val) {
  check_tensor(tensor, "tensor")
  init_no_grad(tensor$fill_(val))
}

#' @rdname nn_init
#' @export
nn_init_zeros_ <- function(tensor) {
  check_tensor(tensor, "tensor")
  init_no_grad(tensor$zero_())
}

#' @rdname nn_init
#' @export
nn_init_ones_ <- function(tensor) {
  check_tensor(tensor, "tensor")
  init_no_grad(tensor$fill_(1))
}

#' @rdname nn_init
#' @export
nn_init_eye_ <- function(tensor) {
  check_tensor(tensor, "tensor")
  if (tensor$dim() != 2L) {
    abort("Only tensors with 2 dimensions are supported", class = "value_error")
  }
  init_no_grad(tensor$copy_(torch_eye(tensor$size(1), tensor$size(2), dtype = tensor$dtype)))
}

#' @rdname nn_init
#' @export
nn_init_trunc_normal_ <- function(tensor, mean = 0, std = 1, a = -2, b = 2) {
  check_tensor(tensor, "tensor")
  # PyTorch's (2.13) rejection sampling, draw for draw: normal draws redrawn where out of
  # [a, b] when the interval holds more than 0.3 of the mass; else uniform draws on [a, b]
  # accepted with the density's ratio to its peak there.
  for (name in c("mean", "std", "a", "b")) arg_number(get(name), name)
  mass <- stats::pnorm((b - mean) / std) - stats::pnorm((a - mean) / std)
  init_no_grad(if (mass > 0.3) {
    lo <- torch_tensor(a, dtype = tensor$dtype)$item() # the bounds as the dtype holds them
    hi <- torch_tensor(b, dtype = tensor$dtype)$item()
    result <- tensor$normal_(mean, std)
    repeat {
      outside <- (result < lo) | (result > hi)
      if (!as.logical(outside$any())) break
      result <- torch_where(outside, torch_empty_like(result)$normal_(mean, std), result)
    }
    tensor$copy_(result)
  } else {
    log_peak <- -0.5 * ((max(a, min(mean, b)) - mean) / std)^2
    log_density <- function(x) x$sub_(mean)$div_(std)$pow_(2)$mul_(-0.5)$sub_(log_peak)
    candidates <- torch_empty_like(tensor)
    accept <- torch_empty_like(tensor)
    result <- tensor$uniform_(a, b)
    pending <- accept$uniform_()$log_()$gt(log_density(candidates$copy_(tensor)))
    while (as.logical(pending$any())) {
      candidates$uniform_(a, b)
      result <- torch_where(pending, candidates, result)
      pending <- torch_where(pending, accept$uniform_()$log_()$gt(log_density(candidates)),
                             pending)
    }
    tensor$copy_(result)
  })
}

#' @rdname nn_init
#' @param sparsity `nn_init_sparse_()`: the fraction of each column set to 0.
#' @export
nn_init_sparse_ <- function(tensor, sparsity, std = 0.01) {
  check_tensor(tensor, "tensor")
  if (tensor$dim() != 2L) {
    abort("Only tensors with 2 dimensions are supported", class = "value_error")
  }
  rows <- tensor$size(1)
  zeros <- min(ceiling(arg_number(sparsity, "sparsity") * rows), rows) # PyTorch's slice's cap
  std <- arg_number(std, "std")
  # PyTorch's draws: the normal ones, then a permutation of the rows per column.
  init_no_grad({
    tensor$normal_(0, std)
    for (col in seq_len(tensor$size(2))) {
      permutation <- torch_randperm(rows) # drawn even when no row is zeroed, as PyTorch's
      if (zeros > 0) tensor[permutation[seq_len(zeros)] + 1L, col] <- 0
    }
  })
  invisible(tensor)
}

#' @rdname nn_init
#' @export
nn_init_orthogonal_ <- function(tensor, gain = 1) {
  check_tensor(tensor, "tensor")
  if (tensor$dim() < 2L) {
    abort("Only tensors with 2 or more dimensions are supported", class = "value_error")
  }
  gain <- arg_number(gain, "gain")
  if (tensor$numel() == 0L) return(invisible(tensor))
  rows <- tensor$size(1)
  cols <- tensor$numel() %/% rows
  # PyTorch's: QR of a normal draw (transposed when wide), Q's columns signed by R's diagonal.
  flat <- torch_empty(rows, cols, dtype = tensor$dtype, device = tensor$device)$normal_(0, 1)
  if (rows < cols) flat <- flat$t()
  qr <- linalg_qr(flat)
  q <- qr[[1L]] * torch_diag(qr[[2L]], 0)$sign()
  if (rows < cols) q <- q$t()
  init_no_grad({
    tensor$view_as(q)$copy_(q)
    tensor$mul_(gain)
  })
}

#' @rdname nn_init
#' @param groups `nn_init_dirac_()`: how many groups of output channels each
#'   keep the identity.
#' @export
nn_init_dirac_ <- function(tensor, groups = 1) {
  check_tensor(tensor, "tensor")
  nd <- tensor$dim()
  if (!nd %in% 3:5) {
    abort("Only tensors with 3, 4, or 5 dimensions are supported", class = "value_error")
  }
  groups <- whole_number(groups, "groups")
  if (groups < 1L) {
    abort(sprintf("`groups` must be at least 1, got %d.", groups), class = "value_error")
  }
  shape <- dim(tensor)
  if (shape[[1L]] %% groups != 0) {
    # PyTorch's "dim 0" is the first dimension to an R user.
    abort(sprintf("`tensor`'s first dimension, %d, is not divisible by groups (`groups` = %d).",
                  shape[[1L]], groups), class = "value_error")
  }
  out_per_group <- shape[[1L]] %/% groups
  centre <- shape[-(1:2)] %/% 2 + 1  # the kernel's middle, 1-based
  init_no_grad({
    tensor$zero_()
    for (g in seq_len(groups) - 1L) {
      for (d in seq_len(min(out_per_group, shape[[2L]]))) {
        index <- c(list(g * out_per_group + d, d), as.list(centre))
        do.call(`[<-`, c(list(tensor), index, list(value = 1)))
      }
    }
  })
  invisible(tensor)
}

# PyTorch's fan computation (torch.nn.init._calculate_fan_in_and_fan_out).
fan_in_out <- function(tensor) {
  check_tensor(tensor, "tensor")
  shape <- dim(tensor)
  if (length(shape) < 2L) {
    abort("Fan in and fan out can not be computed for tensor with fewer than 2 dimensions",
          class = "value_error")
  }
  receptive <- if (length(shape) > 2L) prod(shape[-(1:2)]) else 1
  c(fan_in = shape[[2L]] * receptive, fan_out = shape[[1L]] * receptive)
}

#' @rdname nn_init
#' @param param `nn_init_calculate_gain()`: the negative slope of `"leaky_relu"`
#'   (`NULL`: 0.01).
#' @export
nn_init_calculate_gain <- function(nonlinearity, param = NULL) {
  nonlinearity <- arg_string(nonlinearity, "nonlinearity", example = "such as \"relu\"")
  switch(nonlinearity,
    linear = , conv1d = , conv2d = , conv3d = , conv_transpose1d = , conv_transpose2d = ,
    conv_transpose3d = , sigmoid = 1,
    tanh = 5 / 3,
    relu = sqrt(2),
    leaky_relu = {
      slope <- if (is.null(param)) 0.01 else param
      sqrt(2 / (1 + slope^2))
    },
    selu = 3 / 4,
    abort(sprintf("Unsupported nonlinearity %s", nonlinearity), class = "value_error")
  )
}

#' @rdname nn_init
#' @export
nn_init_kaiming_uniform_ <- function(tensor, a = 0, mode = "fan_in",
                                     nonlinearity = "leaky_relu") {
  if (zero_element(tensor)) return(invisible(tensor))
  fan <- fan_in_out(tensor)[[arg_choice(mode, "mode", c("fan_in", "fan_out"))]]
  bound <- nn_init_calculate_gain(nonlinearity, a) * sqrt(3 / fan)
  init_no_grad(tensor$uniform_(-bound, bound))
}

#' @rdname nn_init
#' @export
nn_init_kaiming_normal_ <- function(tensor, a = 0, mode = "fan_in", nonlinearity = "leaky_relu") {
  if (zero_element(tensor)) return(invisible(tensor))
  fan <- fan_in_out(tensor)[[arg_choice(mode, "mode", c("fan_in", "fan_out"))]]
  init_no_grad(tensor$normal_(0, nn_init_calculate_gain(nonlinearity, a) / sqrt(fan)))
}

#' @rdname nn_init
#' @export
nn_init_xavier_uniform_ <- function(tensor, gain = 1) {
  fans <- fan_in_out(tensor)
  bound <- gain * sqrt(2 / sum(fans)) * sqrt(3)
  init_no_grad(tensor$uniform_(-bound, bound))
}

#' @rdname nn_init
#' @export
nn_init_xavier_normal_ <- function(tensor, gain = 1) {
  init_no_grad(tensor$normal_(0, gain * sqrt(2 / sum(fan_in_out(tensor)))))
}

# PyTorch's kaiming initializers leave a tensor with a zero-size dimension as it is, warning.
zero_element <- function(tensor) {
  check_tensor(tensor, "tensor")
  if (!any(tensor$shape == 0L)) {
    return(FALSE)
  }
  warning("Initializing zero-element tensors is a no-op", call. = FALSE)
  TRUE
}

# PyTorch's reset_parameters() of Linear and the convolutions: kaiming_uniform(a = sqrt(5)) for the
# weight, uniform(+-1/sqrt(fan_in)) for the bias.
reset_linear_like <- function(self) {
  nn_init_kaiming_uniform_(self$weight, a = sqrt(5))
  if (!is.null(self$bias)) {
    fan_in <- fan_in_out(self$weight)[["fan_in"]]
    bound <- if (fan_in > 0) 1 / sqrt(fan_in) else 0 # PyTorch's: no inputs, a zero bias
    nn_init_uniform_(self$bias, -bound, bound)
  }
}

#' Layers
#'
#' R torch's built-in layers: each an [nn_module()] whose parameters are
#' initialized as PyTorch initializes them (so [torch_manual_seed()] gives
#' PyTorch's weights). Sizes may be R doubles; two-dimensional sizes a
#' number or a vector of two.
#'
#' @param in_features,out_features Input and output sizes.
#' @param bias Whether to learn an additive bias.
#' @param padding_mode How a convolution pads: `"zeros"`, `"reflect"`,
#'   `"replicate"` or `"circular"`.
#' @param in_channels,out_channels,kernel_size,stride,padding,dilation,groups
#'   Convolution sizes.
#' @param ceil_mode,count_include_pad,divisor_override,output_size,return_indices
#'   Pooling options (`return_indices`: max pooling returns `list(output,
#'   indices)`, the indices 1-based).
#' @param num_features,eps,momentum,affine,track_running_stats Batch norm.
#' @param normalized_shape,elementwise_affine Layer norm.
#' @param num_embeddings,embedding_dim,padding_idx,max_norm,norm_type
#'   Embedding (`padding_idx` 1-based, as in R torch).
#' @param scale_grad_by_freq,sparse,.weight Embedding.
#' @param mode,include_last_offset `nn_embedding_bag()`: how a bag's rows
#'   are reduced (`"sum"`, `"mean"` or `"max"`), and whether its `offsets`
#'   (given to the module's forward) end with the input's length.
#'   `nn_embedding_bag$from_pretrained(embeddings, freeze = TRUE, ...)` (R
#'   torch's and PyTorch's) makes a bag over a table: its weight holds
#'   `embeddings`' values (the same memory, a tensor of its own), trained
#'   unless `freeze`; the other arguments are `nn_embedding_bag()`'s.
#' @param p,inplace Dropout (`inplace`: activations too, which then write into
#'   their input); `p`: `nn_multi_margin_loss()`'s exponent (1 or 2), the
#'   norm's degree of `nn_pairwise_distance()` and `nn_triplet_margin_loss()`.
#' @param start_dim,end_dim Flatten.
#' @param dim A dimension (1-based).
#' @param negative_slope,alpha,beta,threshold,approximate Activations.
#' @param reduction,weight,ignore_index,label_smoothing,pos_weight,delta,margin Losses.
#' @param ... Modules (`nn_sequential()`), or ignored.
#' @param modules A list of modules (`nn_module_list()`).
#' @return A module.
#' @name nn_layers
#' @examples
#' torch_manual_seed(1)
#' model <- nn_sequential(nn_linear(4, 8), nn_relu(), nn_linear(8, 2))
#' model(torch_randn(3, 4))
#' conv <- nn_conv2d(3, 8, kernel_size = 3, padding = 1)
#' dim(conv(torch_randn(1, 3, 16, 16)))
#' nn_cross_entropy_loss()(torch_randn(2, 5), torch_tensor(c(1L, 5L)))
#' nn_embedding_bag(10, 3, mode = "sum")(torch_tensor(rbind(c(1L, 2L), c(10L, 3L))))
#' table <- torch_randn(10, 3)
#' bag <- nn_embedding_bag$from_pretrained(table, mode = "sum")
#' bag(torch_tensor(c(1L, 2L, 4L, 5L)), offsets = torch_tensor(c(0L, 2L)))
#' nn_aum_loss()(torch_randn(6), torch_tensor(c(1L, 2L, 1L, 1L, 2L, 2L)))
#' nn_sequential(nn_linear(4, 6), nn_prelu(6), nn_glu())(torch_randn(2, 4))
NULL

#' @rdname nn_layers
#' @export
nn_linear <- nn_module(
  "nn_linear",
  initialize = function(in_features, out_features, bias = TRUE) {
    self$in_features <- whole_number(in_features, "in_features")
    self$out_features <- whole_number(out_features, "out_features")
    self$out_feature <- self$out_features # the name older R torch versions used
    self$weight <- nn_parameter(torch_empty(self$out_features, self$in_features))
    if (arg_flag(bias, "bias")) {
      self$bias <- nn_parameter(torch_empty(self$out_features))
    } else {
      self$bias <- NULL
    }
    self$reset_parameters()
  },
  reset_parameters = function() reset_linear_like(self),
  forward = function(input) torch_linear(input, self$weight, self$bias)
)

#' @rdname nn_layers
#' @param in1_features,in2_features `nn_bilinear()`: the sizes of its two inputs.
#' @export
nn_bilinear <- nn_module(
  "nn_bilinear",
  initialize = function(in1_features, in2_features, out_features, bias = TRUE) {
    self$in1_features <- whole_number(in1_features, "in1_features")
    self$in2_features <- whole_number(in2_features, "in2_features")
    self$out_features <- whole_number(out_features, "out_features")
    self$weight <- nn_parameter(torch_empty(self$out_features, self$in1_features,
                                            self$in2_features))
    self$bias <- if (arg_flag(bias, "bias")) nn_parameter(torch_empty(self$out_features))
    self$reset_parameters()
  },
  # PyTorch's Bilinear.reset_parameters(): uniform(+-1/sqrt(in1_features)), weight then bias.
  reset_parameters = function() {
    bound <- 1 / sqrt(self$in1_features)
    nn_init_uniform_(self$weight, -bound, bound)
    if (!is.null(self$bias)) nn_init_uniform_(self$bias, -bound, bound)
  },
  forward = function(input1, input2) nnf_bilinear(input1, input2, self$weight, self$bias)
)

# R torch's and PyTorch's checks of a convolution's groups (a positive whole number already),
# when it is made: each group has a whole share of the channels (and R torch's words).
check_groups <- function(in_channels, out_channels, groups) {
  if (in_channels %% groups != 0L) {
    abort("`in_channels` must be divisible by groups", class = "value_error")
  }
  if (out_channels %% groups != 0L) {
    abort("`out_channels` must be divisible by groups", class = "value_error")
  }
}

# The module factories below define R6 methods, where `self` is bound by R6.
# nolint start: object_usage_linter.
conv_module <- function(classname, nd, f) {
  nn_module(
    classname,
    initialize = function(in_channels, out_channels, kernel_size, stride = 1, padding = 0,
                          dilation = 1, groups = 1, bias = TRUE, padding_mode = "zeros") {
      self$kernel_size <- nd_sizes(kernel_size, "kernel_size", nd, min = 1L)
      self$stride <- nd_sizes(stride, "stride", nd, min = 1L)
      self$padding <- if (is.character(padding)) {
        arg_choice(padding, "padding", c("valid", "same"))
      } else {
        nd_sizes(padding, "padding", nd)
      }
      # PyTorch's check, whatever the padding mode (the others pad by conv_pad_widths()).
      if (identical(self$padding, "same") && any(self$stride != 1L)) {
        abort("padding='same' is not supported for strided convolutions", class = "value_error")
      }
      self$dilation <- nd_sizes(dilation, "dilation", nd, min = 1L)
      self$groups <- positive_whole(groups, "groups")
      self$in_channels <- whole_number(in_channels, "in_channels")
      self$out_channels <- whole_number(out_channels, "out_channels")
      check_groups(self$in_channels, self$out_channels, self$groups)
      self$padding_mode <- arg_choice(padding_mode, "padding_mode",
                                      c("zeros", "reflect", "replicate", "circular"))
      self$weight <- nn_parameter(torch_empty(c(self$out_channels,
                                                self$in_channels %/% self$groups,
                                                self$kernel_size)))
      has_bias <- arg_flag(bias, "bias")
      self$bias <- if (has_bias) nn_parameter(torch_empty(self$out_channels)) else NULL
      self$reset_parameters()
    },
    reset_parameters = function() reset_linear_like(self),
    forward = function(input) {
      if (self$padding_mode == "zeros" || identical(self$padding, "valid")) {
        return(f(input, self$weight, self$bias, self$stride, self$padding, self$dilation,
                 self$groups))
      }
      # PyTorch's other padding modes: the input padded first, then no padding.
      padded <- torch_pad(input, conv_pad_widths(self), mode = self$padding_mode)
      f(padded, self$weight, self$bias, self$stride, 0L, self$dilation, self$groups)
    }
  )
}

# nolint end

# PyTorch's _reversed_padding_repeated_twice: (left, right) per dim, the last dim first.
conv_pad_widths <- function(module) {
  if (identical(module$padding, "same")) {
    total <- module$dilation * (module$kernel_size - 1L)
    left <- total %/% 2L
    return(as.vector(rbind(rev(left), rev(total - left))))
  }
  rep(rev(module$padding), each = 2L)
}

#' @rdname nn_layers
#' @export
nn_conv1d <- conv_module("nn_conv1d", 1L, function(...) torch_conv1d(...))

#' @rdname nn_layers
#' @export
nn_conv2d <- conv_module("nn_conv2d", 2L, function(...) torch_conv2d(...))

#' @rdname nn_layers
#' @export
nn_max_pool2d <- nn_module(
  "nn_max_pool2d",
  initialize = function(kernel_size, stride = NULL, padding = 0, dilation = 1,
                        return_indices = FALSE, ceil_mode = FALSE) {
    self$kernel_size <- kernel_size
    self$stride <- stride %||% kernel_size
    self$padding <- padding
    self$dilation <- dilation
    self$return_indices <- arg_flag(return_indices, "return_indices")
    self$ceil_mode <- ceil_mode
  },
  forward = function(input) {
    nnf_max_pool2d(input, self$kernel_size, self$stride, self$padding, self$dilation,
                   self$ceil_mode, self$return_indices)
  }
)

#' @rdname nn_layers
#' @export
nn_avg_pool2d <- nn_module(
  "nn_avg_pool2d",
  initialize = function(kernel_size, stride = NULL, padding = 0, ceil_mode = FALSE,
                        count_include_pad = TRUE, divisor_override = NULL) {
    self$kernel_size <- kernel_size
    self$stride <- stride %||% kernel_size
    self$padding <- padding
    self$ceil_mode <- ceil_mode
    self$count_include_pad <- count_include_pad
    self$divisor_override <- divisor_override
  },
  forward = function(input) {
    nnf_avg_pool2d(input, self$kernel_size, self$stride, self$padding, self$ceil_mode,
                   self$count_include_pad, self$divisor_override)
  }
)

#' @rdname nn_layers
#' @export
nn_adaptive_avg_pool2d <- nn_module(
  "nn_adaptive_avg_pool2d",
  # As given, read at each call by nnf_adaptive_avg_pool2d() (NA: the input's size there).
  initialize = function(output_size) self$output_size <- output_size,
  forward = function(input) nnf_adaptive_avg_pool2d(input, self$output_size)
)

# nolint start: object_usage_linter. (R6 methods)
batch_norm_module <- function(classname, dims) {
  nn_module(
    classname,
    initialize = function(num_features, eps = 1e-5, momentum = 0.1, affine = TRUE,
                          track_running_stats = TRUE) {
      self$num_features <- whole_number(num_features, "num_features")
      self$eps <- eps
      self$momentum <- momentum
      self$affine <- arg_flag(affine, "affine")
      self$track_running_stats <- arg_flag(track_running_stats, "track_running_stats")
      if (self$affine) {
        self$weight <- nn_parameter(torch_ones(self$num_features))
        self$bias <- nn_parameter(torch_zeros(self$num_features))
      }
      if (self$track_running_stats) {
        self$running_mean <- nn_buffer(torch_zeros(self$num_features))
        self$running_var <- nn_buffer(torch_ones(self$num_features))
        self$num_batches_tracked <- nn_buffer(torch_tensor(0L))
      }
    },
    # R torch's (nn_norm_base_) and PyTorch's: the statistics and the affine parameters back to
    # their initial values, in place (the tensors others hold, an optimizer's, stay the same).
    reset_running_stats = function() {
      if (self$track_running_stats) {
        self$running_mean$zero_()
        self$running_var$fill_(1)
        self$num_batches_tracked$zero_()
      }
      invisible(NULL)
    },
    reset_parameters = function() {
      self$reset_running_stats()
      if (self$affine) {
        nn_init_ones_(self$weight)
        nn_init_zeros_(self$bias)
      }
      invisible(NULL)
    },
    forward = function(input) {
      if (!input$dim() %in% dims) {
        abort(sprintf("expected %s input (got %dD input)",
                      paste0(dims, "D", collapse = " or "), input$dim()), class = "value_error")
      }
      average <- if (is.null(self$momentum)) 0 else self$momentum
      if (self$training && self$track_running_stats) {
        with_no_grad(self$num_batches_tracked$add_(1L))
        if (is.null(self$momentum)) {
          average <- 1 / as.numeric(self$num_batches_tracked)
        }
      }
      use_batch <- self$training || !self$track_running_stats
      nnf_batch_norm(input, self$running_mean, self$running_var, self$weight, self$bias,
                     training = use_batch, momentum = average, eps = self$eps)
    }
  )
}

# nolint end

#' @rdname nn_layers
#' @export
nn_batch_norm1d <- batch_norm_module("nn_batch_norm1d", c(2L, 3L))

#' @rdname nn_layers
#' @export
nn_batch_norm2d <- batch_norm_module("nn_batch_norm2d", 4L)

#' @rdname nn_layers
#' @export
nn_layer_norm <- nn_module(
  "nn_layer_norm",
  initialize = function(normalized_shape, eps = 1e-5, elementwise_affine = TRUE) {
    self$normalized_shape <- whole_numbers(normalized_shape, "normalized_shape")
    self$eps <- eps
    self$elementwise_affine <- arg_flag(elementwise_affine, "elementwise_affine")
    if (self$elementwise_affine) {
      self$weight <- nn_parameter(torch_ones(self$normalized_shape))
      self$bias <- nn_parameter(torch_zeros(self$normalized_shape))
    }
  },
  # R torch's and PyTorch's: weight 1, bias 0, in place.
  reset_parameters = function() {
    if (self$elementwise_affine) {
      nn_init_ones_(self$weight)
      nn_init_zeros_(self$bias)
    }
    invisible(NULL)
  },
  forward = function(input) {
    nnf_layer_norm(input, self$normalized_shape, self$weight, self$bias, self$eps)
  }
)

#' @rdname nn_layers
#' @export
nn_embedding <- nn_module(
  "nn_embedding",
  initialize = function(num_embeddings, embedding_dim, padding_idx = NULL, max_norm = NULL,
                        norm_type = 2, scale_grad_by_freq = FALSE, sparse = FALSE,
                        .weight = NULL) {
    self$num_embeddings <- whole_number(num_embeddings, "num_embeddings")
    self$embedding_dim <- whole_number(embedding_dim, "embedding_dim")
    # R torch's padding_idx is 1-based (a negative one counts from the end: -1 is the last).
    self$padding_idx <- embedding_row(padding_idx, self$num_embeddings)
    self$max_norm <- max_norm
    self$norm_type <- norm_type
    self$scale_grad_by_freq <- scale_grad_by_freq
    self$sparse <- sparse
    if (is.null(.weight)) {
      self$weight <- nn_parameter(torch_empty(self$num_embeddings, self$embedding_dim))
      self$reset_parameters()
    } else {
      self$weight <- nn_parameter(.weight)
    }
  },
  reset_parameters = function() {
    nn_init_normal_(self$weight)
    if (!is.null(self$padding_idx)) with_no_grad(self$weight[self$padding_idx, ]$fill_(0))
  },
  forward = function(input) {
    nnf_embedding(input, self$weight, self$padding_idx, self$max_norm, self$norm_type,
                  self$scale_grad_by_freq, self$sparse)
  }
)

#' @rdname nn_layers
#' @export
nn_embedding_bag <- nn_module(
  "nn_embedding_bag",
  initialize = function(num_embeddings, embedding_dim, max_norm = NULL, norm_type = 2,
                        scale_grad_by_freq = FALSE, mode = "mean", sparse = FALSE,
                        include_last_offset = FALSE, padding_idx = NULL, .weight = NULL) {
    self$num_embeddings <- whole_number(num_embeddings, "num_embeddings")
    self$embedding_dim <- whole_number(embedding_dim, "embedding_dim")
    # 1-based, as nn_embedding's (a negative one counts from the end: -1 is the last row).
    self$padding_idx <- embedding_row(padding_idx, self$num_embeddings)
    self$max_norm <- max_norm
    self$norm_type <- norm_type
    self$scale_grad_by_freq <- arg_flag(scale_grad_by_freq, "scale_grad_by_freq")
    self$mode <- arg_choice(mode, "mode", c("sum", "mean", "max"))
    self$sparse <- arg_flag(sparse, "sparse")
    self$include_last_offset <- arg_flag(include_last_offset, "include_last_offset")
    if (is.null(.weight)) {
      self$weight <- nn_parameter(torch_empty(self$num_embeddings, self$embedding_dim))
      self$reset_parameters()
    } else {
      if (!identical(dim(.weight), c(self$num_embeddings, self$embedding_dim))) {
        abort(sprintf("`.weight` must have the shape (num_embeddings, embedding_dim) = (%d, %d).",
                      self$num_embeddings, self$embedding_dim), class = "value_error")
      }
      self$weight <- nn_parameter(.weight)
    }
  },
  reset_parameters = function() {
    nn_init_normal_(self$weight)
    if (!is.null(self$padding_idx)) with_no_grad(self$weight[self$padding_idx, ]$fill_(0))
  },
  forward = function(input, offsets = NULL, per_sample_weights = NULL) {
    nnf_embedding_bag(input, self$weight, offsets, self$max_norm, self$norm_type,
                      self$scale_grad_by_freq, self$mode, self$sparse, per_sample_weights,
                      self$include_last_offset, self$padding_idx)
  }
)

# R torch's class method of the generator, `nn_embedding_bag$from_pretrained()` (PyTorch's
# EmbeddingBag.from_pretrained): a bag over the given table, frozen unless `freeze = FALSE`. Its
# weight shares the table's memory but is a tensor of its own (PyTorch's Parameter(embeddings)):
# freezing it leaves the table, an embedding's weight say, as it was.
attr(nn_embedding_bag, "module")$from_pretrained <- function(embeddings, freeze = TRUE,
                                                             max_norm = NULL, norm_type = 2,
                                                             scale_grad_by_freq = FALSE,
                                                             mode = "mean", sparse = FALSE,
                                                             include_last_offset = FALSE,
                                                             padding_idx = NULL) {
  if (!is_torch_tensor(embeddings) || embeddings$dim() != 2L) {
    abort(sprintf("`embeddings` must be a 2-dimensional tensor, got %s.", describe(embeddings)),
          class = "value_error")
  }
  freeze <- arg_flag(freeze, "freeze")
  shape <- embeddings$shape
  bag <- nn_embedding_bag(shape[[1L]], shape[[2L]], max_norm = max_norm, norm_type = norm_type,
                          scale_grad_by_freq = scale_grad_by_freq, mode = mode, sparse = sparse,
                          include_last_offset = include_last_offset, padding_idx = padding_idx,
                          .weight = embeddings$detach())
  bag$weight$requires_grad_(!freeze)
  bag
}

# A 1-based row of an embedding table of `n` rows (negative: from the end), as a positive number.
embedding_row <- function(padding_idx, n) {
  if (is.null(padding_idx)) {
    return(NULL)
  }
  padding_idx <- whole_number(padding_idx, "padding_idx")
  if (padding_idx == 0L || padding_idx > n || padding_idx < -n) {
    abort(sprintf(paste0("`padding_idx` must be within num_embeddings (1 to %d, or -%d to -1, ",
                         "1-based), got %d."), n, n, padding_idx), class = "value_error")
  }
  if (padding_idx < 0L) n + padding_idx + 1L else padding_idx
}

# A dropout module over its functional `f(input, p, training, inplace)`: its probability and
# in-place flag checked when made, its training mode read at each call.
# nolint start: object_usage_linter. (R6 methods: `self` is bound by R6)
dropout_module <- function(classname, f) {
  nn_module(
    classname,
    initialize = function(p = 0.5, inplace = FALSE) {
      check_probability(p)
      self$p <- p
      self$inplace <- arg_flag(inplace, "inplace")
    },
    forward = function(input) f(input, self$p, self$training, self$inplace)
  )
}
# nolint end

#' @rdname nn_layers
#' @export
nn_dropout <- dropout_module("nn_dropout", nnf_dropout)

#' @rdname nn_layers
#' @export
nn_dropout2d <- dropout_module("nn_dropout2d", nnf_dropout2d)

#' @rdname nn_layers
#' @export
nn_dropout3d <- dropout_module("nn_dropout3d", nnf_dropout3d)

#' @rdname nn_layers
#' @export
nn_flatten <- nn_module(
  "nn_flatten",
  initialize = function(start_dim = 2, end_dim = -1) {
    self$start_dim <- one_based_dim(start_dim, "start_dim")
    self$end_dim <- one_based_dim(end_dim, "end_dim")
  },
  forward = function(input) nnf_flatten(input, self$start_dim, self$end_dim)
)

# A dim counted from 1 (negative: from the end), checked when a module is made.
one_based_dim <- function(dim, name) {
  dim <- whole_number(dim, name)
  if (dim == 0L) {
    abort(sprintf("Dimension is 1-based, but found 0 in `%s` (the first is 1, the last -1).",
                  name), class = "value_error")
  }
  dim
}

#' @rdname nn_layers
#' @export
nn_identity <- nn_module(
  "nn_identity",
  initialize = function(...) invisible(NULL),
  forward = function(input) input
)

# An activation without parameters of its own: `f(input, <the module's arguments>)`. Where `f`
# takes `inplace`, the module's `inplace` is passed on (R torch's nn_relu(inplace = TRUE) writes
# into its input); elsewhere it is accepted and ignored, as R torch's modules do.
# nolint start: object_usage_linter. (R6 methods, written as expressions)
activation_module <- function(classname, f, arguments = list()) {
  passed <- names(arguments)
  if ("inplace" %in% names(formals(f))) passed <- c(passed, "inplace")
  nn_module(
    classname,
    initialize = rlang::new_function(
      args = c(arguments, alist(inplace = FALSE)),
      body = rlang::expr({
        self$inplace <- arg_flag(inplace, "inplace")
        for (name in !!names(arguments)) self[[name]] <- get(name)
      })
    ),
    forward = rlang::new_function(args = formals(function(input) NULL),
                                  body = forward_body(f, "input", passed))
  )
}

# `f`'s body with its first arguments replaced by the forward's (`input`, `target`) and the
# others by the module's fields, read from the instance (`.subset2(self, "inplace")`, not
# `self$inplace`'s S3 dispatch): the forward calls the functional directly, with two R calls
# fewer on every module call.
forward_body <- function(f, inputs, fields, buffers = character()) {
  # Buffers are not in the instance's environment: `self$weight` finds them.
  field <- function(n) {
    if (n %in% buffers) call("$", quote(self), as.name(n)) else rlang::expr(.subset2(self, !!n))
  }
  values <- c(lapply(inputs, as.name), lapply(fields, field))
  args <- names(formals(f))
  stopifnot(length(args) == length(values))
  do.call(substitute, list(body(f), stats::setNames(values, args)))
}

# nolint end

#' @rdname nn_layers
#' @export
nn_relu <- activation_module("nn_relu", function(input, inplace) nnf_relu(input, inplace))
#' @rdname nn_layers
#' @export
nn_relu6 <- activation_module("nn_relu6", function(input, inplace) nnf_relu6(input, inplace))
#' @rdname nn_layers
#' @export
nn_sigmoid <- activation_module("nn_sigmoid", function(input) torch_sigmoid(input))
#' @rdname nn_layers
#' @export
nn_tanh <- activation_module("nn_tanh", function(input) torch_tanh(input))
#' @rdname nn_layers
#' @export
nn_silu <- activation_module("nn_silu", function(input, inplace) nnf_silu(input, inplace))
#' @rdname nn_layers
#' @export
nn_gelu <- activation_module("nn_gelu", function(input, approximate) nnf_gelu(input, approximate),
                             list(approximate = "none"))
#' @rdname nn_layers
#' @export
nn_leaky_relu <- activation_module("nn_leaky_relu",
                                   function(input, s, inplace) nnf_leaky_relu(input, s, inplace),
                                   list(negative_slope = 0.01))
#' @rdname nn_layers
#' @export
nn_elu <- activation_module("nn_elu", function(input, a, inplace) nnf_elu(input, a, inplace),
                            list(alpha = 1))
#' @rdname nn_layers
#' @export
nn_celu <- activation_module("nn_celu", function(input, a, inplace) nnf_celu(input, a, inplace),
                             list(alpha = 1))
#' @rdname nn_layers
#' @export
nn_softplus <- activation_module("nn_softplus", function(input, b, t) nnf_softplus(input, b, t),
                                 list(beta = 1, threshold = 20))
#' @rdname nn_layers
#' @export
nn_softmax <- activation_module("nn_softmax", function(input, dim) nnf_softmax(input, dim),
                                formals(function(dim) NULL))
#' @rdname nn_layers
#' @export
nn_log_softmax <- activation_module("nn_log_softmax",
                                    function(input, dim) nnf_log_softmax(input, dim),
                                    formals(function(dim) NULL))

# R torch's base of the losses (not exported, as in R torch): every loss module is an "nn_loss"
# and holds its `reduction`.
nn_loss <- nn_module(
  "nn_loss",
  initialize = function(reduction = "mean") {
    self$reduction <- arg_choice(reduction, "reduction", c("mean", "sum", "none"))
  }
)

# `arguments` come before `reduction`, `after` after it (R torch's order: its
# nn_bce_with_logits_loss(weight, reduction, pos_weight)); `f` takes them in that order. The
# tensors among them (`weight`, `pos_weight`) are buffers, as R torch registers them: they follow
# $to() and $cuda() and are in the state dict (NULL: no buffer).
# nolint start: object_usage_linter. (R6 methods, written as expressions)
loss_module <- function(classname, f, arguments = list(), after = list()) {
  fields <- c(names(arguments), "reduction", names(after))
  buffers <- intersect(fields, c("weight", "pos_weight"))
  nn_module(
    classname,
    inherit = nn_loss,
    initialize = rlang::new_function(
      args = c(arguments, alist(reduction = "mean"), after),
      body = rlang::expr({
        arg_choice(reduction, "reduction", c("mean", "sum", "none"))
        for (name in !!setdiff(fields, buffers)) self[[name]] <- get(name)
        for (name in !!buffers) self[[name]] <- loss_buffer(get(name), name)
      })
    ),
    forward = rlang::new_function(
      args = formals(function(input, target) NULL),
      body = forward_body(f, c("input", "target"), fields, buffers)
    )
  )
}

# nolint end

# A loss's weight as a buffer: a tensor (numbers made one, as nn_multi_margin_loss does), or NULL.
loss_buffer <- function(x, name) {
  if (is.null(x)) {
    return(NULL)
  }
  if (is.numeric(x)) x <- torch_tensor(x)
  if (!is_torch_tensor(x)) {
    abort(sprintf("`%s` must be NULL or a tensor, got %s.", name, describe(x)),
          class = "value_error")
  }
  nn_buffer(x)
}

#' @rdname nn_layers
#' @export
nn_mse_loss <- loss_module("nn_mse_loss", function(i, t, r) nnf_mse_loss(i, t, r))
#' @rdname nn_layers
#' @export
nn_l1_loss <- loss_module("nn_l1_loss", function(i, t, r) nnf_l1_loss(i, t, r))
#' @rdname nn_layers
#' @export
nn_bce_loss <- loss_module("nn_bce_loss", function(i, t, w, r) nnf_binary_cross_entropy(i, t, w, r),
                           list(weight = NULL))
#' @rdname nn_layers
#' @export
nn_bce_with_logits_loss <- loss_module(
  "nn_bce_with_logits_loss",
  function(i, t, w, r, pw) nnf_binary_cross_entropy_with_logits(i, t, w, r, pw),
  list(weight = NULL), list(pos_weight = NULL))
#' @rdname nn_layers
#' @export
nn_cross_entropy_loss <- loss_module(
  "nn_cross_entropy_loss",
  function(i, t, w, ii, r, ls) nnf_cross_entropy(i, t, w, ii, r, ls),
  list(weight = NULL, ignore_index = -100), list(label_smoothing = 0))
#' @rdname nn_layers
#' @export
nn_nll_loss <- loss_module("nn_nll_loss", function(i, t, w, ii, r) nnf_nll_loss(i, t, w, ii, r),
                           list(weight = NULL, ignore_index = -100))
#' @rdname nn_layers
#' @export
nn_smooth_l1_loss <- loss_module("nn_smooth_l1_loss", function(i, t, r) nnf_smooth_l1_loss(i, t, r))
#' @rdname nn_layers
#' @export
nn_huber_loss <- loss_module("nn_huber_loss", function(i, t, d, r) nnf_huber_loss(i, t, r, d),
                             list(delta = 1))
#' @rdname nn_layers
#' @export
nn_kl_div_loss <- nn_module(
  "nn_kl_div_loss",
  inherit = nn_loss,
  # R torch's reductions and "batchmean" (the sum over the batch size, KL divergence's definition).
  initialize = function(reduction = "mean") {
    self$reduction <- arg_choice(reduction, "reduction", c("mean", "batchmean", "sum", "none"))
  },
  forward = function(input, target) nnf_kl_div(input, target, self$reduction)
)
#' @rdname nn_layers
#' @export
nn_hinge_embedding_loss <- loss_module(
  "nn_hinge_embedding_loss",
  function(i, t, m, r) nnf_hinge_embedding_loss(i, t, m, r),
  list(margin = 1))
#' @rdname nn_layers
#' @export
nn_soft_margin_loss <- loss_module("nn_soft_margin_loss",
                                   function(i, t, r) nnf_soft_margin_loss(i, t, r))
#' @rdname nn_layers
#' @export
nn_multilabel_soft_margin_loss <- loss_module(
  "nn_multilabel_soft_margin_loss",
  function(i, t, w, r) nnf_multilabel_soft_margin_loss(i, t, w, r),
  list(weight = NULL))

#' @rdname nn_layers
#' @export
nn_sequential <- nn_module(
  "nn_sequential",
  initialize = function(...) {
    modules <- rlang::list2(...)  # R torch splices with !!!
    # Numbered from 0 whatever names the arguments have: R torch's (and its state dicts') keys.
    for (i in seq_along(modules)) self$add_module(as.character(i - 1L), modules[[i]])
  },
  # Each module's forward on the last one's output, in C (rpkg/src/modules.cpp), which lets go of
  # each output no R code can reach any more as soon as the next module has run.
  forward = function(input) .Call(C_module_chain, private$modules_, input)
)

#' @export
length.nn_sequential <- function(x) length(children_of(x))

#' @export
`[[.nn_sequential` <- function(x, name) {
  modules <- children_of(x)
  if (is.numeric(name)) child_at(modules, name) else `$.nn_module`(x, name)
}

#' @export
`[.nn_sequential` <- function(x, i) {
  modules <- children_of(x)[i]
  do.call(nn_sequential, unname(modules))
}

#' @rdname nn_layers
#' @export
nn_module_list <- nn_module(
  "nn_module_list",
  # `modules`: a list, or another module list (R torch indexes either with `[[`).
  initialize = function(modules = list()) {
    for (i in seq_along(modules)) self$append(modules[[i]])
  },
  append = function(module) {
    self$add_module(as.character(length(private$modules_)), module)
    invisible(self)
  },
  extend = function(modules) {
    for (i in seq_along(modules)) self$append(modules[[i]])
    invisible(self)
  },
  insert = function(index, module) {
    index <- whole_number(index, "index")
    modules <- private$modules_
    if (index < 1L || index > length(modules) + 1L) {
      abort(sprintf("`index` must be between 1 and %d, got %d.", length(modules) + 1L, index),
            class = "index_error")
    }
    modules <- append(modules, list(module), after = index - 1L)
    private$modules_ <- list()
    for (m in modules) self$append(m)
    invisible(self)
  }
)

#' @export
length.nn_module_list <- function(x) length(children_of(x))

#' @export
`[[.nn_module_list` <- function(x, name) {
  modules <- children_of(x)
  if (is.numeric(name)) child_at(modules, name) else `$.nn_module`(x, name)
}

#' @export
as.list.nn_module_list <- function(x, ...) unname(children_of(x))

#' Clipping gradients
#'
#' `nn_utils_clip_grad_norm_()` scales the gradients of `parameters` so that
#' their total norm is at most `max_norm` (returns the norm before clipping);
#' `nn_utils_clip_grad_value_()` clamps each gradient to `[-clip_value,
#' clip_value]`. With a grad scaler, call `scaler$unscale_(optimizer)` first.
#' @param parameters A tensor or a list of tensors (a module's `$parameters`).
#' @param max_norm,norm_type The largest total norm, and the norm's order.
#' @param clip_value The largest absolute value.
#' @param error_if_nonfinite Raise when the norm is inf or NaN.
#' @return `nn_utils_clip_grad_norm_()`: the total norm (a tensor).
#' @name nn_utils_clip_grad
#' @examples
#' m <- nn_linear(3, 1)
#' m(torch_randn(4, 3))$sum()$backward()
#' nn_utils_clip_grad_norm_(m$parameters, max_norm = 0.1)
NULL

grads_of <- function(parameters) {
  if (is_torch_tensor(parameters)) parameters <- list(parameters)
  if (!is.list(parameters) || !all(vapply(parameters, is_torch_tensor, NA))) {
    abort(sprintf("`parameters` must be a tensor or a list of tensors, got %s.",
                  describe(parameters)), class = "value_error")
  }
  grads <- lapply(parameters, function(p) p$grad)
  Filter(function(g) !is_undefined_tensor(g), grads)
}

#' @rdname nn_utils_clip_grad
#' @export
nn_utils_clip_grad_norm_ <- function(parameters, max_norm, norm_type = 2,
                                     error_if_nonfinite = FALSE) {
  grads <- unname(grads_of(parameters))
  if (length(grads) == 0L) {
    return(torch_tensor(0))
  }
  with_no_grad({
    norms <- torch__foreach_norm(grads, norm_type)
    total <- torch_linalg_vector_norm(torch_stack(norms), norm_type)
    if (arg_flag(error_if_nonfinite, "error_if_nonfinite") && !as.logical(torch_isfinite(total))) {
      abort("The total norm of gradients is non-finite, so it cannot be clipped.",
            class = "runtime_error")
    }
    # PyTorch's `max_norm / (total + 1e-6)` is total's reciprocal times max_norm (Tensor's
    # __rtruediv__): the same ops, for the same bits.
    coef <- torch_clamp(torch_reciprocal(total + 1e-6) * max_norm, max = 1)
    torch__foreach_mul_(grads, coef)
  })
  total
}

#' @rdname nn_utils_clip_grad
#' @export
nn_utils_clip_grad_value_ <- function(parameters, clip_value) {
  grads <- unname(grads_of(parameters))
  with_no_grad(for (g in grads) g$clamp_(-clip_value, clip_value))
  invisible(NULL)
}

#' Weight normalization
#'
#' R torch's `nn_utils_weight_norm` class (R6): it reparameterizes a module's
#' parameter `name` (e.g. `"weight"`) as a magnitude `<name>_g` and a direction
#' `<name>_v`, `w = g * v / ||v||` (the norm taken over every dimension but
#' `dim`), as PyTorch's `torch.nn.utils.weight_norm()`. Without hooks, the
#' weight is recomputed from `g` and `v` when `$recompute()` (or `$call()`) is
#' called: call it at the start of the module's `forward()`.
#'
#' @section Methods:
#' - `$new(name, dim)`: `name` the parameter's name; `dim` the dimension
#'   (1-based; negative from the end) whose slices each get their own norm
#'   (for a linear layer's weight, `1` per output, `2` per input), or `NULL`
#'   for one norm over the whole tensor.
#' - `$apply(module, name = NULL, dim = NULL)`: replaces the parameter by the
#'   parameters `<name>_g` and `<name>_v`, and the weight by the one computed
#'   from them; returns the module, invisibly.
#' - `$compute_weight(module, name = NULL, dim = NULL)`: the weight
#'   `g * v / ||v||` (a tensor).
#' - `$call(module)`, `$recompute(module)`: recompute the module's weight.
#' - `$remove(module, name = NULL)`: undoes `$apply()`, the computed weight
#'   becoming the parameter `name` again.
#' @return `nn_utils_weight_norm$new()`: a weight normalization object.
#' @name nn_utils_weight_norm
#' @examples
#' lin <- nn_linear(in_features = 20, out_features = 40)
#' weight_norm <- nn_utils_weight_norm$new(name = "weight", dim = 2)
#' weight_norm$apply(lin)
#' lin$weight_g$shape
#' lin$weight_v$shape
#' weight_norm$recompute(lin)
#' weight_norm$remove(lin)
#' @export nn_utils_weight_norm
NULL

# An R6 class, as R torch's (documented above, so that roxygen does not read it as R6 source).
nn_utils_weight_norm <- R6::R6Class(
  "nn_utils_weight_norm",
  lock_objects = FALSE,
  public = list(
    name = NULL,
    dim = NULL,
    initialize = function(name, dim) {
      if (!is.character(name) || length(name) != 1L || is.na(name)) {
        abort(sprintf("`name` must be a parameter's name, such as \"weight\", got %s.",
                      describe(name)), class = "value_error")
      }
      self$name <- name
      self$dim <- if (is.null(dim)) NULL else one_based_dim(dim, "dim")
    },
    compute_weight = function(module, name = NULL, dim = NULL) {
      name <- name %||% self$name
      g <- module[[paste0(name, "_g")]]
      v <- module[[paste0(name, "_v")]]
      torch__weight_norm(v, g, weight_norm_dim(dim %||% self$dim, v))
    },
    apply = function(module, name = NULL, dim = NULL) {
      name <- name %||% self$name
      dim <- dim %||% self$dim
      weight <- module[[name]]
      if (!is_torch_tensor(weight)) {
        abort(sprintf("The module has no parameter `%s` to normalize.", name),
              class = "value_error")
      }
      drop_parameter(module, name)
      norms <- torch_norm_except_dim(weight, 2, weight_norm_dim(dim, weight))
      module$register_parameter(paste0(name, "_g"), nn_parameter(norms$detach()))
      module$register_parameter(paste0(name, "_v"), nn_parameter(weight$detach()))
      module[[name]] <- self$compute_weight(module, name, dim)
      invisible(module)
    },
    call = function(module) {
      module[[self$name]] <- self$compute_weight(module)
      invisible(module)
    },
    recompute = function(module) self$call(module),
    remove = function(module, name = NULL) {
      name <- name %||% self$name
      weight <- self$compute_weight(module, name)
      drop_parameter(module, paste0(name, "_g"))
      drop_parameter(module, paste0(name, "_v"))
      drop_attribute(module, name)
      module[[name]] <- nn_parameter(weight$detach())
      invisible(module)
    }
  )
)

# The dim given to libtorch's norm_except_dim and _weight_norm (1-based, as the generated ops take
# it): a negative one counted from the end of `x`; NULL is libtorch's -1, one norm over all.
weight_norm_dim <- function(dim, x) {
  if (is.null(dim)) {
    return(-1L)
  }
  if (dim < 0L) x$dim() + dim + 1L else dim
}

# A module's R6 instance (a module as its user holds it, or `self` in its methods).
module_instance <- function(module) {
  if (is_nn_module(module)) attr(module, "module", exact = TRUE) else module
}

# Removes the parameter `name` altogether (register_parameter(name, NULL) keeps the name, as
# PyTorch's does; weight normalization deletes it, as PyTorch's `del module._parameters[name]`).
drop_parameter <- function(module, name) {
  private <- .subset2(module_instance(module), ".__enclos_env__")$private
  private$parameters_[[name]] <- NULL
}

# Removes a plain field (not a parameter, buffer or submodule) from a module.
drop_attribute <- function(module, name) {
  instance <- module_instance(module)
  if (exists(name, envir = instance, inherits = FALSE)) rm(list = name, envir = instance)
}
