# x[...] and x[...] <- value with R torch's rules (rpkg/src/indexing.cpp applies them). Here the
# arguments are evaluated R torch's way: `a:b` (and `a:b:s`) inside the brackets is a slice, `N`
# the last position, `newaxis` (or NULL) a new dimension, `..` the remaining dimensions.

#' Indexing tensors
#'
#' `x[i, j, ...]` as R torch indexes: positions count from 1 and `-1` is the
#' last (not R's exclusion); a missing argument takes the whole dimension;
#' `a:b` is a slice that includes `b` (`a:b:s` with a step; `N` is the last
#' position); `NULL` or `newaxis` adds a dimension of size 1; `..` stands for
#' the dimensions not indexed. Vectors, logical masks and long or bool tensors
#' select along their dimension, each one separately as R does (`x[c(1, 2),
#' c(1, 3)]` is a 2x2 block). `drop = FALSE` keeps the dimensions a single
#' number indexes. `x[...] <- value` changes `x` in place (a tensor or one
#' number); through several vector indices it assigns every combination, as R
#' does (`x[c(1, 3), c(2, 4)] <- m` sets a 2x2 block). Positions are whole
#' numbers: a fraction or `NA` is an error, and one `TRUE` is a mask of one
#' element (not recycled, as in R torch).
#'
#' @param x A tensor.
#' @param ... Indices.
#' @param drop Whether a dimension indexed by one number is dropped.
#' @param value A tensor or one number.
#' @param start,end,step A slice: `slc(1, 3)` is `1:3`.
#' @return `[`: a tensor (a view where libtorch can make one). `slc()`: a slice.
#' @name tensor-indexing
#' @examples
#' x <- torch_tensor(matrix(1:12, 3))
#' x[1, ]
#' x[, 2:3]
#' x[-1, -1]
#' x[c(1, 3), ]
#' x[x > 6]
#' x[1, 1] <- 100L
#' x[c(1, 3), c(2, 4)] <- torch_tensor(matrix(c(-1L, -2L, -3L, -4L), 2))
#' x
NULL

#' @rdname tensor-indexing
#' @export
slc <- function(start, end, step = 1L) {
  structure(list(start = start, end = end, step = step), class = "slice")
}

#' @export
print.slice <- function(x, ...) {
  cat("<slice>\n")
  invisible(x)
}

# The environment `:`, N, newaxis and `..` are evaluated in (parent: the caller's frame).
index_mask <- function(parent) {
  env <- new.env(parent = parent, size = 5L)
  env$`:` <- index_colon
  env$N <- .Machine$integer.max
  env$newaxis <- NULL
  env$.. <- structure(list(), class = "fill")
  env
}

# `:` in the brackets: a slice of `from` and `to`, or the step of a slice on the left (`a:b:s`).
# src/indexing.cpp makes the slices of plain `a:b` as slc() does, and calls this for a step.
index_colon <- function(from, to) {
  if (inherits(from, "slice")) {
    from$step <- to
    from
  } else {
    slc(from, to)
  }
}

# An index argument that is not a value or a name (`a:b`, `N`, `..`, `-1`), evaluated in the index
# mask over the caller's frame `env` (called from src/indexing.cpp, which reads the others).
index_eval_masked <- function(expr, env) eval(expr, index_mask(env))

#' @rdname tensor-indexing
#' @export
`[.torch_tensor` <- function(x, ..., drop = TRUE) .Call(C_tensor_index, x, environment(), drop)

#' @rdname tensor-indexing
#' @export
`[<-.torch_tensor` <- function(x, ..., value) {
  if (is.atomic(value) && length(value) > 1L) {
    # R numbers take a floating tensor's dtype, as R coerces into the vector (made float32 first,
    # they lost a float64 tensor's digits, and libtorch refused them for a half one)
    floating <- meta(x, "is_floating_point") && (is.double(value) || is.integer(value))
    value <- torch_tensor(value, dtype = if (floating) meta(x, "dtype"), device = meta(x, "device"))
  }
  index <- .Call(C_index_args, environment())
  # R torch's rule: in an assignment at most one index is a tensor (two would pair their
  # entries, PyTorch's advanced indexing, where R would take the grid of rows and columns).
  if (sum(vapply(index, function(i) is_torch_tensor(i) && length(dim(i)) > 0L, NA)) > 1L) {
    abort(paste0("Only one tensor is allowed in the index of an assignment: index the rows and ",
                 "columns with R vectors, or use `$index_put_()` for pairs of positions."),
          class = "index_error")
  }
  .Call(C_tensor_index_put, x, index, value)
  invisible(x)
}
