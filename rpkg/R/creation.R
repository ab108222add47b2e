# R torch's creation functions over libtorch's factories (the generated `.torch_<name>`): sizes
# as `...` (numbers, vectors or `size =`), the device from with_device() when none is given,
# `requires_grad` applied afterwards, and R torch's arange (end inclusive).

# The size of a creation call: `torch_zeros(2, 3)`, `torch_zeros(c(2, 3))`, `torch_zeros(size =
# c(2, 3))`; not both. Plain whole numbers are read in C (C_plain_sizes), anything else in R.
resolve_size <- function(dots, size = NULL) {
  if (length(dots) && !is.null(size)) {
    abort("You should specify a single size argument.", class = "value_error")
  }
  plain <- .Call(C_plain_sizes, if (is.null(size)) dots else list(size))
  if (!is.null(plain)) {
    return(plain)
  }
  size <- if (length(dots)) sizes_read(dots) else size
  whole_numbers(size %||% integer(), "size")
}

check_names <- function(names) {
  if (!is.null(names)) {
    abort(paste0("Named tensors (`names`) are not in the libtorch ampkit uses (PyTorch removed ",
                 "them); see CONFORMANCE.md."), class = "not_implemented_error")
  }
}

# A factory's result with R torch's options applied (the default first: it is the common call).
created <- function(x, requires_grad) {
  if (!identical(requires_grad, FALSE) && arg_flag(requires_grad, "requires_grad")) {
    x$requires_grad_(TRUE)
  }
  x
}

#' Creating tensors
#'
#' R torch's creation functions. Sizes are given as numbers (`torch_zeros(2,
#' 3)`), a vector (`torch_zeros(c(2, 3))`) or `size =`. `dtype` defaults to
#' the default dtype (float32) for floating results, `device` to the one
#' [with_device()] set (else the CPU). `torch_arange(start, end)` includes
#' `end`, as in R torch (`torch_arange(1, 5)` is 1, 2, 3, 4, 5); integer
#' arguments give an int64 tensor. `torch_randint()` draws from `[low,
#' high)`; `torch_randperm(n)` is a permutation of `0, ..., n - 1` (as R
#' torch's). The `_like` functions take the size (and by default the dtype and
#' device) of `input`.
#'
#' @param ... Sizes: numbers or vectors of them.
#' @param size A size vector (instead of `...`).
#' @param names Not supported (named tensors are not in the libtorch used).
#' @param dtype A `torch_dtype` or its name.
#' @param layout A layout, [torch_strided()] (the default).
#' @param device A device; `NULL`: [with_device()]'s or the CPU.
#' @param requires_grad Whether the result requires gradients.
#' @param generator A [torch_generator()], or `NULL` for the default one.
#' @param fill_value The value of every element.
#' @param low,high The range of `torch_randint()`: `[low, high)`.
#' @param start,end,step,steps,base The range of `torch_arange()`,
#'   `torch_range()`, `torch_linspace()` and `torch_logspace()`.
#' @param n,m Rows and columns of `torch_eye()`; `n` for `torch_randperm()`.
#' @param stride The strides of `torch_empty_strided()`.
#' @param value One number (`torch_scalar_tensor()`: a 0-dimensional tensor).
#' @param input A tensor (the `_like` functions).
#' @param memory_format A memory format ([torch_contiguous_format()], ...).
#' @return A tensor.
#' @name creation
#' @examples
#' torch_zeros(2, 3)
#' torch_ones(c(2, 2), dtype = torch_long())
#' torch_manual_seed(1)
#' torch_randn(3)
#' torch_arange(1, 5)
#' torch_full(c(2, 2), 7)
#' torch_eye(3)
#' torch_zeros_like(torch_randn(2, 2))
NULL

#' @rdname creation
#' @export
torch_zeros <- function(..., size = NULL, names = NULL, dtype = NULL, layout = NULL,
                        device = NULL, requires_grad = FALSE) {
  check_names(names)
  created(.torch_zeros(resolve_size(list(...), size), as_torch_dtype(dtype), layout,
                       creation_device(device)), requires_grad)
}

