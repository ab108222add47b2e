# torch_save()/torch_load() in PyTorch's own file format (rpkg/src/serialize.cpp: libtorch's
# pickler): Python's torch.load() reads R's files and torch_load() reads Python's.

#' Saving and loading tensors and state dicts
#'
#' `torch_save(obj, path)` writes a tensor, or a (named, partly named or
#' nested) list of tensors, numbers and strings (a module's or optimizer's
#' state dict), in PyTorch's own format: Python's `torch.load()` reads it with
#' its defaults (`weights_only = TRUE`), and `torch_load()` reads files
#' Python's `torch.save()` wrote (named lists come back from dicts, an
#' `OrderedDict` state dict included). A named list is a dict; in a partly
#' named list an unnamed element's key is its position (an int), which
#' `torch_load()` reads back as no name. Tensors that shared memory still
#' share it, and `requires_grad` is kept.
#' Modules and optimizers are saved through their state dicts. `torch_serialize()`
#' gives the same bytes as a raw vector, which `torch_load()` also takes.
#' `load_state_dict(path)` reads a state dict saved by Python (R torch's
#' reader).
#'
#' @param obj A tensor, or a list of tensors, numbers, flags, strings and lists.
#' @param path A file path (`torch_load()`: or a raw vector).
#' @param device Where `torch_load()` puts tensors (`NULL`: where they were).
#' @param ... Unused.
#' @param legacy_stream Unused (R torch's argument).
#' @return `torch_save()`: `path`, invisibly. `torch_serialize()`: a raw vector.
#'   `torch_load()`, `load_state_dict()`: the object.
#' @name torch_save
#' @examples
#' path <- tempfile(fileext = ".pt")
#' torch_save(list(a = torch_ones(2), b = torch_tensor(1:3)), path)
#' torch_load(path)
NULL

#' @rdname torch_save
#' @export
torch_save <- function(obj, path, ...) {
  UseMethod("torch_save")
}

#' @rdname torch_save
#' @export
torch_save.default <- function(obj, path, ...) {
  writeBin(torch_serialize(obj), path)
  invisible(path)
}

#' @rdname torch_save
#' @export
torch_save.nn_module <- function(obj, path, ...) { # nolint: object_name_linter.
  abort(paste0("`obj` is an nn_module, whose R code cannot be saved in PyTorch's format: ",
               "save its state dict, `torch_save(model$state_dict(), path)`, and load it into a ",
               "new module with `model$load_state_dict(torch_load(path))`."),
        class = "value_error")
}

#' @rdname torch_save
#' @export
torch_save.torch_optimizer <- function(obj, path, ...) { # nolint: object_name_linter.
  abort(paste0("`obj` is an optimizer: save its state dict, ",
               "`torch_save(opt$state_dict(), path)`, and load it with ",
               "`opt$load_state_dict(torch_load(path))`."), class = "value_error")
}

#' @rdname torch_save
#' @export
torch_serialize <- function(obj, ...) .Call(C_pickle_save, obj)

#' @rdname torch_save
#' @export
torch_load <- function(path, device = NULL) {
  if (!is.raw(path)) {
    if (!is.character(path) || length(path) != 1L || is.na(path)) {
      abort(sprintf("`path` must be a file path or a raw vector, got %s.", describe(path)),
            class = "value_error")
    }
    if (!file.exists(path) || dir.exists(path)) {
      abort(sprintf(paste0("`path` must be a file saved by torch_save() or torch.save(), but ",
                           "there is no file %s."), encodeString(path, quote = "\"")),
            class = "value_error")
    }
  }
  bytes <- if (is.raw(path)) path else readBin(path, "raw", file.size(path))
  out <- .Call(C_pickle_load, bytes)
  if (!is.null(device)) {
    device <- as_torch_device(device)
    out <- rapply(list(out), function(t) t$to(device = device), classes = "torch_tensor",
                  how = "replace")[[1L]]
  }
  out
}

#' @rdname torch_save
#' @export
load_state_dict <- function(path, ..., legacy_stream = FALSE) {
  out <- torch_load(path)
  if (!is.list(out) || is.null(names(out))) {
    abort("The file does not hold a state dict (a dict of tensors).", class = "value_error")
  }
  out
}
