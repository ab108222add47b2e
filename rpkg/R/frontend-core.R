# The R torch front end's core (issue 18; contract: R_CONTRACT.md): the Python module torch,
# tensors as R objects, and the conversions at the border between R's semantics and PyTorch's
# (dims and indices 1-based, R doubles -> float32, dtype and device objects). Each conversion
# lives here once; frontend-tensor.R, frontend-ops.R and indexing.R use them.

# Caches: the module torch (convert = FALSE), the helper module, Python callables looked up once
# (a lookup in reticulate costs as much as a call), dtype and device objects.
.fe <- new.env(parent = emptyenv())
.fe_fn <- new.env(parent = emptyenv()) # torch.<name>
.fe_method <- new.env(parent = emptyenv()) # torch.Tensor.<name> (unbound), or FALSE when absent
.fe_dtype <- new.env(parent = emptyenv()) # torch_dtype objects by Python name ("float32")

#' The Python module torch, as the front end holds it
#'
#' `torch_py()` is PyTorch's module `torch` imported by reticulate with
#' `convert = FALSE` (results stay Python objects). It starts Python on first
#' use, through the same path as every ampkit function (torch keeps its own
#' BLAS; a missing Python module is one error of class `ampkit_unavailable`).
#' @return The Python module `torch`.
#' @keywords internal
#' @noRd
torch_py <- function() {
  torch <- .fe$torch
  if (is.null(torch)) {
    python_modules()
    torch <- reticulate::import("torch", convert = FALSE)
    .fe$helpers <- reticulate::import_from_path("ampkit_r_frontend",
                                                system.file("python", package = "ampkit"),
                                                convert = FALSE)
    .fe$builtins <- reticulate::import_builtins(convert = FALSE)
    .fe$Tensor <- torch$Tensor
    .fe$shape <- .fe$helpers$shape
    .fe$strides <- .fe$helpers$strides
    .fe$set_grad_enabled <- .fe$helpers$set_grad_enabled
    .fe$torch <- torch
  }
  torch
}

# Python's builtins module (convert = FALSE).
py_builtins <- function() {
  torch_py()
  .fe$builtins
}

# The helper module inst/python/ampkit_r_frontend.py.
fe_helpers <- function() {
  torch_py()
  .fe$helpers
}

# torch.<name>, looked up once.
torch_fn <- function(name) {
  f <- .fe_fn[[name]]
  if (is.null(f)) {
    f <- torch_py()[[name]]
    assign(name, f, envir = .fe_fn)
  }
  f
}

# torch.Tensor.<name> (the unbound method or descriptor), looked up once; NULL when torch.Tensor
# has no such attribute.
tensor_method <- function(name) {
  f <- .fe_method[[name]]
  if (is.null(f)) {
    torch_py()
    f <- if (reticulate::py_has_attr(.fe$Tensor, name)) .fe$Tensor[[name]] else FALSE
    assign(name, f, envir = .fe_method)
  }
  if (isFALSE(f)) NULL else f
}

# ---- tensors ---------------------------------------------------------------------------------

#' Wrap a Python tensor as an R torch tensor
#'
#' A tensor of the front end is an environment of class `c("torch_tensor", "R7")` (R torch's
#' class vector) holding the Python tensor (`py`).
#' @param py A Python `torch.Tensor` (reticulate object).
#' @keywords internal
#' @noRd
new_torch_tensor <- function(py) {
  x <- new.env(parent = emptyenv(), size = 1L)
  x$py <- py
  class(x) <- c("torch_tensor", "R7")
  x
}

# The Python tensor inside a front-end tensor (no dispatch).
tpy <- function(x) .subset2(x, "py")

