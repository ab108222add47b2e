# Tensors: R torch's torch_tensor objects, each holding a libtorch tensor (rpkg/src/values.cpp).
# `x$name` looks up R torch's fields (shape, dtype, grad, ...), then the methods written here
# (R torch's own wrappers: 1-based results, sizes given as `...`), then the methods generated
# from libtorch's schemas (gen-ops.R).

#' Tensors
#'
#' `torch_tensor()` makes a tensor from R data, as R torch does: R doubles
#' become float32, integers int64, logicals bool, raw uint8, complex
#' complex64; a vector is a 1-dimensional tensor (a single number too), an
#' array keeps its shape with element `[i, j]` at `[i, j]`. `dtype` and
#' `device` convert; `requires_grad = TRUE` makes a leaf that autograd tracks.
#' A tensor given as `data` is copied.
#'
#' Tensors hold libtorch tensors: operations on them run in libtorch, in this
#' process, with no copy. The same tensor can be handed to Python's torch
#' (`reticulate::r_to_py(x)`) and back.
#'
#' @param data An R vector or array, or a tensor.
#' @param dtype A `torch_dtype` ([torch_float32()], ...) or its name; `NULL`:
#'   from the data.
#' @param device A `torch_device` or a string (`"cpu"`, `"cuda"`); `NULL`: the
#'   CPU.
#' @param requires_grad Whether autograd records operations on the tensor.
#' @param pin_memory Whether the tensor is placed in pinned memory (CPU).
#' @param x An object.
#' @return `torch_tensor()`: a tensor (class `torch_tensor`).
#'   `is_torch_tensor()`, `is_undefined_tensor()`: `TRUE` or `FALSE`.
#' @examples
#' x <- torch_tensor(matrix(1:6, 2), dtype = torch_float32())
#' x
#' x$shape
#' x$sum(dim = 2)
#' as_array(x * 2)
#' torch_tensor(c(TRUE, FALSE))$dtype
#' @export
torch_tensor <- function(data, dtype = NULL, device = NULL, requires_grad = FALSE,
                         pin_memory = FALSE) {
  dtype <- as_torch_dtype(dtype)
  device <- as_torch_device(device)
  if (is_torch_tensor(data)) {
    out <- tensor_methods$clone(tensor_methods$detach(data))
    if (!is.null(dtype) || !is.null(device)) out <- out$to(dtype = dtype, device = device)
    if (arg_flag(requires_grad, "requires_grad")) out$requires_grad_(TRUE)
    return(out)
  }
  if (is.null(data)) {
    data <- logical()
  }
  if (is.list(data)) {
    abort("`data` must be an R vector or array, not a list: use torch_stack() for tensors.",
          class = "value_error")
  }
  out <- .Call(C_tensor_from_r, data, dtype, device, arg_flag(requires_grad, "requires_grad"))
  if (arg_flag(pin_memory, "pin_memory")) out <- out$pin_memory()
  out
}

#' @rdname torch_tensor
#' @export
is_torch_tensor <- function(x) inherits(x, "torch_tensor")

#' @rdname torch_tensor
#' @export
is_undefined_tensor <- function(x) is_torch_tensor(x) && !.Call(C_tensor_meta, x, "defined")

# A tensor's metadata from C++ (values.cpp's C_tensor_meta).
meta <- function(x, what) .Call(C_tensor_meta, x, what)

# ---- `$`: fields, then written methods, then generated ones --------------------------------------

