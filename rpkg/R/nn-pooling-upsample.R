#' @include nn-conv.R
NULL

# R torch's pooling (1d and 3d, adaptive, Lp, unpooling, fractional), upsampling, padding and
# fold/unfold, as PyTorch's torch.nn.functional composes them from libtorch's ops. Indices that
# max pooling returns are 1-based (R torch's), and the unpooling functions take them so.

# Sizes of a pooling window, stride or padding (libtorch checks how many and their ranges);
# NULL (a stride: the kernel size) stays NULL.
pool_sizes <- function(x, name) if (is.null(x)) NULL else whole_numbers(x, name)

# max pooling's (output, 0-based indices) as R torch's (output, 1-based indices).
one_based_indices <- function(out) {
  out[[2L]] <- plus_one(out[[2L]])
  out
}

#' Pooling
#'
#' R torch's pooling functions and modules over 1, 2 or 3 spatial dimensions
#' (inputs `(N, C, ...)` or, unbatched, `(C, ...)`), as PyTorch's. Max pooling
#' with `return_indices = TRUE` returns `list(output, indices)`, the indices
#' 1-based positions in each flattened input plane; the `max_unpool`
#' functions take such indices. `nnf_lp_pool1d()`/`nnf_lp_pool2d()` are the
#' power-average pools (`norm_type` = p). The adaptive pools take the output's
#' spatial size (an `NA` keeps the input's size in that dimension). Fractional
#' max pooling takes either `output_size` or `output_ratio`.
#'
#' @param input The input tensor.
#' @param kernel_size,stride,padding,dilation The window's sizes (one number
#'   or one per dimension; `stride = NULL`: the kernel size).
#' @param ceil_mode Use ceiling instead of floor for the output size.
#' @param count_include_pad Whether average pooling counts the zero padding.
#' @param divisor_override A divisor used instead of the window's size.
#' @param return_indices Also return the (1-based) positions of the maxima.
#' @param output_size The output's spatial size (adaptive and fractional
#'   pooling, unpooling: `NULL` for the default).
#' @param output_ratio The output's size as a fraction of the input's.
#' @param random_samples Fractional pooling's samples, `(N, C, 2 or 3)` in
#'   `[0, 1)`, or `NULL` to draw them.
#' @param norm_type The power `p` of Lp pooling.
#' @param indices Max pooling's (1-based) indices.
#' @return A tensor, or `list(output, indices)` (a module: a module).
#' @name nn_pooling
#' @examples
#' x <- torch_randn(2, 3, 8)
#' nnf_max_pool1d(x, kernel_size = 2)
#' dim(nnf_avg_pool1d(x, kernel_size = 3, stride = 2))
#' dim(nnf_lp_pool1d(x, norm_type = 2, kernel_size = 2))
#' pool <- nn_max_pool1d(2, return_indices = TRUE)
#' out <- pool(x)
#' nn_max_unpool1d(2)(out[[1]], out[[2]])
#' dim(nn_adaptive_avg_pool3d(c(2, 2, 2))(torch_randn(1, 3, 4, 5, 6)))
NULL

#' @rdname nn_pooling
#' @export
nnf_max_pool1d <- function(input, kernel_size, stride = NULL, padding = 0, dilation = 1,
                           ceil_mode = FALSE, return_indices = FALSE) {
  max_pool(torch_max_pool1d, .torch_max_pool1d_with_indices, input, kernel_size, stride, padding,
           dilation, ceil_mode, return_indices)
}

#' @rdname nn_pooling
#' @export
nnf_max_pool3d <- function(input, kernel_size, stride = NULL, padding = 0, dilation = 1,
                           ceil_mode = FALSE, return_indices = FALSE) {
  max_pool(torch_max_pool3d, .torch_max_pool3d_with_indices, input, kernel_size, stride, padding,
           dilation, ceil_mode, return_indices)
}

max_pool <- function(f, f_indices, input, kernel_size, stride, padding, dilation, ceil_mode,
                     return_indices) {
  arguments <- list(input, pool_sizes(kernel_size, "kernel_size"), pool_sizes(stride, "stride"),
                    pool_sizes(padding, "padding"), pool_sizes(dilation, "dilation"),
                    arg_flag(ceil_mode, "ceil_mode"))
  if (!arg_flag(return_indices, "return_indices")) {
    return(do.call(f, arguments))
  }
  one_based_indices(do.call(f_indices, arguments))
}

