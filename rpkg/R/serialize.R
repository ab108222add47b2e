# torch_save() for modules and optimizers (the generic and its default, for tensors and lists,
# are in frontend-functions.R). A module's R code cannot go into PyTorch's file format: what is
# saved is its state dict, as R torch's documentation recommends.

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
