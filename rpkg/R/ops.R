# R torch's hand-written operator functions (over the generated `.torch_<name>`): 1-based indices
# in results, arguments R torch renames or reorders; and R's operators and group generics on
# tensors. Everything else is generated from libtorch's schemas (gen-ops.R).

#' Operators with R torch's conventions
#'
#' These follow R torch: dimensions count from 1 (`-1` is the last), and the
#' indices they return count from 1. `torch_max(x)` is the largest element;
#' `torch_max(x, dim = 1)` a list of the largest values and their (1-based)
#' positions along `dim`; `torch_max(x, other = y)` the elementwise maximum.
#' `torch_where(condition)` gives the (1-based) positions of `TRUE` elements,
#' one tensor per dimension. `torch_split()` takes a size or a vector of
#' sizes; `torch_narrow()` a 1-based `start`; `torch_nonzero()` 1-based
#' positions; `torch_tril_indices()` and `torch_triu_indices()` the 1-based
#' (row, column) positions of a matrix's lower or upper triangle, one column
#' each. The functions generated from libtorch's schemas are documented
#' in [torch_ops].
#'
#' @param self A tensor.
#' @param dim A dimension (1-based; negative from the end).
#' @param other A second tensor.
#' @param keepdim Whether reduced dimensions are kept with size 1.
#' @param descending,largest,sorted,stable Ordering options.
#' @param k How many (`torch_topk()`).
#' @param condition A bool tensor.
#' @param as_list `torch_nonzero()`: a list of index tensors, one per dimension.
#' @param split_size A size, or a vector of sizes.
#' @param start,length `torch_narrow()`: the first (1-based) element and how many.
#' @param source,destination `torch_movedim()`: dimensions (1-based).
#' @param p `torch_norm()`: the norm's order.
#' @param dtype The result's dtype (`torch_norm()`; `torch_tril_indices()` and
#'   `torch_triu_indices()`, whose default is int64).
#' @param repeats,output_size `torch_repeat_interleave()`.
#' @param weights,minlength `torch_bincount()`.
#' @param num_samples,replacement,generator `torch_multinomial()`.
#' @return A tensor, or a list of tensors.
#' @name torch_index_ops
#' @aliases torch_bincount
#' @usage torch_bincount(self, weights = NULL, minlength = 0L)
#' @examples
#' x <- torch_tensor(matrix(c(3, 1, 2, 5), 2))
#' torch_max(x)
#' torch_max(x, dim = 1)
#' torch_argmax(x, dim = 2)
#' torch_sort(torch_tensor(c(3, 1, 2)))
#' torch_where(x > 2)
#' torch_split(torch_arange(1, 5), 2)
#' torch_tril_indices(3, 3)
NULL

# The indices element of a (values, indices) result made 1-based.
second_plus_one <- function(result) {
  result[[2L]] <- plus_one(result[[2L]])
  result
}

#' @rdname torch_index_ops
#' @export
torch_max <- function(self, dim, other, keepdim = FALSE) {
  extremum(.torch_max, self, dim, other, keepdim, missing(dim), missing(other))
}

#' @rdname torch_index_ops
#' @export
torch_min <- function(self, dim, other, keepdim = FALSE) {
  extremum(.torch_min, self, dim, other, keepdim, missing(dim), missing(other))
}

# R torch's max/min: the overall extremum; with `dim` a list of (values, 1-based indices); with
# `other` (or a tensor given as `dim`, as in `torch_max(x, y)`) the elementwise extremum.
extremum <- function(f, self, dim, other, keepdim, no_dim, no_other) {
  if (!no_dim && !no_other) {
    abort("Can't set other and dim arguments.", class = "value_error")
  }
  if (!no_dim && is_torch_tensor(dim)) {
    return(f(self, other = dim))
  }
  if (no_dim && no_other) {
    return(f(self))
  }
  if (no_dim) {
    return(f(self, other = other))
  }
  second_plus_one(f(self, dim = dim, keepdim = keepdim))
}

#' @rdname torch_index_ops
#' @export
torch_argmax <- function(self, dim = NULL, keepdim = FALSE) {
  plus_one(.torch_argmax(self, dim, keepdim))
}

#' @rdname torch_index_ops
#' @export
torch_argmin <- function(self, dim = NULL, keepdim = FALSE) {
  plus_one(.torch_argmin(self, dim, keepdim))
}