#' @rdname nn_pooling
#' @export
nnf_avg_pool1d <- function(input, kernel_size, stride = NULL, padding = 0, ceil_mode = FALSE,
                           count_include_pad = TRUE) {
  torch_avg_pool1d(input, pool_sizes(kernel_size, "kernel_size"), pool_sizes(stride, "stride"),
                   pool_sizes(padding, "padding"), arg_flag(ceil_mode, "ceil_mode"),
                   arg_flag(count_include_pad, "count_include_pad"))
}

#' @rdname nn_pooling
#' @export
nnf_avg_pool3d <- function(input, kernel_size, stride = NULL, padding = 0, ceil_mode = FALSE,
                           count_include_pad = TRUE, divisor_override = NULL) {
  torch_avg_pool3d(input, pool_sizes(kernel_size, "kernel_size"), pool_sizes(stride, "stride"),
                   pool_sizes(padding, "padding"), arg_flag(ceil_mode, "ceil_mode"),
                   arg_flag(count_include_pad, "count_include_pad"),
                   int_arg(divisor_override, "divisor_override", null_ok = TRUE))
}

# An adaptive pool's output size: NA (PyTorch's None) keeps the input's size in that dimension.
adaptive_size <- function(output_size, input, nd) {
  if (is.list(output_size)) {
    output_size <- vapply(output_size, function(s) if (is.null(s)) NA_real_ else s, 0)
  }
  if (length(output_size) == 1L) output_size <- rep(output_size, nd)
  keep <- is.na(output_size)
  if (any(keep)) output_size[keep] <- utils::tail(dim(input), nd)[keep]
  whole_numbers(output_size, "output_size")
}

adaptive_max_pool <- function(f, input, output_size, return_indices, nd) {
  out <- f(input, adaptive_size(output_size, input, nd))
  if (arg_flag(return_indices, "return_indices")) one_based_indices(out) else out[[1L]]
}

#' @rdname nn_pooling
#' @export
nnf_adaptive_max_pool1d <- function(input, output_size, return_indices = FALSE) {
  adaptive_max_pool(torch_adaptive_max_pool1d, input, output_size, return_indices, 1L)
}

#' @rdname nn_pooling
#' @export
nnf_adaptive_max_pool2d <- function(input, output_size, return_indices = FALSE) {
  adaptive_max_pool(torch_adaptive_max_pool2d, input, output_size, return_indices, 2L)
}

#' @rdname nn_pooling
#' @export
nnf_adaptive_max_pool3d <- function(input, output_size, return_indices = FALSE) {
  adaptive_max_pool(torch_adaptive_max_pool3d, input, output_size, return_indices, 3L)
}

#' @rdname nn_pooling
#' @export
nnf_adaptive_avg_pool1d <- function(input, output_size) {
  torch_adaptive_avg_pool1d(input, adaptive_size(output_size, input, 1L))
}

#' @rdname nn_pooling
#' @export
nnf_adaptive_avg_pool3d <- function(input, output_size) {
  torch_adaptive_avg_pool3d(input, adaptive_size(output_size, input, 3L))
}

# An infinite p: the largest (p = Inf) or smallest (-Inf) absolute value, as PyTorch's.
lp_pool_inf <- function(max_pool, input, norm_type, kernel_size, stride, ceil_mode) {
  stride <- stride %||% kernel_size
  if (norm_type > 0) {
    return(max_pool(input$abs(), kernel_size, stride, 0, 1, ceil_mode))
  }
  -max_pool(-input$abs(), kernel_size, stride, 0, 1, ceil_mode)
}

#' @rdname nn_pooling
#' @export
nnf_lp_pool1d <- function(input, norm_type, kernel_size, stride = NULL, ceil_mode = FALSE) {
  norm_type <- arg_number(norm_type, "norm_type")
  if (is.infinite(norm_type)) {
    return(lp_pool_inf(nnf_max_pool1d, input, norm_type, kernel_size, stride, ceil_mode))
  }
  # PyTorch's composition: the average of the p-th powers, times the window's size, to the 1/p.
  out <- nnf_avg_pool1d(input$pow(norm_type), kernel_size, stride, 0, ceil_mode)
  size <- prod(nd_sizes(kernel_size, "kernel_size", 1L, min = 1L))
  (torch_sign(out) * torch_relu(torch_abs(out)))$mul(size)$pow(1 / norm_type)
}