#' Python objects from front-end objects, and back
#'
#' `unwrap()` turns front-end objects into what PyTorch takes: tensors into their Python
#' tensor, `torch_dtype` into a Python dtype, `torch_device` into a Python device, lists into
#' lists of unwrapped elements; anything else is returned unchanged. Modules and optimizers
#' add methods of their own. `wrap()` turns a Python result into R: tensors into
#' `torch_tensor`, tuples and lists into R lists, Python scalars and strings into R values,
#' `None` into `NULL`, dtypes and devices into `torch_dtype` and `torch_device`; other
#' objects stay Python objects.
#' @param x An R object.
#' @param py A Python object (reticulate, any `convert` setting) or an R value.
#' @keywords internal
#' @noRd
unwrap <- function(x) UseMethod("unwrap")

#' @export
unwrap.default <- function(x) x

#' @export
unwrap.torch_tensor <- function(x) .subset2(x, "py")

#' @export
unwrap.torch_dtype <- function(x) .subset2(x, "py")

#' @export
unwrap.torch_device <- function(x) device_py(x)

#' @export
unwrap.list <- function(x) lapply(x, unwrap)

wrap <- function(py) {
  if (!inherits(py, "python.builtin.object")) {
    return(py)
  }
  if (inherits(py, "torch.Tensor")) {
    return(new_torch_tensor(py))
  }
  if (inherits(py, "torch.Size")) {
    return(as.integer(unlist(reticulate::py_to_r(py_builtins()$list(py)))))
  }
  cls <- class(py)[[1L]]
  switch(cls,
    python.builtin.float = ,
    python.builtin.int = ,
    python.builtin.bool = ,
    python.builtin.str = ,
    python.builtin.NoneType = reticulate::py_to_r(py),
    torch.dtype = dtype_from_py(py),
    torch.device = device_from_py(py),
    if (inherits(py, "python.builtin.dict")) {
      keys <- py_builtins()$list(py)
      out <- lapply(seq_len(reticulate::py_len(keys)) - 1L,
                    function(i) wrap(reticulate::py_get_item(py, reticulate::py_get_item(keys, i))))
      names(out) <- vapply(seq_len(reticulate::py_len(keys)) - 1L, function(i) {
        reticulate::py_str(reticulate::py_get_item(keys, i))
      }, "")
      out
    } else if (inherits(py, c("python.builtin.tuple", "python.builtin.list"))) {
      # by item: py_to_r() would give the items reticulate's convert = TRUE.
      items <- py_builtins()$list(py)
      lapply(seq_len(reticulate::py_len(items)) - 1L,
             function(i) wrap(reticulate::py_get_item(items, i)))
    } else {
      py
    }
  )
}

# ---- dims, sizes and indices at the border -----------------------------------------------------

# R torch's dims (1-based; negative from the end, -1 the last) as PyTorch's (0-based; negative
# alike). NULL stays NULL; several dims give a list (a Python list).
as_py_dim <- function(dim, arg = "dim", call = NULL) {
  if (is.null(dim)) {
    return(NULL)
  }
  if (is_torch_tensor(dim)) {
    if (!is_one_whole_number(dim)) {
      # a tensor where a dim may stand is another operand (torch_max(a, b))
      return(tpy(dim))
    }
    dim <- as.integer(dim)
  }
  if (!is_whole(dim)) {
    abort(sprintf("`%s` must be whole numbers (dimensions count from 1), got %s.", arg,
                  describe(dim)), call, class = "value_error")
  }
  if (any(dim == 0)) {
    abort(sprintf("`%s` is 1-based (the first dimension is 1, the last -1), but found 0.", arg),
          call, class = "value_error")
  }
  dim <- as.integer(ifelse(dim > 0, dim - 1, dim))
  if (length(dim) == 1L) dim else as.list(dim)
}

# Whole numbers, at least one, none NA.
is_whole <- function(x) {
  is.numeric(x) && length(x) > 0L && !anyNA(x) && all(x == trunc(x))
}

# A tensor holding one whole number.
is_one_whole_number <- function(x) {
  py <- tpy(x)
  reticulate::py_to_r(py$numel()) == 1L && !reticulate::py_to_r(py$is_floating_point())
}