#' @rdname creation
#' @export
torch_ones <- function(..., size = NULL, names = NULL, dtype = NULL, layout = NULL,
                       device = NULL, requires_grad = FALSE) {
  check_names(names)
  created(.torch_ones(resolve_size(list(...), size), as_torch_dtype(dtype), layout,
                      creation_device(device)), requires_grad)
}

#' @rdname creation
#' @export
torch_empty <- function(..., size = NULL, names = NULL, dtype = NULL, layout = NULL,
                        device = NULL, requires_grad = FALSE, memory_format = NULL) {
  check_names(names)
  created(.torch_empty(resolve_size(list(...), size), as_torch_dtype(dtype), layout,
                       creation_device(device), memory_format = memory_format), requires_grad)
}

#' @rdname creation
#' @export
torch_randn <- function(..., size = NULL, names = NULL, dtype = NULL, layout = NULL,
                        device = NULL, requires_grad = FALSE, generator = NULL) {
  check_names(names)
  created(.torch_randn(resolve_size(list(...), size), generator, as_torch_dtype(dtype), layout,
                       creation_device(device)), requires_grad)
}

#' @rdname creation
#' @export
torch_rand <- function(..., size = NULL, names = NULL, dtype = NULL, layout = NULL,
                       device = NULL, requires_grad = FALSE, generator = NULL) {
  check_names(names)
  created(.torch_rand(resolve_size(list(...), size), generator, as_torch_dtype(dtype), layout,
                      creation_device(device)), requires_grad)
}

#' @rdname creation
#' @export
torch_full <- function(size, fill_value, names = NULL, dtype = NULL, layout = NULL,
                       device = NULL, requires_grad = FALSE) {
  check_names(names)
  created(.torch_full(whole_numbers(size, "size"), fill_value, as_torch_dtype(dtype), layout,
                      creation_device(device)), requires_grad)
}

#' @rdname creation
#' @export
torch_randint <- function(low, high, size, generator = NULL, dtype = NULL, layout = NULL,
                          device = NULL, requires_grad = FALSE) {
  # R torch's dtype: the default (float32) unless given, where PyTorch's is int64.
  created(.torch_randint(low, high, whole_numbers(size, "size"), generator,
                         as_torch_dtype(dtype) %||% torch_get_default_dtype(), layout,
                         creation_device(device)), requires_grad)
}

#' @rdname creation
#' @export
torch_randperm <- function(n, dtype = torch_int64(), layout = NULL, device = NULL,
                           requires_grad = FALSE, generator = NULL) {
  created(.torch_randperm(whole_number(n, "n"), generator, as_torch_dtype(dtype), layout,
                          creation_device(device)), requires_grad)
}

#' @rdname creation
#' @export
torch_arange <- function(start, end, step = 1L, dtype = NULL, layout = NULL, device = NULL,
                         requires_grad = FALSE) {
  if (missing(end)) {
    end <- start
    start <- 1L
  }
  dtype <- as_torch_dtype(dtype)
  if (is.null(dtype) && is.integer(start) && is.integer(end) && is.integer(step)) {
    dtype <- torch_long()
  }
  integral <- !is.null(dtype) && !dtype_info(dtype)[[2L]] && !dtype_info(dtype)[[3L]]
  # R torch's end is inclusive: one past it for integers; for floating ranges one float32 step
  # beyond it (R torch's torch_nextafter() of two R numbers, which are float32 tensors), at the
  # range's magnitude, so that an end of 0 is not within a denormal of being missed. A double's
  # next number would be lost again when libtorch subtracts `start` in double.
  end <- if (integral) {
    end + sign(step)
  } else {
    end <- as.numeric(end)
    end + sign(step) * float32_spacing(max(abs(as.numeric(start)), abs(end)))
  }
  created(.torch_arange(start, end, step, dtype, layout, creation_device(device)),
          requires_grad)
}

# The distance from `x` (>= 0) to the next float32 above it.
float32_spacing <- function(x) {
  if (x < 1.1754943508222875e-38) {
    return(1.401298464324817e-45)
  }
  2^(floor(log2(x)) - 23)
}

