# R torch's value objects over libtorch's: dtypes, devices, layouts, memory formats, generators,
# seeds and the CUDA queries. A dtype is an integer (libtorch's ScalarType) of class
# c("torch_dtype", "R7"), a device a string ("cpu", "cuda:0") of class c("torch_device", "R7"):
# cheap to make and to hand to C++ (rpkg/src/values.cpp).

# ---- dtypes ------------------------------------------------------------------------------------

# libtorch's dtype names (R torch prints them: torch_Float) and the names R code may use.
dtype_aliases <- c(
  float = "Float", float32 = "Float", double = "Double", float64 = "Double", half = "Half",
  float16 = "Half", bfloat16 = "BFloat16", long = "Long", int64 = "Long", int = "Int",
  int32 = "Int", short = "Short", int16 = "Short", int8 = "Char", uint8 = "Byte", bool = "Bool",
  cfloat = "ComplexFloat", complex64 = "ComplexFloat", cdouble = "ComplexDouble",
  complex128 = "ComplexDouble", chalf = "ComplexHalf", complex32 = "ComplexHalf",
  float8_e4m3fn = "Float8_e4m3fn", float8_e5m2 = "Float8_e5m2", uint16 = "UInt16",
  uint32 = "UInt32", uint64 = "UInt64", quint8 = "QUInt8", qint8 = "QInt8", qint32 = "QInt32"
)

# libtorch's names -> PyTorch's (what get_autocast_dtype() reports).
pytorch_dtype_names <- c(
  Float = "float32", Double = "float64", Half = "float16", BFloat16 = "bfloat16",
  Long = "int64", Int = "int32", Short = "int16", Char = "int8", Byte = "uint8", Bool = "bool",
  ComplexFloat = "complex64", ComplexDouble = "complex128", ComplexHalf = "complex32"
)

.dtype_cache <- new.env(parent = emptyenv())

# The dtype named `name` (libtorch's name, "Float"), made once.
dtype_named <- function(name) {
  d <- .dtype_cache[[name]]
  if (is.null(d)) {
    d <- .Call(C_dtype_named, name)
    assign(name, d, envir = .dtype_cache)
  }
  d
}

#' Tensor data types
#'
#' R torch's dtype objects, printed as R torch prints them (`torch_Float`).
#' `torch_float32()` and `torch_float()` are 32-bit floats (the type R doubles
#' become), `torch_float64()`/`torch_double()` 64-bit, `torch_float16()`/
#' `torch_half()` and `torch_bfloat16()` 16-bit; `torch_long()` (R integers
#' become it), `torch_int()`, `torch_bool()` (R logicals) and the rest are
#' integer, boolean, complex and quantized types (`torch_quint8()`,
#' `torch_qint8()`, `torch_qint32()`: see [torch_quantize_per_tensor()]).
#' Compare them with `==`. Where a dtype is expected its name works too
#' (`"float16"`, `"half"`, `"long"`).
#' @return An object of class `torch_dtype`.
#' @name torch_dtype
#' @examples
#' torch_float16()
#' torch_tensor(1:3)$dtype == torch_long()
#' torch_finfo(torch_float16())$max
NULL