#' @rdname nn_pooling
#' @export
nnf_lp_pool2d <- function(input, norm_type, kernel_size, stride = NULL, ceil_mode = FALSE) {
  norm_type <- arg_number(norm_type, "norm_type")
  if (is.infinite(norm_type)) {
    return(lp_pool_inf(nnf_max_pool2d, input, norm_type, kernel_size, stride, ceil_mode))
  }
  out <- torch_avg_pool2d(input$pow(norm_type), pool_sizes(kernel_size, "kernel_size"),
                          pool_sizes(stride, "stride"), 0L, arg_flag(ceil_mode, "ceil_mode"))
  size <- prod(nd_sizes(kernel_size, "kernel_size", 2L, min = 1L))
  (torch_sign(out) * torch_relu(torch_abs(out)))$mul(size)$pow(1 / norm_type)
}

# PyTorch's _unpool_output_size: the default size, or the requested one (spatial, or the whole
# shape) checked to be within a stride of it.
unpool_output_size <- function(input, kernel_size, stride, padding, output_size) {
  nd <- length(kernel_size)
  default <- (utils::tail(dim(input), nd) - 1L) * stride + kernel_size - 2L * padding
  if (is.null(output_size)) {
    return(default)
  }
  output_size <- whole_numbers(output_size, "output_size")
  if (length(output_size) == nd + 2L) output_size <- output_size[-(1:2)]
  if (length(output_size) != nd) {
    abort(sprintf("`output_size` must have %d or %d elements, got %d.", nd, nd + 2L,
                  length(output_size)), class = "value_error")
  }
  low <- default - stride
  high <- default + stride
  bad <- which(output_size <= low | output_size >= high)
  if (length(bad)) {
    d <- bad[[1L]]
    abort(sprintf("`output_size` (%s): dimension %d must be between %d and %d (exclusive).",
                  toString(output_size), d, low[[d]], high[[d]]), class = "value_error")
  }
  output_size
}

unpool_arguments <- function(kernel_size, stride, padding, nd) {
  kernel_size <- nd_sizes(kernel_size, "kernel_size", nd, min = 1L)
  stride <- if (is.null(stride) || length(stride) == 0L) {
    kernel_size
  } else {
    nd_sizes(stride, "stride", nd, min = 1L)
  }
  list(kernel_size = kernel_size, stride = stride, padding = nd_sizes(padding, "padding", nd))
}

#' @rdname nn_pooling
#' @export
nnf_max_unpool1d <- function(input, indices, kernel_size, stride = NULL, padding = 0,
                             output_size = NULL) {
  a <- unpool_arguments(kernel_size, stride, padding, 1L)
  size <- unpool_output_size(input, a$kernel_size, a$stride, a$padding, output_size)
  # As PyTorch: a 2d unpooling over a trailing dimension of size 1.
  torch_max_unpool2d(input$unsqueeze(-1), indices$unsqueeze(-1), c(size, 1L))$squeeze(-1)
}

#' @rdname nn_pooling
#' @export
nnf_max_unpool2d <- function(input, indices, kernel_size, stride = NULL, padding = 0,
                             output_size = NULL) {
  a <- unpool_arguments(kernel_size, stride, padding, 2L)
  torch_max_unpool2d(input, indices,
                     unpool_output_size(input, a$kernel_size, a$stride, a$padding, output_size))
}

#' @rdname nn_pooling
#' @export
nnf_max_unpool3d <- function(input, indices, kernel_size, stride = NULL, padding = 0,
                             output_size = NULL) {
  a <- unpool_arguments(kernel_size, stride, padding, 3L)
  size <- unpool_output_size(input, a$kernel_size, a$stride, a$padding, output_size)
  torch_max_unpool3d(input, indices, size, a$stride, a$padding)
}

fractional_max_pool <- function(f, input, kernel_size, output_size, output_ratio,
                                return_indices, random_samples, nd) {
  if (is.null(output_size)) {
    if (is.null(output_ratio)) {
      abort("Either `output_size` or `output_ratio` must be given.", class = "value_error")
    }
    ratio <- output_ratio
    if (!is.numeric(ratio) || !length(ratio) %in% c(1L, nd) || anyNA(ratio)) {
      abort(sprintf("`output_ratio` must be one number or %d of them, got %s.", nd,
                    describe(ratio)), class = "value_error")
    }
    output_size <- as.integer(trunc(utils::tail(dim(input), nd) * rep_len(ratio, nd)))
  }
  if (is.null(random_samples)) {
    n <- if (input$dim() == nd + 1L) 1L else input$size(1L)
    random_samples <- torch_rand(n, input$size(-nd - 1L), nd, dtype = input$dtype,
                                 device = input$device)
  }
  out <- f(input, nd_sizes(kernel_size, "kernel_size", nd, min = 1L),
           nd_sizes(output_size, "output_size", nd, min = 1L), random_samples)
  if (arg_flag(return_indices, "return_indices")) one_based_indices(out) else out[[1L]]
}