#' @rdname creation
#' @export
torch_range <- function(start, end, step = 1, dtype = NULL, layout = NULL, device = NULL,
                        requires_grad = FALSE) {
  rlang::warn("torch_range() is deprecated: use torch_arange(), whose end is inclusive too.",
              class = c("deprecated", "ampkit_warning"))
  torch_arange(start, end, step, dtype, layout, device, requires_grad)
}

#' @rdname creation
#' @export
torch_linspace <- function(start, end, steps = 100, dtype = NULL, layout = NULL, device = NULL,
                           requires_grad = FALSE) {
  created(.torch_linspace(start, end, whole_number(steps, "steps"), as_torch_dtype(dtype), layout,
                          creation_device(device)), requires_grad)
}

#' @rdname creation
#' @export
torch_logspace <- function(start, end, steps = 100, base = 10, dtype = NULL, layout = NULL,
                           device = NULL, requires_grad = FALSE) {
  created(.torch_logspace(start, end, whole_number(steps, "steps"), base, as_torch_dtype(dtype),
                          layout, creation_device(device)), requires_grad)
}

#' @rdname creation
#' @export
torch_eye <- function(n, m = n, dtype = NULL, layout = NULL, device = NULL,
                      requires_grad = FALSE) {
  created(.torch_eye(whole_number(n, "n"), whole_number(m, "m"), as_torch_dtype(dtype), layout,
                     creation_device(device)), requires_grad)
}

#' @rdname creation
#' @export
torch_empty_strided <- function(size, stride, dtype = NULL, layout = NULL, device = NULL,
                                requires_grad = FALSE) {
  created(.torch_empty_strided(whole_numbers(size, "size"), whole_numbers(stride, "stride"),
                               as_torch_dtype(dtype), layout, creation_device(device)),
          requires_grad)
}

#' @rdname creation
#' @export
torch_scalar_tensor <- function(value, dtype = NULL, device = NULL, requires_grad = FALSE) {
  if (is_torch_tensor(value)) {
    if (length(value) != 1L) {
      abort("value must be a length 1 vector", class = "value_error")
    }
    value <- value$item()
  }
  if (!is.atomic(value) || length(value) != 1L) {
    abort("value must be a length 1 vector", class = "value_error")
  }
  dtype <- as_torch_dtype(dtype) %||% (if (is.integer(value)) torch_long()
                                       else if (is.logical(value)) torch_bool())
  created(.torch_scalar_tensor(value, dtype, NULL, creation_device(device)), requires_grad)
}

like <- function(f, input, dtype, layout, device, requires_grad, memory_format, ...) {
  created(f(input, ..., dtype = as_torch_dtype(dtype), layout = layout,
            device = as_torch_device(device), memory_format = memory_format), requires_grad)
}

#' @rdname creation
#' @export
torch_zeros_like <- function(input, dtype = NULL, layout = NULL, device = NULL,
                             requires_grad = FALSE, memory_format = torch_preserve_format()) {
  like(.torch_zeros_like, input, dtype, layout, device, requires_grad, memory_format)
}

#' @rdname creation
#' @export
torch_ones_like <- function(input, dtype = NULL, layout = NULL, device = NULL,
                            requires_grad = FALSE, memory_format = torch_preserve_format()) {
  like(.torch_ones_like, input, dtype, layout, device, requires_grad, memory_format)
}

#' @rdname creation
#' @export
torch_empty_like <- function(input, dtype = NULL, layout = NULL, device = NULL,
                             requires_grad = FALSE, memory_format = torch_preserve_format()) {
  like(.torch_empty_like, input, dtype, layout, device, requires_grad, memory_format)
}

#' @rdname creation
#' @export
torch_randn_like <- function(input, dtype = NULL, layout = NULL, device = NULL,
                             requires_grad = FALSE, memory_format = torch_preserve_format()) {
  like(.torch_randn_like, input, dtype, layout, device, requires_grad, memory_format,
       generator = NULL)
}

#' @rdname creation
#' @export
torch_rand_like <- function(input, dtype = NULL, layout = NULL, device = NULL,
                            requires_grad = FALSE, memory_format = torch_preserve_format()) {
  like(.torch_rand_like, input, dtype, layout, device, requires_grad, memory_format,
       generator = NULL)
}

