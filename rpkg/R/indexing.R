# `[` and `[<-` on tensors with R torch's rules: 1-based positions, negative ones counting from
# the end (x[-1] is the last element, not all but the first), `start:end` slices including
# `end`, `start:end:step`, `N` (the last), `..` (all remaining dims), `NULL`/`newaxis` (a new
# dim), R logical vectors and boolean tensors as masks, several vectors selecting every
# combination (as R does), `drop = FALSE`, and `!!!` splicing. The translation is in Python
# (inst/python/ampkit_r_frontend.py: getitem/setitem): one crossing per `[`.

#' Create a slice
#'
#' `slc(start, end, step)` is the slice `start:end:step` written as a call,
#' for indexing tensors: `end` is included, positions count from 1 and
#' negative ones from the end; `end = Inf` (or `N`) runs to the end.
#' @param start,end First and last position (1-based, included).
#' @param step The step between positions (positive).
#' @return An object of class `slice`.
#' @export
#' @examples
#' if (ampkit_available()) {
#'   x <- torch_tensor(1:10)
#'   x[slc(start = 1, end = 5, step = 2)]
#'   x[2:N]
#' }
slc <- function(start, end, step = 1) {
  if (is.infinite(end) && end > 0) {
    end <- .Machine$integer.max
  }
  structure(list(start = start, end = end, step = step), class = "slice")
}

#' @export
print.slice <- function(x, ...) {
  cat("<slice>\n")
  invisible(x)
}

# The names `[`'s arguments are evaluated with (R torch's): `a:b` is a slice, `a:b:c` a slice with
# a step, `N` the last position, `newaxis` a new dim, `..` the remaining dims.
index_mask <- list(
  `:` = function(from, to) {
    if (inherits(from, "slice")) {
      from$step <- to
      return(from)
    }
    if (length(from) != 1L || length(to) != 1L) {
      return(base::`:`(from, to))
    }
    slc(from, to)
  },
  N = .Machine$integer.max,
  newaxis = NULL,
  .. = structure(list(), class = "index_fill")
)

# `[`'s arguments as the Python helper's items.
index_items <- function(quos, call) {
  lapply(unname(quos), function(q) {
    if (rlang::quo_is_missing(q)) {
      return(list("all"))
    }
    env <- rlang::quo_get_env(q)
    mask <- list2env(index_mask, parent = if (identical(env, emptyenv())) baseenv() else env)
    index_item(eval(rlang::quo_get_expr(q), mask), call)
  })
}

index_item <- function(value, call) {
  if (is.null(value)) {
    return(list("newaxis"))
  }
  if (inherits(value, "slice")) {
    return(slice_item(value, call))
  }
  if (inherits(value, "index_fill")) {
    return(list("fill"))
  }
  if (is_torch_tensor(value)) {
    return(list("tensor", tpy(value)))
  }
  if (is.logical(value)) {
    return(logical_item(value, call))
  }
  if (is.numeric(value)) {
    return(numeric_item(value, call))
  }
  abort(sprintf(paste0("An index must be numbers, a range such as 1:3, logicals, a tensor, ",
                       "NULL/newaxis or `..`, got %s."), describe(value)), call,
        class = "value_error")
}

slice_item <- function(value, call) {
  for (field in c("start", "end", "step")) {
    v <- value[[field]]
    if (!is_whole(v) || length(v) != 1L) {
      abort(sprintf("A slice's %s must be a whole number, got %s.", field, describe(v)),
            call, class = "value_error")
    }
  }
  list("slice", as.double(value$start), as.double(value$end), as.integer(value$step))
}

logical_item <- function(value, call) {
  if (anyNA(value)) {
    abort("A logical index must not contain NA.", call, class = "value_error")
  }
  if (!is.null(dim(value))) {
    return(list("tensor", tpy(torch_tensor(value))))
  }
  list("lmask", as.list(value))
}

numeric_item <- function(value, call) {
  if (length(value) > 0L && !is_whole(value)) {
    abort(sprintf("An index must be whole numbers (positions count from 1), got %s.",
                  describe(value)), call, class = "value_error")
  }
  if (!is.null(dim(value))) {
    return(list("tensor", tpy(torch_tensor(value, dtype = torch_long()))))
  }
  if (length(value) == 1L) {
    return(list("int", as.double(value)))
  }
  list("vec", as.list(as.double(value)))
}

#' Index tensors
#'
#' `x[i, j, ...]` and `x[i, j, ...] <- value` with R torch's rules: positions
#' count from 1 and negative ones from the end (`x[-1]` is the last element:
#' R torch's rule, not R's exclusion); an empty argument takes the whole dim;
#' `a:b` includes `b` (`2:-1` runs to the end, `1:10:2` steps by 2, `2:N` to
#' the last); `..` stands for all remaining dims, `NULL` or `newaxis` adds a
#' dim; several vectors select every combination, as R does; R logical
#' vectors select along one dim, boolean tensors are masks (`x[x > 0]`);
#' long tensors are 1-based positions. A single number drops its dim unless
#' `drop = FALSE`. `!!!` splices a vector of positions (`x[!!!c(1, 2)]` is
#' `x[1, 2]`). Assignment takes a tensor or R values (recycled as PyTorch
#' broadcasts).
#' @param x A tensor.
#' @param ... Indices, one per dim (fewer are completed with whole dims).
#' @param drop Whether single positions drop their dim.
#' @param value A tensor or R values to assign.
#' @return `[`: a tensor (a view where PyTorch gives one). `[<-`: `x`,
#'   modified in place (other R references to it see the change, as in R
#'   torch).
#' @name tensor-indexing
#' @examples
#' if (ampkit_available()) {
#'   x <- torch_tensor(matrix(1:12, nrow = 3))
#'   x[1, ]
#'   x[-1, ]
#'   x[2:3, 1, drop = FALSE]
#'   x[.., 1]
#'   x[x > 6]
#'   x[1, 1:4:2] <- 0L
#'   x
#' }
NULL

#' @rdname tensor-indexing
#' @export
`[.torch_tensor` <- function(x, ..., drop = TRUE) {
  call <- sys.call()
  items <- index_items(rlang::enquos(..., .ignore_empty = "none"), call)
  py <- call_python(fe_helpers()$getitem(tpy(x), items, arg_flag(drop, "drop", call)), call)
  new_torch_tensor(py)
}

#' @rdname tensor-indexing
#' @export
`[<-.torch_tensor` <- function(x, ..., value) {
  call <- sys.call()
  items <- index_items(rlang::enquos(..., .ignore_empty = "none"), call)
  if (is_torch_tensor(value)) {
    value <- tpy(value)
  } else if ((is.numeric(value) || is.logical(value)) && length(value) == 1L) {
    value <- value
  } else if (is.numeric(value) || is.logical(value)) {
    value <- tpy(torch_tensor(value))
  } else {
    abort(sprintf("`value` must be a tensor or R numbers or logicals, got %s.", describe(value)),
          call, class = "value_error")
  }
  call_python(fe_helpers()$setitem(tpy(x), items, value), call)
  invisible(x)
}