#' @rdname torch_index_ops
#' @export
torch_argsort <- function(self, dim = -1L, descending = FALSE, stable = FALSE) {
  plus_one(.torch_argsort(self, stable = stable, dim = dim, descending = descending))
}

#' @rdname torch_index_ops
#' @export
torch_sort <- function(self, dim = -1L, descending = FALSE, stable) {
  result <- if (missing(stable)) {
    .torch_sort(self, dim = dim, descending = descending)
  } else {
    .torch_sort(self, stable = stable, dim = dim, descending = descending)
  }
  second_plus_one(result)
}

#' @rdname torch_index_ops
#' @export
torch_topk <- function(self, k, dim = -1L, largest = TRUE, sorted = TRUE) {
  second_plus_one(.torch_topk(self, k, dim, largest, sorted))
}

#' @rdname torch_index_ops
#' @export
torch_nonzero <- function(self, as_list = FALSE) {
  if (arg_flag(as_list, "as_list")) {
    return(lapply(torch_nonzero_numpy(self), plus_one))
  }
  plus_one(.torch_nonzero(self))
}

#' @rdname torch_index_ops
#' @export
torch_where <- function(condition, self = NULL, other = NULL) {
  if (is.null(self) && is.null(other)) {
    return(lapply(.torch_where(condition), plus_one))
  }
  .torch_where(condition, self, other)
}

#' @rdname torch_index_ops
#' @export
torch_split <- function(self, split_size, dim = 1L) {
  if (length(split_size) > 1L) {
    return(torch_split_with_sizes(self, split_size, dim))
  }
  .torch_split(self, split_size, dim)
}

#' @rdname torch_index_ops
#' @export
torch_narrow <- function(self, dim, start, length) {
  if (is_torch_tensor(start)) start <- start$item()
  start <- whole_number(start, "start")
  if (start == 0) {
    abort("start indexing starts at 1", class = "value_error")
  }
  .torch_narrow(self, dim, if (start > 0) start - 1L else start, length)
}

# `$narrow_copy()`: 1-based `start`, as torch_narrow() (the generated torch_narrow_copy() takes
# it 0-based, as R torch's does).
narrow_copy_one_based <- function(self, dim, start, length) {
  start <- whole_number(start, "start")
  if (start == 0L) {
    abort("`start` is 1-based (the first is 1, the last -1), but found 0.", class = "index_error")
  }
  torch_narrow_copy(self, dim, if (start > 0) start - 1L else start, length)
}

#' @rdname torch_index_ops
#' @export
torch_movedim <- function(self, source, destination) {
  .torch_movedim(self, one_based(source, "source"), one_based(destination, "destination"))
}

#' @rdname torch_index_ops
#' @export
torch_norm <- function(self, p = 2, dim = NULL, keepdim = FALSE, dtype = NULL) {
  dtype <- as_torch_dtype(dtype)
  if (identical(p, "nuc")) {
    return(torch_linalg_matrix_norm(self, "nuc", dim %||% c(-2L, -1L), keepdim, dtype = dtype))
  }
  if (identical(p, "fro")) p <- 2 # over the given dims, as a vector norm (PyTorch's rule)
  # PyTorch's torch.norm with a numeric p is linalg.vector_norm (over every dimension when `dim`
  # is NULL): libtorch's norm overloads without a dim take no keepdim.
  torch_linalg_vector_norm(self, p, dim, keepdim, dtype = dtype)
}

#' @rdname torch_index_ops
#' @export
torch_repeat_interleave <- function(self, repeats, dim = NULL, output_size = NULL) {
  .torch_repeat_interleave(self, repeats, dim, output_size = output_size)
}

#' @rdname torch_index_ops
#' @export
torch_multinomial <- function(self, num_samples, replacement = FALSE, generator = NULL) {
  with_no_grad(plus_one(.torch_multinomial(self, num_samples, replacement, generator)))
}

#' @rdname torch_index_ops
#' @export
torch_logical_not <- function(self) .torch_logical_not(self)

# 1-based dims given to a function whose schema takes them 0-based (movedim's).
one_based <- function(x, arg) {
  x <- whole_numbers(x, arg)
  if (any(x == 0)) {
    # R torch's words (its tests match them), and the argument's name.
    abort(sprintf("Dimension is 1-based, but found 0 in `%s` (the first is 1, the last -1).", arg),
          class = "value_error")
  }
  ifelse(x > 0, x - 1, x)
}

