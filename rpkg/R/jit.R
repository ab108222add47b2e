#' @include nn-module.R
NULL

# TorchScript from R, R torch's functions over libtorch's tracer, script compiler and modules
# (rpkg/src/jit.cpp). A traced function is an R function of class `script_function` calling the
# traced graph; a traced or loaded module is an nn_module (class `script_module`) whose
# parameters, buffers and submodules are those of a torch::jit::Module, and whose methods are its
# TorchScript methods.

# ---- tracing -----------------------------------------------------------------------------------

#' TorchScript: tracing, compiling, saving and loading
#'
#' `jit_trace(fn, ...)` runs the R function `fn` on the example inputs `...`
#' and records the tensor operations it performs into a TorchScript graph: the
#' result, a `script_function`, runs that graph on new inputs (of other shapes
#' too, where the recorded operations allow). Given an [nn_module()] instance,
#' `jit_trace()` traces its `forward()` (with `respect_mode = TRUE` twice, in
#' training and in evaluation mode, and the traced module runs the graph of its
#' current mode) and returns a `script_module`: an `nn_module` whose
#' parameters, buffers and submodules are the traced module's tensors (shared,
#' not copied), with `$graph`, `$train()`, `$eval()`, `$parameters`,
#' `$state_dict()`, ..., its class's constants as fields (`$k` of Python's
#' `__constants__ = ["k"]`) and `$add_constant(name, value)`.
#' `jit_trace_module(mod, name = inputs, ...)` traces the
#' named methods of a module.
#'
#' Inputs and outputs are tensors or (nested) lists of tensors: an unnamed list
#' is a TorchScript list (a tuple where its elements have no type in common, as
#' `list(x, list(x))`), a named list a dict, a list marked by `jit_tuple()` a
#' tuple; a vector of numbers, flags or strings longer than one is a typed list
#' (`List[int]`, ...). Lists and dicts as outputs need `strict = FALSE`
#' (PyTorch's rule). Tracing records only the operations run on the example
#' inputs: control flow that depends on the data is not recorded.
#'
#' `jit_compile(source)` compiles TorchScript source (Python syntax); its
#' functions are called as `compiled$name(...)`, arguments by position or by
#' their names in the source. A traced function's inputs have no names: its
#' arguments are taken in order, whatever their names (R torch's reading).
#' `jit_save(obj, path)` writes a traced function or a script module in
#' PyTorch's format (Python's `torch.jit.load()` reads it); `jit_load(path)`
#' reads such a file (Python's `torch.jit.save()` wrote it, or `jit_save()`)
#' as a `script_module`. `jit_serialize()` and `jit_unserialize()` do the same
#' with a raw vector; `jit_save_for_mobile()` writes the mobile (lite
#' interpreter) format.
#'
#' @param func An R function of tensors, or an [nn_module()] instance.
#' @param ... `jit_trace()`: the example inputs (unnamed), in the order of
#'   `func`'s arguments. `jit_trace_module()`: the methods to trace, named,
#'   each with its example inputs (a tensor, or a list of them for several
#'   arguments). Other functions: unused.
#' @param strict Whether to refuse lists and dicts as outputs (`TRUE`).
#' @param respect_mode Whether to trace `forward()` both in training and in
#'   evaluation mode (`TRUE`) or only in the module's current mode.
#' @param mod An [nn_module()] instance.
#' @param source TorchScript source code: one or more `def` functions.
#' @param obj A `script_function` or `script_module` (`jit_unserialize()`: a
#'   raw vector from `jit_serialize()`).
#' @param path A file path.
#' @param x A list (`jit_tuple()`) or a number, flag or string (`jit_scalar()`).
#' @return `jit_trace()`: a `script_function`, or a `script_module` for a
#'   module. `jit_trace_module()`, `jit_load()`, `jit_unserialize()`: a
#'   `script_module`. `jit_compile()`: a compilation unit. `jit_save()`,
#'   `jit_save_for_mobile()`: `obj`, invisibly. `jit_serialize()`: a raw
#'   vector. `jit_tuple()`, `jit_scalar()`: `x`, marked.
#' @name jit_trace
#' @examples
#' fn <- function(x) torch_relu(x) * 2
#' tr <- jit_trace(fn, torch_tensor(c(-1, 0, 1)))
#' tr(torch_tensor(c(-2, 3)))
#' tr$graph
#'
#' model <- nn_linear(3, 1)
#' traced <- jit_trace(model, torch_randn(2, 3))
#' traced(torch_ones(1, 3))
#' path <- tempfile(fileext = ".pt")
#' jit_save(traced, path)
#' loaded <- jit_load(path)
#' names(loaded$parameters)
#'
#' comp <- jit_compile("
#' def twice(x):
#'     return x * 2
#' ")
#' comp$twice(torch_tensor(1:3))
NULL