#' @rdname torch_dtype
#' @export
torch_float32 <- function() dtype_named("Float")
#' @rdname torch_dtype
#' @export
torch_float <- function() dtype_named("Float")
#' @rdname torch_dtype
#' @export
torch_float64 <- function() dtype_named("Double")
#' @rdname torch_dtype
#' @export
torch_double <- function() dtype_named("Double")
#' @rdname torch_dtype
#' @export
torch_float16 <- function() dtype_named("Half")
#' @rdname torch_dtype
#' @export
torch_half <- function() dtype_named("Half")
#' @rdname torch_dtype
#' @export
torch_bfloat16 <- function() dtype_named("BFloat16")
#' @rdname torch_dtype
#' @export
torch_long <- function() dtype_named("Long")
#' @rdname torch_dtype
#' @export
torch_int64 <- function() dtype_named("Long")
#' @rdname torch_dtype
#' @export
torch_int <- function() dtype_named("Int")
#' @rdname torch_dtype
#' @export
torch_int32 <- function() dtype_named("Int")
#' @rdname torch_dtype
#' @export
torch_short <- function() dtype_named("Short")
#' @rdname torch_dtype
#' @export
torch_int16 <- function() dtype_named("Short")
#' @rdname torch_dtype
#' @export
torch_int8 <- function() dtype_named("Char")
#' @rdname torch_dtype
#' @export
torch_uint8 <- function() dtype_named("Byte")
#' @rdname torch_dtype
#' @export
torch_bool <- function() dtype_named("Bool")
#' @rdname torch_dtype
#' @export
torch_cfloat <- function() dtype_named("ComplexFloat")
#' @rdname torch_dtype
#' @export
torch_cfloat64 <- function() dtype_named("ComplexFloat")
#' @rdname torch_dtype
#' @export
torch_cdouble <- function() dtype_named("ComplexDouble")
#' @rdname torch_dtype
#' @export
torch_cfloat128 <- function() dtype_named("ComplexDouble")
#' @rdname torch_dtype
#' @export
torch_chalf <- function() dtype_named("ComplexHalf")
#' @rdname torch_dtype
#' @export
torch_cfloat32 <- function() dtype_named("ComplexHalf")  # R torch's: complex32
#' @rdname torch_dtype
#' @export
torch_float8_e4m3fn <- function() dtype_named("Float8_e4m3fn")
#' @rdname torch_dtype
#' @export
torch_float8_e5m2 <- function() dtype_named("Float8_e5m2")
#' @rdname torch_dtype
#' @export
torch_quint8 <- function() dtype_named("QUInt8")
#' @rdname torch_dtype
#' @export
torch_qint8 <- function() dtype_named("QInt8")
#' @rdname torch_dtype
#' @export
torch_qint32 <- function() dtype_named("QInt32")

#' @rdname torch_dtype
#' @param x An object.
#' @export
is_torch_dtype <- function(x) inherits(x, "torch_dtype")

# A dtype argument: a torch_dtype, or a name ("float16", "half", "long", "Float"); NULL passes.
as_torch_dtype <- function(x, arg = "dtype", call = NULL) {
  if (is.null(x) || inherits(x, "torch_dtype")) {
    return(x)
  }
  if (is.character(x) && length(x) == 1L && !is.na(x)) {
    alias <- tolower(sub("^torch[._]", "", x))
    name <- if (alias %in% names(dtype_aliases)) {
      dtype_aliases[[alias]]
    } else if (x %in% dtype_aliases) {
      x
    }
    if (!is.null(name)) {
      return(dtype_named(name))
    }
  }
  abort(sprintf(paste0("`%s` must be a torch_dtype such as torch_float32() or the name of one ",
                       "(\"float16\", \"long\"), got %s."), arg, describe(x)), call,
        class = "value_error")
}

dtype_info <- function(x) .Call(C_dtype_info, x)

#' @export
print.torch_dtype <- function(x, ...) {
  cat("torch_", dtype_info(x)[[1L]], "\n", sep = "")
  invisible(x)
}

#' @export
as.character.torch_dtype <- function(x, ...) dtype_info(x)[[1L]]

#' @export
`$.torch_dtype` <- function(x, name) {
  switch(name,
    .type = function() dtype_info(x)[[1L]],
    is_floating_point = dtype_info(x)[[2L]],
    is_complex = dtype_info(x)[[3L]],
    itemsize = dtype_info(x)[[4L]],
    NULL
  )
}

#' @export
Ops.torch_dtype <- function(e1, e2) {
  if (!.Generic %in% c("==", "!=")) { # nolint: object_usage_linter.
    # nolint start: object_usage_linter.
    abort(sprintf("`%s` is not defined for dtypes.", .Generic), class = "runtime_error")
    # nolint end
  }
  if (!is_torch_dtype(e1) || !is_torch_dtype(e2)) {
    abort("One of the objects is not a dtype. Comparison is not possible.",
          class = "runtime_error")
  }
  same <- identical(unclass(e1)[[1L]], unclass(e2)[[1L]])
  if (.Generic == "==") same else !same # nolint: object_usage_linter.
}

