# R torch's nn_module() over PyTorch (issue 18). A module is what R torch makes it: an R6 object
# (class nn_Module) whose `self$x <- ...` registers parameters, buffers and submodules, handed to
# the user as its forward function with R torch's class vector (c(classname, "nn_module")).
# Each module also holds a real torch.nn.Module (private$py_): PyTorch's own module for the
# built-ins (nn-layers.R), else an ampkit_r_nn.RModule whose forward calls back into the R
# forward. Registration happens on both sides, so that optimizers, state_dict(), `$to()`,
# autocast and DDP see an ordinary torch module, while R code calls the R forward directly.

.nn <- new.env(parent = emptyenv())
.nn$nnf <- list()

# inst/python/ampkit_r_nn.py (convert = FALSE), imported once, after torch (BLAS hook).
nn_py <- function() {
  mod <- .nn$py
  if (is.null(mod)) {
    torch_py()
    mod <- reticulate::import_from_path("ampkit_r_nn", system.file("python", package = "ampkit"),
                                        convert = FALSE)
    .nn$py <- mod
  }
  mod
}

# The Python module torch.nn (convert = FALSE).
torch_nn <- function() {
  mod <- .nn$torch_nn
  if (is.null(mod)) {
    mod <- torch_py()$nn
    .nn$torch_nn <- mod
  }
  mod
}

# A Python result as an R value, for values that are tensors or containers of tensors.
wrap_result <- function(py) wrap(py)

# A Python tensor as an nn_parameter (R torch's class vector for parameters).
as_nn_parameter <- function(py) {
  p <- new_torch_tensor(py)
  class(p) <- c(class(p), "nn_parameter")
  p
}

