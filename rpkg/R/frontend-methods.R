# `$` on tensors: R torch's methods and fields over PyTorch's, with R's conventions converted at
# the border by argument role (dims 1-based, indices 1-based, sizes from doubles) and indices
# in results made 1-based. Methods absent from the table fall through to PyTorch's method of
# the same name (an argument named like a dim is still converted).

# Roles of arguments, by name, for methods and functions not in the table.
default_roles <- c(dim = "dim", dims = "dim", dim0 = "dim", dim1 = "dim", dim2 = "dim",
                   start_dim = "dim", end_dim = "dim", dtype = "dtype", device = "device",
                   size = "size", shape = "size")

# name = list(args = c(<leading positional parameter names> = <role>), varargs = <role of all
# positional arguments collapsed into one>, out = "index" (the result is an index tensor) or
# "second" (a (values, indices) pair)). Roles: dim, index (1-based positions, as a tensor),
# position (one 1-based position, as an int), size, int (whole numbers given as doubles),
# dtype, device, none.
fe_spec <- function(args = character(), varargs = NULL, out = NULL, flag = NULL) {
  list(args = args, varargs = varargs, out = out, flag = flag)
}

fe_dim1 <- c(dim = "dim")
method_specs <- list(
  size = fe_spec(fe_dim1), stride = fe_spec(fe_dim1), sum = fe_spec(fe_dim1),
  mean = fe_spec(fe_dim1), prod = fe_spec(fe_dim1), nansum = fe_spec(fe_dim1),
  nanmean = fe_spec(fe_dim1), std = fe_spec(fe_dim1), var = fe_spec(fe_dim1),
  amax = fe_spec(fe_dim1), amin = fe_spec(fe_dim1), logsumexp = fe_spec(fe_dim1),
  all = fe_spec(fe_dim1), any = fe_spec(fe_dim1), count_nonzero = fe_spec(fe_dim1),
  softmax = fe_spec(fe_dim1), log_softmax = fe_spec(fe_dim1), cumsum = fe_spec(fe_dim1),
  cumprod = fe_spec(fe_dim1), logcumsumexp = fe_spec(fe_dim1), unbind = fe_spec(fe_dim1),
  unsqueeze = fe_spec(fe_dim1), unsqueeze_ = fe_spec(fe_dim1), squeeze = fe_spec(fe_dim1),
  squeeze_ = fe_spec(fe_dim1), norm = fe_spec(c(p = "none", dim = "dim")),
  max = fe_spec(c(dim = "dim"), out = "second"), min = fe_spec(c(dim = "dim"), out = "second"),
  median = fe_spec(fe_dim1, out = "second"), mode = fe_spec(fe_dim1, out = "second"),
  cummax = fe_spec(fe_dim1, out = "second"), cummin = fe_spec(fe_dim1, out = "second"),
  sort = fe_spec(fe_dim1, out = "second"),
  topk = fe_spec(c(k = "int", dim = "dim"), out = "second"),
  kthvalue = fe_spec(c(k = "int", dim = "dim"), out = "second"),
  argmax = fe_spec(fe_dim1, out = "index"), argmin = fe_spec(fe_dim1, out = "index"),
  argsort = fe_spec(fe_dim1, out = "index"), nonzero = fe_spec(out = "index"),
  transpose = fe_spec(c(dim0 = "dim", dim1 = "dim")),
  transpose_ = fe_spec(c(dim0 = "dim", dim1 = "dim")),
  swapaxes = fe_spec(c(axis0 = "dim", axis1 = "dim")),
  swapdims = fe_spec(c(dim0 = "dim", dim1 = "dim")),
  movedim = fe_spec(c(source = "dim", destination = "dim")),
  flatten = fe_spec(c(start_dim = "dim", end_dim = "dim")),
  unflatten = fe_spec(c(dim = "dim", sizes = "size")), flip = fe_spec(varargs = "dim"),
  permute = fe_spec(varargs = "dim"), roll = fe_spec(c(shifts = "int", dims = "dim")),
  chunk = fe_spec(c(chunks = "int", dim = "dim")),
  split = fe_spec(c(split_size = "int", dim = "dim")), diff = fe_spec(c(n = "int", dim = "dim")),
  unfold = fe_spec(c(dimension = "dim", size = "int", step = "int")),
  repeat_interleave = fe_spec(c(repeats = "int", dim = "dim")),
  select = fe_spec(c(dim = "dim", index = "position")),
  narrow = fe_spec(c(dim = "dim", start = "position", length = "int")),
  narrow_copy = fe_spec(c(dim = "dim", start = "position", length = "int")),
  index_select = fe_spec(c(dim = "dim", index = "index")),
  gather = fe_spec(c(dim = "dim", index = "index")),
  scatter = fe_spec(c(dim = "dim", index = "index")),
  scatter_ = fe_spec(c(dim = "dim", index = "index")),
  scatter_add = fe_spec(c(dim = "dim", index = "index")),
  scatter_add_ = fe_spec(c(dim = "dim", index = "index")),
  index_add = fe_spec(c(dim = "dim", index = "index")),
  index_add_ = fe_spec(c(dim = "dim", index = "index")),
  index_copy = fe_spec(c(dim = "dim", index = "index")),
  index_copy_ = fe_spec(c(dim = "dim", index = "index")),
  index_fill = fe_spec(c(dim = "dim", index = "index")),
  index_fill_ = fe_spec(c(dim = "dim", index = "index")), view = fe_spec(varargs = "size"),
  reshape = fe_spec(varargs = "size"), expand = fe_spec(varargs = "size", flag = "implicit"),
  `repeat` = fe_spec(varargs = "size"), tile = fe_spec(varargs = "size"),
  new_zeros = fe_spec(varargs = "size"), new_ones = fe_spec(varargs = "size"),
  new_empty = fe_spec(varargs = "size"),
  resize_ = fe_spec(varargs = "size"), new_full = fe_spec(c(size = "size"))
)