#' @rdname torch_dtype
#' @param dtype A `torch_dtype` (or its name): `torch_finfo()` for floating
#'   dtypes (`bits`, `eps`, `max`, `min`, `tiny`, `resolution`),
#'   `torch_iinfo()` for integer dtypes (`bits`, `max`, `min`);
#'   `torch_set_default_dtype()`: the floating dtype floating creation
#'   functions give from now on.
#' @export
torch_finfo <- function(dtype) {
  dtype <- as_torch_dtype(dtype)
  info <- dtype_info(dtype)
  if (!info[[2L]]) {
    abort(sprintf("torch_finfo() needs a floating dtype, got %s.", info[[1L]]),
          class = "value_error")
  }
  bits <- 8L * info[[4L]]
  # The limits as libtorch computes them: from tensors of the dtype.
  one <- torch_ones(1L, dtype = dtype)
  eps <- as.numeric(torch_nextafter(one, one * 2) - one)
  max <- switch(info[[1L]], Half = 65504, BFloat16 = 3.3895313892515355e38,
                Float = 3.4028234663852886e38, Double = .Machine$double.xmax)
  tiny <- switch(info[[1L]], Half = 6.103515625e-05, BFloat16 = 1.1754943508222875e-38,
                 Float = 1.1754943508222875e-38, Double = .Machine$double.xmin)
  digits <- switch(info[[1L]], Half = 3, BFloat16 = 2, Float = 6, Double = 15)
  list(bits = bits, eps = eps, max = max, min = -max, tiny = tiny, resolution = 10^-digits)
}

#' @rdname torch_dtype
#' @export
torch_iinfo <- function(dtype) {
  dtype <- as_torch_dtype(dtype)
  info <- dtype_info(dtype)
  name <- info[[1L]]
  # R torch's values: integers, and bit64's integer64 for int32 and int64, exact where a double
  # is not (2^63 - 1 became 2^63, and a tensor filled with it wrapped to -2^63). int64's min,
  # -2^63, is bit64's NA: a double, exact. The unsigned dtypes are PyTorch's (uint64's max a
  # double, 2^64).
  limits <- switch(name,
    Byte = c(0L, 255L), Char = c(-128L, 127L), Short = c(-32768L, 32767L), Bool = c(0L, 1L),
    Int = bit64::as.integer64(c("-2147483648", "2147483647")),
    Long = list(-9223372036854775808, bit64::as.integer64("9223372036854775807")),
    UInt16 = c(0L, 65535L), UInt32 = c(0, 4294967295), UInt64 = c(0, 18446744073709551615)
  )
  if (is.null(limits)) {
    abort(sprintf("torch_iinfo() needs an integer dtype, got %s.", name), class = "value_error")
  }
  list(bits = 8L * info[[4L]], max = limits[[2L]], min = limits[[1L]])
}

#' @rdname torch_dtype
#' @export
torch_get_default_dtype <- function() .Call(C_default_dtype, NULL)

#' @rdname torch_dtype
#' @export
torch_set_default_dtype <- function(dtype) {
  invisible(.Call(C_default_dtype, as_torch_dtype(dtype)))
}

# ---- devices -----------------------------------------------------------------------------------

#' Devices
#'
#' `torch_device("cpu")`, `torch_device("cuda", 0)` or `torch_device("cuda:1")`:
#' where a tensor lives. `$type` is `"cpu"`, `"cuda"`, ...; `$index` the
#' device's number (`NULL` when none was given). Where a device is expected a
#' string works too. `with_device()` / `local_device()` set the device the
#' creation functions use when none is given.
#' @param type A device type, or a device string such as `"cuda:0"`.
#' @param index The device's number (0-based, as libtorch numbers them), or
#'   `NULL`.
#' @param x An object.
#' @return `torch_device()`: an object of class `torch_device`.
#' @name torch_device
#' @examples
#' d <- torch_device("cpu")
#' d$type
#' torch_device("cuda", 0)$index
#' is_torch_device(d)
#' with_device(device = "cpu", torch_zeros(2)$device)
NULL