# A size (`torch_randn(64, 10)`, `x$view(c(2, 3))`): numbers, vectors of numbers or a
# torch.Size, all concatenated; doubles must be whole. A Python list of ints.
as_py_size <- function(..., arg = "size", call = NULL) {
  size <- unlist(lapply(list(...), function(s) if (is_torch_tensor(s)) as.integer(s) else s))
  if (is.null(size)) {
    return(list())
  }
  if (!is_whole(size)) {
    abort(sprintf("`%s` must be whole numbers, got %s.", arg, describe(size)), call,
          class = "value_error")
  }
  as.list(as.integer(size))
}

# A 1-based index (R numbers or an integer tensor) as PyTorch's 0-based int64 tensor; negative
# indices count from the end as in R torch.
as_py_index_tensor <- function(index, arg = "index", call = NULL) {
  torch <- torch_py()
  if (is_torch_tensor(index)) {
    idx <- tpy(index)
    if (identical(dtype_key(idx$dtype), "bool")) {
      return(idx)
    }
    idx <- idx$to(dtype = torch$int64)
  } else {
    if (!is_whole(index)) {
      abort(sprintf("`%s` must be whole numbers (indices count from 1), got %s.", arg,
                    describe(index)), call, class = "value_error")
    }
    # R's layout kept (a matrix of positions for gather())
    idx <- tpy(torch_tensor(index, dtype = torch_long()))
  }
  if (py_true(torch$any(torch$eq(idx, 0L)))) {
    abort(sprintf("`%s` is 1-based (the first element is 1), but found 0.", arg), call,
          class = "value_error")
  }
  torch$where(torch$gt(idx, 0L), torch$sub(idx, 1L), idx)
}

py_true <- function(py) isTRUE(reticulate::py_to_r(py$item()))

# ---- dtypes ------------------------------------------------------------------------------------

# PyTorch's dtype names -> R torch's type names (printed as torch_Float, CPUFloatType).
dtype_r_names <- c(
  float32 = "Float", float64 = "Double", float16 = "Half", bfloat16 = "BFloat16",
  int64 = "Long", int32 = "Int", int16 = "Short", int8 = "Char", uint8 = "Byte", bool = "Bool",
  complex64 = "ComplexFloat", complex128 = "ComplexDouble", complex32 = "ComplexHalf",
  float8_e4m3fn = "Float8_e4m3fn", float8_e5m2 = "Float8_e5m2"
)

# The torch_dtype named `key` (PyTorch's name: "float32"), made once.
torch_dtype_named <- function(key) {
  d <- .fe_dtype[[key]]
  if (is.null(d)) {
    py <- reticulate::py_get_attr(torch_py(), key)
    d <- structure(list(py = py, key = key,
                        name = dtype_r_names[[key]] %||% key),
                   class = "torch_dtype")
    assign(key, d, envir = .fe_dtype)
  }
  d
}

dtype_key <- function(py) sub("^torch\\.", "", reticulate::py_str(py))

dtype_from_py <- function(py) torch_dtype_named(dtype_key(py))

# A dtype argument (NULL, a torch_dtype, or a name such as "float16", "half", "long") as a
# Python dtype.
as_py_dtype <- function(dtype, arg = "dtype", call = NULL) {
  if (is.null(dtype)) {
    return(NULL)
  }
  if (inherits(dtype, "torch_dtype")) {
    return(.subset2(dtype, "py"))
  }
  if (inherits(dtype, "torch.dtype")) {
    return(dtype)
  }
  if (is.character(dtype) && length(dtype) == 1L && !is.na(dtype)) {
    key <- dtype_aliases[[tolower(dtype)]]
    if (!is.null(key)) {
      return(.subset2(torch_dtype_named(key), "py"))
    }
  }
  abort(sprintf(paste0("`%s` must be a torch_dtype such as torch_float32() or the name of one ",
                       "(\"float16\", \"long\"), got %s."), arg, describe(dtype)), call,
        class = "value_error")
}

dtype_aliases <- list(
  float = "float32", float32 = "float32", double = "float64", float64 = "float64",
  half = "float16", float16 = "float16", bfloat16 = "bfloat16", long = "int64",
  int64 = "int64", int = "int32", int32 = "int32", short = "int16", int16 = "int16",
  int8 = "int8", uint8 = "uint8", bool = "bool", cfloat = "complex64", cdouble = "complex128"
)