#' @rdname jit_trace
#' @export
jit_trace <- function(func, ..., strict = TRUE, respect_mode = TRUE) {
  inputs <- list(...)
  if (!is.null(names(inputs)) && any(nzchar(names(inputs)))) {
    abort(paste0("The example inputs in `...` must not be named (they are passed in order); ",
                 "got names ", paste0("`", names(inputs)[nzchar(names(inputs))], "`",
                                      collapse = ", "), "."), class = "value_error")
  }
  if (inherits(func, "nn_module_generator")) {
    abort("You must initialize the nn_module before tracing: call its generator first.",
          class = "value_error")
  }
  if (inherits(func, "nn_module")) {
    return(jit_trace_module(func, forward = inputs, strict = strict, respect_mode = respect_mode))
  }
  if (!is.function(func)) {
    abort(sprintf("jit_trace needs a function or nn_module, got %s.", describe(func)),
          class = "value_error")
  }
  check_traceable(inputs, "...")
  strict <- arg_flag(strict, "strict")
  ptr <- .Call(C_jit_trace, function(args) do.call(func, args), inputs, strict, NULL,
               "traced_fn")
  new_script_function(ptr)
}

#' @rdname jit_trace
#' @export
jit_trace_module <- function(mod, ..., strict = TRUE, respect_mode = TRUE) {
  inputs <- list(...)
  if (!is_nn_module(mod)) {
    abort(sprintf("`mod` must be an nn_module instance, got %s.", describe(mod)),
          class = "value_error")
  }
  if (!length(inputs) || is.null(names(inputs)) || !all(nzchar(names(inputs)))) {
    abort("The methods to trace must be named in `...` (e.g. `forward = list(x)`).",
          class = "value_error")
  }
  if (any(c("evalforward", "trainforward") %in% names(inputs))) {
    abort("Methods `evalforward` and `trainforward` are reserved.", class = "value_error")
  }
  strict <- arg_flag(strict, "strict")
  respect_mode <- arg_flag(respect_mode, "respect_mode")
  was_training <- isTRUE(mod$training)
  on.exit(mod$train(was_training), add = TRUE)
  ptr <- script_module_ptr(mod)
  for (name in names(inputs)) {
    method <- mod[[name]]
    if (!is.function(method)) {
      abort(sprintf("Method '%s' does not exist in `mod` and therefore can't be traced.", name),
            class = "value_error")
    }
    args <- inputs[[name]]
    if (!is.list(args) || inherits(args, "jit_tuple")) args <- list(args)
    check_traceable(args, name)
    traced <- function(args) do.call(method, args)
    if (name == "forward" && respect_mode) {
      mod$train(TRUE)
      .Call(C_jit_trace, traced, args, strict, ptr, "trainforward")
      mod$train(FALSE)
      .Call(C_jit_trace, traced, args, strict, ptr, "evalforward")
    } else {
      mod$train(was_training)
      .Call(C_jit_trace, traced, args, strict, ptr, name)
    }
  }
  .Call(C_jit_module_train, ptr, was_training)
  new_script_module(ptr)
}

# Example inputs are tensors or (nested) lists of tensors: anything else is an error naming the
# input (R torch's rule; the tracer has no way to record other values as inputs).
check_traceable <- function(inputs, what) {
  walk <- function(x, where) {
    if (is_torch_tensor(x)) return(invisible())
    if (is.list(x) && !is.object(x) || inherits(x, "jit_tuple")) {
      for (i in seq_along(x)) walk(x[[i]], sprintf("%s[[%d]]", where, i))
      return(invisible())
    }
    abort(sprintf(paste0("Tracing takes tensors or (nested) lists of tensors as inputs: input ",
                         "%s is %s."), where, describe(x)), class = "value_error")
  }
  for (i in seq_along(inputs)) walk(inputs[[i]], sprintf("%d of `%s`", i, what))
}