#' @rdname torch_device
#' @export
torch_device <- function(type, index = NULL) {
  if (!is.character(type) || length(type) != 1L || is.na(type)) {
    abort(sprintf("`type` must be a string such as \"cpu\" or \"cuda\", got %s.",
                  describe(type)), class = "value_error")
  }
  if (!is.null(index)) {
    if (grepl(":", type, fixed = TRUE)) {
      abort(sprintf("type %s should not include any index because index was passed explicitly.",
                    type), class = "value_error")
    }
    type <- paste0(type, ":", whole_number(index, "index"))
  }
  .Call(C_device_info, type)[[3L]]
}

#' @rdname torch_device
#' @export
is_torch_device <- function(x) inherits(x, "torch_device")

# Devices by their spelling, each parsed once: `device = "cpu"` is in many a training step's calls.
.device_cache <- new.env(parent = emptyenv())
cached_device <- function(x) {
  if (!nzchar(x)) {
    return(torch_device(x)) # its error ("" names no device; nor can it name a binding)
  }
  .device_cache[[x]] %||% (.device_cache[[x]] <- torch_device(x))
}

as_torch_device <- function(x, arg = "device", call = NULL) {
  if (is.null(x) || inherits(x, "torch_device")) {
    return(x)
  }
  if (is.character(x) && length(x) == 1L && !is.na(x)) {
    return(cached_device(x))
  }
  abort(sprintf("`%s` must be a torch_device or a string such as \"cpu\" or \"cuda\", got %s.",
                arg, describe(x)), call, class = "value_error")
}

#' @export
`$.torch_device` <- function(x, name) {
  info <- .Call(C_device_info, x)
  switch(name, type = info[[1L]], index = info[[2L]], NULL)
}

#' @export
print.torch_device <- function(x, ...) {
  info <- .Call(C_device_info, x)
  index <- if (is.null(info[[2L]])) "" else paste0(", index=", info[[2L]])
  cat("torch_device(type='", info[[1L]], "'", index, ") \n", sep = "")
  invisible(x)
}

#' @export
as.character.torch_device <- function(x, ...) unclass(x)[[1L]]

#' @export
length.torch_device <- function(x) 1L

#' @export
Ops.torch_device <- function(e1, e2) {
  if (!.Generic %in% c("==", "!=")) { # nolint: object_usage_linter.
    # nolint start: object_usage_linter.
    abort(sprintf("`%s` is not defined for devices.", .Generic), class = "runtime_error")
    # nolint end
  }
  if (!is_torch_device(e1)) e1 <- as_torch_device(e1)
  if (!is_torch_device(e2)) e2 <- as_torch_device(e2)
  same <- identical(unclass(e1)[[1L]], unclass(e2)[[1L]])
  if (.Generic == "==") same else !same # nolint: object_usage_linter.
}

.default_device <- new.env(parent = emptyenv())

#' @rdname torch_device
#' @param code Code to run with `device` as the default device.
#' @param device A device: the default for creation functions while `code` runs.
#' @export
with_device <- function(code, ..., device) {
  local_device(device)
  force(code)
}

#' @rdname torch_device
#' @param ... Must be empty.
#' @param .env The environment whose exit restores the previous default.
#' @export
local_device <- function(device, ..., .env = parent.frame()) {
  if (...length() > 0L) check_dots_empty()
  before <- .default_device$device
  .default_device$device <- as_torch_device(device)
  withr::defer(.default_device$device <- before, envir = .env)
  invisible(.default_device$device)
}

# The device a creation function uses: the given one, else with_device()'s, else none (CPU). A
# given one goes to the op as it is: a torch_device or its name, which the op reads and checks
# (device_of(), rpkg/src/values.cpp), in as_torch_device()'s words.
creation_device <- function(device) if (is.null(device)) .default_device$device else device

#' @rdname torch_device
#' @export
is_meta_device <- function(x) identical(as_torch_device(x)$type, "meta")

# ---- layouts and memory formats ----------------------------------------------------------------

#' Layouts and memory formats
#'
#' `torch_strided()` (dense) and `torch_sparse_coo()` layouts;
#' `torch_contiguous_format()`, `torch_preserve_format()`,
#' `torch_channels_last_format()` memory formats, as R torch names them.
#' @return An object of class `torch_layout` or `torch_memory_format`.
#' @name torch_layout
#' @examples
#' x <- torch_empty(2, 3, 4, 5, memory_format = torch_channels_last_format())
#' x$is_contiguous() # FALSE: its channels are its last dimension in memory
#' x$is_contiguous(memory_format = torch_channels_last_format())
#' x$stride()
#' torch_zeros(2, layout = torch_strided())
NULL