#' Tensor data types
#'
#' R torch's dtype objects, printed as R torch prints them (`torch_Float`).
#' `torch_float32()` and `torch_float()` are 32-bit floats (the type R doubles
#' become), `torch_float64()`/`torch_double()` 64-bit, `torch_float16()`/
#' `torch_half()` and `torch_bfloat16()` 16-bit; `torch_long()` (R integers
#' become it), `torch_int()`, `torch_bool()` (R logicals) and the rest are
#' integer and boolean types. Compare them with `==`.
#' @return An object of class `torch_dtype`.
#' @name torch_dtype
#' @examples
#' if (ampkit_available()) {
#'   torch_float16()
#'   torch_tensor(1:3)$dtype == torch_long()
#' }
NULL

#' @rdname torch_dtype
#' @export
torch_float32 <- function() torch_dtype_named("float32")
#' @rdname torch_dtype
#' @export
torch_float <- function() torch_dtype_named("float32")
#' @rdname torch_dtype
#' @export
torch_float64 <- function() torch_dtype_named("float64")
#' @rdname torch_dtype
#' @export
torch_double <- function() torch_dtype_named("float64")
#' @rdname torch_dtype
#' @export
torch_float16 <- function() torch_dtype_named("float16")
#' @rdname torch_dtype
#' @export
torch_half <- function() torch_dtype_named("float16")
#' @rdname torch_dtype
#' @export
torch_bfloat16 <- function() torch_dtype_named("bfloat16")
#' @rdname torch_dtype
#' @export
torch_long <- function() torch_dtype_named("int64")
#' @rdname torch_dtype
#' @export
torch_int64 <- function() torch_dtype_named("int64")
#' @rdname torch_dtype
#' @export
torch_int <- function() torch_dtype_named("int32")
#' @rdname torch_dtype
#' @export
torch_int32 <- function() torch_dtype_named("int32")
#' @rdname torch_dtype
#' @export
torch_short <- function() torch_dtype_named("int16")
#' @rdname torch_dtype
#' @export
torch_int16 <- function() torch_dtype_named("int16")
#' @rdname torch_dtype
#' @export
torch_int8 <- function() torch_dtype_named("int8")
#' @rdname torch_dtype
#' @export
torch_uint8 <- function() torch_dtype_named("uint8")
#' @rdname torch_dtype
#' @export
torch_bool <- function() torch_dtype_named("bool")

#' @rdname torch_dtype
#' @param x An object.
#' @param dtype A `torch_dtype` (or its name): `torch_finfo()` for floating
#'   dtypes (`bits`, `eps`, `max`, `min`, `tiny`, `resolution`),
#'   `torch_iinfo()` for integer dtypes (`bits`, `max`, `min`);
#'   `torch_set_default_dtype()`: the floating dtype R doubles and floating
#'   creation functions give from now on.
#' @export
is_torch_dtype <- function(x) inherits(x, "torch_dtype")

#' @rdname torch_dtype
#' @export
torch_finfo <- function(dtype) {
  info <- call_python(torch_fn("finfo")(as_py_dtype(dtype)))
  type_info(info, c("bits", "eps", "max", "min", "tiny", "resolution"))
}

#' @rdname torch_dtype
#' @export
torch_iinfo <- function(dtype) {
  info <- call_python(torch_fn("iinfo")(as_py_dtype(dtype)))
  type_info(info, c("bits", "max", "min"))
}

type_info <- function(info, fields) {
  out <- lapply(fields, function(f) reticulate::py_to_r(reticulate::py_get_attr(info, f)))
  names(out) <- fields
  out
}

#' @rdname torch_dtype
#' @export
torch_get_default_dtype <- function() {
  dtype_from_py(torch_fn("get_default_dtype")())
}

#' @rdname torch_dtype
#' @export
torch_set_default_dtype <- function(dtype) {
  call_python(torch_fn("set_default_dtype")(as_py_dtype(dtype)))
  invisible(NULL)
}

