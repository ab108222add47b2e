# R torch's creation functions over libtorch's factories (the generated `.torch_<name>`): sizes
# as `...` (numbers, vectors or `size =`), the device from with_device() when none is given,
# `requires_grad` applied afterwards, and R torch's arange (end inclusive).

# The size of a creation call: `torch_zeros(2, 3)`, `torch_zeros(c(2, 3))`, `torch_zeros(size =
# c(2, 3))`; not both.
resolve_size <- function(dots, size = NULL) {
  if (length(dots) && !is.null(size)) {
    abort("You should specify a single size argument.", class = "value_error")
  }
  size <- if (length(dots)) size_args_list(dots) else size
  whole_numbers(size %||% integer(), "size")
}

size_args_list <- function(dots) {
  unlist(lapply(dots, function(s) if (is_torch_tensor(s)) as_array(s) else s))
}

check_names <- function(names) {
  if (!is.null(names)) {
    abort(paste0("Named tensors (`names`) are not in the libtorch ampkit uses (PyTorch removed ",
                 "them); see CONFORMANCE.md."), class = "not_implemented_error")
  }
}

# A factory's result with R torch's options applied.
created <- function(x, requires_grad) {
  if (isTRUE(requires_grad)) x$requires_grad_(TRUE)
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
  created(.torch_randint(low, high, whole_numbers(size, "size"), generator,
                         as_torch_dtype(dtype) %||% torch_long(), layout,
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
  # R torch's end is inclusive: one past it for integers, the next representable number for
  # floating ranges.
  end <- if (integral) {
    end + sign(step)
  } else {
    as.numeric(torch_nextafter(torch_tensor(end, dtype = torch_float64()),
                               torch_tensor(end + sign(step), dtype = torch_float64())))
  }
  created(.torch_arange(start, end, step, dtype, layout, creation_device(device)),
          requires_grad)
}

#' @rdname creation
#' @export
torch_range <- function(start, end, step = 1, dtype = NULL, layout = NULL, device = NULL,
                        requires_grad = FALSE) {
  rlang::warn("torch_range() is deprecated: use torch_arange(), whose end is inclusive too.",
              class = "deprecated")
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