# nolint start: object_name_linter, cyclocomp_linter. (R torch's name; one R6 class)
nn_Module <- R6::R6Class(
  classname = "nn_Module",
  lock_objects = FALSE,
  public = list(
    initialize = function() invisible(NULL),
    forward = function(...) {
      abort("Forward method is not implemented.", class = "not_implemented_error")
    },
    add_module = function(name, module) {
      self$register_module(name, module)
    },
    register_module = function(name, module) {
      name <- module_key(name)
      if (inherits(module, "nn_module_generator")) {
        abort(sprintf(paste0("Module \"%s\" must be initialized: call the generator, e.g. ",
                             "`nn_linear(10, 1)`."), name), class = "value_error")
      }
      if (!is_nn_module(module)) {
        abort(sprintf("`module` must be an nn_module, got %s.", describe(module)),
              class = "value_error")
      }
      call_python(self$.py_module()$add_module(name, unwrap(module)), call = NULL)
      private$modules_[[name]] <- module
      invisible(self)
    },
    register_parameter = function(name, param) {
      name <- module_key(name)
      if (!is_torch_tensor(param)) {
        abort(sprintf("Parameter \"%s\" must be a tensor, got %s.", name, describe(param)),
              class = "value_error")
      }
      py <- unwrap(param)
      if (!inherits(py, "torch.nn.parameter.Parameter")) {
        py <- torch_nn()$Parameter(py, requires_grad = py$requires_grad)
      }
      call_python(self$.py_module()$register_parameter(name, py), call = NULL)
      private$parameters_[[name]] <- as_nn_parameter(py)
      invisible(self)
    },
    register_buffer = function(name, tensor, persistent = TRUE) {
      name <- module_key(name)
      if (!is_torch_tensor(tensor)) {
        abort(sprintf("Buffer \"%s\" must be a tensor, got %s.", name, describe(tensor)),
              class = "value_error")
      }
      persistent <- arg_flag(persistent, "persistent")
      call_python(self$.py_module()$register_buffer(name, unwrap(tensor), persistent = persistent),
                  call = NULL)
      private$buffers_[[name]] <- new_torch_tensor(unwrap(tensor))
      private$non_persistent_buffers_ <- if (persistent) {
        setdiff(private$non_persistent_buffers_, name)
      } else {
        union(private$non_persistent_buffers_, name)
      }
      invisible(self)
    },
    train = function(mode = TRUE) {
      mode <- arg_flag(mode, "mode")
      self$.py_module()$train(mode)
      invisible(create_nn_module_callable(self))
    },
    eval = function() {
      self$train(FALSE)
    },
    to = function(dtype = NULL, device = NULL, tensor = NULL, non_blocking = FALSE,
                  copy = FALSE, memory_format = NULL) {
      if (!is.null(tensor)) {
        dtype <- tensor$dtype
        device <- tensor$device
      }
      # `$to("cuda")`: a device given in the place of the dtype (R torch's first argument).
      if ((is.character(dtype) && is.null(dtype_aliases[[tolower(dtype[[1L]])]])) ||
          inherits(dtype, "torch_device")) {
        device <- dtype
        dtype <- NULL
      }
      py_dtype <- as_py_dtype(dtype)
      if (!is.null(dtype) && !isTRUE(reticulate::py_to_r(py_dtype$is_floating_point))) {
        abort(sprintf(paste0("nn_module$to() only accepts floating point dtypes, but got ",
                             "desired dtype %s."), format_dtype(py_dtype)),
              class = "value_error")
      }
      call_python(self$.py_module()$to(device = as_py_device(device), dtype = py_dtype,
                                       non_blocking = arg_flag(non_blocking, "non_blocking")),
                  call = NULL)
      self$.sync()
      invisible(create_nn_module_callable(self))
    },
    cuda = function(device = NULL) {
      call_python(self$.py_module()$cuda(device), call = NULL)
      self$.sync()
      invisible(create_nn_module_callable(self))
    },
    cpu = function() {
      call_python(self$.py_module()$cpu(), call = NULL)
      self$.sync()
      invisible(create_nn_module_callable(self))
    },
    state_dict = function(prefix = "", keepvars = FALSE) {
      # wrap(), not py_to_r(): the tensors must stay convert = FALSE.
      out <- wrap(nn_py()$state_dict(self$.py_module(),
                                     keep_vars = arg_flag(keepvars, "keepvars")))
      keys <- as.character(unlist(out[[1L]]))
      values <- out[[2L]]
      names(values) <- paste0(prefix, keys)
      values
    },
    load_state_dict = function(state_dict, ..., .refer_to_state_dict = FALSE) {
      check_state_dict(state_dict)
      own <- names(self$state_dict())
      missing <- setdiff(own, names(state_dict))
      if (length(missing) > 0L) {
        abort(sprintf("Could not find %s in the state_dict.", missing[[1L]]),
              class = "value_error")
      }
      keys <- intersect(names(state_dict), own)
      values <- lapply(state_dict[keys], unwrap)
      call_python(nn_py()$load_state_dict(self$.py_module(), as.list(keys), unname(values)),
                  call = NULL)
      self$.sync()
      invisible(create_nn_module_callable(self))
    },
    zero_grad = function(set_to_none = FALSE) {
      self$.py_module()$zero_grad(set_to_none = arg_flag(set_to_none, "set_to_none"))
      invisible(NULL)
    },
    apply = function(fn) {
      for (module in private$modules_) {
        module$apply(fn)
      }
      fn(create_nn_module_callable(self))
      invisible(create_nn_module_callable(self))
    },
    named_parameters = function(recursive = TRUE) {
      if (recursive) self$parameters else private$parameters_
    },
    named_buffers = function(recursive = TRUE) {
      if (recursive) self$buffers else private$buffers_
    },
    print = function(...) {
      print_nn_module(self, private)
      invisible(self)
    },
    # ampkit's own: the torch.nn.Module behind this module (an RModule made on first use).
    .py_module = function() {
      if (is.null(private$py_)) {
        py <- nn_py()$RModule(class(self)[[1L]])
        self_ <- self
        forward <- function(...) {
          unwrap(do.call(self_$forward, lapply(list(...), wrap)))
        }
        reticulate::py_set_attr(py, "_r_forward", reticulate::r_to_py(forward, convert = FALSE))
        private$py_ <- py
      }
      private$py_
    },
    # The built-ins: this module is PyTorch's module `py`.
    .set_py = function(py) {
      private$py_ <- py
      private$call_ <- py$`__call__`
      self$.sync()
      invisible(self)
    },
    # Re-reads this module's (and its submodules') parameters and buffers from Python, after
    # PyTorch replaced them ($to() makes new buffer tensors).
    .sync = function() {
      local <- wrap(nn_py()$local_tensors(self$.py_module()))
      params <- lapply(local[[2L]], function(p) as_nn_parameter(unwrap(p)))
      names(params) <- as.character(unlist(local[[1L]]))
      buffers <- local[[4L]]
      names(buffers) <- as.character(unlist(local[[3L]]))
      private$parameters_ <- params
      private$buffers_ <- buffers
      for (module in private$modules_) {
        module$.sync()
      }
      invisible(self)
    }
  ),
  private = list(
    py_ = NULL,
    call_ = NULL, # py_'s __call__ (an R function; the module object itself is not one)
    parameters_ = list(),
    buffers_ = list(),
    modules_ = list(),
    non_persistent_buffers_ = character(),
    # Calls the Python module with the arguments unwrapped; the built-ins' forward.
    .forward_py = function(...) {
      args <- lapply(list(...), unwrap)
      wrap(call_python(do.call(private$call_, args), call = NULL))
    }
  ),
  active = list(
    training = function(value) {
      if (!missing(value)) {
        if (!(is.logical(value) && length(value) == 1L && !is.na(value))) {
          abort("Field `training` must be a logical flag.", class = "value_error")
        }
        reticulate::py_set_attr(self$.py_module(), "training", value)
      }
      reticulate::py_to_r(self$.py_module()$training)
    },
    parameters = function(value) {
      if (!missing(value)) {
        abort(paste0("It's not possible to modify the parameters list. You can modify the ",
                     "parameter in-place or use `module$parameter_name <- new_value`."),
              class = "runtime_error")
      }
      pars <- lapply(private$modules_, function(x) x$parameters)
      pars <- append(pars, list(private$parameters_))
      pars <- unlist_named(pars)
      # Shared parameters once (a tied weight is one Python Parameter in two modules).
      pars[!duplicated(vapply(pars, function(p) reticulate::py_id(unwrap(p)), ""))]
    },
    buffers = function(value) {
      if (!missing(value)) {
        abort("It's not possible to modify the buffers list.", class = "runtime_error")
      }
      bufs <- lapply(private$modules_, function(x) x$buffers)
      bufs <- append(bufs, list(private$buffers_))
      bufs <- unlist_named(bufs)
      bufs[!duplicated(vapply(bufs, function(p) reticulate::py_id(unwrap(p)), ""))]
    },
    modules = function(value) {
      if (!missing(value)) {
        abort("It's not possible to modify the modules list.", class = "runtime_error")
      }
      mods <- c(list(create_nn_module_callable(self)),
                unlist(lapply(unname(private$modules_), function(x) x$modules),
                       recursive = FALSE))
      instances <- lapply(mods, function(x) attr(x, "module"))
      mods[!duplicated(instances)]
    },
    children = function(value) {
      if (!missing(value)) {
        abort("It's not possible to modify the children list.", class = "runtime_error")
      }
      private$modules_
    }
  )
)
# nolint end