# Fields: computed when read (R torch's active fields).
tensor_fields <- list(
  shape = function(self) meta(self, "shape"),
  dtype = function(self) meta(self, "dtype"),
  device = function(self) meta(self, "device"),
  ndim = function(self) meta(self, "ndim"),
  is_cuda = function(self) identical(meta(self, "device")$type, "cuda"),
  requires_grad = function(self) .Call(C_tensor_autograd, self, "requires_grad", NULL),
  grad = function(self) .Call(C_tensor_autograd, self, "grad", NULL),
  grad_fn = function(self) .Call(C_tensor_autograd, self, "grad_fn", NULL),
  is_leaf = function(self) .Call(C_tensor_autograd, self, "is_leaf", NULL),
  names = function(self) NULL,
  ptr = function(self) self,
  real = function(self) torch_real(self),
  imag = function(self) torch_imag(self),
  T = function(self) {
    if (meta(self, "ndim") < 2L) self else self$permute(rev(seq_len(meta(self, "ndim"))))
  },
  mT = function(self) self$transpose(-2L, -1L),
  H = function(self) self$conj()$t()
)

# Fields that can be assigned (`x$requires_grad <- TRUE`).
tensor_setters <- list(
  requires_grad = function(self, value) {
    .Call(C_tensor_autograd, self, "requires_grad", arg_flag(value, "requires_grad"))
  },
  grad = function(self, value) {
    .Call(C_tensor_autograd, self, "grad", if (is.null(value)) FALSE else value)
  },
  real = function(self, value) self$real$copy_(value),
  imag = function(self, value) self$imag$copy_(value)
)

.tensor_methods <- new.env(parent = emptyenv())
.tensor_fields <- new.env(parent = emptyenv())

# The method table: the generated methods, then the written ones over them; and the fields as a
# table too. Built at load, and handed to `$`'s lookup in C (C_tensor_dollar, tensor_dollar.cpp),
# which binds a method to its tensor by taking `self` out of its formals: each must start with it.
build_tensor_methods <- function() {
  for (name in names(tensor_methods)) assign(name, tensor_methods[[name]], envir = .tensor_methods)
  for (name in names(written_methods)) {
    assign(name, written_methods[[name]], envir = .tensor_methods)
  }
  for (name in names(tensor_fields)) assign(name, tensor_fields[[name]], envir = .tensor_fields)
  for (name in ls(.tensor_methods, all.names = TRUE)) {
    if (!identical(names(formals(.tensor_methods[[name]]))[1], "self")) {
      stop("ampkit: the tensor method `", name, "` does not take `self` first.")
    }
  }
  .Call(C_tensor_dollar_init, .tensor_fields, .tensor_methods, no_tensor_member)
}

no_tensor_member <- function(name) {
  abort(sprintf("A tensor has no method or field `%s`.", paste(name, collapse = "")),
        class = "value_error")
}

#' @export
`$.torch_tensor` <- function(x, name) .Call(C_tensor_dollar, x, name)

#' @export
`[[.torch_tensor` <- function(x, i) {
  if (is.character(i)) {
    return(`$.torch_tensor`(x, i))
  }
  abort("Tensors are indexed with `[`, not `[[`.", class = "value_error")
}

#' @export
`$<-.torch_tensor` <- function(x, name, value) { # nolint: object_name_linter.
  setter <- tensor_setters[[name]]
  if (is.null(setter)) {
    abort(sprintf("`$%s` of a tensor cannot be assigned.", name), class = "value_error")
  }
  setter(x, value)
  invisible(x)
}

#' @export
`[[<-.torch_tensor` <- function(x, i, value) {
  # a field by name only: `[[<-` with a number took the setters by position (x[[1]] <- TRUE set
  # requires_grad)
  if (!is.character(i) || length(i) != 1L) {
    abort("Tensors are assigned to with `[<-`, not `[[<-`.", class = "value_error")
  }
  `$<-.torch_tensor`(x, i, value)
}

#' @export
.DollarNames.torch_tensor <- function(x, pattern = "") { # nolint: object_name_linter.
  candidates <- c(names(tensor_fields), ls(.tensor_methods))
  sort(unique(grep(pattern, candidates, value = TRUE)))
}

# ---- R data --------------------------------------------------------------------------------------

