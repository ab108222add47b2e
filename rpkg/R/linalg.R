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
#' `linalg_qr(A, mode)`, ...); dims count from 1. `linalg_multi_dot()` takes a
#' list of tensors.
#' @param A A tensor (a matrix or a batch of them); for `linalg_multi_dot()`,
#'   a list of tensors.
#' @param ... The operator's other arguments (see PyTorch's torch.linalg).
#' @return A tensor, or a list of tensors for the decompositions.
#' @name linalg
#' @examples
#' A <- torch_tensor(matrix(c(4, 1, 1, 3), 2))
#' linalg_det(A)
#' linalg_solve(A, torch_tensor(c(1, 2)))
#' linalg_qr(A)
#' linalg_norm(A, ord = "fro")
NULL

# nolint start: object_name_linter. (`A`: R torch's and PyTorch's name for the matrix)
#' @rdname linalg
#' @export
linalg_cholesky <- function(A, ...) torch_linalg_cholesky(A, ...)

#' @rdname linalg
#' @export
linalg_cholesky_ex <- function(A, ...) torch_linalg_cholesky_ex(A, ...)

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
linalg_inv_ex <- function(A, ...) torch_linalg_inv_ex(A, ...)

#' @rdname linalg
#' @export
linalg_lstsq <- function(A, ...) torch_linalg_lstsq(A, ...)

#' @rdname linalg
#' @export
linalg_matrix_norm <- function(A, ...) torch_linalg_matrix_norm(A, ...)

#' @rdname linalg
#' @export
linalg_matrix_power <- function(A, ...) torch_linalg_matrix_power(A, ...)

#' @rdname linalg
#' @export
linalg_matrix_rank <- function(A, ...) torch_linalg_matrix_rank(A, ...)

#' @rdname linalg
#' @export
linalg_multi_dot <- function(A, ...) torch_linalg_multi_dot(A, ...)

#' @rdname linalg
#' @export
linalg_norm <- function(A, ...) torch_linalg_norm(A, ...)

#' @rdname linalg
#' @export
linalg_pinv <- function(A, ...) torch_linalg_pinv(A, ...)

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
linalg_solve_triangular <- function(A, ...) torch_linalg_solve_triangular(A, ...)

#' @rdname linalg
#' @export
linalg_svd <- function(A, ...) torch_linalg_svd(A, ...)

#' @rdname linalg
#' @export
linalg_svdvals <- function(A, ...) torch_linalg_svdvals(A, ...)

#' @rdname linalg
#' @export
linalg_tensorinv <- function(A, ...) torch_linalg_tensorinv(A, ...)

#' @rdname linalg
#' @export
linalg_tensorsolve <- function(A, ...) torch_linalg_tensorsolve(A, ...)

#' @rdname linalg
#' @export
linalg_vector_norm <- function(A, ...) torch_linalg_vector_norm(A, ...)
# nolint end