#' @rdname nn_pooling
#' @export
nnf_fractional_max_pool2d <- function(input, kernel_size, output_size = NULL,
                                      output_ratio = NULL, return_indices = FALSE,
                                      random_samples = NULL) {
  fractional_max_pool(torch_fractional_max_pool2d, input, kernel_size, output_size, output_ratio,
                      return_indices, random_samples, 2L)
}

#' @rdname nn_pooling
#' @export
nnf_fractional_max_pool3d <- function(input, kernel_size, output_size = NULL,
                                      output_ratio = NULL, return_indices = FALSE,
                                      random_samples = NULL) {
  fractional_max_pool(torch_fractional_max_pool3d, input, kernel_size, output_size, output_ratio,
                      return_indices, random_samples, 3L)
}

# A module whose forward is `f(input, <its arguments, as given to initialize>)`; `stride = NULL`
# becomes the kernel size where `stride_default` (R torch's pools keep it so).
# nolint start: object_usage_linter. (R6 methods, written as expressions)
pool_module <- function(classname, f, arguments, stride_default = TRUE) {
  nn_module(
    classname,
    initialize = rlang::new_function(
      args = arguments,
      body = rlang::expr({
        for (name in !!names(arguments)) self[[name]] <- get(name)
        if (!!stride_default && is.null(self$stride)) self$stride <- self$kernel_size
      })
    ),
    forward = rlang::new_function(
      args = formals(function(input) NULL),
      body = rlang::expr((!!f)(input, !!!lapply(rlang::set_names(names(arguments)), function(n) {
        rlang::expr(self[[!!n]])
      })))
    )
  )
}
# nolint end

max_pool_arguments <- alist(kernel_size = , stride = NULL, padding = 0, dilation = 1,
                            return_indices = FALSE, ceil_mode = FALSE)

#' @rdname nn_pooling
#' @export
nn_max_pool1d <- pool_module("nn_max_pool1d", nnf_max_pool1d, max_pool_arguments)

#' @rdname nn_pooling
#' @export
nn_max_pool3d <- pool_module("nn_max_pool3d", nnf_max_pool3d, max_pool_arguments)

#' @rdname nn_pooling
#' @export
nn_avg_pool1d <- pool_module("nn_avg_pool1d", nnf_avg_pool1d, alist(
  kernel_size = , stride = NULL, padding = 0, ceil_mode = FALSE, count_include_pad = TRUE))

#' @rdname nn_pooling
#' @export
nn_avg_pool3d <- pool_module("nn_avg_pool3d", nnf_avg_pool3d, alist(
  kernel_size = , stride = NULL, padding = 0, ceil_mode = FALSE, count_include_pad = TRUE,
  divisor_override = NULL))

#' @rdname nn_pooling
#' @export
nn_adaptive_avg_pool1d <- pool_module("nn_adaptive_avg_pool1d", nnf_adaptive_avg_pool1d,
                                      formals(function(output_size) NULL),
                                      stride_default = FALSE)

#' @rdname nn_pooling
#' @export
nn_adaptive_avg_pool3d <- pool_module("nn_adaptive_avg_pool3d", nnf_adaptive_avg_pool3d,
                                      formals(function(output_size) NULL),
                                      stride_default = FALSE)

#' @rdname nn_pooling
#' @export
nn_adaptive_max_pool1d <- pool_module("nn_adaptive_max_pool1d", nnf_adaptive_max_pool1d,
                                      alist(output_size = , return_indices = FALSE),
                                      stride_default = FALSE)

#' @rdname nn_pooling
#' @export
nn_adaptive_max_pool2d <- pool_module("nn_adaptive_max_pool2d", nnf_adaptive_max_pool2d,
                                      alist(output_size = , return_indices = FALSE),
                                      stride_default = FALSE)

#' @rdname nn_pooling
#' @export
nn_adaptive_max_pool3d <- pool_module("nn_adaptive_max_pool3d", nnf_adaptive_max_pool3d,
                                      alist(output_size = , return_indices = FALSE),
                                      stride_default = FALSE)

#' @rdname nn_pooling
#' @export
nn_lp_pool1d <- pool_module("nn_lp_pool1d", nnf_lp_pool1d, alist(
  norm_type = , kernel_size = , stride = NULL, ceil_mode = FALSE), stride_default = FALSE)