#' Tensors as R data
#'
#' `as_array()` converts a tensor to an R vector (1 dimension or 0) or array,
#' with element `[i, j]` at `[i, j]`: doubles for floating dtypes, integers for
#' integer ones (int64 values beyond R's integers become doubles), logicals for
#' bool, complex for complex ones. The usual R conversions (`as.numeric()`,
#' `as.matrix()`, ...) go through it; `dim()` is the shape and `length()` the
#' number of elements. `all.equal()` compares two tensors' values and shapes
#' (as testthat's `expect_equal()` does).
#' @param x A tensor.
#' @param ... Unused (`all.equal()`: passed on, e.g. `tolerance`).
#' @param mode As for [as.vector()].
#' @return An R vector or array.
#' @name as_array
#' @examples
#' x <- torch_tensor(matrix(c(1, 2, 3, 4), 2))
#' as_array(x)
#' as.numeric(x)
#' dim(x)
#' length(x)
#' all.equal(x, x + 1e-9)
NULL

#' @rdname as_array
#' @export
as_array <- function(x) {
  if (!is_torch_tensor(x)) {
    abort(sprintf("`x` must be a tensor, got %s.", describe(x)), class = "value_error")
  }
  .Call(C_r_from_tensor, x, FALSE)
}

#' @rdname as_array
#' @export
as.array.torch_tensor <- function(x, ...) as_array(x)

#' @rdname as_array
#' @param keep.names Unused (bit64's generic's argument).
#' @importFrom bit64 as.integer64
#' @export
as.integer64.torch_tensor <- function(x, keep.names = FALSE, ...) { # nolint: object_name_linter.
  .Call(C_r_from_tensor, x, TRUE)
}

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

# testthat's expect_equal() (waldo) compares tensors by what they hold (values, device,
# requires_grad, the node that made them), as R torch's proxy does, not by the addresses of their
# external pointers. Registered when waldo loads (it is suggested, not imported).
#' @exportS3Method waldo::compare_proxy
compare_proxy.torch_tensor <- function(x, path) { # nolint: object_name_linter.
  if (!isTRUE(meta(x, "defined"))) {
    return(list(object = "a tensor that no longer exists", path = path))
  }
  node <- x$grad_fn
  list(object = list(x = as_array(if (x$is_sparse()) x$to_dense() else x$cpu()),
                     device = as.character(x$device), requires_grad = x$requires_grad,
                     grad_fn = if (is.null(node)) NULL else node$name()),
       path = path)
}

#' @rdname as_array
#' @param target,current Tensors.
#' @export
all.equal.torch_tensor <- function(target, current, ...) {
  if (!is_torch_tensor(current)) {
    return(sprintf("target is a tensor, current is %s", describe(current)))
  }
  dense <- function(x) as_array(if (x$is_sparse()) x$to_dense() else x)
  all.equal(dense(target), dense(current), ...)
}

#' @rdname as_array
#' @export
as.complex.torch_tensor <- function(x, ...) as.complex(as_array(x))

#' @rdname as_array
#' @export
as.vector.torch_tensor <- function(x, mode = "any") as.vector(as_array(x), mode = mode)

#' @rdname as_array
#' @export
dim.torch_tensor <- function(x) meta(x, "dim") # NULL for a freed tensor (values.cpp says why)

#' @rdname as_array
#' @export
length.torch_tensor <- function(x) {
  if (!.Call(C_tensor_meta, x, "defined")) {
    return(0L)
  }
  n <- meta(x, "numel")
  if (n <= .Machine$integer.max) as.integer(n) else n # a double beyond R's integers
}

# ---- printing ------------------------------------------------------------------------------------

