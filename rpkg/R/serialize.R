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
#' Any other R object (an [nn_module()], a dataset, a list holding functions)
#' is saved whole, as R torch saves it: R's serialization of the object, its
#' tensors kept as tensors in the same file, so that `torch_load()` gives back
#' a module that runs, with its parameters (a tensor reached twice comes back
#' as one). Optimizers are saved through their state dicts.
#' `torch_serialize()` gives the same bytes as a raw vector, which
#' `torch_load()` also takes.
#' `load_state_dict(path)` reads a state dict saved by Python (R torch's
#' reader).
#'
#' @param obj A tensor, a list of tensors, numbers, flags, strings and lists, or
#'   any R object holding tensors (a module, a dataset).
#' @param path A file path or a connection (`torch_load()`: or a raw vector).
#' @param device Where `torch_load()` puts tensors (`NULL`: where they were).
#' @param ... Must be empty (a misspelt argument is an error).
#' @param compress Accepted for R torch's code (a flag): the files are
#'   PyTorch's format, whose tensors are stored uncompressed.
#' @param legacy_stream Unused (R torch's argument).
#' @return `torch_save()`: `path`, invisibly. `torch_serialize()`: a raw vector.
#'   `torch_load()`, `load_state_dict()`: the object.
#' @name torch_save
#' @examples
#' path <- tempfile(fileext = ".pt")
#' torch_save(list(a = torch_ones(2), b = torch_tensor(1:3)), path)
#' torch_load(path)
#' model <- nn_linear(3, 1)
#' torch_save(model, path)
#' torch_load(path)(torch_ones(2, 3))
NULL

#' @rdname torch_save
#' @export
torch_save <- function(obj, path, ..., compress = TRUE) {
  UseMethod("torch_save")
}

#' @rdname torch_save
#' @export
torch_save.default <- function(obj, path, ..., compress = TRUE) {
  if (...length() > 0L) check_dots_empty()
  arg_flag(compress, "compress")
  bytes <- .Call(C_pickle_save, if (is_plain_value(obj)) obj else r_object_archive(obj))
  if (inherits(path, "connection")) {
    writeBin(bytes, path)
    return(invisible(path))
  }
  if (!is.character(path) || length(path) != 1L || is.na(path)) {
    abort(sprintf("`path` must be a file path or a connection, got %s.", describe(path)),
          class = "value_error")
  }
  writeBin(bytes, path)
  invisible(path)
}

#' @rdname torch_save
#' @export
# nolint start: object_name_linter.
torch_save.torch_optimizer <- function(obj, path, ..., compress = TRUE) {
# nolint end
  abort(paste0("`obj` is an optimizer: save its state dict, ",
               "`torch_save(opt$state_dict(), path)`, and load it with ",
               "`opt$load_state_dict(torch_load(path))`."), class = "value_error")
}

#' @rdname torch_save
#' @export
torch_serialize <- function(obj, ...) {
  # Through torch_save() with `path` taken: a `path` in `...` is R's "matched by multiple
  # actual arguments" error, as in R torch.
  con <- rawConnection(raw(0), "wb")
  on.exit(close(con))
  torch_save(obj, path = con, ...)
  rawConnectionValue(con)
}

#' @rdname torch_save
#' @export
torch_load <- function(path, device = NULL) {
  bytes <- read_saved_bytes(path)
  out <- .Call(C_pickle_load, bytes)
  if (is_r_object_archive(out)) {
    out <- r_object_restore(out, device)
  } else if (!is.null(device)) {
    out <- tensors_to_device(out, device)
  }
  out
}

read_saved_bytes <- function(path) {
  if (is.raw(path)) return(path)
  if (inherits(path, "connection")) return(read_connection(path))
  if (!is.character(path) || length(path) != 1L || is.na(path)) {
    abort(sprintf("`path` must be a file path, a connection or a raw vector, got %s.",
                  describe(path)), class = "value_error")
  }
  if (!file.exists(path) || dir.exists(path)) {
    abort(sprintf(paste0("`path` must be a file saved by torch_save() or torch.save(), but ",
                         "there is no file %s."), encodeString(path, quote = "\"")),
          class = "value_error")
  }
  readBin(path, "raw", file.size(path))
}

read_connection <- function(con) {
  chunks <- list()
  repeat {
    chunk <- readBin(con, "raw", 1048576L)
    if (!length(chunk)) break
    chunks[[length(chunks) + 1L]] <- chunk
  }
  unlist(chunks, use.names = FALSE)
}