#' @rdname nn_pooling
#' @export
nn_lp_pool2d <- pool_module("nn_lp_pool2d", nnf_lp_pool2d, alist(
  norm_type = , kernel_size = , stride = NULL, ceil_mode = FALSE), stride_default = FALSE)

# nolint start: object_usage_linter. (R6 methods)
unpool_module <- function(classname, f, nd) {
  nn_module(
    classname,
    initialize = function(kernel_size, stride = NULL, padding = 0) {
      a <- unpool_arguments(kernel_size, stride, padding, nd)
      self$kernel_size <- a$kernel_size
      self$stride <- a$stride
      self$padding <- a$padding
    },
    forward = function(input, indices, output_size = NULL) {
      f(input, indices, self$kernel_size, self$stride, self$padding, output_size)
    }
  )
}

fractional_module <- function(classname, f, nd) {
  nn_module(
    classname,
    initialize = function(kernel_size, output_size = NULL, output_ratio = NULL,
                          return_indices = FALSE) {
      self$kernel_size <- nd_sizes(kernel_size, "kernel_size", nd, min = 1L)
      if (is.null(output_size) == is.null(output_ratio)) {
        abort("Exactly one of `output_size` and `output_ratio` must be given.",
              class = "value_error")
      }
      if (!is.null(output_size)) output_size <- nd_sizes(output_size, "output_size", nd)
      if (!is.null(output_ratio)) {
        if (!is.numeric(output_ratio) || anyNA(output_ratio) ||
              any(output_ratio <= 0 | output_ratio >= 1)) {
          abort(sprintf("`output_ratio` must be between 0 and 1 (exclusive), got %s.",
                        toString(output_ratio)), class = "value_error")
        }
        output_ratio <- rep_len(output_ratio, nd)
      }
      self$output_size <- output_size
      self$output_ratio <- output_ratio
      self$return_indices <- arg_flag(return_indices, "return_indices")
    },
    forward = function(input) {
      f(input, self$kernel_size, self$output_size, self$output_ratio, self$return_indices)
    }
  )
}
# nolint end

#' @rdname nn_pooling
#' @export
nn_max_unpool1d <- unpool_module("nn_max_unpool1d", nnf_max_unpool1d, 1L)

#' @rdname nn_pooling
#' @export
nn_max_unpool2d <- unpool_module("nn_max_unpool2d", nnf_max_unpool2d, 2L)

#' @rdname nn_pooling
#' @export
nn_max_unpool3d <- unpool_module("nn_max_unpool3d", nnf_max_unpool3d, 3L)

#' @rdname nn_pooling
#' @export
nn_fractional_max_pool2d <- fractional_module("nn_fractional_max_pool2d",
                                              nnf_fractional_max_pool2d, 2L)

#' @rdname nn_pooling
#' @export
nn_fractional_max_pool3d <- fractional_module("nn_fractional_max_pool3d",
                                              nnf_fractional_max_pool3d, 3L)

#' Upsampling and interpolation
#'
#' `nnf_interpolate()` resizes the spatial dimensions of an `(N, C, ...)`
#' input (1, 2 or 3 of them) to `size`, or by `scale_factor` (exactly one of
#' the two; one number for every dimension or one per dimension), as
#' `torch.nn.functional.interpolate`: modes `"nearest"`, `"nearest-exact"`,
#' `"linear"` (3D input), `"bilinear"`, `"bicubic"` (4D), `"trilinear"` (5D)
#' and `"area"`. `nn_upsample()` is the module.
#'
#' @param input The input tensor.
#' @param size The output's spatial size.
#' @param scale_factor The multiplier of the spatial size.
#' @param mode The interpolation.
#' @param align_corners For the linear and cubic modes: align the corner
#'   pixels' centres of input and output (`NULL`: `FALSE`); the nearest and
#'   area modes take no `TRUE`.
#' @param recompute_scale_factor Compute the output size from `scale_factor`
#'   and interpolate with the scale that size implies (`NULL`/`FALSE`: use
#'   `scale_factor` itself).
#' @param antialias Anti-aliasing when downsampling (`"bilinear"` and
#'   `"bicubic"`, 4D input).
#' @return A tensor (a module: a module).
#' @name nn_upsample
#' @examples
#' x <- torch_arange(1, 4)$view(c(1, 1, 2, 2))
#' nnf_interpolate(x, scale_factor = 2)
#' nnf_interpolate(x, size = c(3, 3), mode = "bilinear", align_corners = TRUE)
#' nn_upsample(scale_factor = 2, mode = "bilinear")(x)
NULL

