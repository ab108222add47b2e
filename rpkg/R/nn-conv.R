#' @include nn-layers.R
NULL

# R torch's three-dimensional and transposed convolutions (modules and functionals), over
# libtorch's ops. Weights are initialized as PyTorch's _ConvNd.reset_parameters() does, so that
# torch_manual_seed() gives PyTorch's weights.

# A size given for each of `nd` spatial dims: one whole number (repeated) or `nd` of them.
nd_sizes <- function(x, name, nd, min = 0L) {
  x <- whole_numbers(x, name)
  if (length(x) == 1L) x <- rep_len(x, nd)
  if (length(x) != nd) {
    abort(sprintf("`%s` must be one whole number or %d of them, got %d.", name, nd, length(x)),
          class = "value_error")
  }
  if (any(x < min)) {
    abort(sprintf("`%s` must be at least %d, got %s.", name, min, paste(x, collapse = ", ")),
          class = "value_error")
  }
  x
}

#' Convolutions (3d and transposed)
#'
#' R torch's `nn_conv3d()` and transposed convolutions
#' (`nn_conv_transpose1d()`, `nn_conv_transpose2d()`, `nn_conv_transpose3d()`)
#' and their functionals. Their weights are initialized as PyTorch's
#' (`torch_manual_seed()` gives `torch.nn.Conv3d`'s and
#' `torch.nn.ConvTranspose2d`'s weights); a transposed convolution's weight has
#' shape `(in_channels, out_channels / groups, kernel_size)`. Sizes are one
#' number (used for every spatial dimension) or one per dimension. A
#' transposed module's forward takes an optional `output_size` (the spatial
#' sizes, or the whole shape) that picks the output padding, as PyTorch's.
#'
#' @param in_channels,out_channels Channels of the input and of the output.
#' @param kernel_size,stride,padding,dilation,groups Convolution sizes
#'   (`nn_conv3d()`'s `padding` may also be `"same"` or `"valid"`).
#' @param output_padding Extra size added to one side of each output dimension
#'   (transposed convolutions; smaller than `stride` or `dilation`).
#' @param bias Whether to learn an additive bias (modules); a bias tensor or
#'   `NULL` (functionals).
#' @param padding_mode `"zeros"`, `"reflect"`, `"replicate"` or `"circular"`
#'   (transposed convolutions: only `"zeros"`).
#' @param input The input tensor, `(N, C, ...)`.
#' @param weight The filters.
#' @param pad `nnf_conv_tbc()`: the padding of the time dimension.
#' @return A module (`nn_*`), or a tensor (`nnf_*`).
#' @name nn_conv
#' @examples
#' torch_manual_seed(1)
#' conv <- nn_conv3d(2, 4, kernel_size = 3, padding = 1)
#' dim(conv(torch_randn(1, 2, 5, 6, 7)))
#' up <- nn_conv_transpose2d(4, 2, kernel_size = 3, stride = 2, padding = 1)
#' x <- torch_randn(1, 4, 8, 8)
#' dim(up(x))
#' dim(up(x, output_size = c(16, 16)))
#' dim(nnf_conv_transpose1d(torch_randn(1, 3, 5), torch_randn(3, 2, 3)))
NULL

#' @rdname nn_conv
#' @export
nn_conv3d <- conv_module("nn_conv3d", 3L, function(...) torch_conv3d(...))

#' @rdname nn_conv
#' @export
nnf_conv3d <- function(input, weight, bias = NULL, stride = 1, padding = 0, dilation = 1,
                       groups = 1) {
  torch_conv3d(input, weight, bias, stride, padding, dilation, groups)
}

#' @rdname nn_conv
#' @export
nnf_conv_transpose1d <- function(input, weight, bias = NULL, stride = 1, padding = 0,
                                 output_padding = 0, groups = 1, dilation = 1) {
  torch_conv_transpose1d(input, weight, bias, stride, padding, output_padding, groups, dilation)
}

#' @rdname nn_conv
#' @export
nnf_conv_transpose2d <- function(input, weight, bias = NULL, stride = 1, padding = 0,
                                 output_padding = 0, groups = 1, dilation = 1) {
  torch_conv_transpose2d(input, weight, bias, stride, padding, output_padding, groups, dilation)
}

#' @rdname nn_conv
#' @export
nnf_conv_transpose3d <- function(input, weight, bias = NULL, stride = 1, padding = 0,
                                 output_padding = 0, groups = 1, dilation = 1) {
  torch_conv_transpose3d(input, weight, bias, stride, padding, output_padding, groups, dilation)
}

#' @rdname nn_conv
#' @export
nnf_conv_tbc <- function(input, weight, bias, pad = 0) {
  torch_conv_tbc(input, weight, bias, pad)
}

