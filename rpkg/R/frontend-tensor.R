# Tensors of the R torch front end: creation (R torch's dtype rules), R conversions and
# printing, and the `$` methods and fields with R torch's names and 1-based dims.

# Calls the Python callable `f` with R arguments (front-end objects unwrapped), turning a Python
# exception into an R condition; the result stays Python.
fe_pycall <- function(f, args, call = NULL) {
  call_python(do.call(f, lapply(args, unwrap)), call = call)
}

# The options every creation function takes, as PyTorch's keyword arguments.
creation_options <- function(dtype, device, requires_grad, call) {
  list(dtype = as_py_dtype(dtype, call = call), device = as_py_device(device, call = call),
       requires_grad = arg_flag(requires_grad, "requires_grad", call))
}

check_no_names <- function(names, call) {
  if (!is.null(names)) {
    abort("`names` (named tensors) is not supported by ampkit's front end; leave it NULL.",
          call, class = "value_error")
  }
}

#' Create tensors
#'
#' R torch's creation functions. `torch_tensor()` converts an R vector,
#' matrix or array with R torch's rules: doubles become `torch_float32()`,
#' integers `torch_long()`, logicals `torch_bool()`, raw vectors
#' `torch_uint8()` unless `dtype` says
#' otherwise, and a matrix or array keeps R's layout (`x[1, ]` is R's first
#' row). A single number is a tensor of shape `1`, as in R torch. The others
#' take sizes as numbers or vectors (`torch_randn(64, 10)`,
#' `torch_zeros(c(2, 3))`). `torch_arange(start, end, step)` includes `end`
#' (R torch's rule, unlike PyTorch); with one argument it counts from 1.
#' `torch_randint(low, high, size)` draws whole numbers from `low` to
#' `high - 1` (as floats unless `dtype` is given, as in R torch).
#'
#' @param data An R atomic vector, matrix or array (or a tensor, copied).
#' @param ... Sizes: numbers or numeric vectors, concatenated.
#' @param size A size (numeric vector).
#' @param dtype A [torch_dtype] (e.g. `torch_float16()`) or its name; `NULL`
#'   for the default.
#' @param device A [torch_device()] or `"cpu"`/`"cuda"`; `NULL` for the CPU.
#' @param requires_grad Whether autograd records operations on the tensor.
#' @param names,layout,pin_memory,memory_format Accepted for R torch's
#'   signatures; named tensors and other layouts are not supported (`names`
#'   must stay `NULL`).
#' @param fill_value The value `torch_full()` fills with.
#' @param start,end,step `torch_arange()`'s range; `end` is included.
#' @param low,high `torch_randint()`'s range: from `low` to `high - 1`.
#' @param generator Accepted for R torch's signature; must stay `NULL`
#'   (PyTorch's default generator, seeded by [torch_manual_seed()], is used).
#' @param input A tensor whose shape (and, by default, dtype and device) the
#'   `_like` functions copy.
#' @return A `torch_tensor`.
#' @name torch_tensor
#' @examples
#' if (ampkit_available()) {
#'   torch_tensor(c(1, 2, 3))
#'   torch_tensor(matrix(1:6, nrow = 2))
#'   torch_manual_seed(1)
#'   torch_randn(2, 3)
#'   torch_zeros(2, 2, dtype = torch_long())
#'   torch_full(c(2, 2), 7)
#'   torch_arange(1, 5)
#'   torch_ones_like(torch_randn(3))
#' }
NULL

#' @rdname torch_tensor
#' @export
torch_tensor <- function(data, dtype = NULL, device = NULL, requires_grad = FALSE,
                         pin_memory = FALSE) {
  call <- sys.call()
  opts <- creation_options(dtype, device, requires_grad, call)
  if (is_torch_tensor(data)) {
    py <- call_python(tpy(data)$detach()$clone()$to(dtype = opts$dtype, device = opts$device),
                      call)
    py$requires_grad_(opts$requires_grad)
    return(new_torch_tensor(py))
  }
  if (is.list(data) && length(data) > 0L && all(vapply(data, is_torch_tensor, NA))) {
    return(torch_stack(data)$to(dtype = dtype, device = device))
  }
  data <- tensor_data(data, call)
  kind <- typeof(data)
  shape <- if (is.null(dim(data))) length(data) else dim(data)
  raw <- writeBin(as.vector(data), raw())
  py <- call_python(fe_helpers()$from_r(raw, kind, as.list(as.integer(shape)), opts$dtype,
                                        opts$device, opts$requires_grad), call)
  new_torch_tensor(py)
}