#' @rdname creation
#' @export
torch_full_like <- function(input, fill_value, dtype = NULL, layout = NULL, device = NULL,
                            requires_grad = FALSE, memory_format = torch_preserve_format()) {
  like(.torch_full_like, input, dtype, layout, device, requires_grad, memory_format,
       fill_value = fill_value)
}

#' @rdname creation
#' @export
torch_randint_like <- function(input, low, high, dtype = NULL, layout = NULL, device = NULL,
                               requires_grad = FALSE, memory_format = torch_preserve_format()) {
  like(.torch_randint_like, input, dtype, layout, device, requires_grad, memory_format,
       low = low, high = high, generator = NULL)
}

#' Normally distributed random numbers
#'
#' R torch's `torch_normal()`: draws from normal distributions. With tensors
#' `mean` and/or `std`, one draw per element (the result has their shape);
#' with two numbers, a tensor of `size` (and the creation options in `...`).
#' A missing `mean` is 0, a missing `std` 1.
#'
#' @param mean,std A tensor (one mean or standard deviation per element) or a
#'   number.
#' @param size The result's size, when `mean` and `std` are numbers.
#' @param generator A [torch_generator()], or `NULL` for the default one.
#' @param ... With two numbers: `dtype`, `layout`, `device`, `requires_grad`.
#' @return A tensor.
#' @name torch_normal
#' @examples
#' torch_manual_seed(1)
#' torch_normal(0, 1, size = c(2, 3))
#' torch_normal(torch_zeros(3), torch_tensor(c(1, 10, 100)))
#' torch_normal(mean = torch_arange(1, 3), std = 0.1)
#' @export
torch_normal <- function(mean = 0, std = 1, size = NULL, generator = NULL, ...) {
  if (is_torch_tensor(mean) || is_torch_tensor(std)) {
    if (!is.null(size)) {
      abort("size is set, but one of mean or std is not a scalar value.", class = "value_error")
    }
    if (...length()) {
      abort("options is set, but one of mean or std is not a scalar value.",
            class = "value_error")
    }
    return(.torch_normal(mean, std, generator = generator))
  }
  if (is.null(size)) {
    abort("size is not set.", class = "value_error")
  }
  normal_of_size(mean, std, size, generator, ...)
}

# torch_normal() of two numbers: a tensor of `size`, with the creation options.
normal_of_size <- function(mean, std, size, generator, dtype = NULL, layout = NULL, device = NULL,
                           requires_grad = FALSE) {
  created(.torch_normal(arg_number(mean, "mean"), arg_number(std, "std"),
                        whole_numbers(unlist(size), "size"), generator, as_torch_dtype(dtype),
                        layout, creation_device(device)), requires_grad)
}

#' Sparse tensors
#'
#' `torch_sparse_coo_tensor(indices, values, size)` makes a sparse tensor in
#' COO format: column `j` of `indices` (a matrix of one row per dimension,
#' 1-based as R torch's) is the position of `values[j]`. `size` defaults to the
#' smallest that holds the indices. Sparse tensors are otherwise little
#' supported here: convert with `$to_dense()` (`as_array()` refuses them).
#'
#' @param indices A long tensor or an R matrix of 1-based positions, one row
#'   per sparse dimension.
#' @param values A tensor or R vector of the values.
#' @param size The size, or `NULL`.
#' @param dtype,device,requires_grad As for the creation functions.
#' @return A sparse tensor.
#' @name torch_sparse_coo_tensor
#' @examples
#' i <- torch_tensor(matrix(c(1, 2, 2, 3), nrow = 2), dtype = torch_long())
#' x <- torch_sparse_coo_tensor(i, c(3, 4), size = c(3, 3))
#' x$is_sparse()
#' x$to_dense()
#' @export
torch_sparse_coo_tensor <- function(indices, values, size = NULL, dtype = NULL, device = NULL,
                                    requires_grad = FALSE) {
  dtype <- as_torch_dtype(dtype)
  device <- creation_device(device)
  out <- if (is.null(size)) {
    .torch_sparse_coo_tensor(indices, values, dtype = dtype, device = device)
  } else {
    .torch_sparse_coo_tensor(indices, values, whole_numbers(size, "size"), dtype = dtype,
                             device = device)
  }
  created(out, requires_grad)
}