# One argument converted by its role.
fe_convert_arg <- function(value, role, name, call) {
  switch(role,
    dim = as_py_dim(value, name, call),
    index = as_py_index_tensor(value, name, call),
    position = as_py_index(value, name, call),
    size = as_py_size(value, arg = name, call = call),
    int = as_py_int(value, name, call),
    dtype = as_py_dtype(value, name, call),
    device = as_py_device(value, name, call),
    as_py_value(value)
  )
}

# An argument without a role: front-end objects unwrapped; R vectors of several numbers become
# tensors (R torch converts them so); single numbers stay Python scalars.
as_py_value <- function(value) {
  if (is.atomic(value) && length(value) != 1L && !is.null(value) && !is.character(value)) {
    return(tpy(torch_tensor(value)))
  }
  unwrap(value)
}

as_py_int <- function(value, arg, call) {
  if (is.double(value) && !anyNA(value) && all(value == trunc(value))) {
    value <- as.integer(value)
    if (length(value) != 1L) value <- as.list(value)
  }
  unwrap(value)
}

# A 1-based position: one number (as a Python int), or several (or a tensor) as a 0-based tensor.
as_py_index <- function(value, arg = "index", call = NULL) {
  if (is.numeric(value) && length(value) == 1L && !is.na(value) && value == trunc(value)) {
    if (value == 0) {
      abort(sprintf("`%s` is 1-based (the first element is 1), but found 0.", arg), call,
            class = "value_error")
    }
    return(as.integer(if (value > 0) value - 1 else value))
  }
  as_py_index_tensor(value, arg, call)
}