# libtorch's interpolation per mode and number of spatial dims (and whether it takes
# align_corners).
interpolate_op <- function(mode, nd) {
  ops <- list(
    nearest = list(.torch_upsample_nearest1d, .torch_upsample_nearest2d,
                   .torch_upsample_nearest3d),
    "nearest-exact" = list(torch__upsample_nearest_exact1d, torch__upsample_nearest_exact2d,
                           torch__upsample_nearest_exact3d),
    linear = list(torch_upsample_linear1d, NULL, NULL),
    bilinear = list(NULL, torch_upsample_bilinear2d, NULL),
    bicubic = list(NULL, torch_upsample_bicubic2d, NULL),
    trilinear = list(NULL, NULL, .torch_upsample_trilinear3d)
  )
  if (nd < 1L || nd > 3L || is.null(ops[[mode]][[nd]])) {
    needs <- c(linear = 3L, bilinear = 4L, bicubic = 4L, trilinear = 5L)
    rule <- if (mode %in% names(needs)) {
      sprintf("the mode \"%s\" needs a %dD input", mode, needs[[mode]])
    } else {
      sprintf("the mode \"%s\" needs a 3D, 4D or 5D input", mode)
    }
    abort(sprintf("`input` is %dD, but %s.", nd + 2L, rule), class = "not_implemented_error")
  }
  ops[[mode]][[nd]]
}

# One size or factor per spatial dimension: one (repeated) or `nd`.
per_dimension <- function(x, name, nd, input) {
  if (length(x) == 1L) x <- rep(x, nd)
  if (length(x) != nd) {
    abort(sprintf(paste0("`%s` must have one element or one per spatial dimension of `input` ",
                         "(%d, for an input of shape (%s)), got %d."),
                  name, nd, toString(dim(input)), length(x)), class = "value_error")
  }
  x
}

#' @rdname nn_upsample
#' @export
nnf_interpolate <- function(input, size = NULL, scale_factor = NULL, mode = "nearest",
                            align_corners = FALSE, recompute_scale_factor = NULL,
                            antialias = FALSE) {
  check_tensor(input, "input")
  mode <- arg_choice(mode, "mode", interpolate_modes)
  align_corners <- arg_flag(align_corners, "align_corners", null_ok = TRUE) %||% FALSE
  antialias <- arg_flag(antialias, "antialias")
  nd <- input$dim() - 2L
  check_interpolate_options(mode, align_corners, antialias, nd)
  recompute <- isTRUE(arg_flag(recompute_scale_factor, "recompute_scale_factor", null_ok = TRUE))
  if (recompute && !is.null(size)) {
    abort("`recompute_scale_factor` is not meaningful with an explicit `size`.",
          class = "value_error")
  }
  # "area" (an adaptive average pool) needs the output size.
  sizes <- interpolate_sizes(input, size, scale_factor, nd, recompute || mode == "area")
  if (mode == "area") {
    area <- list(torch_adaptive_avg_pool1d, torch_adaptive_avg_pool2d, torch_adaptive_avg_pool3d)
    if (nd < 1L || nd > 3L) interpolate_op("nearest", nd) # the input's error
    return(area[[nd]](input, sizes$output_size))
  }
  f <- interpolate_op(mode, nd)
  if (antialias) {
    f <- if (mode == "bilinear") torch__upsample_bilinear2d_aa else torch__upsample_bicubic2d_aa
  }
  if (mode %in% c("nearest", "nearest-exact")) {
    return(f(input = input, output_size = sizes$output_size,
             scale_factors = sizes$scale_factors))
  }
  f(input = input, output_size = sizes$output_size, align_corners = align_corners,
    scale_factors = sizes$scale_factors)
}

check_interpolate_options <- function(mode, align_corners, antialias, nd) {
  if (mode %in% c("nearest", "nearest-exact", "area") && align_corners) {
    abort(paste0("`align_corners` can only be TRUE with the interpolating modes: linear, ",
                 "bilinear, bicubic and trilinear."), class = "value_error")
  }
  if (antialias && !(mode %in% c("bilinear", "bicubic") && nd == 2L)) {
    abort("`antialias` is for the modes \"bilinear\" and \"bicubic\", with a 4D input.",
          class = "value_error")
  }
}

interpolate_modes <- c("nearest", "nearest-exact", "linear", "bilinear", "bicubic", "trilinear",
                       "area")