# A 1-based index tensor as libtorch's (entries >= 1 lose 1).
one_based_tensor <- function(x, arg) {
  if (!is_torch_tensor(x)) x <- torch_tensor(whole_numbers(x, arg), dtype = torch_long())
  .Call(C_zero_based, x, arg)  # src/indexing.cpp: a 0 is an error naming `arg`
}

# ---- operators -----------------------------------------------------------------------------------

# An R value on the left of an operator becomes a tensor on the device of the right one (R
# torch's rule); on the right a number stays a scalar (libtorch's "wrapped number").
left_tensor <- function(e1, e2) torch_tensor(e1, device = meta(e2, "device"))
# An operator's left operand, written into each method: a tensor is tested inline with the builtin
# typeof(), where calling a helper that called inherits() cost ~1.7 us of `x + y`'s ~4.4 (two
# closure calls). An external pointer that is not a tensor fails the op's own check on `self`.
left_operand <- quote(if (typeof(e1) == "externalptr") e1 else left_tensor(e1, e2))
as_operand <- function(e, like) {
  if (is_torch_tensor(e)) e else torch_tensor(e, device = meta(like, "device"))
}

# An operator's op call: the generated function's own call (gen-ops.R: the op's entry and
# number), its arguments written in, so that `x + y` makes one R call fewer than through
# torch_add() (~1 us of the operator's ~5).
op_call <- function(op, ...) do.call(substitute, list(body(op), list(...)))
operator_formals <- formals(function(e1, e2) NULL)

#' @export
`+.torch_tensor` <- rlang::new_function(operator_formals, rlang::expr({
  if (missing(e2)) {
    return(e1)
  }
  !!op_call(torch_add, self = left_operand, other = quote(e2), alpha = 1L)
}))

#' @export
`-.torch_tensor` <- rlang::new_function(operator_formals, rlang::expr({
  if (missing(e2)) {
    return(torch_neg(e1))
  }
  !!op_call(torch_sub, self = left_operand, other = quote(e2), alpha = 1L)
}))

#' @export
`*.torch_tensor` <- rlang::new_function(operator_formals, op_call(
  torch_mul, self = left_operand, other = quote(e2)
))

#' @export
`/.torch_tensor` <- rlang::new_function(
  operator_formals, rlang::expr(torch_div(!!left_operand, e2))
)

#' @export
# nolint start: object_name_linter.
`^.torch_tensor` <- rlang::new_function(operator_formals, op_call(
  torch_pow, self = left_operand, exponent = quote(e2)
))
# nolint end

#' @export
`%%.torch_tensor` <- rlang::new_function(operator_formals, op_call(
  torch_fmod, self = left_operand, other = quote(e2)
))

#' @export
`%/%.torch_tensor` <- rlang::new_function( # nolint: object_name_linter.
  operator_formals, rlang::expr(torch_div(!!left_operand, e2, rounding_mode = "trunc"))
)

#' @export
Ops.torch_tensor <- function(e1, e2) {
  like <- if (is_torch_tensor(e1)) e1 else e2
  # A comparison's right side may stay an R number (libtorch's Scalar overloads, as R torch
  # calls them): making it a tensor first cost ~20 us a comparison.
  switch(.Generic, # nolint: object_usage_linter.
    `==` = torch_eq(as_operand(e1, like), e2),
    `!=` = torch_ne(as_operand(e1, like), e2),
    `<` = torch_lt(as_operand(e1, like), e2),
    `<=` = torch_le(as_operand(e1, like), e2),
    `>` = torch_gt(as_operand(e1, like), e2),
    `>=` = torch_ge(as_operand(e1, like), e2),
    `&` = torch_logical_and(as_operand(e1, like), as_operand(e2, like)),
    `|` = torch_logical_or(as_operand(e1, like), as_operand(e2, like)),
    `!` = torch_logical_not(e1),
    # nolint start: object_usage_linter.
    abort(sprintf("`%s` is not defined for tensors.", .Generic), class = "value_error")
    # nolint end
  )
}

#' Matrix product of tensors with `%*%`
#'
#' `x %*% y` is [torch_matmul()] of the two (an R value on one side becomes a
#' tensor like the other). R dispatches `%*%` on tensors from R 4.3 on.
#' @param x,y Tensors, or one tensor and an R vector or matrix.
#' @return A tensor.
#' @export
#' @examples
#' a <- torch_ones(2, 3)
#' b <- torch_ones(3, 2)
#' if (getRversion() >= "4.3") a %*% b
#' `%*%.torch_tensor`(a, b)
# nolint start: object_name_linter.
`%*%.torch_tensor` <- function(x, y) torch_matmul(as_operand(x, y), as_operand(y, x))
# nolint end