# `data` for torch_tensor(): an R vector, matrix or array of doubles, integers or logicals
# (NULL: an empty logical, factors: their codes), without NA except in doubles (NaN there).
tensor_data <- function(data, call) {
  if (is.null(data)) {
    data <- logical()
  }
  if (is.factor(data)) {
    data <- as.integer(data)
  }
  kind <- typeof(data)
  if (!kind %in% c("double", "integer", "logical", "raw") || !is.atomic(data)) {
    abort(sprintf(paste0("`data` must be an R numeric, integer, logical or raw vector, matrix ",
                         "or array, got %s."), describe(data)), call, class = "value_error")
  }
  if (kind %in% c("integer", "logical") && anyNA(data)) {
    abort(sprintf(paste0("`data` must not contain NA: integer and boolean tensors have no NA ",
                         "(doubles' NA becomes NaN), got %s."), describe(data)), call,
          class = "value_error")
  }
  data
}

# A creation function of PyTorch's with a size and the options.
create_sized <- function(name, size, dtype, device, requires_grad, call, before = list(),
                         after = list()) {
  opts <- creation_options(dtype, device, requires_grad, call)
  args <- c(before, list(size), after, opts[!vapply(opts, is.null, NA)])
  new_torch_tensor(fe_pycall(torch_fn(name), args, call))
}

#' @rdname torch_tensor
#' @export
torch_randn <- function(..., names = NULL, dtype = NULL, layout = NULL, device = NULL,
                        requires_grad = FALSE) {
  check_no_names(names, sys.call())
  create_sized("randn", as_py_size(..., call = sys.call()), dtype, device, requires_grad,
               sys.call())
}

#' @rdname torch_tensor
#' @export
torch_rand <- function(..., names = NULL, dtype = NULL, layout = NULL, device = NULL,
                       requires_grad = FALSE) {
  check_no_names(names, sys.call())
  create_sized("rand", as_py_size(..., call = sys.call()), dtype, device, requires_grad,
               sys.call())
}

#' @rdname torch_tensor
#' @export
torch_zeros <- function(..., names = NULL, dtype = NULL, layout = NULL, device = NULL,
                        requires_grad = FALSE) {
  check_no_names(names, sys.call())
  create_sized("zeros", as_py_size(..., call = sys.call()), dtype, device, requires_grad,
               sys.call())
}

#' @rdname torch_tensor
#' @export
torch_ones <- function(..., names = NULL, dtype = NULL, layout = NULL, device = NULL,
                       requires_grad = FALSE) {
  check_no_names(names, sys.call())
  create_sized("ones", as_py_size(..., call = sys.call()), dtype, device, requires_grad,
               sys.call())
}

#' @rdname torch_tensor
#' @export
torch_empty <- function(..., names = NULL, dtype = NULL, layout = NULL, device = NULL,
                        requires_grad = FALSE, memory_format = NULL) {
  check_no_names(names, sys.call())
  create_sized("empty", as_py_size(..., call = sys.call()), dtype, device, requires_grad,
               sys.call())
}

#' @rdname torch_tensor
#' @export
torch_full <- function(size, fill_value, names = NULL, dtype = NULL, layout = NULL,
                       device = NULL, requires_grad = FALSE) {
  call <- sys.call()
  check_no_names(names, call)
  fill <- scalar_value(fill_value, "fill_value", call)
  opts <- creation_options(dtype, device, requires_grad, call)
  # R torch: a double fill gives the default float dtype, an integer fill int64.
  if (is.null(opts$dtype)) {
    opts$dtype <- as_py_dtype(if (is.logical(fill)) "bool" else if (is.integer(fill)) "long"
                              else "float")
  }
  args <- c(list(as_py_size(size, call = call), fill), opts[!vapply(opts, is.null, NA)])
  new_torch_tensor(fe_pycall(torch_fn("full"), args, call))
}

