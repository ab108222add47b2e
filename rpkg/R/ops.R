# R torch's hand-written operator functions (over the generated `.torch_<name>`): 1-based indices
# in results, arguments R torch renames or reorders; and R's operators and group generics on
# tensors. Everything else is generated from libtorch's schemas (gen-ops.R).

#' Operators with R torch's conventions
#'
#' These follow R torch: dimensions count from 1 (`-1` is the last), and the
#' indices they return count from 1. `torch_max(x)` is the largest element;
#' `torch_max(x, dim = 1)` a list of the largest values and their (1-based)
#' positions along `dim`; `torch_max(x, other = y)` the elementwise maximum.
#' `torch_where(condition)` gives the (1-based) positions of `TRUE` elements,
#' one tensor per dimension. `torch_split()` takes a size or a vector of
#' sizes; `torch_narrow()` a 1-based `start`; `torch_nonzero()` 1-based
#' positions. The functions generated from libtorch's schemas are documented
#' in [torch_ops].
#'
#' @param self,input A tensor.
#' @param dim A dimension (1-based; negative from the end).
#' @param other A second tensor.
#' @param keepdim Whether reduced dimensions are kept with size 1.
#' @param descending,largest,sorted,stable Ordering options.
#' @param k How many (`torch_topk()`).
#' @param condition A bool tensor.
#' @param as_list `torch_nonzero()`: a list of index tensors, one per dimension.
#' @param split_size A size, or a vector of sizes.
#' @param start,length `torch_narrow()`: the first (1-based) element and how many.
#' @param source,destination `torch_movedim()`: dimensions (1-based).
#' @param p,dtype `torch_norm()`: the norm's order and the result's dtype.
#' @param repeats,output_size `torch_repeat_interleave()`.
#' @param weights,minlength `torch_bincount()`.
#' @param num_samples,replacement,generator `torch_multinomial()`.
#' @return A tensor, or a list of tensors.
#' @name torch_index_ops
#' @examples
#' x <- torch_tensor(matrix(c(3, 1, 2, 5), 2))
#' torch_max(x)
#' torch_max(x, dim = 1)
#' torch_argmax(x, dim = 2)
#' torch_sort(torch_tensor(c(3, 1, 2)))
#' torch_where(x > 2)
#' torch_split(torch_arange(1, 5), 2)
NULL

# The indices element of a (values, indices) result made 1-based.
second_plus_one <- function(result) {
  result[[2L]] <- plus_one(result[[2L]])
  result
}

#' @rdname torch_index_ops
#' @export
torch_max <- function(self, dim, other, keepdim = FALSE) {
  if (!missing(dim) && !missing(other)) {
    abort("Can't set other and dim arguments.", class = "value_error")
  }
  result <- do.call(.torch_max, as.list(environment()))
  if (is.list(result)) second_plus_one(result) else result
}

#' @rdname torch_index_ops
#' @export
torch_min <- function(self, dim, other, keepdim = FALSE) {
  if (!missing(dim) && !missing(other)) {
    abort("Can't set other and dim arguments.", class = "value_error")
  }
  result <- do.call(.torch_min, as.list(environment()))
  if (is.list(result)) second_plus_one(result) else result
}

#' @rdname torch_index_ops
#' @export
torch_argmax <- function(self, dim = NULL, keepdim = FALSE) plus_one(.torch_argmax(self, dim, keepdim))

#' @rdname torch_index_ops
#' @export
torch_argmin <- function(self, dim = NULL, keepdim = FALSE) plus_one(.torch_argmin(self, dim, keepdim))

#' @rdname torch_index_ops
#' @export
torch_argsort <- function(self, dim = -1L, descending = FALSE, stable = FALSE) {
  plus_one(.torch_argsort(self, stable = stable, dim = dim, descending = descending))
}

#' @rdname torch_index_ops
#' @export
torch_sort <- function(self, dim = -1L, descending = FALSE, stable) {
  result <- if (missing(stable)) {
    .torch_sort(self, dim = dim, descending = descending)
  } else {
    .torch_sort(self, stable = stable, dim = dim, descending = descending)
  }
  second_plus_one(result)
}