#' @export
Math.torch_tensor <- function(x, ...) {
  switch(.Generic, # nolint: object_usage_linter.
    abs = torch_abs(x), sign = torch_sign(x), sqrt = torch_sqrt(x), ceiling = torch_ceil(x),
    floor = torch_floor(x), trunc = torch_trunc(x), exp = torch_exp(x), expm1 = torch_expm1(x),
    log = {
      # log(x, base): `base` by name or by position.
      base <- list(...)
      if (length(base)) torch_log(x) / log(base[[1L]]) else torch_log(x)
    },
    log2 = torch_log2(x), log10 = torch_log10(x), log1p = torch_log1p(x), cos = torch_cos(x),
    sin = torch_sin(x), tan = torch_tan(x), acos = torch_acos(x), asin = torch_asin(x),
    atan = torch_atan(x), cosh = torch_cosh(x), sinh = torch_sinh(x), tanh = torch_tanh(x),
    round = {
      # round(x, digits): PyTorch's round(decimals =).
      digits <- list(...)
      if (length(digits) && digits[[1L]] != 0) {
        torch_round(x, decimals = whole_number(digits[[1L]], "digits"))
      } else {
        torch_round(x)
      }
    },
    cumsum = torch_cumsum(x, dim = 1L),
    cumprod = torch_cumprod(x, dim = 1L), lgamma = torch_lgamma(x), digamma = torch_digamma(x),
    # nolint start: object_usage_linter.
    abort(sprintf("`%s` is not defined for tensors.", .Generic), class = "value_error")
    # nolint end
  )
}

#' @export
Summary.torch_tensor <- function(..., na.rm = FALSE) { # nolint: object_name_linter.
  if (arg_flag(na.rm, "na.rm")) {
    abort("Torch tensors do not have NAs!", class = "value_error")
  }
  args <- list(...)
  # R torch's sum(x, dim =, keepdim =) and prod(...): a reduction over `dim` of one tensor. Any
  # other name is a misspelt argument, not one more value to reduce (base R's rule would add it).
  given <- names(args)
  unknown <- setdiff(given[nzchar(given)], c("dim", "keepdim"))
  if (length(unknown)) {
    abort(sprintf("`%s` is not an argument of %s() for tensors (`dim`, `keepdim`, `na.rm` are).",
                  unknown[[1L]], .Generic), class = "value_error") # nolint: object_usage_linter.
  }
  dim <- args[["dim"]]
  keepdim <- arg_flag(args[["keepdim"]] %||% FALSE, "keepdim")
  args[c("dim", "keepdim")] <- NULL
  if (keepdim && is.null(dim)) {
    abort("`keepdim` keeps the dimensions `dim` reduces: give `dim` too.", class = "value_error")
  }
  if (!is.null(dim)) {
    if (length(args) != 1L) {
      abort("`dim` reduces one tensor, but several were given.", class = "value_error")
    }
    x <- args[[1L]]
    # nolint start: object_usage_linter.
    return(switch(.Generic, sum = torch_sum(x, dim = dim, keepdim = keepdim),
    # nolint end
                  prod = torch_prod(x, dim = dim, keepdim = keepdim),
                  max = torch_max(x, dim = dim, keepdim = keepdim),
                  min = torch_min(x, dim = dim, keepdim = keepdim),
                  all = torch_all(x, dim = dim, keepdim = keepdim),
                  any = torch_any(x, dim = dim, keepdim = keepdim),
                  # nolint start: object_usage_linter.
                  abort(sprintf("`%s` takes no `dim`.", .Generic), class = "value_error")))
                  # nolint end
  }
  one <- function(x) {
    if (!is_torch_tensor(x)) x <- torch_tensor(x)
    # nolint start: object_usage_linter.
    switch(.Generic, sum = torch_sum(x), prod = torch_prod(x), max = torch_max(x),
    # nolint end
           min = torch_min(x), all = torch_all(x), any = torch_any(x),
           range = torch_stack(list(torch_min(x), torch_max(x))),
           # nolint start: object_usage_linter.
           abort(sprintf("`%s` is not defined for tensors.", .Generic), class = "value_error"))
           # nolint end
  }
  values <- lapply(args, one)
  if (length(values) == 1L) {
    return(values[[1L]])
  }
  Reduce(function(a, b) one(torch_stack(list(a$reshape(-1L), b$reshape(-1L)))$reshape(-1L)),
         values)
}