# The Python arguments of a call by `spec` (the method's or function's table entry, or NULL).
fe_convert_args <- function(args, spec, call) {
  n <- length(args)
  if (n == 0L) {
    return(args)
  }
  names(args) <- names(args) %||% character(n)
  collapsed <- !is.null(spec$varargs) && any(!nzchar(names(args)))
  if (collapsed) {
    args <- collapse_varargs(args, spec$varargs, call, spec$flag)
  }
  names <- names(args)
  roles <- spec$args
  k <- 0L
  for (i in seq_along(args)) {
    name <- names[[i]]
    if (!nzchar(name)) {
      k <- k + 1L
      if (collapsed && i == 1L) next
      name <- if (k <= length(roles)) names(roles)[[k]] else ""
    }
    value <- args[[i]]
    if (!is.null(value)) {
      args[i] <- list(fe_convert_arg(value, arg_role(name, roles), name, call))
    }
  }
  args
}

# The positional arguments of a varargs method (x$view(2, 3), x$permute(2, 1)) as one size or
# list of dims, first.
# A logical among them is the method's keyword `flag` (x$expand(c(2, 3), TRUE): implicit).
collapse_varargs <- function(args, role, call, flag = NULL) {
  positional <- !nzchar(names(args))
  flags <- positional & vapply(args, is.logical, NA)
  if (!is.null(flag) && any(flags)) {
    value <- args[flags][[1L]]
    args <- args[!flags]
    args[[flag]] <- value
    positional <- !nzchar(names(args))
  }
  given <- args[positional]
  collapsed <- if (length(given) == 1L && inherits(given[[1L]], "torch_dtype")) {
    unwrap(given[[1L]])
  } else if (role == "size") {
    as_py_size(given, call = call)
  } else {
    as_py_dim(unlist(given), "dims", call)
  }
  c(list(collapsed), args[!positional])
}

# The role of the argument `name`: the method's table, else by its name alone.
arg_role <- function(name, roles) {
  if (!nzchar(name)) {
    return("none")
  }
  role <- roles[name][[1L]]
  if (is.null(role) || is.na(role)) role <- default_roles[name][[1L]]
  if (is.null(role) || is.na(role)) "none" else role
}

# The wrapped result with indices made 1-based where the spec says so.
wrap_spec_result <- function(py, spec) {
  out <- spec$out
  if (is.null(out)) {
    return(wrap(py))
  }
  if (out == "index") {
    return(new_torch_tensor(tensor_method("add_")(py, 1L)))
  }
  result <- wrap(py)
  if (is.list(result) && length(result) == 2L) {
    tensor_method("add_")(tpy(result[[2L]]), 1L)
  }
  result
}

# Calls the Python callable `f` with `self` (a Python tensor, or NULL for functions) and the R
# arguments converted by `spec`. A TypeError with whole doubles among the arguments is retried
# with them as integers (PyTorch wants ints where R users write 2, not 2L).
call_by_spec <- function(f, self, args, spec, call) {
  py_args <- fe_convert_args(args, spec, call)
  if (!is.null(self)) py_args <- c(list(self), py_args)
  result <- tryCatch(do.call(f, py_args), error = function(e) e)
  if (inherits(result, "error")) {
    result <- retry_with_ints(f, py_args, result, call)
  }
  wrap_spec_result(result, spec)
}

# After a call failed with `error`: again with whole doubles as ints if PyTorch raised a
# TypeError and there are some; else the error, in R's terms.
retry_with_ints <- function(f, py_args, error, call) {
  wholes <- vapply(py_args, function(a) is.double(a) && is_whole(a), NA)
  info <- reticulate::py_last_error()
  if (!any(wholes) || is.null(info) || !identical(info$type, "TypeError")) {
    return(call_python(stop(error), call))
  }
  py_args[wholes] <- lapply(py_args[wholes], function(a) {
    if (length(a) == 1L) as.integer(a) else as.list(as.integer(a))
  })
  call_python(do.call(f, py_args), call)
}