#' @rdname torch_index_ops
#' @export
torch_topk <- function(self, k, dim = -1L, largest = TRUE, sorted = TRUE) {
  second_plus_one(.torch_topk(self, k, dim, largest, sorted))
}

#' @rdname torch_index_ops
#' @export
torch_nonzero <- function(self, as_list = FALSE) {
  if (isTRUE(as_list)) {
    return(lapply(torch_nonzero_numpy(self), plus_one))
  }
  plus_one(.torch_nonzero(self))
}

#' @rdname torch_index_ops
#' @export
torch_where <- function(condition, self = NULL, other = NULL) {
  if (is.null(self) && is.null(other)) {
    return(lapply(.torch_where(condition), plus_one))
  }
  .torch_where(condition, self, other)
}

#' @rdname torch_index_ops
#' @export
torch_split <- function(self, split_size, dim = 1L) {
  if (length(split_size) > 1L) {
    return(torch_split_with_sizes(self, split_size, dim))
  }
  .torch_split(self, split_size, dim)
}

#' @rdname torch_index_ops
#' @export
torch_narrow <- function(self, dim, start, length) {
  if (is_torch_tensor(start)) start <- start$item()
  start <- whole_number(start, "start")
  if (start == 0) {
    abort("start indexing starts at 1", class = "value_error")
  }
  .torch_narrow(self, dim, if (start > 0) start - 1L else start, length)
}

#' @rdname torch_index_ops
#' @export
torch_movedim <- function(self, source, destination) {
  .torch_movedim(self, one_based(source, "source"), one_based(destination, "destination"))
}

#' @rdname torch_index_ops
#' @export
torch_norm <- function(self, p = 2, dim = NULL, keepdim = FALSE, dtype = NULL) {
  if (is.null(dim)) {
    return(.torch_norm(self, p = p))
  }
  .torch_norm(self, p = p, dim = dim, keepdim = keepdim, dtype = as_torch_dtype(dtype))
}

#' @rdname torch_index_ops
#' @export
torch_repeat_interleave <- function(self, repeats, dim = NULL, output_size = NULL) {
  .torch_repeat_interleave(self, repeats, dim, output_size = output_size)
}

#' @rdname torch_index_ops
#' @export
torch_bincount <- function(self, weights = NULL, minlength = 0L) {
  .torch_bincount(one_based_tensor(self, "self"), weights, minlength)
}

#' @rdname torch_index_ops
#' @export
torch_multinomial <- function(self, num_samples, replacement = FALSE, generator = NULL) {
  with_no_grad(plus_one(.torch_multinomial(self, num_samples, replacement, generator)))
}

#' @rdname torch_index_ops
#' @export
torch_logical_not <- function(self) .torch_logical_not(self)

# 1-based dims given to a function whose schema takes them 0-based (movedim's).
one_based <- function(x, arg) {
  x <- whole_numbers(x, arg)
  if (any(x == 0)) {
    abort(sprintf("`%s` is 1-based (the first is 1, the last -1), but found 0.", arg),
          class = "value_error")
  }
  ifelse(x > 0, x - 1, x)
}

# A 1-based index tensor as libtorch's (entries >= 1 lose 1).
one_based_tensor <- function(x, arg) {
  if (!is_torch_tensor(x)) x <- torch_tensor(whole_numbers(x, arg), dtype = torch_long())
  if (as.logical(torch_any(x == 0L))) {
    abort(sprintf("`%s` is 1-based (the first is 1), but found 0.", arg), class = "value_error")
  }
  x - (x >= 0L)$to(dtype = x$dtype)
}

# ---- operators -----------------------------------------------------------------------------------

# An R value on the left of an operator becomes a tensor (R torch's rule); on the right a number
# stays a scalar (libtorch's "wrapped number").
left_tensor <- function(e1, e2) {
  if (is_torch_tensor(e1)) e1 else torch_tensor(e1, device = meta(e2, "device"))
}
as_operand <- function(e, like) {
  if (is_torch_tensor(e)) e else torch_tensor(e, device = meta(like, "device"))
}

#' @export
`+.torch_tensor` <- function(e1, e2) {
  if (missing(e2)) {
    return(e1)
  }
  torch_add(left_tensor(e1, e2), e2)
}

#' @export
`-.torch_tensor` <- function(e1, e2) {
  if (missing(e2)) {
    return(torch_neg(e1))
  }
  torch_sub(left_tensor(e1, e2), e2)
}

