#' @include nn-pooling-upsample.R
NULL

# R torch's remaining normalization layers and functionals: batch norm over 5D input, group norm,
# Lp normalization and local response normalization, as torch.nn.functional composes them.

#' Normalization layers
#'
#' `nn_batch_norm3d()` is batch normalization over a 5D input `(N, C, D, H,
#' W)`; `nn_group_norm()` normalizes the channels in `num_groups` groups (its
#' affine weight and bias per channel, initialized to ones and zeros, as
#' PyTorch's). `nnf_group_norm()` is its functional, `nnf_normalize()` divides
#' by the Lp norm over a (1-based) dimension, and `nnf_local_response_norm()`
#' normalizes each channel by its neighbours' squares, as
#' `torch.nn.functional`'s.
#'
#' @param num_features,num_channels Channels (`C`).
#' @param eps A value added to the denominator, for stability.
#' @param momentum The running statistics' update factor (`NULL`: a cumulative
#'   average).
#' @param affine Learn a per-channel weight and bias.
#' @param track_running_stats Keep running statistics (and use them in eval
#'   mode).
#' @param num_groups The number of groups (it divides the channels).
#' @param input The input tensor.
#' @param weight,bias Per-channel weight and bias, or `NULL`.
#' @param p The norm's order.
#' @param dim The dimension (1-based) to normalize over.
#' @param out A tensor to write the result into, or `NULL`.
#' @param size How many neighbouring channels.
#' @param alpha,beta,k The multiplier, the exponent and the additive constant
#'   of the denominator.
#' @return A module (`nn_*`), or a tensor.
#' @name nn_normalization
#' @examples
#' x <- torch_randn(2, 6, 4)
#' gn <- nn_group_norm(3, 6)
#' dim(gn(x))
#' nnf_normalize(torch_tensor(rbind(c(3, 4), c(1, 0))))
#' dim(nnf_local_response_norm(torch_randn(2, 5, 4, 4), size = 2))
#' bn <- nn_batch_norm3d(3)
#' dim(bn(torch_randn(2, 3, 2, 2, 2)))
NULL

#' @rdname nn_normalization
#' @export
nn_batch_norm3d <- batch_norm_module("nn_batch_norm3d", 5L)

#' @rdname nn_normalization
#' @param running_mean,running_var `nnf_instance_norm()`: running statistics to
#'   update (with `use_input_stats`) or to normalize with, or `NULL`.
#' @param use_input_stats `nnf_instance_norm()`: normalize each instance by its
#'   own statistics (`FALSE`: by the running ones).
#' @export
nnf_instance_norm <- function(input, running_mean = NULL, running_var = NULL, weight = NULL,
                              bias = NULL, use_input_stats = TRUE, momentum = 0.1, eps = 1e-5) {
  check_tensor(input, "input")
  use_input_stats <- arg_flag(use_input_stats, "use_input_stats")
  # PyTorch's check (_verify_spatial_size): one value per instance and channel normalizes to 0.
  if (use_input_stats && prod(dim(input)[-(1:2)]) == 1) {
    abort(sprintf("Expected more than 1 spatial element when training, got input size (%s).",
                  toString(dim(input))), class = "value_error")
  }
  torch_instance_norm(input, weight, bias, running_mean, running_var,
                      use_input_stats, arg_number(momentum, "momentum"), arg_number(eps, "eps"),
                      FALSE)
}

#' @rdname nn_normalization
#' @export
nnf_group_norm <- function(input, num_groups, weight = NULL, bias = NULL, eps = 1e-5) {
  check_tensor(input, "input")
  num_groups <- whole_number(num_groups, "num_groups")
  if (input$dim() < 2L) {
    abort(sprintf("`input` must have at least 2 dimensions, got %d.", input$dim()),
          class = "value_error")
  }
  # PyTorch's check (_verify_batch_size): one value per group cannot be normalized.
  shape <- dim(input)
  if (num_groups >= 1L && shape[[1L]] * shape[[2L]] %/% num_groups * prod(shape[-(1:2)]) == 1) {
    abort(sprintf("Expected more than 1 value per group, got an input of shape (%s).",
                  toString(shape)), class = "value_error")
  }
  torch_group_norm(input, num_groups, weight, bias, arg_number(eps, "eps"), TRUE)
}

#' @rdname nn_normalization
#' @export
nn_group_norm <- nn_module(
  "nn_group_norm",
  initialize = function(num_groups, num_channels, eps = 1e-5, affine = TRUE) {
    self$num_groups <- whole_number(num_groups, "num_groups")
    self$num_channels <- whole_number(num_channels, "num_channels")
    if (self$num_groups < 1L || self$num_channels %% self$num_groups != 0L) {
      abort(sprintf("`num_channels` (%d) must be divisible by `num_groups` (%d).",
                    self$num_channels, self$num_groups), class = "value_error")
    }
    self$eps <- arg_number(eps, "eps")
    self$affine <- arg_flag(affine, "affine")
    if (self$affine) {
      self$weight <- nn_parameter(torch_empty(self$num_channels))
      self$bias <- nn_parameter(torch_empty(self$num_channels))
    }
    self$reset_parameters()
  },
  reset_parameters = function() {
    if (self$affine) {
      nn_init_ones_(self$weight)
      nn_init_zeros_(self$bias)
    }
  },
  forward = function(input) {
    nnf_group_norm(input, self$num_groups, self$weight, self$bias, self$eps)
  }
)

#' @rdname nn_normalization
#' @export
nnf_normalize <- function(input, p = 2, dim = 2, eps = 1e-12, out = NULL) {
  check_tensor(input, "input")
  # Tensor.norm(p, dim, keepdim = TRUE) is linalg.vector_norm for a numeric p (PyTorch's).
  denom <- torch_linalg_vector_norm(input, arg_number(p, "p"), one_based_dim(dim, "dim"),
                                    keepdim = TRUE)
  denom <- denom$clamp_min(arg_number(eps, "eps"))$expand_as(input)
  if (is.null(out)) {
    return(input / denom)
  }
  check_tensor(out, "out")
  torch_div_out(out, input, denom)
}

#' @rdname nn_normalization
#' @export
nnf_local_response_norm <- function(input, size, alpha = 1e-4, beta = 0.75, k = 1) {
  check_tensor(input, "input")
  size <- positive_whole(size, "size")
  nd <- input$dim()
  if (nd < 3L) {
    abort(sprintf("`input` must have 3 or more dimensions, got %d.", nd), class = "value_error")
  }
  if (input$numel() == 0L) {
    return(input)
  }
  # PyTorch's composition: the average of the squares over `size` neighbouring channels (an
  # average pool over the channel dimension, zero-padded), then (k + alpha * avg)^beta.
  div <- input$mul(input)$unsqueeze(2L)
  if (nd == 3L) {
    div <- torch_pad(div, c(0L, 0L, size %/% 2L, (size - 1L) %/% 2L))
    div <- torch_avg_pool2d(div, c(size, 1L), 1L)$squeeze(2L)
  } else {
    shape <- dim(input)
    div <- div$view(c(shape[[1L]], 1L, shape[[2L]], shape[[3L]], -1L))
    div <- torch_pad(div, c(0L, 0L, 0L, 0L, size %/% 2L, (size - 1L) %/% 2L))
    div <- torch_avg_pool3d(div, c(size, 1L, 1L), 1L)$squeeze(2L)
    div <- div$view(shape)
  }
  div <- div$mul(arg_number(alpha, "alpha"))$add(arg_number(k, "k"))$pow(arg_number(beta, "beta"))
  input / div
}