# libtorch's enum values (c10/core/Layout.h, c10/core/MemoryFormat.h).
torch_enum <- function(value, class) structure(as.integer(value), class = c(class, "R7"))

#' @rdname torch_layout
#' @export
torch_strided <- function() torch_enum(0L, "torch_layout")
#' @rdname torch_layout
#' @param x An object.
#' @export
is_torch_layout <- function(x) inherits(x, "torch_layout")
#' @rdname torch_layout
#' @export
is_torch_memory_format <- function(x) inherits(x, "torch_memory_format")
#' @rdname torch_layout
#' @export
torch_sparse_coo <- function() torch_enum(1L, "torch_layout")
#' @rdname torch_layout
#' @export
torch_contiguous_format <- function() torch_enum(0L, "torch_memory_format")
#' @rdname torch_layout
#' @export
torch_preserve_format <- function() torch_enum(1L, "torch_memory_format")
#' @rdname torch_layout
#' @export
torch_channels_last_format <- function() torch_enum(2L, "torch_memory_format")

# ---- generators and seeds ----------------------------------------------------------------------

#' Random number generators and seeds
#'
#' `torch_manual_seed(seed)` seeds libtorch's default generators (the CPU's and
#' every CUDA device's): the same seed gives the same numbers as PyTorch's
#' `torch.manual_seed`. `torch_generator()` is a generator of its own, for the
#' functions that take `generator`; `$current_seed()` and
#' `$set_current_seed(seed)` read and set its seed.
#' `with_torch_manual_seed()` runs code with a seed and restores the generator
#' afterwards.
#' @param seed A whole number.
#' @param code Code to run with the seed.
#' @param ... Unused: `seed` is given by name.
#' @return `torch_generator()`: an object of class `torch_generator`.
#' @name torch_manual_seed
#' @examples
#' torch_manual_seed(1)
#' a <- torch_randn(3)
#' torch_manual_seed(1)
#' torch_equal(a, torch_randn(3))
#' g <- torch_generator()
#' g$set_current_seed(42)
#' g$current_seed()
NULL

#' @rdname torch_manual_seed
#' @export
torch_manual_seed <- function(seed) {
  invisible(.Call(C_manual_seed, whole_number(seed, "seed")))
}

#' @rdname torch_manual_seed
#' @export
torch_generator <- function() .Call(C_generator_new, NULL)

#' @export
`$.torch_generator` <- function(x, name) {
  switch(name,
    # bit64's integer64, as R torch's: seeds are 64-bit
    current_seed = function() .Call(C_generator_seed, x, NULL),
    set_current_seed = function(seed) {
      if (!inherits(seed, "integer64")) seed <- whole_number(seed, "seed")
      invisible(.Call(C_generator_seed, x, seed))
    },
    NULL
  )
}

#' @export
print.torch_generator <- function(x, ...) {
  cat("torch_generator()\n")
  invisible(x)
}

#' @rdname torch_manual_seed
#' @export
with_torch_manual_seed <- function(code, ..., seed) {
  local_torch_manual_seed(seed)
  force(code)
}

#' @rdname torch_manual_seed
#' @param .env The frame whose end restores the generator's state (by default
#'   the caller's).
#' @export
local_torch_manual_seed <- function(seed, .env = parent.frame()) {
  state <- torch_get_rng_state()
  cuda_state <- if (cuda_is_available()) cuda_get_rng_state()
  torch_manual_seed(seed)
  withr::defer({
    torch_set_rng_state(state)
    if (!is.null(cuda_state)) cuda_set_rng_state(cuda_state)
  }, envir = .env)
}

#' @rdname torch_manual_seed
#' @param state A generator state, as `torch_get_rng_state()` returns it.
#' @export
torch_get_rng_state <- function() .Call(C_rng_state, NULL, NULL)

#' @rdname torch_manual_seed
#' @export
torch_set_rng_state <- function(state) invisible(.Call(C_rng_state, state, NULL))

# ---- CUDA and threads --------------------------------------------------------------------------