#' @rdname torch_tensor
#' @export
torch_randint <- function(low, high, size, generator = NULL, dtype = NULL, layout = NULL,
                          device = NULL, requires_grad = FALSE, memory_format = NULL) {
  call <- sys.call()
  if (!is.null(generator)) {
    abort("`generator` is not supported by ampkit's front end; leave it NULL.", call,
          class = "value_error")
  }
  if (is.null(dtype)) {
    dtype <- torch_float32()
  }
  create_sized("randint", as_py_size(size, call = call), dtype, device, requires_grad, call,
               before = list(whole_number(low, "low", call), whole_number(high, "high", call)))
}

#' @rdname torch_tensor
#' @export
torch_arange <- function(start, end, step = 1L, dtype = NULL, layout = NULL, device = NULL,
                         requires_grad = FALSE) {
  call <- sys.call()
  if (missing(end)) {
    end <- start
    start <- 1L
  }
  start <- scalar_value(start, "start", call)
  end <- scalar_value(end, "end", call)
  step <- scalar_value(step, "step", call)
  if (is.null(dtype) && is.integer(start) && is.integer(end) && is.integer(step)) {
    dtype <- torch_long()
  }
  opts <- creation_options(dtype, device, requires_grad, call)
  args <- c(list(start, arange_end(end, step, opts$dtype), step), opts[!vapply(opts, is.null, NA)])
  new_torch_tensor(fe_pycall(torch_fn("arange"), args, call))
}

# R torch includes `end`: one past it for integer dtypes, the next float32 after it otherwise.
arange_end <- function(end, step, py_dtype) {
  integer_dtype <- !is.null(py_dtype) &&
    !reticulate::py_to_r(py_dtype$is_floating_point) && !reticulate::py_to_r(py_dtype$is_complex)
  if (integer_dtype) {
    return(as.integer(end + sign(step)))
  }
  torch <- torch_py()
  e <- torch$tensor(as.double(end), dtype = torch$float32)
  towards <- torch$tensor(as.double(end + sign(step)), dtype = torch$float32)
  reticulate::py_to_r(torch$nextafter(e, towards)$item())
}

#' @rdname torch_tensor
#' @param value One number (or a one-element tensor).
#' @export
torch_scalar_tensor <- function(value, dtype = NULL, device = NULL, requires_grad = FALSE) {
  call <- sys.call()
  if (length(value) != 1L) {
    abort(sprintf("`value` must be one number, got %s.", describe(value)), call,
          class = "value_error")
  }
  x <- torch_tensor(value, dtype = dtype, device = device)$squeeze()
  if (isTRUE(requires_grad)) x$requires_grad_(TRUE)
  x
}

#' @rdname torch_tensor
#' @param n,m `torch_eye()`'s numbers of rows and columns.
#' @export
torch_eye <- function(n, m = n, dtype = NULL, layout = NULL, device = NULL,
                      requires_grad = FALSE) {
  call <- sys.call()
  create_sized("eye", whole_number(m, "m", call), dtype, device, requires_grad, call,
               before = list(whole_number(n, "n", call)))
}

#' @rdname torch_tensor
#' @param steps `torch_linspace()`'s number of values.
#' @export
torch_linspace <- function(start, end, steps = 100, dtype = NULL, layout = NULL, device = NULL,
                           requires_grad = FALSE) {
  call <- sys.call()
  create_sized("linspace", whole_number(steps, "steps", call), dtype, device, requires_grad, call,
               before = list(as.double(scalar_value(start, "start", call)),
                             as.double(scalar_value(end, "end", call))))
}

#' @rdname torch_tensor
#' @export
torch_range <- function(start, end, step = 1, dtype = NULL, layout = NULL, device = NULL,
                        requires_grad = FALSE) {
  rlang::warn("torch_range() is deprecated in favor of torch_arange().", class = "ampkit_warning")
  torch_arange(start, end, step, dtype = dtype, device = device, requires_grad = requires_grad)
}