# list(child = list(a = p1), list(w = p2)) -> list(child.a = p1, w = p2): R torch's names.
unlist_named <- function(x) {
  out <- list()
  for (i in seq_along(x)) {
    prefix <- names(x)[i]
    items <- x[[i]]
    if (length(items) == 0L) next
    if (!is.null(prefix) && nzchar(prefix)) {
      names(items) <- paste0(prefix, ".", names(items))
    }
    out <- c(out, items)
  }
  out
}

module_key <- function(name) { # nolint: cyclocomp_linter.
  if (is.numeric(name) && length(name) == 1L && !is.na(name)) {
    name <- as.character(name)
  }
  if (!is.character(name) || length(name) != 1L || is.na(name) || !nzchar(name)) {
    abort(sprintf("`name` must be a non-empty string, got %s.", describe(name)),
          class = "value_error")
  }
  name
}

format_dtype <- function(py_dtype) {
  paste0("torch_", dtype_r_names[[dtype_key(py_dtype)]] %||% dtype_key(py_dtype))
}

check_state_dict <- function(state_dict) {
  ok <- is.list(state_dict) && (length(state_dict) == 0L || !is.null(names(state_dict))) &&
    all(vapply(state_dict, is_torch_tensor, logical(1)))
  if (!ok) {
    abort(sprintf(paste0("`state_dict` must be a named list of tensors, as `$state_dict()` ",
                         "or `torch_load()` return, got %s."), describe(state_dict)),
          class = "value_error")
  }
}

