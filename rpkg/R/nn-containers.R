#' @include nn-layers.R
NULL

# R torch's other containers: a dict of named submodules, and a model's body without its head.

#' Module containers: a dict of modules, and pruning a model's head
#'
#' `nn_module_dict(dict)` holds the named modules of `dict` as submodules
#' (registered, so that their parameters are the dict's), reached by name:
#' `dict$encoder(x)`. It has no forward of its own.
#'
#' `nn_prune_head(x, head_size)` gives the model `x` without its last
#' `head_size` submodules (a classifier's head, say): an [nn_sequential()] of
#' the first ones, under their names, sharing their parameters with `x`. A
#' module that is not a sequence is taken as one: its submodules in the order
#' they were assigned.
#'
#' @param dict A named list of modules.
#' @param x A module.
#' @param head_size How many of the last submodules to drop (a whole number).
#' @return `nn_module_dict()`: a module. `nn_prune_head()`: an
#'   [nn_sequential()].
#' @name nn_containers
#' @examples
#' dict <- nn_module_dict(list(encoder = nn_linear(4, 2), decoder = nn_linear(2, 4)))
#' dict$decoder(dict$encoder(torch_randn(3, 4)))
#' model <- nn_sequential(nn_linear(4, 8), nn_relu(), nn_linear(8, 2))
#' nn_prune_head(model, 1)
NULL

#' @rdname nn_containers
#' @export
nn_module_dict <- nn_module(
  "nn_module_dict",
  initialize = function(dict) {
    if (!is.list(dict) || (length(dict) && (is.null(names(dict)) || !all(nzchar(names(dict)))))) {
      abort(sprintf("`dict` must be a named list of modules, got %s.", describe(dict)),
            class = "value_error")
    }
    for (name in names(dict)) self$add_module(name, dict[[name]])
  },
  forward = function(...) {
    abort("nn_module_dict() has no forward: call one of its modules.",
          class = "not_implemented_error")
  }
)

#' @rdname nn_containers
#' @export
nn_prune_head <- function(x, head_size = 1L) {
  UseMethod("nn_prune_head")
}

#' @rdname nn_containers
#' @export
nn_prune_head.nn_module <- function(x, head_size = 1L) { # nolint: object_name_linter.
  modules <- children_of(x)
  head_size <- whole_number(head_size, "head_size")
  if (head_size < 0L || head_size >= length(modules)) {
    abort(sprintf("`head_size` must be between 0 and %d (the module has %d submodules), got %d.",
                  length(modules) - 1L, length(modules), head_size), class = "value_error")
  }
  # Under their names (R torch's nn_prune_head.nn_module), which nn_sequential() would number.
  kept <- modules[seq_len(length(modules) - head_size)]
  out <- nn_sequential()
  for (name in names(kept)) out$add_module(name, kept[[name]])
  out
}