#' @rdname torch_tensor
#' @param stride `torch_empty_strided()`'s strides (in elements).
#' @export
torch_empty_strided <- function(size, stride, dtype = NULL, layout = NULL, device = NULL,
                                requires_grad = FALSE, pin_memory = FALSE) {
  call <- sys.call()
  create_sized("empty_strided", as_py_size(size, call = call), dtype, device, requires_grad,
               call, after = list(as_py_size(stride, arg = "stride", call = call)))
}

#' @rdname torch_tensor
#' @param base `torch_logspace()`'s base.
#' @export
torch_logspace <- function(start, end, steps = 100, base = 10, dtype = NULL, layout = NULL,
                           device = NULL, requires_grad = FALSE) {
  call <- sys.call()
  create_sized("logspace", whole_number(steps, "steps", call), dtype, device, requires_grad, call,
               before = list(as.double(scalar_value(start, "start", call)),
                             as.double(scalar_value(end, "end", call))),
               after = list(base = as.double(scalar_value(base, "base", call))))
}

#' @rdname torch_tensor
#' @export
torch_randperm <- function(n, dtype = torch_int64(), layout = NULL, device = NULL,
                           requires_grad = FALSE) {
  # 0-based, as R torch's (R torch's sampler adds 1)
  call <- sys.call()
  create_sized("randperm", whole_number(n, "n", call), dtype, device, requires_grad, call)
}

# One number (or a one-element tensor) for Python: doubles stay floats, integers ints.
scalar_value <- function(x, arg, call) {
  if (is_torch_tensor(x)) {
    x <- x$item()
  }
  if (!(is.numeric(x) || is.logical(x)) || length(x) != 1L || is.na(x) && !is.nan(x)) {
    abort(sprintf("`%s` must be one number, got %s.", arg, describe(x)), call,
          class = "value_error")
  }
  x
}

whole_number <- function(x, arg, call) {
  x <- scalar_value(x, arg, call)
  if (x != trunc(x)) {
    abort(sprintf("`%s` must be a whole number, got %s.", arg, describe(x)), call,
          class = "value_error")
  }
  as.integer(x)
}

like_options <- function(input, dtype, device, requires_grad, call) {
  if (!is_torch_tensor(input)) {
    abort(sprintf("`input` must be a torch_tensor, got %s.", describe(input)), call,
          class = "value_error")
  }
  opts <- creation_options(dtype, device, requires_grad, call)
  opts[!vapply(opts, is.null, NA)]
}

create_like <- function(name, input, dtype, device, requires_grad, call, extra = list()) {
  args <- c(list(tpy(input)), extra, like_options(input, dtype, device, requires_grad, call))
  new_torch_tensor(fe_pycall(torch_fn(name), args, call))
}

#' @rdname torch_tensor
#' @export
torch_zeros_like <- function(input, dtype = NULL, layout = NULL, device = NULL,
                             requires_grad = FALSE, memory_format = NULL) {
  create_like("zeros_like", input, dtype, device, requires_grad, sys.call())
}

#' @rdname torch_tensor
#' @export
torch_ones_like <- function(input, dtype = NULL, layout = NULL, device = NULL,
                            requires_grad = FALSE, memory_format = NULL) {
  create_like("ones_like", input, dtype, device, requires_grad, sys.call())
}

#' @rdname torch_tensor
#' @export
torch_empty_like <- function(input, dtype = NULL, layout = NULL, device = NULL,
                             requires_grad = FALSE, memory_format = NULL) {
  create_like("empty_like", input, dtype, device, requires_grad, sys.call())
}

#' @rdname torch_tensor
#' @export
torch_randn_like <- function(input, dtype = NULL, layout = NULL, device = NULL,
                             requires_grad = FALSE, memory_format = NULL) {
  create_like("randn_like", input, dtype, device, requires_grad, sys.call())
}

#' @rdname torch_tensor
#' @export
torch_rand_like <- function(input, dtype = NULL, layout = NULL, device = NULL,
                            requires_grad = FALSE, memory_format = NULL) {
  create_like("rand_like", input, dtype, device, requires_grad, sys.call())
}