# R's own methods and fields (those that differ from PyTorch's or need R's conversions).
tensor_r_members <- list(
  ptr = function(self) self,
  shape = function(self) tensor_shape(self),
  is_cuda = function(self) identical(reticulate::py_to_r(tpy(self)$device$type), "cuda"),
  names = function(self) NULL,
  to = function(self) function(...) tensor_to(self, ..., call = sys.call()),
  cuda = function(self) {
    function(device = NULL, non_blocking = FALSE, memory_format = NULL) {
      tensor_to(self, device = device %||% "cuda", non_blocking = non_blocking,
                call = sys.call())
    }
  },
  cpu = function(self) function(memory_format = NULL) tensor_to(self, device = "cpu"),
  float = function(self) function(...) tensor_to(self, dtype = torch_float32()),
  double = function(self) function(...) tensor_to(self, dtype = torch_float64()),
  half = function(self) function(...) tensor_to(self, dtype = torch_float16()),
  bfloat16 = function(self) function(...) tensor_to(self, dtype = torch_bfloat16()),
  long = function(self) function(...) tensor_to(self, dtype = torch_long()),
  int = function(self) function(...) tensor_to(self, dtype = torch_int()),
  bool = function(self) function(...) tensor_to(self, dtype = torch_bool()),
  item = function(self) function() wrap(tensor_method("item")(tpy(self))),
  stride = function(self) {
    function(dim) {
      strides <- as.double(reticulate::py_to_r(.fe$strides(tpy(self))))
      if (missing(dim)) {
        return(strides)
      }
      strides[[as_py_dim(dim, call = sys.call()) %% length(strides) + 1L]]
    }
  },
  max = function(self) {
    function(dim, other, keepdim = FALSE) {
      tensor_extreme(self, "max", dim, other, keepdim, sys.call())
    }
  },
  min = function(self) {
    function(dim, other, keepdim = FALSE) {
      tensor_extreme(self, "min", dim, other, keepdim, sys.call())
    }
  },
  numel = function(self) function() reticulate::py_to_r(tensor_method("numel")(tpy(self))),
  # fields in PyTorch, methods in R torch
  is_sparse = function(self) function() wrap(reticulate::py_get_attr(tpy(self), "is_sparse")),
  is_sparse_csr = function(self) {
    function() wrap(reticulate::py_get_attr(tpy(self), "is_sparse_csr"))
  },
  is_quantized = function(self) {
    function() wrap(reticulate::py_get_attr(tpy(self), "is_quantized"))
  },
  has_names = function(self) function() FALSE,
  backward = function(self) {
    function(...) {
      tensor_call(self, "backward", ...)
      invisible(NULL)
    }
  },
  retain_grad = function(self) {
    function() {
      tensor_call(self, "retain_grad")
      invisible(self)
    }
  },
  # R torch keeps the R attributes (nn_parameter's class, ...) of what is cloned or detached
  clone = function(self) function(...) same_attributes(self, tensor_call(self, "clone", ...)),
  detach = function(self) function(...) same_attributes(self, tensor_call(self, "detach", ...)),
  print = function(self) function(...) print.torch_tensor(self, ...),
  grad_fn = function(self) {
    node <- reticulate::py_get_attr(tpy(self), "grad_fn")
    if (inherits(node, "python.builtin.NoneType")) NULL else new_autograd_node(node)
  },
  register_hook = function(self) {
    function(hook) {
      # the hook sees and returns front-end tensors; PyTorch sees Python ones. A value that
      # is not a tensor leaves the gradient as it is (R torch's rule).
      py_hook <- function(grad) {
        out <- hook(wrap(grad))
        if (is_torch_tensor(out)) tpy(out) else NULL
      }
      call_python(tensor_method("register_hook")(tpy(self), py_hook), sys.call())
    }
  }
)

# A node of the autograd graph (`x$grad_fn`), as R torch's autograd_node: printed as its name,
# `$next_functions` the nodes it feeds gradients to (NULL where an input needs none).
new_autograd_node <- function(py) {
  structure(list(py = py), class = "autograd_node")
}