#' @export
# nolint start: object_name_linter.
mean.torch_tensor <- function(x, dim, keepdim = FALSE, na.rm = FALSE, ...) {
# nolint end
  if (...length() > 0L) check_dots_empty()  # mean(x, dims = 1), mean(x, trim = 0.1)
  if (arg_flag(na.rm, "na.rm")) {
    abort("Torch tensors do not have NAs!", class = "value_error")
  }
  if (missing(dim)) torch_mean(x) else torch_mean(x, dim = dim, keepdim = keepdim)
}

# ---- R torch's other hand-written wrappers ------------------------------------------------------

#' Spectral functions: FFTs, short-time Fourier transforms and windows
#'
#' R torch's wrappers of libtorch's `fft_*`, `stft` and window functions.
#' `torch_fft_fft()` and `torch_fft_ifft()` are the (inverse) discrete Fourier
#' transform over `dim`; `torch_fft_rfft()` that of a real input (the
#' one-sided half) and `torch_fft_irfft()` its inverse; `norm` is
#' `"backward"` (the default: no scaling forward, 1/n backward), `"forward"` or
#' `"ortho"`. `torch_fft_fftfreq(n, d)` gives the sample frequencies of an FFT
#' of size `n` with sample spacing `d`. `torch_stft()` is the short-time
#' Fourier transform (PyTorch's `torch.stft`). The window functions give a
#' window of `window_length` points: `periodic = TRUE` (the default) for use
#' with spectral functions, `FALSE` for a symmetric window.
#'
#' @param self,input A tensor.
#' @param n The length of the transform (`NULL`: the size of `dim`); for
#'   `torch_fft_fftfreq()`, the window length.
#' @param dim The dimension transformed (1-based; `-1`, the default, is the last).
#' @param norm `NULL` or `"backward"`, `"forward"`, `"ortho"`.
#' @param d The sample spacing (the inverse of the sampling rate).
#' @param n_fft,hop_length,win_length,window,center,pad_mode,normalized,onesided,return_complex
#'   `torch_stft()`'s arguments, as PyTorch's `torch.stft()`'s.
#' @param window_length The window's number of points.
#' @param periodic Whether the window is periodic (`TRUE`) or symmetric.
#' @param alpha,beta The coefficients of the Hamming window; `beta` is also the
#'   Kaiser window's shape.
#' @param dtype,layout,device,requires_grad As for the creation functions.
#' @return A tensor.
#' @name torch_spectral
#' @examples
#' x <- torch_tensor(c(1, 2, 3, 4))
#' torch_fft_fft(x)
#' torch_fft_irfft(torch_fft_rfft(x), n = 4)
#' torch_fft_fftfreq(4)
#' torch_hann_window(5)
#' torch_kaiser_window(5, periodic = FALSE, beta = 5)
#' torch_stft(torch_ones(100), n_fft = 16, return_complex = TRUE)$shape
NULL

#' @rdname torch_spectral
#' @export
torch_fft_fft <- function(self, n = NULL, dim = -1L, norm = NULL) {
  .torch_fft_fft(self, n = n, dim = dim, norm = norm %||% "backward")
}

#' @rdname torch_spectral
#' @export
torch_fft_ifft <- function(self, n = NULL, dim = -1L, norm = NULL) {
  .torch_fft_ifft(self, n = n, dim = dim, norm = norm %||% "backward")
}

#' @rdname torch_spectral
#' @export
torch_fft_rfft <- function(self, n = NULL, dim = -1L, norm = NULL) {
  .torch_fft_rfft(self, n = n, dim = dim, norm = norm %||% "backward")
}

#' @rdname torch_spectral
#' @export
torch_fft_irfft <- function(self, n = NULL, dim = -1L, norm = NULL) {
  .torch_fft_irfft(self, n = n, dim = dim, norm = norm %||% "backward")
}

#' @rdname torch_spectral
#' @export
torch_fft_fftfreq <- function(n, d = 1, dtype = NULL, layout = NULL, device = NULL,
                              requires_grad = FALSE) {
  created(.torch_fft_fftfreq(whole_number(n, "n"), d, as_torch_dtype(dtype), layout,
                             creation_device(device)), requires_grad)
}