#' @rdname torch_tensor
#' @export
torch_full_like <- function(input, fill_value, dtype = NULL, layout = NULL, device = NULL,
                            requires_grad = FALSE, memory_format = NULL) {
  call <- sys.call()
  create_like("full_like", input, dtype, device, requires_grad, call,
              extra = list(scalar_value(fill_value, "fill_value", call)))
}

#' @rdname torch_tensor
#' @export
torch_randint_like <- function(input, low, high, dtype = NULL, layout = NULL, device = NULL,
                               requires_grad = FALSE, memory_format = NULL) {
  call <- sys.call()
  create_like("randint_like", input, dtype, device, requires_grad, call,
              extra = list(whole_number(low, "low", call), whole_number(high, "high", call)))
}

# ---- conversions to R --------------------------------------------------------------------------

#' Convert tensors to R
#'
#' As R torch converts: floating tensors become doubles, integer tensors
#' integers (`torch_long()` included; values beyond R's integers give
#' doubles), boolean tensors logicals, `torch_uint8()` tensors raw vectors; a tensor of
#' one or no dimension becomes a plain vector, others arrays (matrices for
#' two dimensions) in R's layout. Tensors on a GPU are copied to the CPU.
#' @param x A `torch_tensor`.
#' @param ... Unused.
#' @param mode As in [as.vector()].
#' @return An R vector, matrix or array.
#' @name as_array
#' @examples
#' if (ampkit_available()) {
#'   x <- torch_tensor(matrix(1:6, nrow = 2))
#'   as_array(x)
#'   as.numeric(x)
#'   dim(x)
#'   length(x)
#' }
NULL

#' @rdname as_array
#' @export
as_array <- function(x) {
  if (!is_torch_tensor(x)) {
    return(base::as.array(x))
  }
  out <- call_python(fe_helpers()$to_r(tpy(x)), sys.call())
  parts <- reticulate::py_to_r(out)
  kind <- parts[[2L]]
  shape <- as.integer(unlist(parts[[3L]]))
  n <- prod(shape)
  values <- switch(kind,
    raw = parts[[1L]],
    double = readBin(parts[[1L]], "double", n = n, size = 8L),
    readBin(parts[[1L]], "integer", n = n, size = 4L)
  )
  if (kind == "logical") {
    values <- as.logical(values)
  }
  if (length(shape) >= 2L) {
    dim(values) <- shape
  }
  values
}

#' @rdname as_array
#' @export
as.array.torch_tensor <- function(x, ...) as_array(x)

#' @rdname as_array
#' @export
as.matrix.torch_tensor <- function(x, ...) as.matrix(as_array(x))

#' @rdname as_array
#' @export
as.numeric.torch_tensor <- function(x, ...) as.numeric(as_array(x))

#' @rdname as_array
#' @export
as.double.torch_tensor <- function(x, ...) as.double(as_array(x))

#' @rdname as_array
#' @export
as.integer.torch_tensor <- function(x, ...) as.integer(as_array(x))

#' @rdname as_array
#' @export
as.logical.torch_tensor <- function(x, ...) as.logical(as_array(x))

#' @rdname as_array
#' @export
as.vector.torch_tensor <- function(x, mode = "any") as.vector(as_array(x), mode = mode)

#' @rdname as_array
#' @export
dim.torch_tensor <- function(x) tensor_shape(x)

#' @rdname as_array
#' @export
length.torch_tensor <- function(x) {
  reticulate::py_to_r(tensor_method("numel")(tpy(x)))
}

tensor_shape <- function(x) {
  as.integer(reticulate::py_to_r(.fe$shape(tpy(x))))
}

# ---- printing ----------------------------------------------------------------------------------