print_nn_module <- function(self, private) {
  count <- sum(vapply(self$parameters, function(p) prod(p$shape), numeric(1)))
  cat("An `nn_module` containing ", format(count, big.mark = ",", scientific = FALSE),
      " parameters.\n", sep = "")
  if (length(private$modules_) > 0L) {
    cat("\n-- Modules --\n")
    for (name in names(private$modules_)) {
      m <- private$modules_[[name]]
      n <- sum(vapply(m$parameters, function(p) prod(p$shape), numeric(1)))
      cat("* ", name, ": <", class(m)[[1L]], "> #", format(n, big.mark = ","),
          " parameters\n", sep = "")
    }
  }
  if (length(private$parameters_) > 0L) {
    cat("\n-- Parameters --\n")
    for (name in names(private$parameters_)) {
      p <- private$parameters_[[name]]
      cat("* ", name, ": ", format_tensor_brief(p), "\n", sep = "")
    }
  }
  if (length(private$buffers_) > 0L) {
    cat("\n-- Buffers --\n")
    for (name in names(private$buffers_)) {
      cat("* ", name, ": ", format_tensor_brief(private$buffers_[[name]]), "\n", sep = "")
    }
  }
}

format_tensor_brief <- function(t) {
  py <- unwrap(t)
  shape <- as.integer(unlist(wrap(nn_py()$shape_of(py))))
  paste0(sub("^torch_", "", format_dtype(py$dtype)), " [", paste0("1:", shape, collapse = ", "),
         "]")
}

#' Parameters and buffers of a module
#'
#' `nn_parameter()` marks a tensor as a parameter of an [nn_module()]: assigned
#' with `self$name <- nn_parameter(x)` in `initialize`, it is registered, listed
#' in `$parameters` and the state dict, and trained by optimizers.
#' `nn_buffer()` marks a tensor as a buffer: registered and saved in the state
#' dict (unless `persistent = FALSE`), moved by `$to()`, but not trained.
#'
#' As in PyTorch, the parameter is a new tensor object sharing `x`'s storage
#' (R torch marks `x` itself).
#'
#' @param x A tensor.
#' @param requires_grad Whether the parameter requires gradients.
#' @param persistent Whether the buffer is part of the state dict.
#' @return The tensor, with class `"nn_parameter"` or `"nn_buffer"` added.
#' @export
#' @examples
#' if (ampkit_available()) {
#'   scale <- nn_module(
#'     initialize = function(n) {
#'       self$w <- nn_parameter(torch_ones(n))
#'       self$calls <- nn_buffer(torch_zeros(1))
#'     },
#'     forward = function(x) x * self$w
#'   )
#'   m <- scale(3)
#'   names(m$parameters)
#'   names(m$state_dict())
#' }
nn_parameter <- function(x, requires_grad = TRUE) {
  if (!is_torch_tensor(x)) {
    abort(sprintf("`x` must be a tensor, got %s.", describe(x)), class = "value_error")
  }
  requires_grad <- arg_flag(requires_grad, "requires_grad")
  py <- call_python(torch_nn()$Parameter(unwrap(x), requires_grad = requires_grad), call = NULL)
  as_nn_parameter(py)
}

#' @rdname nn_parameter
#' @export
is_nn_parameter <- function(x) inherits(x, "nn_parameter")

#' @rdname nn_parameter
#' @export
nn_buffer <- function(x, persistent = TRUE) {
  if (!is_torch_tensor(x)) {
    abort(sprintf("`x` must be a tensor, got %s.", describe(x)), class = "value_error")
  }
  class(x) <- c(class(x), "nn_buffer")
  attr(x, "persistent") <- arg_flag(persistent, "persistent")
  x
}

#' @rdname nn_parameter
#' @export
is_nn_buffer <- function(x) inherits(x, "nn_buffer")