#' @export
print.torch_tensor <- function(x, n = 30, ...) {
  cat("torch_tensor\n")
  text <- strsplit(tensor_text(x), "\n", fixed = TRUE)[[1L]]
  if (length(text) > n && n > 1L) {
    text <- c(text[seq_len(n)], "... [the output was truncated (use n=-1 to disable)]",
              text[[length(text)]])
  }
  cat(paste(text, collapse = "\n"))
  if (.Call(C_tensor_meta, x, "defined")) {
    # Reading the node of a view made under no_grad and changed in place there is libtorch's
    # error; PyTorch's printer says "<Invalid>" then, as here.
    node <- tryCatch(x$grad_fn, runtime_error = function(e) "Invalid")
    if (is.character(node)) {
      cat("[ grad_fn = <", node, "> ]", sep = "")
    } else if (!is.null(node)) {
      cat("[ grad_fn = <", node_info(node)[[1L]], "> ]", sep = "")
    } else if (x$requires_grad) {
      cat("[ requires_grad = TRUE ]")
    }
  }
  cat("\n")
  invisible(x)
}

# libtorch's text of a tensor; where libtorch's printer cannot (compressed sparse layouts, complex
# values, which it prints as their real parts), the values as R prints them, under libtorch's
# footer.
tensor_text <- function(x) {
  if (!isTRUE(meta(x, "defined"))) return(meta(x, "print"))
  layout <- meta(x, "layout")
  if (layout >= 2L && layout != 3L) {
    return(paste0(tensor_text(x$to_dense()), "\n[ shown dense: a compressed sparse tensor ]"))
  }
  if (!x$is_complex()) return(meta(x, "print"))
  footer <- utils::tail(strsplit(suppressWarnings(meta(x, "print")), "\n")[[1L]], 1L)
  values <- as_array(x$cpu())
  paste(c(utils::capture.output(print(if (is.null(dim(values))) matrix(values) else values)),
          footer), collapse = "\n")
}

#' @export
str.torch_tensor <- function(object, ...) {
  shape <- meta(object, "shape")
  dims <- if (length(shape)) paste0("[", paste0("1:", shape, collapse = ", "), "]") else "[]"
  cat(as.character(meta(object, "dtype")), " ", dims, "\n", sep = "")
  invisible()
}

#' First and last rows of a tensor
#'
#' `head()` and `tail()` give the first and last `n` elements along the first
#' dimension, as R torch's do.
#' @param x A tensor.
#' @param n How many.
#' @param ... Unused.
#' @return A tensor.
#' @name tensor-head
#' @examples
#' x <- torch_tensor(1:10)
#' head(x, 3)
#' tail(x, 2)
NULL

#' @rdname tensor-head
#' @export
head.torch_tensor <- function(x, n = 6L, ...) {
  n <- rows_kept(x, n)
  leading_rows(x, seq_len(n))
}

#' @rdname tensor-head
#' @export
tail.torch_tensor <- function(x, n = 6L, ...) {
  n <- rows_kept(x, n)
  leading_rows(x, seq_len(n) + (meta(x, "shape")[[1L]] - n))
}

# How many rows head() and tail() keep: n, at most all; a negative n all but that many (R's).
rows_kept <- function(x, n) {
  n <- whole_number(n, "n")
  len <- meta(x, "shape")[[1L]]
  if (is.null(len)) {
    abort("head() and tail() need a tensor of one dimension or more.", class = "value_error")
  }
  if (n < 0) max(len + n, 0) else min(n, len)
}

# Rows of `x` along its first dimension, that dimension kept (one row too, or none), as R torch's
# index_select() keeps it.
leading_rows <- function(x, rows) {
  x$index_select(1L, torch_tensor(as.integer(rows), dtype = torch_long()))
}

# ---- methods written by hand (R torch's own) -----------------------------------------------------

tensor_storage <- function(self) {
  start <- meta(self, "data_ptr") - meta(self, "storage_offset") * meta(self, "element_size")
  structure(list(data_ptr = function() format(start, scientific = FALSE)),
            class = "torch_storage")
}

convert_to <- function(self, dtype, memory_format) {
  if (is.null(memory_format)) self$to(dtype = dtype) else
    self$to(dtype = dtype, memory_format = memory_format)
}