# The torch::jit::Module holding an R module's tensors (the same tensors, so that the tracer
# records them as the module's attributes), its submodules' likewise.
script_module_ptr <- function(mod) {
  if (inherits(mod, "script_module")) return(module_of(mod)$..ptr..())
  ptr <- .Call(C_jit_module_new, script_class_name(mod), isTRUE(mod$training))
  priv <- .subset2(module_of(mod), ".__enclos_env__")$private
  for (n in names(priv$parameters_)) {
    p <- priv$parameters_[[n]]
    if (!is.null(p)) .Call(C_jit_module_register, ptr, "parameter", n, p)
  }
  for (n in names(priv$buffers_)) {
    b <- priv$buffers_[[n]]
    if (!is.null(b)) .Call(C_jit_module_register, ptr, "buffer", n, b)
  }
  for (n in names(priv$modules_)) {
    .Call(C_jit_module_register, ptr, "module", n, script_module_ptr(priv$modules_[[n]]))
  }
  ptr
}

# The TorchScript class of a module traced from R: its R class, made unique in the session as R
# torch makes it (nn_linear, nn_linear1, nn_linear2, ...), so that graphs print R torch's names.
script_class_names <- new.env(parent = emptyenv())
script_class_name <- function(mod) {
  base <- gsub("[^A-Za-z0-9_]", "_", class(mod)[[1L]])
  if (!grepl("^[A-Za-z_]", base)) base <- paste0("m_", base)
  name <- base
  k <- 0L
  while (exists(name, envir = script_class_names, inherits = FALSE)) {
    k <- k + 1L
    name <- paste0(base, k)
  }
  assign(name, TRUE, envir = script_class_names)
  name
}

# ---- script functions and methods -------------------------------------------------------------

new_script_function <- function(ptr) {
  f <- function(...) .Call(C_jit_call, ptr, list(...))
  class(f) <- "script_function"
  attr(f, "ptr") <- ptr
  f
}

new_script_method <- function(ptr) {
  f <- function(...) .Call(C_jit_call, ptr, list(...))
  class(f) <- "script_method"
  attr(f, "ptr") <- ptr
  f
}

script_graph <- function(text) structure(list(str = text), class = "script_method_graph")

# `$graph`, `$graph_for(...)` (the optimized graph of a run on `...`), `$save(path)`.
script_callable_field <- function(x, name) {
  ptr <- attr(x, "ptr", exact = TRUE)
  switch(name,
    graph = script_graph(.Call(C_jit_graph, ptr, FALSE)),
    graph_for = function(...) {
      x(...)
      script_graph(.Call(C_jit_graph, NULL, TRUE))
    },
    save = function(path) jit_save(x, path),
    save_for_mobile = function(path) jit_save_for_mobile(x, path),
    ptr = ptr,
    NULL
  )
}

#' @export
`$.script_function` <- function(x, name) script_callable_field(x, name)

#' @export
`$.script_method` <- function(x, name) script_callable_field(x, name)

#' @export
print.script_function <- function(x, ...) {
  cat("<script_function>\n")
  invisible(x)
}

#' @export
print.script_method <- function(x, ...) {
  cat("<script_method>\n")
  invisible(x)
}

#' @export
print.script_method_graph <- function(x, ...) {
  cat(x$str)
  invisible(x)
}

# ---- script modules ----------------------------------------------------------------------------