#' @export
`*.torch_tensor` <- function(e1, e2) torch_mul(left_tensor(e1, e2), e2)

#' @export
`/.torch_tensor` <- function(e1, e2) torch_div(left_tensor(e1, e2), e2)

#' @export
`^.torch_tensor` <- function(e1, e2) torch_pow(left_tensor(e1, e2), e2)

#' @export
`%%.torch_tensor` <- function(e1, e2) torch_fmod(left_tensor(e1, e2), e2)

#' @export
`%/%.torch_tensor` <- function(e1, e2) {
  torch_div(left_tensor(e1, e2), e2, rounding_mode = "trunc")
}

#' @export
Ops.torch_tensor <- function(e1, e2) {
  like <- if (is_torch_tensor(e1)) e1 else e2
  switch(.Generic,
    `==` = torch_eq(as_operand(e1, like), as_operand(e2, like)),
    `!=` = torch_ne(as_operand(e1, like), e2),
    `<` = torch_lt(as_operand(e1, like), as_operand(e2, like)),
    `<=` = torch_le(as_operand(e1, like), as_operand(e2, like)),
    `>` = torch_gt(as_operand(e1, like), as_operand(e2, like)),
    `>=` = torch_ge(as_operand(e1, like), as_operand(e2, like)),
    `&` = torch_logical_and(as_operand(e1, like), as_operand(e2, like)),
    `|` = torch_logical_or(as_operand(e1, like), as_operand(e2, like)),
    `!` = torch_logical_not(e1),
    abort(sprintf("`%s` is not defined for tensors.", .Generic), class = "value_error")
  )
}

#' @export
`%*%.torch_tensor` <- function(x, y) torch_matmul(as_operand(x, y), as_operand(y, x))

#' @export
Math.torch_tensor <- function(x, ...) {
  switch(.Generic,
    abs = torch_abs(x), sign = torch_sign(x), sqrt = torch_sqrt(x), ceiling = torch_ceil(x),
    floor = torch_floor(x), trunc = torch_trunc(x), exp = torch_exp(x), expm1 = torch_expm1(x),
    log = {
      base <- list(...)$base
      if (is.null(base)) torch_log(x) else torch_log(x) / log(base)
    },
    log2 = torch_log2(x), log10 = torch_log10(x), log1p = torch_log1p(x), cos = torch_cos(x),
    sin = torch_sin(x), tan = torch_tan(x), acos = torch_acos(x), asin = torch_asin(x),
    atan = torch_atan(x), cosh = torch_cosh(x), sinh = torch_sinh(x), tanh = torch_tanh(x),
    round = torch_round(x), cumsum = torch_cumsum(x, dim = 1L),
    cumprod = torch_cumprod(x, dim = 1L), lgamma = torch_lgamma(x), digamma = torch_digamma(x),
    abort(sprintf("`%s` is not defined for tensors.", .Generic), class = "value_error")
  )
}

#' @export
Summary.torch_tensor <- function(..., na.rm = FALSE) {
  if (isTRUE(na.rm)) {
    abort("Torch tensors do not have NAs!", class = "value_error")
  }
  args <- list(...)
  one <- function(x) {
    if (!is_torch_tensor(x)) x <- torch_tensor(x)
    switch(.Generic, sum = torch_sum(x), prod = torch_prod(x), max = torch_max(x),
           min = torch_min(x), all = torch_all(x), any = torch_any(x),
           range = torch_stack(list(torch_min(x), torch_max(x))),
           abort(sprintf("`%s` is not defined for tensors.", .Generic), class = "value_error"))
  }
  values <- lapply(args, one)
  if (length(values) == 1L) {
    return(values[[1L]])
  }
  Reduce(function(a, b) one(torch_stack(list(a$reshape(-1L), b$reshape(-1L)))$reshape(-1L)),
         values)
}

#' @export
mean.torch_tensor <- function(x, dim, keepdim = FALSE, na.rm = FALSE, ...) {
  if (isTRUE(na.rm)) {
    abort("Torch tensors do not have NAs!", class = "value_error")
  }
  if (missing(dim)) torch_mean(x) else torch_mean(x, dim = dim, keepdim = keepdim)
}