#' @export
`$.autograd_node` <- function(x, name) {
  py <- .subset2(x, "py")
  switch(name,
    next_functions = {
      edges <- reticulate::py_get_attr(py, "next_functions")
      lapply(seq_len(reticulate::py_len(edges)) - 1L, function(i) {
        node <- reticulate::py_get_item(reticulate::py_get_item(edges, i), 0L)
        if (inherits(node, "python.builtin.NoneType")) NULL else new_autograd_node(node)
      })
    },
    name = function() wrap(py$name()),
    ptr = x,
    wrap(reticulate::py_get_attr(py, name))
  )
}

#' @export
print.autograd_node <- function(x, newline = TRUE, ...) {
  cat(x$name(), if (newline) "\n", sep = "")
  invisible(x)
}

tensor_call <- function(self, name, ...) {
  call_by_spec(tensor_method(name), tpy(self), list(...), method_specs[[name]], sys.call(-1L))
}

same_attributes <- function(self, result) {
  attributes(result) <- attributes(self)
  result
}

# `$max()`/`$min()` as R torch's: the whole tensor's, along `dim` (values and 1-based indices),
# or elementwise against `other` (a tensor or R values), not both.
tensor_extreme <- function(self, name, dim, other, keepdim, call) {
  f <- tensor_method(name)
  if (!missing(dim) && !missing(other)) {
    abort(sprintf("`$%s()` takes `dim` or `other`, not both.", name), call,
          class = "value_error")
  }
  if (!missing(other)) {
    other <- if (is_torch_tensor(other)) tpy(other) else tpy(torch_tensor(other))
    return(new_torch_tensor(call_python(f(tpy(self), other), call)))
  }
  if (missing(dim)) {
    return(new_torch_tensor(call_python(f(tpy(self)), call)))
  }
  call_by_spec(f, tpy(self), list(dim = dim, keepdim = keepdim), method_specs[[name]], call)
}

# `$to()`: R torch's to(dtype, device, other, non_blocking, copy); a device may come first.
tensor_to <- function(self, dtype = NULL, device = NULL, other = NULL, non_blocking = FALSE,
                      copy = FALSE, memory_format = NULL, call = NULL) {
  if (is.character(dtype) && is.null(dtype_aliases[[tolower(dtype)]]) ||
      inherits(dtype, "torch_device")) {
    device <- dtype
    dtype <- NULL
  }
  if (is_torch_tensor(dtype)) {
    other <- dtype
    dtype <- NULL
  }
  py <- tpy(self)
  if (!is.null(other)) {
    return(new_torch_tensor(call_python(py$to(tpy(other), non_blocking = non_blocking,
                                              copy = copy), call)))
  }
  args <- list(dtype = as_py_dtype(dtype, call = call),
               device = as_py_device(device, call = call),
               non_blocking = non_blocking, copy = copy)
  new_torch_tensor(call_python(do.call(tensor_method("to"), c(list(py), args)), call))
}

# The kind of torch.Tensor.<name>: "method", "field", or NULL when there is none; remembered.
.fe_kind <- new.env(parent = emptyenv())
tensor_member_kind <- function(name) {
  kind <- .fe_kind[[name]]
  if (is.null(kind)) {
    m <- tensor_method(name)
    kind <- if (is.null(m)) {
      "none"
    } else if (reticulate::py_to_r(py_builtins()$callable(m))) {
      "method"
    } else {
      "field"
    }
    assign(name, kind, envir = .fe_kind)
  }
  kind
}