#' CUDA devices and threads
#'
#' `cuda_is_available()` tells whether libtorch sees a CUDA device;
#' `cuda_device_count()` how many; `cuda_current_device()` which one is
#' current (its 0-based number); `cuda_runtime_version()` the CUDA runtime
#' libtorch was built with; `cuda_synchronize()` waits until a device
#' has run its queued work; `cuda_memory_stats()` reads its caching
#' allocator's counters (`cuda_memory_summary()` prints them) and
#' `cuda_empty_cache()` returns its cached, unused memory to the device.
#' `cuda_get_rng_state()` and `cuda_set_rng_state()` read and set the
#' state of a device's default generator (every device's, as a list, with
#' `device = NULL`), as [torch_get_rng_state()] does for the CPU's.
#' `torch_set_num_threads()` and `torch_get_num_threads()` set and read the
#' threads libtorch's CPU operations use. Where there is no CUDA device, the
#' CUDA functions other than `cuda_is_available()`, `cuda_device_count()`,
#' `cuda_synchronize()` and the generator states of every device (none) are
#' `runtime_error`s.
#' @param device The device's number (0-based), or `NULL` for the current one
#'   (for the generator states: every device).
#' @param state A state `cuda_get_rng_state()` gave (for `device = NULL`, the
#'   list of every device's).
#' @param num_threads A whole number >= 1.
#' @return `cuda_is_available()`: `TRUE` or `FALSE`. `cuda_device_count()`,
#'   `cuda_current_device()`, `torch_get_num_threads()`: a number.
#'   `cuda_runtime_version()`: a `numeric_version`. `cuda_get_rng_state()`: a
#'   `torch_uint8()` tensor, or a list of them.
#' @name cuda_is_available
#' @examples
#' cuda_is_available()
#' cuda_device_count()
#' torch_get_num_threads()
NULL

#' @rdname cuda_is_available
#' @export
cuda_is_available <- function() .Call(C_cuda, "available", NULL)

#' @rdname cuda_is_available
#' @export
cuda_device_count <- function() .Call(C_cuda, "count", NULL)

#' @rdname cuda_is_available
#' @export
cuda_synchronize <- function(device = NULL) invisible(.Call(C_cuda, "synchronize", device))

#' @rdname cuda_is_available
#' @return `cuda_memory_stats()`: R torch's layout, a list with `allocated_bytes`,
#'   `reserved_bytes` and `active_bytes`, each `list(all = list(current, peak, allocated,
#'   freed))` in bytes, for the caching allocator of `device`.
#' @export
cuda_memory_stats <- function(device = NULL) {
  counts <- .Call(C_cuda, "memory_stats", cuda_device_index(device))
  kinds <- lapply(counts, function(x) {
    list(all = list(current = x[[1]], peak = x[[2]], allocated = x[[3]], freed = x[[4]]))
  })
  stats::setNames(kinds, c("allocated_bytes", "reserved_bytes", "active_bytes"))
}

#' @rdname cuda_is_available
#' @export
cuda_empty_cache <- function() invisible(.Call(C_cuda, "empty_cache", NULL))

#' @rdname cuda_is_available
#' @export
cuda_current_device <- function() .Call(C_cuda, "current_device", NULL)

#' @rdname cuda_is_available
#' @export
cuda_runtime_version <- function() {
  v <- .Call(C_cuda, "runtime_version", NULL)
  major <- v %/% 1000
  minor <- (v %% 1000) %/% 10
  numeric_version(paste(major, minor, v %% 10, sep = "."))
}

#' @rdname cuda_is_available
#' @export
cuda_memory_summary <- function(device = NULL) {
  stats <- cuda_memory_stats(device)
  utils::str(stats)
  invisible(stats)
}

#' @rdname cuda_is_available
#' @return `cuda_get_device_capability()`: the device's compute capability,
#'   `c(Major = , Minor = )` as integers (8 and 0 for an A100).
#' @export
cuda_get_device_capability <- function(device = cuda_current_device()) {
  device <- cuda_device_index(device)
  # libtorch's C++ API has no capability query outside CUDA's own headers, which the CPU wheel
  # the package builds against lacks: Python's torch in this process answers (not per step).
  capability <- python_modules()$torch$cuda$get_device_capability(device)
  c(Major = as.integer(capability[[1L]]), Minor = as.integer(capability[[2L]]))
}