# PyTorch's _ConvTransposeNd._output_padding: the output padding that gives `output_size` (the
# spatial sizes, or the whole shape), which must lie within what the stride allows.
transposed_output_padding <- function(module, input, output_size, nd) {
  if (is.null(output_size)) {
    return(module$output_padding)
  }
  output_size <- whole_numbers(output_size, "output_size")
  non_spatial <- input$dim() - nd
  if (length(output_size) == nd + non_spatial) output_size <- output_size[-seq_len(non_spatial)]
  if (length(output_size) != nd) {
    abort(sprintf("`output_size` must have %d or %d elements for a %dD input, got %d.", nd,
                  nd + non_spatial, input$dim(), length(output_size)), class = "value_error")
  }
  spatial <- utils::tail(dim(input), nd)
  min_sizes <- (spatial - 1L) * module$stride - 2L * module$padding +
    module$dilation * (module$kernel_size - 1L) + 1L
  max_sizes <- min_sizes + module$stride - 1L
  if (any(output_size < min_sizes | output_size > max_sizes)) {
    abort(sprintf(paste0("requested an output size of (%s), but valid sizes range from (%s) ",
                         "to (%s) (for an input of (%s))."),
                  toString(output_size), toString(min_sizes), toString(max_sizes),
                  toString(spatial)), class = "value_error")
  }
  output_size - min_sizes
}

# nolint start: object_usage_linter. (R6 methods, where `self` is bound by R6)
conv_transpose_module <- function(classname, nd, f) {
  nn_module(
    classname,
    initialize = function(in_channels, out_channels, kernel_size, stride = 1, padding = 0,
                          output_padding = 0, groups = 1, bias = TRUE, dilation = 1,
                          padding_mode = "zeros") {
      self$in_channels <- whole_number(in_channels, "in_channels")
      self$out_channels <- whole_number(out_channels, "out_channels")
      self$groups <- positive_whole(groups, "groups")
      check_groups(self$in_channels, self$out_channels, self$groups)
      self$kernel_size <- nd_sizes(kernel_size, "kernel_size", nd, min = 1L)
      self$stride <- nd_sizes(stride, "stride", nd, min = 1L)
      self$padding <- nd_sizes(padding, "padding", nd)
      self$output_padding <- nd_sizes(output_padding, "output_padding", nd)
      self$dilation <- nd_sizes(dilation, "dilation", nd, min = 1L)
      self$transposed <- TRUE
      if (!identical(padding_mode, "zeros")) {
        abort(sprintf("Only `padding_mode = \"zeros\"` is supported for %s, got %s.", classname,
                      describe(padding_mode)), class = "value_error")
      }
      self$padding_mode <- padding_mode
      self$weight <- nn_parameter(torch_empty(c(self$in_channels,
                                                self$out_channels %/% self$groups,
                                                self$kernel_size)))
      has_bias <- arg_flag(bias, "bias")
      self$bias <- if (has_bias) nn_parameter(torch_empty(self$out_channels)) else NULL
      self$reset_parameters()
    },
    reset_parameters = function() reset_linear_like(self),
    forward = function(input, output_size = NULL) {
      output_padding <- transposed_output_padding(self, input, output_size, nd)
      f(input, self$weight, self$bias, self$stride, self$padding, output_padding, self$groups,
        self$dilation)
    }
  )
}
# nolint end

#' @rdname nn_conv
#' @export
nn_conv_transpose1d <- conv_transpose_module("nn_conv_transpose1d", 1L,
                                             function(...) torch_conv_transpose1d(...))

#' @rdname nn_conv
#' @export
nn_conv_transpose2d <- conv_transpose_module("nn_conv_transpose2d", 2L,
                                             function(...) torch_conv_transpose2d(...))

#' @rdname nn_conv
#' @export
nn_conv_transpose3d <- conv_transpose_module("nn_conv_transpose3d", 3L,
                                             function(...) torch_conv_transpose3d(...))

#' Unflattening
#'
#' `nn_unflatten(dim, unflattened_size)` splits the (1-based) dimension `dim`
#' of its input into `unflattened_size`, the inverse of [nn_flatten()] (as
#' `torch.nn.Unflatten`).
#' @param dim The dimension to split (1-based; negative counts from the end).
#' @param unflattened_size The sizes it becomes (one may be `-1`).
#' @return A module.
#' @examples
#' x <- torch_randn(4, 6)
#' dim(nn_unflatten(2, c(2, 3))(x))
#' @export
nn_unflatten <- nn_module(
  "nn_unflatten",
  initialize = function(dim, unflattened_size) {
    self$dim <- one_based_dim(dim, "dim")
    self$unflattened_size <- whole_numbers(unflattened_size, "unflattened_size")
  },
  forward = function(input) torch_unflatten(input, self$dim, self$unflattened_size)
)