#' @export
print.torch_dtype <- function(x, ...) {
  cat("torch_", .subset2(x, "name"), "\n", sep = "")
  invisible(x)
}

#' @export
as.character.torch_dtype <- function(x, ...) .subset2(x, "name")

#' @export
`$.torch_dtype` <- function(x, name) {
  switch(name,
    is_floating_point = .subset2(x, "key") %in% c("float32", "float64", "float16", "bfloat16",
                                                  "float8_e4m3fn", "float8_e5m2"),
    .type = function() .subset2(x, "name"),
    ptr = x,
    NULL
  )
}

#' @export
Ops.torch_dtype <- function(e1, e2) {
  op <- get(".Generic")
  if (!op %in% c("==", "!=")) {
    abort(sprintf("`%s` is not defined for torch_dtype objects; compare them with == or !=.",
                  op), class = "value_error")
  }
  if (!inherits(e1, "torch_dtype") || !inherits(e2, "torch_dtype")) {
    other <- if (inherits(e1, "torch_dtype")) e2 else e1
    abort(sprintf("`%s` compares two torch_dtype objects; %s is not a dtype.", op,
                  describe(other)), class = "value_error")
  }
  same <- identical(.subset2(e1, "key"), .subset2(e2, "key"))
  if (op == "==") same else !same
}

# ---- devices -----------------------------------------------------------------------------------

#' Devices
#'
#' `torch_device("cpu")`, `torch_device("cuda")`, `torch_device("cuda", 1)` or
#' `torch_device("cuda:1")`: where a tensor lives, as in R torch (fields
#' `$type` and `$index`). Wherever a `device` argument is taken, the strings
#' `"cpu"` and `"cuda"` may be given instead. `cuda_is_available()` tells
#' whether PyTorch sees a CUDA GPU.
#' @param type `"cpu"`, `"cuda"`, or a type with an index such as `"cuda:0"`.
#' @param index Optional device ordinal (0-based, as in R torch and PyTorch).
#' @param device For `cuda_synchronize()`: the device to wait for (`NULL`:
#'   the current one; without CUDA it does nothing). For `with_device()` and
#'   `local_device()`: the default device of creation functions meanwhile.
#' @return `torch_device()`: an object of class `torch_device`;
#'   `cuda_is_available()`: `TRUE` or `FALSE`.
#' @export
#' @examples
#' if (ampkit_available()) {
#'   torch_device("cpu")
#'   cuda_is_available()
#' }
torch_device <- function(type, index = NULL) {
  arg_string(type, "type")
  if (grepl(":", type, fixed = TRUE)) {
    if (!is.null(index)) {
      abort(sprintf(paste0("`type` (\"%s\") must not include an index when `index` is given ",
                           "too."), type), class = "value_error")
    }
    parts <- strsplit(type, ":", fixed = TRUE)[[1L]]
    type <- parts[[1L]]
    index <- suppressWarnings(as.integer(parts[[2L]]))
    if (is.na(index)) {
      abort(sprintf("`type` must be a device such as \"cpu\" or \"cuda:0\", got \"%s\".",
                    paste(parts, collapse = ":")), class = "value_error")
    }
  }
  index <- device_index(index)
  py <- call_python(torch_fn("device")(type, index))
  structure(list(type = type, index = index, py = py), class = "torch_device")
}

device_index <- function(index) {
  if (is.null(index)) {
    return(NULL)
  }
  if (!is_whole(index) || length(index) != 1L || index < 0) {
    abort(sprintf("`index` must be a device ordinal (0, 1, ...) or NULL, got %s.",
                  describe(index)), class = "value_error")
  }
  as.integer(index)
}

device_from_py <- function(py) {
  index <- reticulate::py_to_r(py$index)
  structure(list(type = reticulate::py_to_r(py$type), index = index, py = py),
            class = "torch_device")
}

device_py <- function(x) .subset2(x, "py")