#' Methods and fields of tensors
#'
#' `x$name` gives R torch's methods and fields: `$shape`, `$dtype`,
#' `$device`, `$grad`, `$requires_grad`, `$is_leaf` are fields; `$to()`,
#' `$cuda()`, `$cpu()`, `$item()`, `$sum()`, `$mean()`, `$view()`,
#' `$reshape()`, `$t()`, `$mm()`, `$matmul()`, `$argmax()`, `$max()`,
#' `$detach()`, `$backward()`, `$numel()`, `$size()`, `$stride()` and the
#' other methods of PyTorch's tensors are methods, with R torch's
#' conventions: dims count from 1 (`dim = -1` is the last), sizes may be
#' doubles (`x$view(c(2, 3))`), indices taken (`index_add_()`, `gather()`,
#' `select()`, `narrow()`) and returned (`$argmax()`, `$max(dim = )`,
#' `$sort()`) count from 1. `x$requires_grad <- TRUE` and `x$grad <- NULL`
#' set fields.
#' @param x A `torch_tensor`.
#' @param name A method or field name.
#' @param value The new value of the field.
#' @return The field's value, or the method as an R function.
#' @name tensor-methods
#' @examples
#' if (ampkit_available()) {
#'   x <- torch_tensor(matrix(c(1, 5, 3, 2, 4, 6), nrow = 2))
#'   x$shape
#'   x$sum(dim = 1)
#'   x$max(dim = 2)
#'   x$argmax()
#'   x$requires_grad <- TRUE
#'   x$sum()$backward()
#'   x$grad
#' }
NULL

#' @rdname tensor-methods
#' @export
`$.torch_tensor` <- function(x, name) {
  member <- tensor_r_members[[name]]
  if (!is.null(member)) {
    return(member(x))
  }
  kind <- .fe_kind[[name]] %||% tensor_member_kind(name)
  if (kind == "method") {
    f <- .fe_method[[name]]
    spec <- method_specs[[name]]
    if (endsWith(name, "_")) {
      # in place: PyTorch returns the tensor itself, R torch the same R object.
      return(function(...) {
        call_by_spec(f, .subset2(x, "py"), list(...), spec, sys.call())
        x
      })
    }
    function(...) call_by_spec(f, .subset2(x, "py"), list(...), spec, sys.call())
  } else if (kind == "field") {
    wrap(reticulate::py_get_attr(.subset2(x, "py"), name))
  } else {
    abort(sprintf("A torch_tensor has no method or field `%s`.", name), sys.call(),
          class = "value_error")
  }
}

#' @rdname tensor-methods
#' @export
`[[.torch_tensor` <- function(x, name) {
  if (!is.character(name) || length(name) != 1L) {
    abort(sprintf(paste0("`[[` on a tensor takes the name of a method or field, got %s; ",
                         "index elements with `[`, e.g. x[1]."), describe(name)), sys.call(),
          class = "value_error")
  }
  `$.torch_tensor`(x, name)
}

#' @rdname tensor-methods
#' @export
`$<-.torch_tensor` <- function(x, name, value) { # nolint: object_name_linter.
  py <- .subset2(x, "py")
  call <- sys.call()
  switch(name,
    requires_grad = call_python(py$requires_grad_(arg_flag(value, "requires_grad", call)), call),
    grad = ,
    data = call_python(reticulate::py_set_attr(py, name, unwrap(value)), call),
    abort(sprintf(paste0("The field `%s` of a torch_tensor cannot be assigned; ",
                         "`requires_grad`, `grad` and `data` can."), name), call,
          class = "value_error")
  )
  invisible(x)
}

#' @importFrom utils .DollarNames
#' @rdname tensor-methods
#' @export
`[[<-.torch_tensor` <- function(x, name, value) { # nolint: object_name_linter.
  `$<-.torch_tensor`(x, name, value)
}

#' @export
.DollarNames.torch_tensor <- function(x, pattern = "") { # nolint: object_name_linter.
  candidates <- c(names(tensor_r_members), names(method_specs), "shape", "dtype", "device",
                  "grad", "requires_grad", "is_leaf", "backward", "detach", "t", "mm",
                  "matmul", "requires_grad_", "add_", "mul_", "zero_", "copy_", "clone")
  sort(unique(grep(pattern, candidates, value = TRUE)))
}
