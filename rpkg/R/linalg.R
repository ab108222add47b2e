#' @include gen-ops.R
NULL

# R torch's linalg_* functions: its names for libtorch's torch.linalg operators (generated as
# torch_linalg_*), the matrix first.

#' Linear algebra (R torch's `linalg_*` functions)
#'
#' `linalg_<name>(A, ...)` is libtorch's `torch.linalg.<name>` (the generated
#' `torch_linalg_<name>()`), as R torch names it: the matrix (or batch of
#' matrices) `A` first, then the operator's other arguments, by name or in its
#' order (`linalg_norm(A, ord, dim, keepdim)`, `linalg_solve(A, B)`,
#' `linalg_qr(A, mode)`, ...); dims count from 1. `linalg_multi_dot(tensors)`
#' takes a list of tensors, `linalg_tensorsolve(A, B, dims)` R torch's names.
#'
#' Where R torch gives a function arguments or results of its own, so does
#' ampkit: `linalg_tensorinv()`'s `ind` counts from 1 (the default 3 is
#' PyTorch's 2); `linalg_lstsq()`, `linalg_cholesky_ex()` and `linalg_inv_ex()`
#' return named lists (`solution`, `residuals`, `rank`, `singular_values`; `L`,
#' `info`; `inverse`, `info`); `linalg_matrix_rank()`'s `tol` and
#' `linalg_pinv()`'s `rcond` are R torch's deprecated names of `atol` and
#' `rtol` (taken with a warning). A tolerance left `NULL` is PyTorch's default.
#' @param A A tensor (a matrix or a batch of them).
#' @param tensors `linalg_multi_dot()`: a list of tensors, multiplied in order.
#' @param B The right-hand side.
#' @param dims `linalg_tensorsolve()`: dimensions of `A` moved to its end
#'   first, counted from 1, or `NULL`.
#' @param ... The operator's other arguments (see PyTorch's torch.linalg); for
#'   `linalg_lstsq()`, `linalg_matrix_rank()` and `linalg_solve_triangular()`,
#'   empty: the arguments after it are named.
#' @param check_errors Whether a failed decomposition is an error (`TRUE`) or
#'   only reported in `info` (`FALSE`).
#' @param rcond `linalg_lstsq()`: singular values below `rcond` times the largest
#'   count as zero (`NULL`: the driver's default). `linalg_pinv()`: the
#'   deprecated name of `rtol`.
#' @param driver The LAPACK driver of `linalg_lstsq()` (`NULL`: `"gelsy"` on the
#'   CPU, `"gels"` on CUDA).
#' @param atol,rtol Absolute and relative tolerances below which singular values
#'   (eigenvalues if `hermitian`) count as zero: numbers (or one-element tensors) or `NULL`.
#' @param tol The deprecated name of `atol`.
#' @param hermitian Whether `A` is Hermitian (symmetric if real).
#' @param upper,left,unitriangular `linalg_solve_triangular()`: whether `A` is
#'   upper triangular, whether to solve `A X = B` (`TRUE`) or `X A = B`, and
#'   whether `A`'s diagonal is taken as ones.
#' @param ind `linalg_tensorinv()`: the dimension, counted from 1, where the
#'   inverse's dimensions end (the product of `A`'s dimensions before `ind`
#'   must equal that of those from it).
#' @return A tensor, or a list of tensors for the decompositions.
#' @name linalg
#' @examples
#' A <- torch_tensor(matrix(c(4, 1, 1, 3), 2))
#' linalg_det(A)
#' linalg_solve(A, torch_tensor(c(1, 2)))
#' linalg_qr(A)
#' linalg_norm(A, ord = "fro")
#' linalg_lstsq(A, torch_tensor(matrix(c(1, 2), 2)))$solution
#' linalg_tensorinv(torch_eye(6)$reshape(c(2, 3, 6)), ind = 3)$shape
#' linalg_multi_dot(tensors = list(A, A, A))
#' linalg_tensorsolve(torch_eye(6)$reshape(c(2, 3, 6)), B = torch_ones(2, 3))$shape
NULL

# nolint start: object_name_linter. (`A`: R torch's and PyTorch's name for the matrix)
#' @rdname linalg
#' @export
linalg_cholesky <- function(A, ...) torch_linalg_cholesky(A, ...)

#' @rdname linalg
#' @export
linalg_cholesky_ex <- function(A, check_errors = FALSE) {
  stats::setNames(torch_linalg_cholesky_ex(A, check_errors = check_errors), c("L", "info"))
}

#' @rdname linalg
#' @export
linalg_cond <- function(A, ...) torch_linalg_cond(A, ...)

#' @rdname linalg
#' @export
linalg_det <- function(A, ...) torch_linalg_det(A, ...)

#' @rdname linalg
#' @export
linalg_eig <- function(A, ...) torch_linalg_eig(A, ...)

#' @rdname linalg
#' @export
linalg_eigh <- function(A, ...) torch_linalg_eigh(A, ...)