#' @rdname torch_spectral
#' @export
torch_stft <- function(input, n_fft, hop_length = NULL, win_length = NULL, window = NULL,
                       center = TRUE, pad_mode = "reflect", normalized = FALSE, onesided = NULL,
                       return_complex = NULL) {
  .torch_stft(input, n_fft, hop_length = hop_length, win_length = win_length, window = window,
              center = center, pad_mode = pad_mode, normalized = normalized, onesided = onesided,
              return_complex = return_complex)
}

# A window function's call with R torch's options.
window_of <- function(f, window_length, ..., dtype, layout, device, requires_grad) {
  if (is.null(window_length)) {
    abort("argument 'window_length' must be int, not NULL", class = "value_error")
  }
  created(f(whole_number(window_length, "window_length"), ..., dtype = as_torch_dtype(dtype),
            layout = layout, device = creation_device(device)), requires_grad)
}

#' @rdname torch_spectral
#' @export
torch_bartlett_window <- function(window_length, periodic = TRUE, dtype = NULL, layout = NULL,
                                  device = NULL, requires_grad = FALSE) {
  window_of(.torch_bartlett_window, window_length, periodic = periodic, dtype = dtype,
            layout = layout, device = device, requires_grad = requires_grad)
}

#' @rdname torch_spectral
#' @export
torch_blackman_window <- function(window_length, periodic = TRUE, dtype = NULL, layout = NULL,
                                  device = NULL, requires_grad = FALSE) {
  window_of(.torch_blackman_window, window_length, periodic = periodic, dtype = dtype,
            layout = layout, device = device, requires_grad = requires_grad)
}

#' @rdname torch_spectral
#' @export
torch_hamming_window <- function(window_length, periodic = TRUE, alpha = 0.54, beta = 0.46,
                                 dtype = NULL, layout = NULL, device = NULL,
                                 requires_grad = FALSE) {
  window_of(.torch_hamming_window, window_length, periodic = periodic, alpha = alpha, beta = beta,
            dtype = dtype, layout = layout, device = device, requires_grad = requires_grad)
}

#' @rdname torch_spectral
#' @export
torch_hann_window <- function(window_length, periodic = TRUE, dtype = NULL, layout = NULL,
                              device = NULL, requires_grad = FALSE) {
  window_of(.torch_hann_window, window_length, periodic = periodic, dtype = dtype,
            layout = layout, device = device, requires_grad = requires_grad)
}

#' @rdname torch_spectral
#' @export
torch_kaiser_window <- function(window_length, periodic = TRUE, beta = 12, dtype = NULL,
                                layout = NULL, device = NULL, requires_grad = FALSE) {
  window_of(.torch_kaiser_window, window_length, periodic = periodic, beta = beta, dtype = dtype,
            layout = layout, device = device, requires_grad = requires_grad)
}

#' More operators with R torch's signatures
#'
#' R torch's hand-written functions over libtorch's operators.
#' `torch_atleast_1d()` (`_2d`, `_3d`) gives a tensor (or each tensor of a
#' list) at least that many dimensions. `torch_tensordot(a, b, dims)`
#' contracts the last `dims` dimensions of `a` with the first `dims` of `b`,
#' or the (1-based) dimensions `dims[[1]]` of `a` with `dims[[2]]` of `b`.
#' `torch_vander(x, N)` is the Vandermonde matrix of `x`. `torch_result_type()`
#' is the dtype an operation on two tensors or numbers gives.
#' `torch_polygamma(n, input)` is the `n`-th derivative of the digamma
#' function. `torch_quantize_per_tensor()` quantizes a tensor (or a list of
#' tensors) with a scale and zero point to a quantized dtype
#' ([torch_quint8()], ...); `torch_dequantize()` gives the float values back.
#'
#' @param self,input,a,b,x,tensor A tensor (`self`, `tensor`: or a list of tensors).
#' @param dims `torch_tensordot()`: how many dimensions to contract, or a list
#'   of two vectors of (1-based) dimensions.
#' @param N,increasing `torch_vander()`: the number of columns (`NULL`: as many
#'   as `x` has elements), and whether the powers increase left to right.
#' @param tensor1,tensor2 Tensors or R numbers.
#' @param n The order of the derivative.
#' @param scale,zero_point,dtype The quantization's scale (a number, or a
#'   tensor of one per tensor of a list), zero point and quantized dtype.
#' `torch_lu(A)` is the LU factorisation of (a batch of) matrices: the packed
#' factors and the pivots (1-based, as LAPACK's), and with `get_infos` the
#' LAPACK info codes instead of an error for a singular matrix.
#' `torch_tensor_from_buffer(buffer, shape, dtype)` reads an R vector's bytes
#' (a raw vector, or a numeric one) as a tensor of `dtype` and `shape`;
#' `buffer_from_torch_tensor()` gives a tensor's bytes as a raw vector. The
#' first shares the R vector's memory, as R torch's (writing to the tensor
#' writes to the vector); the second copies.
#' @param A A tensor of matrices.
#' @param pivot,get_infos Whether to pivot; whether to return the info codes.
#' @param out Ignored unless a list of tensors to copy the results into.
#' @param buffer An R vector.
#' @param shape The tensor's shape.
#' @return A tensor, a list of tensors, or (`torch_result_type()`) a dtype.
#' @name torch_wrappers
#' @examples
#' torch_atleast_2d(torch_tensor(1))$shape
#' a <- torch_randn(3, 4, 5)
#' b <- torch_randn(4, 3, 2)
#' torch_tensordot(a, b, list(c(2, 1), c(1, 2)))$shape
#' torch_vander(torch_tensor(c(1, 2, 3)), N = 3)
#' torch_result_type(torch_tensor(1:2), 1)
#' torch_polygamma(1, torch_tensor(c(1, 0.5)))
#' q <- torch_quantize_per_tensor(torch_tensor(c(-1, 0, 1, 2)), 0.1, 10, torch_quint8())
#' torch_dequantize(q)
#' torch_lu(torch_tensor(matrix(c(4, 3, 6, 3), 2)))
#' b <- buffer_from_torch_tensor(torch_tensor(c(1.5, 2)))
#' torch_tensor_from_buffer(b, shape = 2, dtype = "float")
NULL