# An nn_module over a torch::jit::Module: its parameters, buffers and submodules are read from
# (and registered into) the TorchScript module; forward() is the module's `forward` method, or
# `trainforward` / `evalforward` by the current mode (a module traced with respect_mode).
nn_ScriptModule <- R6::R6Class( # nolint: object_name_linter.
  classname = "nn_ScriptModule",
  inherit = nn_Module,
  lock_objects = FALSE,
  public = list(
    .classes = c("script_module", "nn_module"),
    initialize = function(ptr) {
      private$ptr <- ptr
      rm(list = c("parameters_", "buffers_", "modules_"), envir = private)
      makeActiveBinding("parameters_", function(value) {
        if (!missing(value)) {
          for (n in names(value)) {
            if (!is.null(value[[n]])) .Call(C_jit_module_register, ptr, "parameter", n, value[[n]])
          }
        }
        lapply(.Call(C_jit_module_info, ptr, "parameters", FALSE), function(p) {
          class(p) <- c(class(p), "nn_parameter")
          p
        })
      }, private)
      makeActiveBinding("buffers_", function(value) {
        if (!missing(value)) {
          for (n in names(value)) {
            if (!is.null(value[[n]])) .Call(C_jit_module_register, ptr, "buffer", n, value[[n]])
          }
        }
        .Call(C_jit_module_info, ptr, "buffers", FALSE)
      }, private)
      makeActiveBinding("modules_", function(value) {
        if (is.null(private$children_)) {
          private$children_ <- lapply(.Call(C_jit_module_info, ptr, "children", FALSE),
                                      new_script_module)
        }
        private$children_
      }, private)
      methods <- .Call(C_jit_module_info, ptr, "methods", FALSE)
      forward <- function(name) new_script_method(.Call(C_jit_module_method, ptr, name))
      private$forward_ <- if ("forward" %in% methods) {
        forward("forward")
      } else if (all(c("trainforward", "evalforward") %in% methods)) {
        train_forward <- forward("trainforward")
        eval_forward <- forward("evalforward")
        function(...) {
          if (.Call(C_jit_module_info, ptr, "training", FALSE)) train_forward(...)
          else eval_forward(...)
        }
      }
      # The other methods (traced with jit_trace_module, or the loaded module's) as `$name()`,
      # and the class's constants (Python's __constants__) as `$name`, as R torch finds them.
      for (name in setdiff(methods, c("forward", "trainforward", "evalforward"))) {
        if (!exists(name, envir = self, inherits = FALSE)) assign(name, forward(name), self)
      }
      constants <- .Call(C_jit_module_info, ptr, "constants", FALSE)
      for (name in names(constants)) {
        if (!exists(name, envir = self, inherits = FALSE)) assign(name, constants[[name]], self)
      }
    },
    add_constant = function(name, value) {
      .Call(C_jit_module_add_constant, private$ptr, name, value)
      assign(name, value, self)
      invisible(self)
    },
    forward = function(...) {
      if (is.null(private$forward_)) {
        abort(paste0("Forward is not defined. Methods from submodules of traced modules are not ",
                     "traced. Are you trying to call from a submodule?"), class = "runtime_error")
      }
      private$forward_(...)
    },
    train = function(mode = TRUE) {
      .Call(C_jit_module_train, private$ptr, arg_flag(mode, "mode"))
      invisible(create_nn_module_callable(self))
    },
    register_parameter = function(name, param) {
      .Call(C_jit_module_register, private$ptr, "parameter", module_key(name), param)
      invisible(self)
    },
    register_buffer = function(name, tensor, persistent = TRUE) {
      if (!arg_flag(persistent, "persistent")) {
        abort("ScriptModule does not support non persistent buffers.", class = "runtime_error")
      }
      .Call(C_jit_module_register, private$ptr, "buffer", module_key(name), tensor)
      invisible(self)
    },
    register_module = function(name, module) {
      if (!inherits(module, "script_module")) {
        abort(sprintf("Script modules can only register script modules as children, got %s.",
                      describe(module)), class = "runtime_error")
      }
      .Call(C_jit_module_register, private$ptr, "module", module_key(name),
            module_of(module)$..ptr..())
      private$children_ <- NULL
      invisible(self)
    },
    graph_for = function(...) {
      self$forward(...)
      script_graph(.Call(C_jit_graph, NULL, TRUE))
    },
    ..ptr.. = function() private$ptr
  ),
  private = list(
    ptr = NULL,
    forward_ = NULL,
    children_ = NULL
  ),
  active = list(
    training = function(value) {
      if (!missing(value)) .Call(C_jit_module_train, private$ptr, arg_flag(value, "training"))
      .Call(C_jit_module_info, private$ptr, "training", FALSE)
    },
    graph = function() {
      methods <- .Call(C_jit_module_info, private$ptr, "methods", FALSE)
      name <- if ("forward" %in% methods) "forward" else if (self$training) "trainforward" else
        "evalforward"
      method <- .Call(C_jit_module_method, private$ptr, name)
      if (is.null(method)) {
        abort("The script module has no forward method.", class = "runtime_error")
      }
      script_graph(.Call(C_jit_graph, method, FALSE))
    }
  )
)

