# R torch's modules, in R over native tensors. A module is an R6 object (class nn_Module) whose
# `self$x <- ...` registers parameters (nn_parameter), buffers (nn_buffer) and submodules; the
# user holds a callable: a function that calls the instance's forward, with R torch's class
# vector (c(classname, "nn_module")) and the instance in its "module" attribute. Calling it runs
# the instance's current forward, so that a precision policy or the overflow locator may wrap
# forward in place and every reference sees it.

#' Parameters and buffers
#'
#' `nn_parameter(x)` marks a tensor as a module's parameter (assigned as
#' `self$w <- nn_parameter(...)` in `initialize`); `nn_buffer(x)` as a buffer
#' (state that is not trained, such as batch norm's running mean; saved in the
#' state dict unless `persistent = FALSE`).
#' @param x A tensor.
#' @param requires_grad Whether the parameter is trained.
#' @param persistent Whether the buffer is part of the state dict.
#' @return The tensor, marked.
#' @name nn_parameter
#' @examples
#' p <- nn_parameter(torch_zeros(3))
#' is_nn_parameter(p)
#' p$requires_grad
NULL

#' @rdname nn_parameter
#' @export
nn_parameter <- function(x, requires_grad = TRUE) {
  if (!is_torch_tensor(x)) {
    abort(sprintf("`x` must be a tensor, got %s.", describe(x)), class = "value_error")
  }
  x$requires_grad_(requires_grad)
  if (!inherits(x, "nn_parameter")) class(x) <- c(class(x), "nn_parameter")
  x
}

#' @rdname nn_parameter
#' @export
is_nn_parameter <- function(x) inherits(x, "nn_parameter")

#' @rdname nn_parameter
#' @export
nn_buffer <- function(x, persistent = TRUE) {
  if (!inherits(x, "nn_buffer")) class(x) <- c(class(x), "nn_buffer")
  attr(x, "persistent") <- persistent
  x
}

#' @rdname nn_parameter
#' @export
is_nn_buffer <- function(x) inherits(x, "nn_buffer")