#' @rdname nn_module
#' @export
is_nn_module <- function(x) {
  inherits(x, "nn_module") && !inherits(x, "nn_module_generator")
}

get_inherited_classes <- function(inherit) {
  classes <- inherit$public_fields$.classes
  classes[!classes %in% c("nn_Module", "R6ClassGenerator", "nn_module_generator", "nn_module")]
}

get_init <- function(generator) {
  init <- generator$public_methods$initialize
  if (!is.null(init)) {
    return(init)
  }
  get_init(generator$get_inherit())
}

#' Define a neural network module
#'
#' R torch's `nn_module()`: `initialize` builds the module (assign submodules,
#' [nn_parameter()]s and [nn_buffer()]s to `self$name`; they are registered),
#' `forward` computes with them; other arguments in `...` become methods or
#' fields. The result is a generator: calling it with `initialize`'s arguments
#' gives a module, which is called like a function (its forward). Modules have
#' class `c(classname, "nn_module")`.
#'
#' Each module is also a real `torch.nn.Module` in Python (optimizers, state
#' dicts, autocast and DDP see it as one); a module defined in R runs its R
#' forward, also when Python calls it.
#'
#' @section Methods and fields of a module:
#' \describe{
#'   \item{`$parameters`, `$buffers`}{Named lists of all parameters / buffers,
#'     submodules' included (names such as `"fc1.weight"`).}
#'   \item{`$named_parameters(recursive = TRUE)`, `$named_buffers()`}{The same
#'     as methods; `recursive = FALSE` for this module's own only.}
#'   \item{`$modules`, `$children`}{All modules (this one first), and the
#'     direct submodules by name.}
#'   \item{`$train(mode = TRUE)`, `$eval()`, `$training`}{Training mode.}
#'   \item{`$state_dict()`, `$load_state_dict(state_dict)`}{A named list of
#'     tensors (keys 0-based for [nn_sequential()], as in R torch and PyTorch),
#'     and loading one (a key missing from it is an error; extra keys are
#'     ignored, as in R torch).}
#'   \item{`$to(dtype = , device = )`, `$cuda()`, `$cpu()`}{Move or cast the
#'     parameters and buffers (floating-point dtypes only).}
#'   \item{`$zero_grad()`, `$apply(fn)`, `$register_parameter()`,
#'     `$register_buffer()`, `$add_module()`, `$register_module()`}{As in R
#'     torch.}
#' }
#'
#' @param classname The module's class name.
#' @param inherit A module generator to inherit from.
#' @param ... Methods and fields: `initialize`, `forward`, others.
#' @param private,active Passed to [R6::R6Class()].
#' @param parent_env The environment the methods are defined in.
#' @param x An object.
#' @return `nn_module()`: a module generator (class
#'   `c(classname, "nn_module", "nn_module_generator")`). `is_nn_module()`:
#'   whether `x` is a module (not a generator).
#' @export
#' @examples
#' if (ampkit_available()) {
#'   net <- nn_module(
#'     "net",
#'     initialize = function(n_in, n_hidden) {
#'       self$fc1 <- nn_linear(n_in, n_hidden)
#'       self$fc2 <- nn_linear(n_hidden, 1)
#'     },
#'     forward = function(x) {
#'       x <- nnf_relu(self$fc1(x))
#'       self$fc2(x)
#'     }
#'   )
#'   model <- net(4, 8)
#'   class(model)
#'   names(model$parameters)
#'   model(torch_randn(2, 4))$shape
#' }
nn_module <- function(classname = NULL, inherit = nn_Module, ..., private = NULL,
                      active = NULL, parent_env = parent.frame()) {
  if (inherits(inherit, "nn_module")) {
    inherit <- attr(inherit, "module")
  }
  e <- new.env(parent = parent_env)
  e$inherit <- inherit
  classes <- c(classname, get_inherited_classes(inherit), "nn_module")
  Module <- R6::R6Class( # nolint: object_name_linter.
    classname = classname,
    inherit = inherit,
    lock_objects = FALSE,
    public = list(.classes = classes, ...),
    private = private,
    active = active,
    parent_env = e
  )
  init <- get_init(Module)
  fun <- rlang::new_function(
    args = rlang::fn_fmls(init),
    body = rlang::expr({
      instance <- Module$new(!!!rlang::fn_fmls_syms(init))
      instance$.py_module()
      create_nn_module_callable(instance)
    })
  )
  attr(fun, "class") <- c(classes, "nn_module_generator")
  attr(fun, "module") <- Module
  fun
}