new_script_module <- function(ptr) create_nn_module_callable(nn_ScriptModule$new(ptr))

# ---- saving and loading ------------------------------------------------------------------------

#' @rdname jit_trace
#' @export
jit_save <- function(obj, path, ...) {
  save_script(obj, path, mobile = FALSE)
}

#' @rdname jit_trace
#' @export
jit_save_for_mobile <- function(obj, path, ...) {
  save_script(obj, path, mobile = TRUE)
}

save_script <- function(obj, path, mobile) {
  if (!is.character(path) || length(path) != 1L || is.na(path)) {
    abort(sprintf("`path` must be a file path, got %s.", describe(path)), class = "value_error")
  }
  path <- normalizePath(path, mustWork = FALSE)
  if (inherits(obj, "script_function")) {
    .Call(C_jit_function_save, attr(obj, "ptr", exact = TRUE), path, mobile)
  } else if (inherits(obj, "script_module")) {
    .Call(C_jit_module_save, module_of(obj)$..ptr..(), path, mobile)
  } else {
    abort(sprintf("Only a `script_function` or a `script_module` can be saved, got %s.",
                  describe(obj)), class = "value_error")
  }
  invisible(obj)
}

#' @rdname jit_trace
#' @export
jit_load <- function(path, ...) {
  if (!is.character(path) || length(path) != 1L || is.na(path)) {
    abort(sprintf("`path` must be a file path, got %s.", describe(path)), class = "value_error")
  }
  if (!file.exists(path)) {
    abort(sprintf("`path` names no file: %s.", path), class = "value_error")
  }
  new_script_module(.Call(C_jit_load, normalizePath(path)))
}

#' @rdname jit_trace
#' @export
jit_serialize <- function(obj) {
  if (inherits(obj, "script_module")) {
    return(.Call(C_jit_module_save, module_of(obj)$..ptr..(), NULL, FALSE))
  }
  if (inherits(obj, "script_function")) {
    return(.Call(C_jit_function_save, attr(obj, "ptr", exact = TRUE), NULL, FALSE))
  }
  abort(sprintf("Only a `script_module` or `script_function` can be serialized, got %s.",
                describe(obj)), class = "value_error")
}

#' @rdname jit_trace
#' @export
jit_unserialize <- function(obj) {
  if (!is.raw(obj)) {
    abort(sprintf("`obj` to be deserialized must be a raw vector, got %s.", describe(obj)),
          class = "value_error")
  }
  new_script_module(.Call(C_jit_load, obj))
}

# ---- compiling ---------------------------------------------------------------------------------

#' @rdname jit_trace
#' @export
jit_compile <- function(source) {
  if (!is.character(source) || length(source) < 1L || anyNA(source)) {
    abort(sprintf("`source` must be TorchScript code as a string, got %s.", describe(source)),
          class = "value_error")
  }
  structure(list(ptr = .Call(C_jit_compile, dedent(paste(source, collapse = "\n")))),
            class = "torch_compilation_unit")
}

# Source written indented inside R code: the common indentation of its lines is removed (Python's
# textwrap.dedent), which TorchScript's parser, like Python's, needs.
dedent <- function(text) {
  lines <- strsplit(text, "\n", fixed = TRUE)[[1L]]
  code <- lines[grepl("[^[:space:]]", lines)]
  if (!length(code)) return(paste0(text, "\n"))
  indent <- min(nchar(sub("^([ \t]*).*$", "\\1", code)))
  lines <- ifelse(grepl("[^[:space:]]", lines), substring(lines, indent + 1L), "")
  # The parser wants the last line ended (strsplit() drops a final newline).
  paste0(paste(lines, collapse = "\n"), "\n")
}