#' @rdname cuda_is_available
#' @export
cuda_get_rng_state <- function(device = NULL) {
  if (!is.null(device)) {
    return(.Call(C_rng_state, NULL, cuda_device_index(device)))
  }
  lapply(seq_len(cuda_device_count()) - 1L, function(d) .Call(C_rng_state, NULL, d))
}

#' @rdname cuda_is_available
#' @export
cuda_set_rng_state <- function(state, device = NULL) {
  if (!is.null(device)) {
    check_tensor(state, "state")
    return(invisible(.Call(C_rng_state, state, cuda_device_index(device))))
  }
  if (is_torch_tensor(state) || !is.list(state) || length(state) != cuda_device_count()) {
    abort(sprintf(paste0("`state` must be a list of one state per CUDA device (%d), as ",
                         "cuda_get_rng_state() gives it, got %s."), cuda_device_count(),
                  describe(state)), class = "value_error")
  }
  for (s in state) check_tensor(s, "state")
  for (i in seq_along(state)) .Call(C_rng_state, state[[i]], i - 1L)
  invisible(NULL)
}

# A CUDA device's 0-based number (NULL: the current one), checked: R torch's rule and words.
cuda_device_index <- function(device) {
  if (!cuda_is_available()) abort("no CUDA device is available.", class = "runtime_error")
  if (is.null(device)) {
    return(cuda_current_device())
  }
  device <- whole_number(device, "device")
  if (device < 0 || device >= cuda_device_count()) {
    abort("device must be an integer between 0 and the number of devices minus 1",
          class = "value_error")
  }
  device
}

#' The backends of the libtorch in use
#'
#' R torch's `backends_*()` functions (PyTorch's `torch.backends`): whether
#' libtorch was built with MKL, oneDNN (MKL-DNN) and OpenMP, whether Apple's
#' MPS and NVIDIA's cuDNN can be used here, and cuDNN's version.
#' `backends_mps_synchronize()` waits for the work queued on the MPS device.
#' @return `TRUE` or `FALSE`; `backends_cudnn_version()`: a `numeric_version`
#'   (an error where cuDNN is not available); `backends_mps_synchronize()`:
#'   `NULL`, invisibly (an error where MPS is not available).
#' @name backends
#' @examples
#' backends_mkl_is_available()
#' backends_mkldnn_is_available()
#' backends_openmp_is_available()
#' backends_mps_is_available()
#' backends_cudnn_is_available()
#' if (backends_cudnn_is_available()) backends_cudnn_version()
NULL

#' @rdname backends
#' @export
backends_mkl_is_available <- function() .Call(C_backend, "mkl")

#' @rdname backends
#' @export
backends_mkldnn_is_available <- function() .Call(C_backend, "mkldnn")

#' @rdname backends
#' @export
backends_openmp_is_available <- function() .Call(C_backend, "openmp")

#' @rdname backends
#' @export
backends_mps_is_available <- function() .Call(C_backend, "mps")

#' @rdname backends
#' @export
backends_mps_synchronize <- function() invisible(.Call(C_backend, "mps_synchronize"))

#' @rdname backends
#' @export
backends_cudnn_is_available <- function() .Call(C_backend, "cudnn")

#' @rdname backends
#' @export
backends_cudnn_version <- function() {
  v <- .Call(C_backend, "cudnn_version")
  # cuDNN's number: major * 1000 + minor * 100 + patch before cuDNN 9, major * 10000 since.
  major_unit <- if (v >= 90000) 10000 else 1000
  major <- v %/% major_unit
  minor <- (v %% major_unit) %/% 100
  numeric_version(paste(major, minor, v %% 100, sep = "."))
}

# The benchmark runner's: the peak of allocated bytes since the last reset.
cuda_reset_peak_memory <- function() invisible(.Call(C_cuda, "reset_peak", NULL))
cuda_peak_memory <- function() cuda_memory_stats()$allocated_bytes$all$peak

# The benchmark runners' allocator policy (ampkit.bench.measure.steady_allocator): glibc's
# malloc keeps all it frees (cpu-allocator.R).
steady_allocator <- function() {
  set_cpu_allocator_config(threshold_call_gc = .cpu_allocator$config$threshold_call_gc,
                           cache_max_size_mb = Inf)
}