scatter_call <- function(method, self, dim, index, src, reduce) {
  if (is_torch_tensor(src)) {
    if (is.null(reduce)) method(self, dim, index, src = src) else
      method(self, dim, index, src = src, reduce = reduce)
  } else if (is.null(reduce)) {
    method(self, dim, index, value = src)
  } else {
    method(self, dim, index, value = src, reduce = reduce)
  }
}

# The 1-based index positions in a result (R torch adds 1 to returned indices).
plus_one <- function(indices) indices + 1L

# `x` (a new tensor) with the R attributes of `like` (its class vector, nn_buffer's fields).
with_attributes_of <- function(x, like) {
  attributes(x) <- attributes(like)
  x
}

# `x$new_zeros(2, 3, dtype = )` and its kin: the sizes in `...`, as the creation functions take
# them, then the schema's options; a dtype or device not given is x's (libtorch's rule).
new_sized <- function(name) {
  force(name)
  function(self, ..., dtype = NULL, layout = NULL, device = NULL, pin_memory = NULL,
           requires_grad = FALSE) {
    created(tensor_methods[[name]](self, size = sizes_of(list(...)),
                                   dtype = as_torch_dtype(dtype), layout = layout,
                                   device = as_torch_device(device), pin_memory = pin_memory),
            requires_grad)
  }
}