#' @export
print.torch_tensor <- function(x, n = 30, ...) {
  cat("torch_tensor\n")
  py <- tpy(x)
  shape <- tensor_shape(x)
  device <- toupper(reticulate::py_to_r(py$device$type))
  if (device == "META") {
    # no data to show
    cat("...\n[ META", dtype_from_py(py$dtype)$.type(), "Type{", paste(shape, collapse = ","),
        "} ]\n", sep = "")
    return(invisible(x))
  }
  values <- as_array(x)
  if (length(shape) == 0L) {
    cat(format_values(values), "\n", sep = "")
  } else if (length(shape) == 1L) {
    if (n < 0) n <- length(values)
    shown <- values[seq_len(min(n, length(values)))]
    cat(paste0(" ", format_values(shown), collapse = "\n"), "\n", sep = "")
    if (length(values) > n) cat("... [the output was truncated (use n=-1 to disable)]\n")
  } else if (length(shape) == 2L) {
    print_matrix(values)
  } else {
    # as libtorch prints: a matrix over the last two dims for each index of the others.
    k <- length(shape)
    lead <- rev(expand.grid(lapply(rev(shape[seq_len(k - 2L)]), seq_len)))
    for (i in seq_len(nrow(lead))) {
      idx <- unlist(lead[i, ], use.names = FALSE)
      cat("(", paste(c(idx, ".", "."), collapse = ","), ") = \n", sep = "")
      slice <- do.call(`[`, c(list(values), as.list(idx), list(TRUE, TRUE, drop = FALSE)))
      dim(slice) <- shape[c(k - 1L, k)]
      print_matrix(slice)
      cat("\n")
    }
  }
  cat("[ ", device, dtype_from_py(py$dtype)$.type(), "Type{", paste(shape, collapse = ","),
      "} ]", sep = "")
  grad_fn <- x$grad_fn
  if (!is.null(grad_fn)) {
    cat("[ grad_fn = <", grad_fn$name(), "> ]", sep = "")
  } else if (reticulate::py_to_r(py$requires_grad)) {
    cat("[ requires_grad = TRUE ]")
  }
  cat("\n")
  invisible(x)
}

# Values as libtorch prints them: whole floats without decimals, others with 4 decimals (in
# scientific notation for very large or small magnitudes).
format_values <- function(values) {
  if (is.logical(values)) {
    # libtorch prints booleans as 1 and 0
    return(format(as.integer(values)))
  }
  if (!is.double(values)) {
    return(format(values))
  }
  finite <- values[is.finite(values)]
  if (length(finite) == 0L || all(finite == trunc(finite)) && max(abs(finite)) < 1e9) {
    return(format(values, scientific = FALSE))
  }
  format(formatC(values, format = float_format(finite), digits = 4), justify = "right")
}

# "e" (scientific) for very large or small magnitudes, else "f" (fixed).
float_format <- function(finite) {
  nonzero <- abs(finite[finite != 0])
  wide <- length(nonzero) > 0L && (max(nonzero) >= 1e5 || min(nonzero) < 1e-4)
  if (wide) "e" else "f"
}

print_matrix <- function(values) {
  m <- format_values(values)
  dim(m) <- dim(values)
  lines <- apply(m, 1L, paste, collapse = " ")
  cat(paste0(" ", lines, collapse = "\n"), "\n", sep = "")
}

#' First and last elements along the first dim
#'
#' `head(x, n)` and `tail(x, n)` on tensors, as R torch: the first or last `n`
#' entries along the first dim (rows of a matrix).
#' @param x A tensor.
#' @param n How many.
#' @param ... Unused.
#' @return A tensor.
#' @name tensor-head
#' @importFrom utils head tail
#' @examples
#' if (ampkit_available()) {
#'   head(torch_tensor(1:10), 3)
#'   tail(torch_tensor(matrix(1:20, 10)), 2)
#' }
NULL

#' @rdname tensor-head
#' @export
head.torch_tensor <- function(x, n = 6L, ...) {
  size <- tensor_shape(x)[[1L]]
  x$index_select(1L, seq_len(min(n, size)))
}

#' @rdname tensor-head
#' @export
tail.torch_tensor <- function(x, n = 6L, ...) {
  size <- tensor_shape(x)[[1L]]
  x$index_select(1L, seq.int(max(1L, size - n + 1L), size))
}

#' @export
str.torch_tensor <- function(object, ...) {
  cat(dtype_from_py(tpy(object)$dtype)$.type(), " [",
      paste0("1:", tensor_shape(object), collapse = ", "), "]\n", sep = "")
}