#' @export
`$.torch_compilation_unit` <- function(x, name) {
  ptr <- .Call(C_jit_unit_function, .subset2(x, "ptr"), name)
  if (is.null(ptr)) return(NULL)
  new_script_function(ptr)
}

#' @export
`[[.torch_compilation_unit` <- function(x, i, ...) `$.torch_compilation_unit`(x, i)

#' @export
names.torch_compilation_unit <- function(x) .Call(C_jit_unit_function, .subset2(x, "ptr"), NULL)

#' @export
print.torch_compilation_unit <- function(x, ...) {
  cat("<torch_compilation_unit> functions: ", paste(names(x), collapse = ", "), "\n", sep = "")
  invisible(x)
}

# ---- TorchScript values and operators ---------------------------------------------------------

#' @rdname jit_trace
#' @export
jit_tuple <- function(x) {
  if (!is.list(x)) {
    abort(sprintf("`x` must be a list, got %s.", describe(x)), class = "value_error")
  }
  if (!inherits(x, "jit_tuple")) class(x) <- c("jit_tuple", class(x))
  x
}

#' @rdname jit_trace
#' @export
jit_scalar <- function(x) {
  if (!is.atomic(x) || length(x) != 1L) {
    abort(sprintf("`x` must be a number, flag or string of length 1, got %s.", describe(x)),
          class = "value_error")
  }
  if (!inherits(x, "jit_scalar")) class(x) <- c("jit_scalar", class(x))
  x
}

# TorchScript's operators (R torch's internal cpp_jit_* functions and `jit_ops`).
cpp_jit_all_operators <- function() .Call(C_jit_operators, NULL)

cpp_jit_all_schemas_for <- function(name) {
  lapply(.Call(C_jit_operators, name), function(s) structure(s, class = "function_schema"))
}

cpp_jit_operator_info <- function(name) cpp_jit_all_schemas_for(name)[[1L]]

cpp_jit_execute <- function(name, stack) .Call(C_jit_execute, name, stack)

#' TorchScript's operators
#'
#' `jit_ops$<namespace>$<operator>(...)` calls one of TorchScript's operators
#' (libtorch's registry: `aten`, `prim`, ...) on a stack of arguments, with the
#' first overload the arguments fit: tensors, and numbers, flags or strings
#' marked by [jit_scalar()] (an integer for `int` arguments). Printing an
#' operator shows its schema.
#'
#' @format An object of class `torch_ops`.
#' @return Calling an operator: its result, or a list of its results where it
#'   has several.
#' @examples
#' jit_ops$aten$matmul(torch_ones(2, 3), torch_ones(3, 2))
#' jit_ops$aten$split(torch_arange(1, 5), jit_scalar(2L), jit_scalar(0L))
#' jit_ops$aten$relu
#' @export
jit_ops <- structure(list(), class = "torch_ops")

# `jit_ops$<namespace>` is a handle to the namespace (a list holding its name), and
# `jit_ops$<namespace>$<op>` a function calling the operator.
#' @export
`$.torch_ops` <- function(x, name) {
  if (!length(x)) return(structure(list(name), class = "torch_ops"))
  if (is.function(x)) return(NULL)
  op <- paste0(x[[1L]], "::", name)
  f <- function(...) {
    out <- .Call(C_jit_execute, op, list(...))
    if (length(out) == 1L) out[[1L]] else out
  }
  structure(f, class = "torch_ops", opname = op)
}

#' @export
print.torch_ops <- function(x, ...) {
  if (is.function(x)) {
    print(cpp_jit_operator_info(attr(x, "opname", exact = TRUE)))
  } else if (length(x) == 1L) {
    cat("<torch_ops>: Handle to namespace ", x[[1L]], "\n")
  } else {
    cat("Object of class <torch_ops>\n")
  }
  invisible(x)
}

#' @export
print.function_schema <- function(x, ...) {
  describe_args <- function(args) {
    if (!length(args)) return("<none>")
    text <- unlist(args)
    if (!is.null(names(args))) text <- paste(names(args), "-", text)
    paste(text, collapse = ", ")
  }
  cat("function_schema (name = ", x$name, ")\n", sep = "")
  cat("arguments:", describe_args(x$arguments), "\n")
  cat("returns:", describe_args(x$returns), "\n")
  invisible(x)
}