#' @rdname torch_wrappers
#' @export
torch_atleast_1d <- function(self) {
  if (is_torch_tensor(self)) .torch_atleast_1d(self = self) else .torch_atleast_1d(tensors = self)
}

#' @rdname torch_wrappers
#' @export
torch_atleast_2d <- function(self) {
  if (is_torch_tensor(self)) .torch_atleast_2d(self = self) else .torch_atleast_2d(tensors = self)
}

#' @rdname torch_wrappers
#' @export
torch_atleast_3d <- function(self) {
  if (is_torch_tensor(self)) .torch_atleast_3d(self = self) else .torch_atleast_3d(tensors = self)
}

#' @rdname torch_wrappers
#' @export
torch_tensordot <- function(a, b, dims = 2) {
  if (is.list(dims)) {
    dims_a <- dims[[1L]]
    dims_b <- dims[[2L]]
  } else if (is_torch_tensor(dims) && dims$numel() > 1) {
    dims_a <- as_array(dims[1])
    dims_b <- as_array(dims[2])
  } else {
    dims <- whole_number(dims, "dims")
    if (dims < 1) {
      abort(sprintf("tensordot expects dims >= 1, but got %d", dims), class = "runtime_error")
    }
    dims_a <- seq(from = -dims, to = -1)
    dims_b <- seq(from = 1, to = dims)
  }
  .torch_tensordot(a, b, whole_numbers(dims_a, "dims"), whole_numbers(dims_b, "dims"))
}

#' @rdname torch_wrappers
#' @export
# nolint start: object_name_linter.
torch_vander <- function(x, N = NULL, increasing = FALSE) .torch_vander(x, N, increasing)
# nolint end

#' @rdname torch_wrappers
#' @export
torch_result_type <- function(tensor1, tensor2) {
  code <- if (is_torch_tensor(tensor1)) {
    .torch_result_type(tensor = tensor1, other = tensor2)
  } else if (is_torch_tensor(tensor2)) {
    .torch_result_type(scalar = tensor1, tensor = tensor2)
  } else {
    .torch_result_type(scalar1 = tensor1, scalar2 = tensor2)
  }
  structure(as.integer(code), class = class(torch_float32()))
}

#' @rdname torch_wrappers
#' @export
torch_polygamma <- function(n, input) .torch_polygamma(whole_number(n, "n"), input)

#' @rdname torch_wrappers
#' @export
torch_quantize_per_tensor <- function(self, scale, zero_point, dtype) {
  dtype <- as_torch_dtype(dtype)
  if (!is.list(self)) {
    return(.torch_quantize_per_tensor(self = self, scale = scale, zero_point = zero_point,
                                      dtype = dtype))
  }
  as_qparams <- function(x, type) {
    if (is_torch_tensor(x)) x else torch_tensor(unlist(x), dtype = type)
  }
  .torch_quantize_per_tensor(tensors = self, scales = as_qparams(scale, torch_float64()),
                             zero_points = as_qparams(zero_point, torch_long()), dtype = dtype)
}