# A device argument: NULL, a torch_device, or a string ("cpu", "cuda", "cuda:0"), as what
# PyTorch takes.
as_py_device <- function(device, arg = "device", call = NULL) {
  if (is.null(device) || inherits(device, "torch.device")) {
    return(device)
  }
  if (inherits(device, "torch_device")) {
    return(device_py(device))
  }
  if (is.character(device) && length(device) == 1L && !is.na(device)) {
    return(device)
  }
  abort(sprintf("`%s` must be a torch_device or a string such as \"cpu\" or \"cuda\", got %s.",
                arg, describe(device)), call, class = "value_error")
}

#' @export
print.torch_device <- function(x, ...) {
  index <- .subset2(x, "index")
  cat("torch_device(type='", .subset2(x, "type"), "'",
      if (!is.null(index)) paste0(", index=", index), ")\n", sep = "")
  invisible(x)
}

#' @export
as.character.torch_device <- function(x, ...) {
  index <- .subset2(x, "index")
  paste0(.subset2(x, "type"), if (!is.null(index)) paste0(":", index))
}

#' @export
length.torch_device <- function(x) 1L

#' @export
`$.torch_device` <- function(x, name) {
  switch(name, ptr = x, .subset2(x, name))
}

#' @export
Ops.torch_device <- function(e1, e2) {
  op <- get(".Generic")
  if (!op %in% c("==", "!=")) {
    abort(sprintf("`%s` is not defined for torch_device objects; compare them with == or !=.",
                  op), class = "value_error")
  }
  as_chr <- function(d) if (inherits(d, "torch_device")) as.character(d) else d
  same <- identical(as_chr(e1), as_chr(e2))
  if (op == "==") same else !same
}

#' @rdname torch_device
#' @export
cuda_is_available <- function() {
  reticulate::py_to_r(torch_py()$cuda$is_available())
}

#' @rdname torch_device
#' @export
cuda_device_count <- function() {
  reticulate::py_to_r(torch_py()$cuda$device_count())
}

#' @rdname torch_device
#' @export
cuda_synchronize <- function(device = NULL) {
  if (cuda_is_available()) {
    call_python(torch_py()$cuda$synchronize(as_py_device(device)))
  }
  invisible(NULL)
}

#' @rdname torch_device
#' @param x An object.
#' @export
is_torch_device <- function(x) inherits(x, "torch_device")

#' @rdname torch_device
#' @export
is_meta_device <- function(x) {
  if (!is_torch_device(x)) x <- torch_device(x)
  identical(.subset2(x, "type"), "meta")
}

#' @rdname torch_device
#' @param code Code run with `device` as the default device of creation
#'   functions (`with_device()`).
#' @export
with_device <- function(code, device) {
  local_device(device)
  force(code)
}

#' @rdname torch_device
#' @param .env The environment whose exit restores the default device
#'   (`local_device()`).
#' @export
local_device <- function(device, .env = parent.frame()) {
  torch <- torch_py()
  before <- call_python(torch$get_default_device())
  call_python(torch$set_default_device(as_py_device(device)))
  withr::defer(torch$set_default_device(before), envir = .env)
}

#' Seed PyTorch's random number generators
#'
#' Seeds libtorch's generators, as R torch's `torch_manual_seed()` and
#' PyTorch's `torch.manual_seed()` do (both draw from the same generator, so
#' equal seeds give equal tensors in R torch, PyTorch and here).
#' @param seed A whole number.
#' @return `NULL`, invisibly.
#' @export
#' @examples
#' if (ampkit_available()) {
#'   torch_manual_seed(1)
#'   a <- torch_randn(2)
#'   torch_manual_seed(1)
#'   b <- torch_randn(2)
#'   torch_equal(a, b)
#' }
torch_manual_seed <- function(seed) {
  if (!is_whole(seed) || length(seed) != 1L) {
    abort(sprintf("`seed` must be a whole number, got %s.", describe(seed)),
          class = "value_error")
  }
  call_python(torch_fn("manual_seed")(reticulate::py_eval(format(seed, scientific = FALSE),
                                                           convert = FALSE)))
  invisible(NULL)
}