# Each tensor moved to `device` as it was: a leaf that requires grad stays a leaf that does (a
# $to() alone made it a copy with a grad_fn, which optimizers refuse), its R classes kept.
tensors_to_device <- function(x, device) {
  device <- as_torch_device(device)
  rapply(list(x), function(t) {
    moved <- with_no_grad(t$to(device = device))
    if (t$requires_grad) moved$requires_grad_(TRUE)
    with_attributes_of(moved, t)
  }, classes = "torch_tensor", how = "replace")[[1L]]
}

# ---- R objects that hold tensors: modules, datasets, anything R can serialize -------------------
#
# A tensor, or a list of tensors, numbers, flags and strings, is written as PyTorch writes it.
# Anything else (an nn_module, a dataset, a list holding functions or environments) is written as
# R's own serialization of the object with each tensor replaced by a reference (serialize()'s
# refhook), next to the tensors themselves, in the same PyTorch file: a dict
# {"__ampkit_r_object__": the bytes, "tensors": [...], "classes": [...]}. A tensor reached twice
# (a parameter also held elsewhere) is written once and comes back as one tensor, shared again.

archive_key <- "__ampkit_r_object__"

# What PyTorch's format holds as it is: a number, flag or string, a vector of numbers or flags
# (a Python list: it comes back a list of them, as PyTorch's optimizers' betas do), lists of
# these with no names or unique ones. Anything else (NA, which Python has no value for, a vector
# of strings, raw or complex vectors, names on a vector) is kept whole by R's serialization.
is_plain_value <- function(x) {
  if (is_torch_tensor(x) || is.null(x)) return(TRUE)
  if (is.atomic(x)) return(is_plain_atomic(x))
  is.list(x) && !is.object(x) && is_plain_list(x)
}

# A list with no attributes but unique, non-empty names (a Python dict's keys), of plain values.
is_plain_list <- function(x) {
  keys <- names(x)
  if (length(setdiff(names(attributes(x)), "names")) || anyDuplicated(keys) ||
        !all(nzchar(keys))) {
    return(FALSE)
  }
  all(vapply(x, is_plain_value, TRUE))
}

is_plain_atomic <- function(x) {
  simple <- is.double(x) || is.integer(x) || is.logical(x) || (is.character(x) && length(x) == 1L)
  # NaN is a Python float; NA is none
  simple && length(x) >= 1L && is.null(attributes(x)) && !any(is.na(x) & !is.nan(x))
}

r_object_archive <- function(obj) {
  tensors <- list()
  classes <- list()
  index_of <- new.env(parent = emptyenv()) # a tensor's address -> its index in `tensors`
  refhook <- function(x) {
    if (!is_torch_tensor(x) || !isTRUE(meta(x, "defined"))) return(NULL)
    address <- xptr_address(x)
    index <- index_of[[address]]
    if (is.null(index)) {
      index <- length(tensors) + 1L
      assign(address, index, envir = index_of)
      tensors[[index]] <<- x
      classes[[index]] <<- as.list(class(x))
    }
    c("ampkit_tensor", as.character(index))
  }
  bytes <- serialize(obj, connection = NULL, refhook = refhook)
  out <- list(torch_tensor(bytes), tensors, classes)
  names(out) <- c(archive_key, "tensors", "classes")
  out
}

is_r_object_archive <- function(x) is.list(x) && identical(names(x)[1L], archive_key)

r_object_restore <- function(archive, device) {
  tensors <- archive$tensors
  if (!is.null(device)) tensors <- lapply(tensors, tensors_to_device, device = device)
  for (i in seq_along(tensors)) class(tensors[[i]]) <- unlist(archive$classes[[i]])
  refhook <- function(key) {
    if (!identical(key[1L], "ampkit_tensor")) {
      abort("The file holds an R object reference ampkit did not write.", class = "value_error")
    }
    tensors[[as.integer(key[2L])]]
  }
  unserialize(as_array(archive[[archive_key]]), refhook = refhook)
}

# R torch's internal identity of a tensor: the address of its libtorch TensorImpl, as a string.
# Two R objects of one tensor have the same; a view or a copy has another.
xptr_address <- function(x) .Call(C_tensor_meta, x, "address")
# The same for a list of tensors, in one call.
tensor_addresses <- function(tensors) .Call(C_tensor_addresses, tensors)

# Whether `con` (a connection, a raw vector or a path) holds an RDS object (R torch's legacy
# files); a connection's position is left where it was.
is_rds <- function(con) {
  if (is.raw(con)) {
    con <- rawConnection(con)
    on.exit(close(con), add = TRUE)
  } else if (inherits(con, "connection")) {
    where <- seek(con)
    on.exit(seek(con, where = where), add = TRUE)
  }
  !inherits(try(readRDS(con), silent = TRUE), "try-error")
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