# PyTorch's rules: exactly one of `size` and `scale_factor`; with `recompute`, the output size
# computed from the scale factors (floor(input size * factor)) replaces them.
interpolate_sizes <- function(input, size, scale_factor, nd, recompute) {
  if (!is.null(size) && !is.null(scale_factor)) {
    abort("Only one of `size` and `scale_factor` may be given.", class = "value_error")
  }
  if (!is.null(size)) {
    return(list(output_size = per_dimension(whole_numbers(size, "size"), "size", nd, input)))
  }
  if (is.null(scale_factor)) {
    abort("Either `size` or `scale_factor` must be given.", class = "value_error")
  }
  if (!is.numeric(scale_factor) || anyNA(scale_factor)) {
    abort(sprintf("`scale_factor` must be numbers, got %s.", describe(scale_factor)),
          class = "value_error")
  }
  scale_factors <- as.double(per_dimension(scale_factor, "scale_factor", nd, input))
  if (recompute) {
    return(list(output_size = as.integer(floor(utils::tail(dim(input), nd) * scale_factors))))
  }
  list(scale_factors = scale_factors)
}

#' @rdname nn_upsample
#' @export
nn_upsample <- nn_module(
  "nn_upsample",
  initialize = function(size = NULL, scale_factor = NULL, mode = "nearest",
                        align_corners = NULL) {
    self$size <- size
    self$scale_factor <- scale_factor
    self$mode <- arg_choice(mode, "mode", interpolate_modes)
    self$align_corners <- arg_flag(align_corners, "align_corners", null_ok = TRUE)
  },
  forward = function(input) {
    nnf_interpolate(input, self$size, self$scale_factor, self$mode, self$align_corners)
  }
)

#' Padding, folding and unfolding
#'
#' `nnf_pad()` pads the last dimensions of `input`: `pad` lists (before,
#' after) sizes starting from the last dimension, as
#' `torch.nn.functional.pad` (`c(1, 2)` pads the last dimension with 1 before
#' and 2 after; `c(1, 1, 2, 2)` also the one before it); negative sizes crop.
#' Modes `"constant"` (with `value`, default 0), `"reflect"`, `"replicate"` and
#' `"circular"`. `nnf_unfold()` extracts sliding local blocks of an
#' `(N, C, H, W)` input into the columns of an `(N, C * prod(kernel_size), L)`
#' tensor; `nnf_fold()` sums such columns back into an `(N, C, output_size)`
#' tensor.
#' @param input The input tensor.
#' @param pad Padding sizes (whole numbers, an even number of them).
#' @param mode The padding mode.
#' @param value The fill value of `"constant"` padding (`NULL`: 0).
#' @param output_size The spatial size of the folded output.
#' @param kernel_size,dilation,padding,stride The blocks' sizes (one number or
#'   two).
#' @return A tensor.
#' @name nnf_pad
#' @examples
#' x <- torch_arange(1, 3)$view(c(1, 1, 3))
#' nnf_pad(x, c(1, 2))
#' nnf_pad(x, c(2, 2), mode = "reflect")
#' cols <- nnf_unfold(torch_randn(1, 2, 4, 4), kernel_size = 2)
#' dim(cols)
#' dim(nnf_fold(cols, output_size = c(4, 4), kernel_size = 2))
NULL

#' @rdname nnf_pad
#' @export
nnf_pad <- function(input, pad, mode = "constant", value = NULL) {
  check_tensor(input, "input")
  pad <- whole_numbers(pad, "pad")
  if (length(pad) %% 2L != 0L) {
    abort(sprintf("`pad` must have an even number of sizes (before and after), got %d.",
                  length(pad)), class = "value_error")
  }
  if (length(pad) %/% 2L > input$dim()) {
    abort(sprintf("`pad` pads %d dimensions, but `input` has %d.", length(pad) %/% 2L,
                  input$dim()), class = "value_error")
  }
  mode <- arg_choice(mode, "mode", c("constant", "reflect", "replicate", "circular"))
  value <- arg_number(value, "value", null_ok = TRUE)
  if (!is.null(value) && mode != "constant") {
    abort(sprintf("`value` is for `mode = \"constant\"`, not \"%s\".", mode),
          class = "value_error")
  }
  torch_pad(input, pad, mode, value)
}

pair_sizes <- function(x, name, min = 0L) nd_sizes(x, name, 2L, min = min)

#' @rdname nnf_pad
#' @export
nnf_unfold <- function(input, kernel_size, dilation = 1, padding = 0, stride = 1) {
  torch_im2col(input, pair_sizes(kernel_size, "kernel_size", 1L),
               pair_sizes(dilation, "dilation", 1L), pair_sizes(padding, "padding"),
               pair_sizes(stride, "stride", 1L))
}