create_nn_module_callable <- function(instance) {
  f <- instance$forward
  attr(f, "class") <- instance$.classes
  attr(f, "module") <- instance
  f
}

#' @export
`$.nn_module` <- function(x, name) {
  attr(x, "module")[[name]]
}

#' @export
`[[.nn_module` <- function(x, i) {
  attr(x, "module")[[i]]
}

#' @export
`$<-.nn_module` <- function(x, name, value) { # nolint: object_name_linter.
  module <- attr(x, "module")
  module[[name]] <- value
  invisible(x)
}

#' @export
`[[<-.nn_module` <- `$<-.nn_module`

#' @export
`$.nn_Module` <- function(x, name) { # nolint: object_name_linter.
  x[[name]]
}

#' @export
`[[.nn_Module` <- function(x, i) { # nolint: cyclocomp_linter. (R torch's lookup order)
  if (identical(i, ".__enclos_env__")) {
    return(.subset2(x, i))
  }
  private <- .subset2(x, ".__enclos_env__")$private
  if (is.numeric(i)) {
    return(private$modules_[[i]])
  }
  if (!is.null(private)) {
    o <- private$parameters_[[i]]
    if (!is.null(o)) {
      return(o)
    }
    o <- private$buffers_[[i]]
    if (!is.null(o)) {
      return(o)
    }
    o <- private$modules_[[i]]
    if (!is.null(o)) {
      return(o)
    }
  }
  o <- .subset2(x, i)
  if (is.null(o) && !is.null(private$py_) && !startsWith(i, ".")) {
    # The built-ins' settings are their PyTorch module's attributes (`fc$in_features`).
    o <- py_module_field(private$py_, i)
  }
  o
}

# A Python module's attribute `name` as an R value (NULL when it has none); a tuple of numbers
# (kernel_size) as a numeric vector.
py_module_field <- function(py, name) {
  if (!reticulate::py_has_attr(py, name)) {
    return(NULL)
  }
  value <- wrap(reticulate::py_get_attr(py, name))
  if (is.list(value) && length(value) > 0L &&
      all(vapply(value, function(e) is.numeric(e) && length(e) == 1L, logical(1)))) {
    value <- unlist(value)
  }
  value
}

#' @export
`[[<-.nn_Module` <- function(x, i, value) {
  private <- .subset2(x, ".__enclos_env__")$private
  if (inherits(value, "nn_parameter")) {
    x$register_parameter(i, value)
  } else if (inherits(value, "nn_buffer")) {
    x$register_buffer(i, value, attr(value, "persistent") %||% TRUE)
  } else if (is_nn_module(value)) {
    x$add_module(i, value)
  } else if (!is.null(private$buffers_[[i]]) && is_torch_tensor(value)) {
    x$register_buffer(i, value, !i %in% private$non_persistent_buffers_)
  } else if (!is.null(private$parameters_[[i]])) {
    abort(sprintf(paste0("Cannot assign %s as parameter \"%s\": wrap it in nn_parameter() ",
                         "(or assign NULL to a new name)."), describe(value), i),
          class = "value_error")
  } else {
    assign(i, value, envir = x)
  }
  invisible(x)
}

#' @export
`$<-.nn_Module` <- function(x, name, value) { # nolint: object_name_linter.
  x[[name]] <- value
  invisible(x)
}

#' @export
print.nn_module <- function(x, ...) {
  attr(x, "module")$print()
  invisible(x)
}

#' @export
names.nn_module <- function(x) {
  ls(attr(x, "module"), all.names = FALSE)
}

#' @export
unwrap.nn_module <- function(x) { # nolint: object_name_linter.
  attr(x, "module")$.py_module()
}

#' @export
unwrap.nn_Module <- function(x) { # nolint: object_name_linter.
  x$.py_module()
}