written_methods <- list(
  size = function(self, dim) {
    shape <- meta(self, "shape")
    if (missing(dim)) {
      return(shape)
    }
    dim <- whole_number(dim, "dim")
    if (dim == 0) {
      abort("Indexing starts at 1 and got a 0.", class = "runtime_error")
    }
    if (dim > 0) shape[[dim]] else rev(shape)[[abs(dim)]]
  },
  stride = function(self, dim) {
    strides <- meta(self, "stride")
    if (missing(dim)) {
      return(strides)
    }
    dim <- whole_number(dim, "dim")
    if (dim == 0) {
      abort("Indexing starts at 1 and got a 0.", class = "runtime_error")
    }
    if (dim > 0) strides[[dim]] else rev(strides)[[abs(dim)]]
  },
  dim = function(self) meta(self, "ndim"),
  length = function(self) length.torch_tensor(self),
  numel = function(self) meta(self, "numel"),
  element_size = function(self) meta(self, "element_size"),
  # The address of the first element, a number (PyTorch's data_ptr()): the same in Python for
  # the same tensor.
  data_ptr = function(self) meta(self, "data_ptr"),
  # PyTorch's is_contiguous(memory_format =): dense in that order (channels last: NHWC).
  is_contiguous = function(self, memory_format = NULL) {
    if (is.null(memory_format) || identical(memory_format, torch_contiguous_format())) {
      return(meta(self, "is_contiguous"))
    }
    if (!identical(memory_format, torch_channels_last_format())) {
      abort(sprintf(paste0("`memory_format` must be torch_contiguous_format() or ",
                           "torch_channels_last_format(), got %s."), describe(memory_format)),
            class = "value_error")
    }
    meta(self, "is_channels_last")
  },
  item = function(self) {
    n <- meta(self, "numel")
    if (n != 1) {
      abort(sprintf("a Tensor with %s elements cannot be converted to Scalar", n),
            class = "runtime_error")
    }
    value <- .Call(C_r_from_tensor, self, FALSE)
    dim(value) <- NULL
    if (is.integer(value) || is.logical(value) || is.complex(value)) value else as.double(value)
  },
  view = function(self, ...) {
    size <- .Call(C_plain_sizes, list(...)) # plain numbers, the common call: read in one call
    if (!is.null(size)) {
      return(tensor_methods$view(self, size = size))
    }
    args <- list(...)
    # view(dtype = ) (or a dtype alone) reinterprets the bytes; any other view takes sizes.
    if (length(args) == 1L && (identical(names(args), "dtype") || is_torch_dtype(args[[1L]]))) {
      return(tensor_methods$view(self, dtype = args[[1L]]))
    }
    tensor_methods$view(self, size = sizes_of(args))
  },
  reshape = function(self, ...) tensor_methods$reshape(self, shape = sizes_of(list(...), "shape")),
  expand = function(self, ..., implicit = FALSE) {
    sizes <- list(...)
    # R torch's signature is expand(size, implicit): a flag after the size, unnamed, is `implicit`.
    last <- names(sizes)[length(sizes)]
    unnamed <- is.null(last) || !nzchar(last)
    if (length(sizes) > 1L && is.logical(sizes[[length(sizes)]]) && unnamed) {
      implicit <- sizes[[length(sizes)]]
      sizes <- sizes[-length(sizes)]
    }
    tensor_methods$expand(self, size = sizes_of(sizes), implicit = implicit)
  },
  permute = function(self, ...) tensor_methods$permute(self, dims = sizes_of(list(...), "dims")),
  `repeat` = function(self, ...) {
    tensor_methods[["repeat"]](self, repeats = sizes_of(list(...), "repeats"))
  },
  tile = function(self, ...) tensor_methods$tile(self, dims = sizes_of(list(...), "dims")),
  flip = function(self, ...) tensor_methods$flip(self, dims = sizes_of(list(...), "dims")),
  new_zeros = new_sized("new_zeros"),
  new_ones = new_sized("new_ones"),
  new_empty = new_sized("new_empty"),
  to = function(self, dtype = NULL, device = NULL, other = NULL, non_blocking = FALSE,
                copy = FALSE, memory_format = NULL) {
    if (!is.null(other)) {
      if (!is.null(dtype) || !is.null(device)) {
        abort("Had `other` but `device` or `dtype` are non NULL.", class = "value_error")
      }
      dtype <- other$dtype
      device <- other$device
    }
    dtype <- as_torch_dtype(dtype)
    device <- as_torch_device(device)
    if (is.null(dtype) && is.null(device)) {
      if (is.null(memory_format)) {
        return(if (isTRUE(copy)) self$clone() else self)
      }
      dtype <- meta(self, "dtype") # a layout alone (R torch's): libtorch's to() wants a dtype
    }
    tensor_methods$to(self, dtype = dtype, device = device, non_blocking = non_blocking,
                      copy = copy, memory_format = memory_format)
  },
  cpu = function(self, memory_format = NULL) self$to(device = "cpu", memory_format = memory_format),
  cuda = function(self, device = NULL, non_blocking = FALSE, memory_format = NULL) {
    device <- if (is.null(device)) "cuda" else as_torch_device(device)
    self$to(device = device, non_blocking = non_blocking, memory_format = memory_format)
  },
  float = function(self, memory_format = NULL) convert_to(self, torch_float32(), memory_format),
  double = function(self, memory_format = NULL) convert_to(self, torch_float64(), memory_format),
  half = function(self, memory_format = NULL) convert_to(self, torch_float16(), memory_format),
  bfloat16 = function(self, memory_format = NULL) convert_to(self, torch_bfloat16(), memory_format),
  long = function(self, memory_format = NULL) convert_to(self, torch_long(), memory_format),
  int = function(self, memory_format = NULL) convert_to(self, torch_int(), memory_format),
  bool = function(self, memory_format = NULL) convert_to(self, torch_bool(), memory_format),
  # R torch's scatter(dim, index, src): a tensor `src` is scattered, a number is the value.
  scatter = function(self, dim, index, src, reduce = NULL) {
    scatter_call(tensor_methods$scatter, self, dim, index, src, reduce)
  },
  scatter_ = function(self, dim, index, src, reduce = NULL) {
    scatter_call(tensor_methods$scatter_, self, dim, index, src, reduce)
  },
  # R torch's storage object, for its data_ptr() (where the tensor's memory starts, before any
  # offset of a view): two tensors share memory when their storages' data_ptr() agree.
  storage = function(self) tensor_storage(self),
  storage_offset = function(self) meta(self, "storage_offset"),
  # A sparse tensor's indices, 1-based (R torch's).
  indices = function(self) plus_one(tensor_methods$indices(self)),
  max = function(self, dim, other, keepdim = FALSE) {
    torch_max(self, dim = dim, other = other, keepdim = keepdim)
  },
  min = function(self, dim, other, keepdim = FALSE) {
    torch_min(self, dim = dim, other = other, keepdim = keepdim)
  },
  # R torch's clone() and detach() keep the R attributes (an nn_parameter stays one).
  clone = function(self, ...) with_attributes_of(tensor_methods$clone(self, ...), self),
  detach = function(self, ...) with_attributes_of(tensor_methods$detach(self, ...), self),
  argmax = function(self, dim = NULL, keepdim = FALSE) torch_argmax(self, dim, keepdim),
  argmin = function(self, dim = NULL, keepdim = FALSE) torch_argmin(self, dim, keepdim),
  argsort = function(self, dim = -1L, descending = FALSE) torch_argsort(self, dim, descending),
  sort = function(self, dim = -1L, descending = FALSE, stable) {
    torch_sort(self, dim = dim, descending = descending, stable = stable)
  },
  topk = function(self, k, dim = -1L, largest = TRUE, sorted = TRUE) {
    torch_topk(self, k, dim, largest, sorted)
  },
  nonzero = function(self, as_list = FALSE) torch_nonzero(self, as_list),
  split = function(self, split_size, dim = 1L) torch_split(self, split_size, dim),
  narrow = function(self, dim, start, length) torch_narrow(self, dim, start, length),
  # 1-based `start` as `$narrow()` (R torch's torch_narrow_copy() takes it 0-based).
  narrow_copy = function(self, dim, start, length) narrow_copy_one_based(self, dim, start, length),
  movedim = function(self, source, destination) torch_movedim(self, source, destination),
  norm = function(self, p = 2, dim = NULL, keepdim = FALSE, dtype = NULL) {
    torch_norm(self, p, dim, keepdim, dtype)
  },
  repeat_interleave = function(self, repeats, dim = NULL, output_size = NULL) {
    torch_repeat_interleave(self, repeats, dim, output_size)
  },
  backward = function(self, gradient = NULL, retain_graph = create_graph, create_graph = FALSE,
                      inputs = NULL, ...) {
    if (...length() > 0L) {
      # R torch's `...` takes its deprecated `keep_graph`; any other argument is misspelt.
      extra <- list(...)
      if ("keep_graph" %in% names(extra)) {
        rlang::warn(c("`keep_graph` has been deprecated. Please use `retain_graph` instead.",
                      i = "`keep_graph` will take precedence."), class = "ampkit_warning",
                    .frequency = "once", .frequency_id = "keep_graph")
        retain_graph <- extra[["keep_graph"]]
        extra[["keep_graph"]] <- NULL
      }
      if (length(extra)) {
        given <- (names(extra) %||% "")[[1L]]
        what <- if (nzchar(given)) sprintf("`%s`", given) else "by position after `inputs`"
        abort(sprintf("`$backward()` takes no argument %s.", what), class = "value_error")
      }
    }
    autograd_backward(self, gradient, retain_graph, create_graph, inputs)
  },
  register_hook = function(self, hook) register_tensor_hook(self, hook),
  retain_grad = function(self) invisible(tensor_methods$retain_grad(self)),
  requires_grad_ = function(self, requires_grad = TRUE) {
    .Call(C_tensor_autograd, self, "requires_grad", arg_flag(requires_grad, "requires_grad"))
    invisible(self)
  },
  set_grad_ = function(self, grad) {
    .Call(C_tensor_autograd, self, "grad", grad)
    invisible(self)
  },
  has_names = function(self) FALSE,
  is_sparse = function(self) meta(self, "layout") == 1L,
  is_sparse_csr = function(self) meta(self, "layout") == 2L,
  is_quantized = function(self) meta(self, "is_quantized"),
  print = function(self, n = 30) print.torch_tensor(self, n)
)