#' @rdname linalg
#' @export
linalg_eigvals <- function(A, ...) torch_linalg_eigvals(A, ...)

#' @rdname linalg
#' @export
linalg_eigvalsh <- function(A, ...) torch_linalg_eigvalsh(A, ...)

#' @rdname linalg
#' @export
linalg_householder_product <- function(A, ...) torch_linalg_householder_product(A, ...)

#' @rdname linalg
#' @export
linalg_inv <- function(A, ...) torch_linalg_inv(A, ...)

#' @rdname linalg
#' @export
linalg_inv_ex <- function(A, check_errors = FALSE) {
  stats::setNames(torch_linalg_inv_ex(A, check_errors = check_errors), c("inverse", "info"))
}

#' @rdname linalg
#' @export
linalg_lstsq <- function(A, B, rcond = NULL, ..., driver = NULL) {
  check_dots_empty(example = "`driver = \"gelsd\"`")
  stats::setNames(
    torch_linalg_lstsq(A, B, rcond = rcond, driver = driver),
    c("solution", "residuals", "rank", "singular_values")
  )
}

#' @rdname linalg
#' @export
linalg_matrix_norm <- function(A, ...) torch_linalg_matrix_norm(A, ...)

#' @rdname linalg
#' @export
linalg_matrix_power <- function(A, ...) torch_linalg_matrix_power(A, ...)

#' @rdname linalg
#' @export
linalg_matrix_rank <- function(A, ..., atol = NULL, rtol = NULL, tol = NULL, hermitian = FALSE) {
  check_dots_empty(example = "`atol = 1e-4`")
  atol <- deprecated_tolerance(tol, "tol", atol, "atol")
  torch_linalg_matrix_rank(self = A, atol = tolerance(atol, "atol"), rtol = tolerance(rtol, "rtol"),
                           hermitian = hermitian)
}

#' @rdname linalg
#' @export
linalg_multi_dot <- function(tensors) torch_linalg_multi_dot(tensors)

#' @rdname linalg
#' @export
linalg_norm <- function(A, ...) torch_linalg_norm(A, ...)

#' @rdname linalg
#' @export
linalg_pinv <- function(A, rcond = NULL, hermitian = FALSE, atol = NULL, rtol = NULL) {
  rtol <- deprecated_tolerance(rcond, "rcond", rtol, "rtol")
  torch_linalg_pinv(A, atol = tolerance(atol, "atol"), rtol = tolerance(rtol, "rtol"),
                    hermitian = hermitian)
}

#' @rdname linalg
#' @export
linalg_qr <- function(A, ...) torch_linalg_qr(A, ...)

#' @rdname linalg
#' @export
linalg_slogdet <- function(A, ...) torch_linalg_slogdet(A, ...)

#' @rdname linalg
#' @export
linalg_solve <- function(A, ...) torch_linalg_solve(A, ...)

#' @rdname linalg
#' @export
linalg_solve_triangular <- function(A, B, ..., upper, left = TRUE, unitriangular = FALSE) {
  check_dots_empty(example = "`upper = TRUE`")
  torch_linalg_solve_triangular(A, B, upper = upper, left = left, unitriangular = unitriangular)
}

#' @rdname linalg
#' @export
linalg_svd <- function(A, ...) torch_linalg_svd(A, ...)

#' @rdname linalg
#' @export
linalg_svdvals <- function(A, ...) torch_linalg_svdvals(A, ...)

#' @rdname linalg
#' @export
linalg_tensorinv <- function(A, ind = 3L) {
  # R torch's `ind` counts dimensions from 1, as a dim would: the first `ind - 1` go to the
  # inverse's last dimensions (libtorch's `ind` is how many).
  torch_linalg_tensorinv(A, ind = whole_number(ind, "ind") - 1L)
}

#' @rdname linalg
#' @export
linalg_tensorsolve <- function(A, B, dims = NULL) torch_linalg_tensorsolve(A, B, dims)

#' @rdname linalg
#' @export
linalg_vector_norm <- function(A, ...) torch_linalg_vector_norm(A, ...)
# nolint end

# R torch's older names of a tolerance (`tol`, `rcond`): taken with a warning when the new one is
# not given too.
deprecated_tolerance <- function(old, old_name, new, new_name) {
  if (is.null(old)) {
    return(new)
  }
  if (!is.null(new)) {
    abort(sprintf("`%s` and `%s` are the same tolerance: give `%s` only.", old_name, new_name,
                  new_name), class = "value_error")
  }
  rlang::warn(sprintf("`%s` is deprecated: it is `%s` now.", old_name, new_name))
  old
}

# A tolerance as libtorch's overload with numbers takes it: NULL (PyTorch's default), or one
# number, which a one-element tensor gives too (as R torch reads it).
tolerance <- function(x, name) {
  if (is_torch_tensor(x) && length(x) == 1L) x <- x$item()
  arg_number(x, name, null_ok = TRUE)
}