# nolint start: object_name_linter. (R torch's name; one R6 class)
nn_Module <- R6::R6Class(
  classname = "nn_Module",
  lock_objects = FALSE,
  public = list(
    initialize = function() invisible(NULL),
    forward = function(...) {
      abort("Forward method is not implemented.", class = "not_implemented_error")
    },
    add_module = function(name, module) self$register_module(name, module),
    register_module = function(name, module) {
      name <- module_key(name)
      if (inherits(module, "nn_module_generator")) {
        abort(sprintf(paste0("Module \"%s\" must be initialized: call the generator, e.g. ",
                             "`nn_linear(10, 1)`."), name), class = "value_error")
      }
      if (!is_nn_module(module)) {
        # R torch's words ("but got object of type"), which its users' code may match.
        abort(sprintf("`module` must be an nn_module, but got object of type %s.",
                      describe(module)), class = "value_error")
      }
      private$modules_[[name]] <- module
      invisible(self)
    },
    register_parameter = function(name, param) {
      name <- module_key(name)
      if (!is.null(param) && !is_torch_tensor(param)) {
        abort(sprintf("Parameter \"%s\" must be a tensor, got %s.", name, describe(param)),
              class = "value_error")
      }
      if (!is.null(param) && !is_nn_parameter(param)) param <- nn_parameter(param)
      private$parameters_[name] <- list(param)
      invisible(self)
    },
    register_buffer = function(name, tensor, persistent = TRUE) {
      name <- module_key(name)
      persistent <- arg_flag(persistent, "persistent")
      private$buffers_[name] <- list(tensor)
      private$non_persistent_buffers_ <- if (persistent) {
        setdiff(private$non_persistent_buffers_, name)
      } else {
        union(private$non_persistent_buffers_, name)
      }
      invisible(self)
    },
    train = function(mode = TRUE) {
      mode <- arg_flag(mode, "mode")
      private$training_ <- mode
      for (m in private$modules_) module_of(m)$train(mode)
      invisible(create_nn_module_callable(self))
    },
    eval = function() self$train(FALSE),
    # Applies `fn` to every parameter and buffer (recursively). A parameter stays the same R
    # object with fn's result as its data (PyTorch's `param.data = fn(param)`), so a weight tied
    # between two modules stays one parameter and an optimizer made before keeps training it;
    # where the data cannot be swapped (another kind of tensor), a new parameter takes its place.
    # Its gradient follows the same way. Where `fn` gives the tensor itself (a `$to()` to where
    # it already is), nothing changes.
    .apply = function(fn) {
      for (m in private$modules_) module_of(m)$.apply(fn)
      for (name in names(private$parameters_)) {
        p <- private$parameters_[[name]]
        if (is.null(p)) next
        new <- with_no_grad(fn(p))
        grad <- p$grad
        if (!same_impl(new, p)) {
          if (swappable(p, new)) {
            with_no_grad(p$set_data(new))
          } else {
            p <- nn_parameter(new$detach(), p$requires_grad)
            private$parameters_[[name]] <- p
          }
        }
        if (!is_undefined_tensor(grad)) {
          new_grad <- with_no_grad(fn(grad))
          if (same_impl(new_grad, grad)) next
          if (same_impl(p$grad, grad) && swappable(grad, new_grad)) {
            with_no_grad(grad$set_data(new_grad))
          } else {
            p$set_grad_(new_grad)
          }
        }
      }
      for (name in names(private$buffers_)) {
        b <- private$buffers_[[name]]
        if (is.null(b)) next
        new <- with_no_grad(fn(b))
        if (same_impl(new, b)) next
        private$buffers_[[name]] <- nn_buffer(new, attr(b, "persistent") %||% TRUE)
      }
      invisible(create_nn_module_callable(self))
    },
    to = function(dtype = NULL, device = NULL, tensor = NULL, non_blocking = FALSE,
                  copy = FALSE, memory_format = NULL) {
      if (!is.null(tensor)) {
        dtype <- tensor$dtype
        device <- tensor$device
      }
      # `$to("cuda")`: a device in the place of the dtype (R torch's first argument).
      if ((is.character(dtype) && !tolower(dtype[[1L]]) %in% names(dtype_aliases)) ||
          is_torch_device(dtype)) {
        device <- dtype
        dtype <- NULL
      }
      dtype <- as_torch_dtype(dtype)
      if (!is.null(dtype) && !dtype_info(dtype)[[2L]] && !dtype_info(dtype)[[3L]]) {
        abort(paste0("nn.Module.to only accepts floating point or complex dtypes, but got ",
                     "desired dtype=", as.character(dtype)), class = "value_error")
      }
      self$.apply(function(x) {
        if (!is.null(dtype) && (x$is_floating_point() || x$is_complex())) {
          x$to(dtype = dtype, device = device, non_blocking = non_blocking, copy = copy)
        } else {
          x$to(device = device, non_blocking = non_blocking, copy = copy)
        }
      })
    },
    cuda = function(device = NULL) self$to(device = if (is.null(device)) "cuda" else device),
    cpu = function() self$to(device = "cpu"),
    apply = function(fn) {
      for (m in private$modules_) module_of(m)$apply(fn)
      fn(create_nn_module_callable(self))
      invisible(create_nn_module_callable(self))
    },
    # R torch's module zero_grad() zeroes the gradients in place (its optimizers' may set them to
    # NULL with `set_to_none = TRUE`).
    zero_grad = function(set_to_none = FALSE) {
      .Call(C_zero_grad, unname(self$parameters), arg_flag(set_to_none, "set_to_none"))
      invisible(self)
    },
    named_parameters = function(recursive = TRUE) {
      if (arg_flag(recursive, "recursive")) self$parameters else private$parameters_
    },
    named_buffers = function(recursive = TRUE) {
      if (arg_flag(recursive, "recursive")) self$buffers else private$buffers_
    },
    # Parameters and persistent buffers, the module's own first, then its submodules' (R torch's
    # and PyTorch's order). Without `keepvars`, each is detached: a plain tensor sharing the
    # storage, outside the graph, no longer marked as a parameter or buffer, that keeps the
    # requires_grad flag (R torch's rule: a saved and reloaded state dict knows which were
    # trained).
    state_dict = function(prefix = "", keepvars = FALSE) {
      out <- list()
      for (name in names(private$parameters_)) {
        p <- private$parameters_[[name]]
        if (!is.null(p)) out[[paste0(prefix, name)]] <- if (keepvars) p else detached_entry(p)
      }
      for (name in setdiff(names(private$buffers_), private$non_persistent_buffers_)) {
        b <- private$buffers_[[name]]
        if (!is.null(b)) out[[paste0(prefix, name)]] <- if (keepvars) b else detached_entry(b)
      }
      for (name in names(private$modules_)) {
        out <- c(out, module_of(private$modules_[[name]])$state_dict(
          prefix = paste0(prefix, name, "."), keepvars = keepvars))
      }
      out
    },
    load_state_dict = function(state_dict, ..., .refer_to_state_dict = FALSE) {
      check_dots_empty()
      if (inherits(state_dict, "python.builtin.object")) {
        state_dict <- py_state_dict_to_r(state_dict)
      }
      keys <- names(state_dict)
      if (!is.list(state_dict) || (length(state_dict) && (is.null(keys) || !all(nzchar(keys))))) {
        abort(sprintf("`state_dict` must be a named list of tensors, got %s.",
                      describe(state_dict)), class = "value_error")
      }
      refer <- arg_flag(.refer_to_state_dict, ".refer_to_state_dict")
      # Every key and shape is checked before anything is loaded: an error leaves the module as
      # it was, not half loaded.
      private$load_from(state_dict, "", refer, check = TRUE)
      private$load_from(state_dict, "", refer, check = FALSE)
      invisible(create_nn_module_callable(self))
    },
    register_forward_hook = function(hook) add_forward_hook(self, hook, pre = FALSE),
    register_forward_pre_hook = function(hook) add_forward_hook(self, hook, pre = TRUE),
    # R torch's print: the number of parameters (their elements), then the submodules, the
    # parameters and the buffers of this module.
    print = function(...) {
      cat("An `nn_module` containing ", format_count(parameter_count(self)), " parameters.\n",
          sep = "")
      if (length(private$modules_)) {
        cat("\n\u2500\u2500 Modules ", strrep("\u2500", 49L), "\n", sep = "")
        for (name in names(private$modules_)) {
          m <- private$modules_[[name]]
          cat("\u2022 ", name, ": <", class(m)[[1L]], "> #", format_count(parameter_count(m)),
              " parameters\n", sep = "")
        }
      }
      for (kind in c("Parameters", "Buffers")) {
        tensors <- Filter(Negate(is.null), if (kind == "Buffers") private$buffers_ else
          private$parameters_)
        if (length(tensors)) {
          cat("\n\u2500\u2500 ", kind, " ", strrep("\u2500", 58L - nchar(kind)), "\n", sep = "")
          for (name in names(tensors)) {
            cat("\u2022 ", name, ": ", format_tensor_type(tensors[[name]]), "\n", sep = "")
          }
        }
      }
      invisible(self)
    },
    .classes = NULL
  ),
  private = list(
    training_ = TRUE,
    parameters_ = list(),
    buffers_ = list(),
    modules_ = list(),
    non_persistent_buffers_ = character(),
    forward_hooks_ = list(),
    load_from = function(state_dict, prefix, refer, check) {
      own <- c(names(private$parameters_),
               setdiff(names(private$buffers_), private$non_persistent_buffers_))
      for (name in own) {
        key <- paste0(prefix, name)
        is_param <- name %in% names(private$parameters_)
        target <- if (is_param) private$parameters_[[name]] else private$buffers_[[name]]
        # Registered as NULL (a missing bias): nothing to load, and none in the state dict (R
        # torch's rule).
        if (is.null(target)) next
        value <- state_dict[[key]]
        if (is.null(value)) {
          if (grepl("num_batches_tracked$", name)) next
          abort(sprintf("Could not find %s in the state_dict.", key), class = "value_error")
        }
        if (!is_torch_tensor(value)) value <- torch_tensor(value)
        # A module restored by readRDS() has tensors that no longer exist: loading a state dict
        # gives it new ones (R torch's way to repair such a module).
        lost <- !is.null(target) && !isTRUE(meta(target, "defined"))
        if (check) {
          # PyTorch's rule and words (R torch's copy_() would broadcast a smaller tensor). One
          # value of shape (1) and of none are the same value: R torch's num_batches_tracked
          # has shape (1), PyTorch's none, and PyTorch's batch norm state dicts load.
          if (!lost && !identical(value$shape, target$shape) && length(value$shape) <= 1L &&
                length(target$shape) <= 1L && length(value) == 1L && length(target) == 1L) {
            value <- value$reshape_as(target)
          }
          if (!lost && !identical(value$shape, target$shape)) {
            abort(sprintf(paste0("size mismatch for %s: copying a param with shape (%s) from ",
                                 "checkpoint, the shape in current model is (%s)."),
                          key, toString(value$shape), toString(target$shape)),
                  class = "runtime_error")  # PyTorch's RuntimeError
          }
        } else if (refer || lost) {
          if (is_param) {
            trained <- if (lost) TRUE else target$requires_grad
            private$parameters_[[name]] <- nn_parameter(if (lost) value$clone() else value,
                                                        trained)
          } else {
            private$buffers_[[name]] <- value
          }
        } else {
          with_no_grad(target$copy_(value))
        }
      }
      for (name in names(private$modules_)) {
        .subset2(module_of(private$modules_[[name]]), ".__enclos_env__")$private$load_from(
          state_dict, paste0(prefix, name, "."), refer, check)
      }
    }
  ),
  active = list(
    training = function(value) {
      if (!missing(value)) {
        if (!is.logical(value) || length(value) != 1L || is.na(value)) {
          abort(sprintf("Field `training` must be a logical flag, got %s.", describe(value)),
                class = "value_error")
        }
        private$training_ <- value
      }
      private$training_
    },
    # The submodules' parameters, then the module's own (R torch's order); a tensor reached
    # under several names (a tied weight) once, under its first.
    parameters = function(value, recursive = TRUE) {
      if (!missing(value)) {
        abort(paste0("It's not possible to modify the parameters list. Modify a parameter in ",
                     "place, or assign it: `module$name <- nn_parameter(...)`."),
              class = "runtime_error")
      }
      unique_tensors(module_tensors(private, "parameters_"))
    },
    buffers = function(value) {
      if (!missing(value)) {
        abort("It's not possible to modify the buffers list.", class = "runtime_error")
      }
      unique_tensors(module_tensors(private, "buffers_"))
    },
    modules = function(value) {
      if (!missing(value)) {
        abort("It's not possible to modify the modules list.", class = "runtime_error")
      }
      out <- list(create_nn_module_callable(self))
      for (m in private$modules_) out <- c(out, module_of(m)$modules)
      # A module reached under several names once (R torch compares the R6 instances).
      instances <- lapply(out, module_of)
      out[!duplicated(instances)]
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

# A module's tensors of one kind (`kind`: "parameters_" or "buffers_", read from its private
# fields `priv`), its submodules' first, named "<submodule>.<name>", then its own; NULL entries
# left out. The walk is src/modules.cpp's (in R it cost ~7 us a module).
module_tensors <- function(priv, kind) .Call(C_module_tensors, priv, kind)

# Several names for one tensor (a parameter shared between modules) keep the first.
unique_tensors <- function(tensors) {
  if (length(tensors) < 2L) {
    return(tensors)
  }
  tensors[!duplicated(tensor_addresses(tensors))]
}

format_count <- function(n) format(n, big.mark = ",", scientific = FALSE)

# Whether two R tensors are one libtorch tensor (one TensorImpl; a view or a copy is another).
same_impl <- function(a, b) identical(meta(a, "impl"), meta(b, "impl"))

# Whether `to`'s data can become `from`'s in place (`$set_data()`): PyTorch's test before its
# `param.data = ...` (a dense tensor's can, on any device; a sparse one's cannot become dense).
swappable <- function(to, from) isTRUE(torch__has_compatible_shallow_copy_type(to, from))

# A state dict's entry: the tensor detached (sharing its storage), with its requires_grad flag.
detached_entry <- function(x) {
  out <- torch_detach(x)
  if (isTRUE(x$requires_grad)) out$requires_grad_(TRUE)
  out
}

# ---- cloning -------------------------------------------------------------------------------------
#
# `module$clone(deep = TRUE)` (R torch's): a module with its own parameters and buffers (detached
# copies, with requires_grad and classes kept) and its own submodules, where whatever the original
# shared (a tied weight, a submodule under two names) is shared again in the copy. R6's own
# clone copies the fields; `memo` maps each original tensor and module to its one copy.

#' Clone a module
#'
#' R torch's `clone_module()`, what `module$clone()` calls: a shallow clone
#' shares everything with `module`; a deep one (`deep = TRUE`) has its own
#' submodules and, with `replace_values = TRUE`, its own copies of the
#' parameters and buffers (detached, `requires_grad` and classes kept), where
#' what `module` shared (a tied weight, a submodule under two names) is shared
#' again in the clone.
#'
#' @param module A module ([nn_module()]).
#' @param deep Whether to clone deeply.
#' @param ... Unused.
#' @param replace_values Whether a deep clone copies the parameters and buffers
#'   (`FALSE`: it shares them).
#' @return The clone (a module).
#' @export
#' @examples
#' a <- nn_linear(2, 1)
#' b <- clone_module(a, deep = TRUE)
#' torch_equal(a$weight, b$weight)
#' b$weight$requires_grad
#' with_no_grad(b$weight$zero_())
#' torch_equal(a$weight, b$weight)
clone_module <- function(module, deep = FALSE, ..., replace_values = TRUE) {
  clone_module_memo(module, deep, replace_values, memo = NULL)
}

clone_module_memo <- function(module, deep, replace_values, memo) {
  instance <- module_of(module)
  r6_clone <- .subset2(instance, ".__enclos_env__")$private$.r6_clone
  if (!arg_flag(deep, "deep")) {
    return(create_nn_module_callable(rebind_clone(r6_clone(deep = FALSE), instance)))
  }
  memo <- memo %||% new.env(parent = emptyenv())
  key <- paste0("m", rlang::obj_address(instance))
  if (!is.null(memo[[key]])) return(memo[[key]])
  copy <- rebind_clone(r6_clone(deep = TRUE), instance)
  callable <- create_nn_module_callable(copy)
  memo[[key]] <- callable
  priv <- .subset2(copy, ".__enclos_env__")$private
  if (arg_flag(replace_values, "replace_values")) {
    priv$parameters_ <- lapply(priv$parameters_, clone_tensor, memo = memo)
    priv$buffers_ <- lapply(priv$buffers_, clone_tensor, memo = memo)
  }
  priv$modules_ <- lapply(priv$modules_, clone_module_memo, deep = TRUE,
                          replace_values = replace_values, memo = memo)
  if (is.function(priv$finalize_deep_clone)) priv$finalize_deep_clone()
  callable
}

# A clone of an instance: R6 copied its forward as it was, and a forward that runs hooks or a
# precision policy's region runs the original's hooks or forward; the clone gets its own
# (clone_forward(), precision.R). R6 copied the private fields too, and the policy's handle, whose
# remove() only reaches the original, would keep the clone from getting a policy: it has none.
rebind_clone <- function(copy, instance) {
  from <- .subset2(instance, ".__enclos_env__")
  to <- .subset2(copy, ".__enclos_env__")
  priv <- to$private
  if (!is.null(policy_of(copy))) set_policy_of(copy, NULL)
  # R6 locks a copied private field holding one of the instance's methods, as the plain forward
  # under hooks is: hooks and policies on the clone replace it.
  if (exists("plain_forward", envir = priv, inherits = FALSE) &&
        bindingIsLocked("plain_forward", priv)) {
    unlockBinding("plain_forward", priv)
  }
  if (!is.null(priv$plain_forward)) {
    priv$plain_forward <- clone_forward(priv$plain_forward, from, to)
    set_forward(copy, hooked_forward(copy, priv$plain_forward))
  } else {
    forward <- .subset2(copy, "forward")
    own <- clone_forward(forward, from, to)
    if (!identical(own, forward)) set_forward(copy, own)
  }
  copy
}

clone_tensor <- function(x, memo) {
  if (is.null(x)) return(NULL)
  key <- paste0("t", xptr_address(x))
  if (is.null(memo[[key]])) {
    # detached first: a clone of a module's weight is a new leaf, not a CloneBackward output
    copy <- torch_detach(x)$clone()
    if (isTRUE(x$requires_grad)) copy$requires_grad_(TRUE)
    attributes(copy) <- attributes(x)
    memo[[key]] <- copy
  }
  memo[[key]]
}

# Installs R torch's `$clone()` on a module class: R6's own clone is kept as the private
# `.r6_clone`, which clone_module() calls. The function is inlined in the method's body, since the
# method runs in the user's environment, where ampkit's internals are not visible.
# nolint start: object_usage_linter. (`self`, `deep`: the method's, where it runs)
set_module_clone <- function(module_class) {
  module_class$set("private", ".r6_clone", nn_Module$public_methods$clone, overwrite = TRUE)
  body <- as.call(list(clone_module, quote(self), deep = quote(deep), as.symbol("..."),
                       replace_values = quote(replace_values)))
  clone <- rlang::new_function(rlang::pairlist2(deep = FALSE, ... = , replace_values = TRUE), body)
  module_class$set("public", "clone", clone, overwrite = TRUE)
}
# nolint end


parameter_count <- function(module) sum(vapply(module$parameters, length, 0))

format_tensor_type <- function(x) {
  sprintf("%s [%s]", as.character(x$dtype), paste0("1:", dim(x), collapse = ", "))
}

module_key <- function(name) {
  if (is.numeric(name)) name <- as.character(name)
  if (!is.character(name) || length(name) != 1L || is.na(name) || !nzchar(name)) {
    abort(sprintf("A module's name must be a non-empty string, got %s.", describe(name)),
          class = "value_error")
  }
  name
}

# The `i`-th (1-based) of a module's submodules; out of range, an index_error.
child_at <- function(modules, i) {
  i <- whole_number(i, "index")
  if (i < 1L || i > length(modules)) {
    abort(sprintf(paste0("Index %s is out of range (subscript out of bounds): the module has %d ",
                         "submodule%s."), describe(i), length(modules),
                  if (length(modules) == 1L) "" else "s"), class = "index_error")
  }
  modules[[i]]
}

# A module's submodules (a named list of callables), from the callable or the instance.
children_of <- function(x) .subset2(module_of(x), ".__enclos_env__")$private$modules_

# The R6 instance behind a callable (or the instance itself).
module_of <- function(x) {
  if (R6::is.R6(x)) x else attr(x, "module", exact = TRUE)
}

#' Defining modules
#'
#' `nn_module(classname, initialize, forward, ...)` defines a module class as
#' R torch does: `initialize()` assigns parameters (`self$w <-
#' nn_parameter(...)`), buffers and submodules (`self$fc <- nn_linear(4, 2)`),
#' `forward()` computes the output; other elements of `...` become methods.
#' Calling the returned generator makes a module, which is called like a
#' function (`model(x)`). A module's `$parameters` is a named list of its
#' parameters and its submodules'; `$state_dict()` and `$load_state_dict()`
#' save and restore them; `$train()`, `$eval()`, `$to()`, `$cuda()`,
#' `$zero_grad()` do what R torch's do.
#'
#' @param classname The class name.
#' @param inherit A module generator to inherit from.
#' @param ... Methods: `initialize`, `forward`, others.
#' @param private,active Private methods and fields, active bindings (R6).
#' @param parent_env The environment the methods are evaluated in.
#' @param x An object.
#' @return `nn_module()`: a module generator. `is_nn_module()`: `TRUE` or
#'   `FALSE`.
#' @export
#' @examples
#' net <- nn_module(
#'   "net",
#'   initialize = function() {
#'     self$fc1 <- nn_linear(4, 8)
#'     self$fc2 <- nn_linear(8, 1)
#'   },
#'   forward = function(x) {
#'     x |> self$fc1() |> nnf_relu() |> self$fc2()
#'   }
#' )
#' model <- net()
#' model(torch_randn(2, 4))
#' names(model$parameters)
nn_module <- function(classname = NULL, inherit = nn_Module, ..., private = NULL,
                      active = NULL, parent_env = parent.frame()) {
  if (inherits(inherit, "nn_module_generator")) {
    inherit <- attr(inherit, "module")
  }
  inherited <- get_inherited_classes(inherit)
  classes <- c(classname, inherited, "nn_module")
  methods <- list(...)
  methods$.classes <- classes
  # R6 evaluates `inherit` in parent_env: it is given as the generator itself.
  module_class <- rlang::inject(R6::R6Class(
    classname = classname, inherit = !!inherit, lock_objects = FALSE, public = methods,
    private = private, active = active, parent_env = parent_env))
  set_module_clone(module_class)
  if (register_module_lookup(classes) && is.function(module_class$public_methods$forward)) {
    module_class$set("public", "forward", direct_self_reads(module_class$public_methods$forward),
                     overwrite = TRUE)
  }
  if (identical(topenv(parent_env), topenv())) package_module_classes[[classes[[1]]]] <- classes
  init <- module_class$public_methods$initialize %||% function(...) NULL
  # The generator has initialize's arguments and passes them on as they came (`...` unevaluated,
  # so that initialize may splice with rlang::list2, as nn_sequential(!!!layers) does).
  generator <- rlang::new_function(
    args = formals(init),
    body = rlang::expr({
      instance <- module_class$new(!!!rlang::fn_fmls_syms(init))
      create_nn_module_callable(instance)
    })
  )
  environment(generator) <- list2env(list(module_class = module_class),
                                     parent = asNamespace("ampkit"))
  attr(generator, "class") <- c(classes, "nn_module_generator")
  attr(generator, "module") <- module_class
  generator
}

get_inherited_classes <- function(inherit) {
  classes <- inherit$public_fields$.classes %||% inherit$public_methods$.classes
  setdiff(classes, c("nn_module", "nn_Module"))
}

# The callable a user holds: calls the instance's current forward.
create_nn_module_callable <- function(instance) {
  f <- function(...) .subset2(instance, "forward")(...)
  attr(f, "class") <- instance$.classes %||% "nn_module"
  attr(f, "module") <- instance
  f
}

#' @rdname nn_module
#' @export
is_nn_module <- function(x) inherits(x, "nn_module") && !inherits(x, "nn_module_generator")

# Every `self$x` in a forward comes here: parameters, buffers, submodules, then the instance's own
# fields and methods (C_module_lookup, rpkg/src/modules.cpp: in C, as in R it cost more than the
# ops it feeds).
#' @export
`$.nn_module` <- function(x, name) .Call(C_module_lookup, x, name)

#' @export
`[[.nn_module` <- function(x, name) `$.nn_module`(x, name)

#' @export
`$.nn_Module` <- function(x, name) .Call(C_module_lookup, x, name) # nolint: object_name_linter.

#' @export
`[[.nn_Module` <- function(x, name) .Call(C_module_lookup, x, name)

# `self$x` on a module of class `classes[1]` finds its method at once: R looks for a method of
# each class of the object in turn, and a class with none (the module's own, before "nn_Module")
# costs a search of every attached package, ~1 us of each lookup. Not where one of the classes has
# a method of its own (nn_sequential's `[[`). The package's own classes are registered when it
# loads (.onLoad).
# Returns whether `$` on the module is the package's lookup (no class of its own has a method).
register_module_lookup <- function(classes) {
  if (length(classes) == 0L) return(invisible(FALSE))
  own <- setdiff(classes, c("nn_module", "nn_Module"))
  registered <- c(`$` = FALSE, `[[` = FALSE)
  for (generic in c("$", "[[")) {
    methods <- lapply(own, function(cls) utils::getS3method(generic, cls, optional = TRUE))
    if (all(vapply(methods, function(m) is.null(m) || identical(m, `$.nn_Module`), TRUE))) {
      registerS3method(generic, classes[[1]], `$.nn_Module`, envir = asNamespace("ampkit"))
      registered[[generic]] <- TRUE
    }
  }
  invisible(all(registered))
}

# A forward's reads `self$name` and `self[["name"]]` call the lookup `$` dispatches to
# (C_module_lookup) directly: R's S3 dispatch of `$` cost ~1.8 us of each read, a quarter of an
# nn_linear's call. Only where `$` on the module is that lookup (register_module_lookup()), and
# only reads: an assignment's target (`self$x <- v`, `self$x$y <- v`) stays as written, as do
# quoted code and functions that take their own `self`. The namespace is written into the call
# as an object (R serializes it as a reference): the forward runs from any environment, and a
# module saved with torch_save() and loaded elsewhere finds the lookup of the R it loads in.
direct_self_reads <- function(f) {
  out <- rlang::new_function(formals(f), rewrite_self_reads(body(f)), environment(f))
  attr(out, "srcref") <- attr(f, "srcref") # printed as written
  out
}

rewrite_self_reads <- function(e) {
  if (!is.call(e) || left_as_written(e)) return(e)
  lookup <- self_read_lookup(e)
  if (!is.null(lookup)) return(lookup)
  # An assignment's value is rewritten, its target not.
  parts <- if (is_assignment(e)) 3L else seq_along(e)
  for (i in parts) {
    if (is.call(e[[i]])) e[[i]] <- rewrite_self_reads(e[[i]])
  }
  e
}

call_name <- function(e) if (is.symbol(e[[1L]])) as.character(e[[1L]]) else ""

is_assignment <- function(e) call_name(e) %in% c("<-", "=", "<<-") && length(e) == 3L

# Quoted code, and a function that takes its own `self`.
left_as_written <- function(e) {
  name <- call_name(e)
  name %in% c("quote", "bquote", "substitute", "~", "expression") ||
    (name == "function" && "self" %in% names(e[[2L]]))
}

# `.Call(<namespace>$C_module_lookup, self, "name")` for a call `self$name` or
# `self[["name"]]`, else NULL.
self_read_lookup <- function(e) {
  name <- call_name(e)
  if (!name %in% c("$", "[[") || length(e) != 3L || !identical(e[[2L]], quote(self))) {
    return(NULL)
  }
  field <- if (name == "$" && is.symbol(e[[3L]])) as.character(e[[3L]]) else e[[3L]]
  if (!is.character(field) || length(field) != 1L) return(NULL)
  call(".Call", call("$", asNamespace("ampkit"), quote(C_module_lookup)), quote(self), field)
}

# The classes of the modules made by nn_module() as the package was built (kept in the installed
# namespace), for .onLoad: reading the generators themselves would load every object of the
# lazy-loaded namespace (0.8 s and 200 MB at start-up).
package_module_classes <- new.env(parent = emptyenv())

register_package_modules <- function() {
  for (classes in as.list(package_module_classes)) register_module_lookup(classes)
  # nn_sequential()'s chain runs these layers' forwards as the package made them without R
  # (rpkg/src/modules.cpp): the same op through the same dispatcher, R's call overhead left out.
  .Call(C_native_layers, attr(nn_linear, "module")$public_methods$forward,
        attr(nn_relu, "module")$public_methods$forward)
}

# How many layer forwards nn_sequential()'s chain has run without R. Internal: for the tests.
native_layer_calls <- function() .Call(C_native_layers, NULL, NULL)

# The lookups C leaves to R: a generator's own fields, a submodule by number.
module_lookup_other <- function(instance, name) {
  if (inherits(instance, "R6ClassGenerator")) {
    return(get0(name, envir = instance, inherits = FALSE))
  }
  if (is.numeric(name)) {
    return(child_at(children_of(instance), name))
  }
  .subset2(instance, name)
}

#' @export
`$<-.nn_module` <- function(x, name, value) { # nolint: object_name_linter.
  module_assign(attr(x, "module", exact = TRUE), name, value)
  x
}

#' @export
`[[<-.nn_module` <- function(x, name, value) `$<-.nn_module`(x, name, value)

#' @export
`$<-.nn_Module` <- function(x, name, value) { # nolint: object_name_linter.
  module_assign(x, name, value)
  x
}

#' @export
`[[<-.nn_Module` <- function(x, name, value) `$<-.nn_Module`(x, name, value)

module_assign <- function(instance, name, value) {
  priv <- .subset2(instance, ".__enclos_env__")$private
  if (inherits(value, "nn_parameter")) {
    instance$register_parameter(name, value)
  } else if (inherits(value, "nn_buffer")) {
    instance$register_buffer(name, value, attr(value, "persistent") %||% TRUE)
  } else if (is_nn_module(value)) {
    instance$register_module(name, value)
  } else if (name %in% names(priv$parameters_) && (is.null(value) || is_torch_tensor(value))) {
    replace_parameter(instance, name, value)
  } else if (name %in% names(priv$buffers_) && (is.null(value) || is_torch_tensor(value))) {
    priv$buffers_[name] <- list(value)
  } else {
    assign(name, value, envir = instance)
  }
  invisible(instance)
}

# PyTorch's rule: a parameter is replaced by a parameter or NULL (a plain tensor would silently
# become one, trained, or stop being one).
replace_parameter <- function(instance, name, value) {
  if (!is.null(value)) {
    abort(sprintf(paste0("Cannot assign a plain tensor to the parameter `%s`: wrap it in ",
                         "nn_parameter() (or assign NULL)."), name), class = "value_error")
  }
  instance$register_parameter(name, NULL)
}

#' @export
print.nn_module <- function(x, ...) {
  if (inherits(x, "nn_module_generator")) {
    print(attr(x, "module", exact = TRUE)) # the R6 class
  } else {
    attr(x, "module", exact = TRUE)$print(...)
  }
  invisible(x)
}

#' @export
names.nn_module <- function(x) {
  instance <- attr(x, "module", exact = TRUE)
  priv <- .subset2(instance, ".__enclos_env__")$private
  c(names(priv$parameters_), names(priv$buffers_), names(priv$modules_),
    ls(instance, all.names = FALSE))
}

#' @export
.DollarNames.nn_module <- function(x, pattern = "") { # nolint: object_name_linter.
  grep(pattern, names(x), value = TRUE)
}

# Forward hooks: `hook(module, input, output)` after forward (a non-NULL value replaces the
# output); pre hooks `hook(module, input)` before it (a non-NULL list replaces the input). The
# instance's forward is wrapped while any hook is registered.
add_forward_hook <- function(instance, hook, pre) {
  priv <- .subset2(instance, ".__enclos_env__")$private
  # A counter names the hooks (R's random numbers are the user's: registering a hook must not
  # move them).
  priv$hooks_made_ <- (priv$hooks_made_ %||% 0L) + 1L
  id <- paste0(if (pre) "pre" else "post", priv$hooks_made_)
  priv$forward_hooks_[[id]] <- list(fn = hook, pre = pre)
  if (is.null(priv$plain_forward)) {
    priv$plain_forward <- .subset2(instance, "forward")
    set_forward(instance, hooked_forward(instance, priv$plain_forward))
  }
  handle <- new.env(parent = emptyenv())
  handle$remove <- function() {
    priv$forward_hooks_[[id]] <- NULL
    if (length(priv$forward_hooks_) == 0L && !is.null(priv$plain_forward)) {
      set_forward(instance, priv$plain_forward)
      priv$plain_forward <- NULL
    }
    invisible(NULL)
  }
  class(handle) <- "torch_hook"
  handle
}

# The forward of an instance with hooks: the instance's hooks around `plain`, its own forward
# (which a precision policy may replace in this function's environment: precision.R). Made
# again for a clone, since R6's clone leaves this function's environment, the original's, as it is.
hooked_forward <- function(instance, plain) {
  force(plain)
  priv <- .subset2(instance, ".__enclos_env__")$private
  function(...) {
    callable <- create_nn_module_callable(instance)
    input <- run_pre_hooks(priv$forward_hooks_, callable, list(...))
    run_post_hooks(priv$forward_hooks_, callable, input, do.call(plain, input))
  }
}

run_pre_hooks <- function(hooks, callable, input) {
  for (h in hooks) {
    if (h$pre) {
      out <- h$fn(callable, input)
      if (!is.null(out)) input <- if (is.list(out)) out else list(out)
    }
  }
  input
}

run_post_hooks <- function(hooks, callable, input, output) {
  for (h in hooks) {
    if (!h$pre) {
      out <- h$fn(callable, input, output)
      if (!is.null(out)) output <- out
    }
  }
  output
}

# Replaces an instance's forward (R6 locks its methods' bindings).
set_forward <- function(instance, f) {
  unlockBinding("forward", instance)
  assign("forward", f, envir = instance)
  lockBinding("forward", instance)
}