#' @rdname torch_wrappers
#' @export
torch_dequantize <- function(tensor) {
  if (is_torch_tensor(tensor)) {
    .torch_dequantize(self = tensor)
  } else {
    .torch_dequantize(tensors = tensor)
  }
}

#' @rdname torch_index_ops
#' @param row,col,offset `torch_tril_indices()`, `torch_triu_indices()`: the
#'   matrix's rows and columns, and the diagonal's offset.
#' @param layout,device As for the creation functions.
#' @export
torch_tril_indices <- function(row, col, offset = 0, dtype = NULL, device = NULL, layout = NULL) {
  plus_one(.torch_tril_indices(whole_number(row, "row"), whole_number(col, "col"),
                               whole_number(offset, "offset"), as_torch_dtype(dtype), layout,
                               creation_device(device)))
}

#' @rdname torch_index_ops
#' @export
torch_triu_indices <- function(row, col, offset = 0, dtype = NULL, device = NULL, layout = NULL) {
  plus_one(.torch_triu_indices(whole_number(row, "row"), whole_number(col, "col"),
                               whole_number(offset, "offset"), as_torch_dtype(dtype), layout,
                               creation_device(device)))
}

#' @rdname torch_wrappers
#' @export
torch_lu <- function(A, pivot = TRUE, get_infos = FALSE, out = NULL) { # nolint: object_name_linter.
  get_infos <- arg_flag(get_infos, "get_infos")
  result <- torch_linalg_lu_factor_ex(A, pivot = pivot, check_errors = !get_infos)
  result <- if (get_infos) result else result[1:2]
  if (is.null(out)) {
    return(result)
  }
  if (!is.list(out) || length(out) != length(result)) {
    abort(sprintf("`out` must be a list of %d tensors.", length(result)), class = "value_error")
  }
  for (i in seq_along(out)) out[[i]]$resize_as_(result[[i]])$copy_(result[[i]])
  out
}

#' @rdname torch_wrappers
#' @export
torch_tensor_from_buffer <- function(buffer, shape, dtype = "float") {
  .Call(C_tensor_from_buffer, buffer, shape, as_torch_dtype(dtype, "dtype"))
}

#' @rdname torch_wrappers
#' @export
buffer_from_torch_tensor <- function(tensor) {
  as_array(tensor$contiguous()$view(dtype = torch_uint8())$flatten())
}

# ---- upsampling (internal, as in R torch) --------------------------------------------------------

# libtorch's upsample ops take either `input` with `output_size`/`scale_factors` (the .vec
# overloads) or `self` with `output_size` and per-dimension scales: R torch's wrappers pass `self`
# only when given, so that the call picks the overload the arguments name.
upsample_call <- function(op, args, self) {
  if (!missing(self)) args$self <- self
  do.call(op, args)
}

torch_upsample_nearest1d <- function(input, self, output_size = NULL, scale_factors = NULL,
                                     scales = NULL) {
  upsample_call(.torch_upsample_nearest1d, list(input = input, output_size = output_size,
                                                scale_factors = scale_factors, scales = scales),
                self)
}

torch_upsample_nearest2d <- function(input, self, output_size = NULL, scale_factors = NULL,
                                     scales_h = NULL, scales_w = NULL) {
  upsample_call(.torch_upsample_nearest2d, list(input = input, output_size = output_size,
                                                scale_factors = scale_factors,
                                                scales_h = scales_h, scales_w = scales_w),
                self)
}

torch_upsample_nearest3d <- function(input, self, output_size = NULL, scale_factors = NULL,
                                     scales_d = NULL, scales_h = NULL, scales_w = NULL) {
  upsample_call(.torch_upsample_nearest3d, list(input = input, output_size = output_size,
                                                scale_factors = scale_factors, scales_d = scales_d,
                                                scales_h = scales_h, scales_w = scales_w),
                self)
}

torch_upsample_trilinear3d <- function(input, self, output_size = NULL, align_corners,
                                       scale_factors = NULL, scales_d = NULL, scales_h = NULL,
                                       scales_w = NULL) {
  args <- list(input = input, output_size = output_size, scale_factors = scale_factors,
               scales_d = scales_d, scales_h = scales_h, scales_w = scales_w)
  if (!missing(align_corners)) args$align_corners <- align_corners
  upsample_call(.torch_upsample_trilinear3d, args, self)
}