#' @rdname nnf_pad
#' @export
nnf_fold <- function(input, output_size, kernel_size, dilation = 1, padding = 0, stride = 1) {
  torch_col2im(input, pair_sizes(output_size, "output_size", 1L),
               pair_sizes(kernel_size, "kernel_size", 1L), pair_sizes(dilation, "dilation", 1L),
               pair_sizes(padding, "padding"), pair_sizes(stride, "stride", 1L))
}

#' Spatial transformers' grids
#'
#' `nnf_affine_grid()` makes the sampling grid of a batch of affine maps
#' (`theta`, `(N, 2, 3)` for 2-D, `(N, 3, 4)` for 3-D) for an output of `size`
#' (`c(N, C, H, W)` or `c(N, C, D, H, W)`); `nnf_grid_sample()` samples `input`
#' at a grid's points (coordinates in `[-1, 1]`). PyTorch's
#' `torch.nn.functional.affine_grid()` and `grid_sample()`.
#' @param theta A batch of affine matrices.
#' @param size The output's size (whole numbers).
#' @param align_corners Whether -1 and 1 are the corner pixels' centres
#'   (`TRUE`) or their outer edges.
#' @param input The tensor sampled, `(N, C, H, W)` or `(N, C, D, H, W)`.
#' @param grid The sampling points, `(N, H_out, W_out, 2)` or `(N, D_out,
#'   H_out, W_out, 3)`.
#' @param mode `"bilinear"`, `"nearest"` or `"bicubic"` (2-D only).
#' @param padding_mode What points outside the input read: `"zeros"`,
#'   `"border"` or `"reflection"`.
#' @return A tensor.
#' @name nnf_grid_sample
#' @examples
#' theta <- torch_tensor(array(c(1, 0, 0, 1, 0, 0), c(1, 2, 3)))
#' grid <- nnf_affine_grid(theta, c(1, 1, 4, 4))
#' x <- torch_randn(1, 1, 4, 4)
#' torch_allclose(nnf_grid_sample(x, grid, align_corners = FALSE), x, atol = 1e-6)
NULL

#' @rdname nnf_grid_sample
#' @export
nnf_affine_grid <- function(theta, size, align_corners = FALSE) {
  check_tensor(theta, "theta")
  size <- whole_numbers(size, "size")
  align_corners <- arg_flag(align_corners, "align_corners")
  if (!theta$is_floating_point()) {
    abort(sprintf("`theta` must have a floating point dtype, got %s.", theta$dtype$.type()),
          class = "value_error")
  }
  # PyTorch's checks: (N, 2, 3) matrices for a 4-D size, (N, 3, 4) for a 5-D one.
  rows <- length(size) - 2L
  if (!rows %in% c(2L, 3L)) {
    abort(sprintf("`size` must have 4 or 5 entries (2-D or 3-D maps), got %d.", length(size)),
          class = "value_error")
  }
  if (theta$dim() != 3L || !identical(dim(theta)[2:3], c(rows, rows + 1L))) {
    abort(sprintf("`theta` must be a batch of %dx%d matrices for a size of %d entries, got (%s).",
                  rows, rows + 1L, length(size), toString(dim(theta))), class = "value_error")
  }
  if (align_corners && min(size[-(1:2)]) == 1) {
    rlang::warn(paste("Since version 1.3.0, affine_grid behavior has changed for unit-size grids",
                      "when align_corners=True. This is not an intended use case of affine_grid.",
                      "See the documentation of affine_grid for details."),
                class = "ampkit_warning")
  } else if (min(size) <= 0) {
    abort(sprintf("`size` must be positive, got (%s).", toString(size)), class = "value_error")
  }
  torch_affine_grid_generator(theta, size, align_corners)
}

#' @rdname nnf_grid_sample
#' @export
nnf_grid_sample <- function(input, grid, mode = "bilinear", padding_mode = "zeros",
                            align_corners = FALSE) {
  check_tensor(input, "input")
  check_tensor(grid, "grid")
  # libtorch's enums (GridSamplerInterpolation, GridSamplerPadding), in their order.
  modes <- c("bilinear", "nearest", "bicubic")
  paddings <- c("zeros", "border", "reflection")
  mode <- match(arg_choice(mode, "mode", modes), modes) - 1L
  padding_mode <- match(arg_choice(padding_mode, "padding_mode", paddings), paddings) - 1L
  torch_grid_sampler(input, grid, mode, padding_mode, arg_flag(align_corners, "align_corners"))
}