# The collector's share of tensor memory (values.cpp): the bytes R tensors hold, the bytes made
# since the last collection, the bytes alive after it, the floor, the young and the full
# collections run and the seconds spent in them, and whether a collection waits for the end of
# a backward pass. `defer_cpu = TRUE` lets CPU tensors defer a collection as CUDA ones do (the
# tests' switch: the rule is for devices that queue work; FALSE sets it back).
# Internal: for the benchmark's runner and the memory tests.
tensor_memory_stats <- function(defer_cpu = NULL) {
  v <- .Call(C_memory_stats, NULL, defer_cpu)
  list(live = v[[1]], since_collection = v[[2]], live_after = v[[3]], floor = v[[4]],
       collections = v[[5]], full = v[[6]], seconds = v[[7]], pending = v[[8]] == 1)
}

# A full collection of the package's own now: R's collector runs, and what R tensors hold after
# it becomes the working set that the next full collection is judged against (values.cpp).
# Internal: for the benchmark's runner, whose timed steps then begin from a measured working set.
tensor_memory_collect <- function() invisible(.Call(C_memory_collect))

#' @rdname cuda_is_available
#' @export
torch_get_num_interop_threads <- function() .Call(C_num_interop_threads, NULL)

#' @rdname cuda_is_available
#' @export
torch_set_num_interop_threads <- function(num_threads) {
  invisible(.Call(C_num_interop_threads, whole_number(num_threads, "num_threads")))
}

#' @rdname cuda_is_available
#' @export
torch_get_num_threads <- function() .Call(C_num_threads, NULL)

#' @rdname cuda_is_available
#' @export
torch_set_num_threads <- function(num_threads) {
  invisible(.Call(C_num_threads, whole_number(num_threads, "num_threads")))
}


# ---- reductions, quantization schemes, the installation ----------------------------------------

#' Reductions, quantization schemes and the libtorch in use
#'
#' `torch_reduction_mean()`, `torch_reduction_sum()` and
#' `torch_reduction_none()` are libtorch's codes of a loss's reduction (R
#' torch's), as the `reduction` argument of the generated loss functions takes
#' them. `torch_per_tensor_affine()` and the other `torch_per_*()` are the
#' quantization schemes (class `torch_qscheme`). `torch_is_installed()` is
#' `TRUE`: the libtorch is PyTorch's, found when the package was installed;
#' `torch_install_path()` is its folder.
#' @param x An object.
#' @param ... Ignored (R torch's arguments about downloading libtorch).
#' @return A number, a `torch_qscheme`, `TRUE`, or a path.
#' @name torch_reduction
#' @examples
#' torch_reduction_mean()
#' torch_per_tensor_affine()
#' torch_is_installed()
NULL

#' @rdname torch_reduction
#' @export
torch_reduction_none <- function() 0
#' @rdname torch_reduction
#' @export
torch_reduction_mean <- function() 1
#' @rdname torch_reduction
#' @export
torch_reduction_sum <- function() 2

qscheme <- function(name) structure(list(name = name), class = "torch_qscheme")
#' @rdname torch_reduction
#' @export
torch_per_tensor_affine <- function() qscheme("per_tensor_affine")
#' @rdname torch_reduction
#' @export
torch_per_channel_affine <- function() qscheme("per_channel_affine")
#' @rdname torch_reduction
#' @export
torch_per_tensor_symmetric <- function() qscheme("per_tensor_symmetric")
#' @rdname torch_reduction
#' @export
torch_per_channel_symmetric <- function() qscheme("per_channel_symmetric")
#' @rdname torch_reduction
#' @export
is_torch_qscheme <- function(x) inherits(x, "torch_qscheme")
#' @export
print.torch_qscheme <- function(x, ...) {
  cat("torch_", x$name, "\n", sep = "")
  invisible(x)
}

#' @rdname torch_reduction
#' @export
torch_is_installed <- function(...) TRUE
#' @rdname torch_reduction
#' @export
torch_install_path <- function(...) {
  dirname(readLines(system.file("torch_lib_dir", package = "ampkit")))
}
