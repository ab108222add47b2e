# torch_* functions of the R torch front end: PyTorch's functions with R torch's conventions (the
# argument roles of frontend-methods.R: 1-based dims and indices, sizes from doubles), lists of
# tensors, autograd modes, and saving tensors.

# torch_<name>(self, ...) as torch.Tensor.<name>(self, ...) (PyTorch's function and method agree
# for these); R vectors given as `self` become tensors first, as in R torch.
fe_method_call <- function(name, self, args, call) {
  if (!is_torch_tensor(self)) {
    if (!(is.numeric(self) || is.logical(self))) {
      abort(sprintf("`self` must be a torch_tensor, got %s.", describe(self)), call,
            class = "value_error")
    }
    self <- torch_tensor(self)
  }
  call_by_spec(tensor_method(name), tpy(self), args, method_specs[[name]], call)
}

#' Tensor functions
#'
#' R torch's `torch_*` functions, with R torch's conventions: dims count from
#' 1 (`dim = -1` is the last), indices taken and returned count from 1
#' (`torch_argmax()`, `torch_max(x, dim = )`'s second element,
#' `torch_index_select()`), sizes may be doubles. Each is PyTorch's function
#' of the same name (`torch_ceil()` is `torch.ceil`); `...` takes its further
#' arguments with R torch's names (`dim`, `keepdim`, `other`, ...).
#' `torch_cat()` and `torch_stack()` take a list of tensors;
#' `torch_where(condition, self, other)` chooses elementwise (with only
#' `condition`: the 1-based indices where it holds, one tensor per dim).
#' @param self A tensor (R vectors are converted with [torch_tensor()]).
#' @param ... The function's further arguments, as in R torch.
#' @param tensors A list of tensors.
#' @param dim The dim along which to join (1-based).
#' @param condition A boolean tensor.
#' @param other The values where `condition` is `FALSE` (a tensor or a number).
#' @param x `is_torch_tensor()`: any R object.
#' @return A tensor, a list of tensors (`torch_max(x, dim = )`, `torch_sort()`,
#'   `torch_split()`, ...), or `TRUE`/`FALSE` (`torch_equal()`,
#'   `torch_allclose()`).
#' @name torch-functions
#' @examples
#' if (ampkit_available()) {
#'   x <- torch_tensor(matrix(c(1, 5, 3, 2, 4, 6), nrow = 2))
#'   torch_sum(x, dim = 2)
#'   torch_max(x, dim = 1)
#'   torch_argmax(x, dim = 2)
#'   torch_mm(x, torch_t(x))
#'   torch_cat(list(x, x), dim = 1)$shape
#'   torch_stack(list(x, x))$shape
#'   torch_where(x > 2, x, 0)
#'   torch_flatten(torch_ones(2, 3, 4), start_dim = 2)$shape
#' }
NULL

#' @rdname torch-functions
#' @export
torch_cat <- function(tensors, dim = 1L) {
  call <- sys.call()
  call_python(wrap(torch_fn("cat")(tensor_list(tensors, call), dim = as_py_dim(dim, call = call))),
              call)
}

#' @rdname torch-functions
#' @export
torch_stack <- function(tensors, dim = 1L) {
  call <- sys.call()
  call_python(wrap(torch_fn("stack")(tensor_list(tensors, call),
                                     dim = as_py_dim(dim, call = call))), call)
}

# A list of tensors (R vectors converted) as a Python list.
tensor_list <- function(tensors, call) {
  if (is_torch_tensor(tensors) || !is.list(tensors)) {
    abort(sprintf("`tensors` must be a list of tensors, got %s.", describe(tensors)), call,
          class = "value_error")
  }
  unname(lapply(tensors, function(t) tpy(if (is_torch_tensor(t)) t else torch_tensor(t))))
}

#' @rdname torch-functions
#' @export
torch_where <- function(condition, self = NULL, other = NULL) {
  call <- sys.call()
  cond <- tpy(if (is_torch_tensor(condition)) condition else torch_tensor(condition))
  if (is.null(self) && is.null(other)) {
    indices <- call_python(wrap(torch_fn("where")(cond)), call)
    return(lapply(indices, function(i) new_torch_tensor(tensor_method("add_")(tpy(i), 1L))))
  }
  operand <- function(v) {
    if (is_torch_tensor(v)) tpy(v) else if (length(v) == 1L) v else tpy(torch_tensor(v))
  }
  new_torch_tensor(call_python(torch_fn("where")(cond, operand(self), operand(other)), call))
}
# Generated list (one line each): torch_<name>(self, ...) is PyTorch's torch.<name> with R torch's
# conventions, through the method table of frontend-methods.R.

#' @rdname torch-functions
#' @export
torch_exp <- function(self, ...) fe_method_call("exp", self, list(...), sys.call())

#' @rdname torch-functions
#' @export
torch_log <- function(self, ...) fe_method_call("log", self, list(...), sys.call())

#' @rdname torch-functions
#' @export
torch_sqrt <- function(self, ...) fe_method_call("sqrt", self, list(...), sys.call())

#' @rdname torch-functions
#' @export
torch_abs <- function(self, ...) fe_method_call("abs", self, list(...), sys.call())

#' @rdname torch-functions
#' @export
torch_relu <- function(self, ...) fe_method_call("relu", self, list(...), sys.call())

#' @rdname torch-functions
#' @export
torch_sigmoid <- function(self, ...) fe_method_call("sigmoid", self, list(...), sys.call())

#' @rdname torch-functions
#' @export
torch_tanh <- function(self, ...) fe_method_call("tanh", self, list(...), sys.call())

#' @rdname torch-functions
#' @export
torch_sin <- function(self, ...) fe_method_call("sin", self, list(...), sys.call())

#' @rdname torch-functions
#' @export
torch_cos <- function(self, ...) fe_method_call("cos", self, list(...), sys.call())

#' @rdname torch-functions
#' @export
torch_log1p <- function(self, ...) fe_method_call("log1p", self, list(...), sys.call())

#' @rdname torch-functions
#' @export
torch_expm1 <- function(self, ...) fe_method_call("expm1", self, list(...), sys.call())

#' @rdname torch-functions
#' @export
torch_log2 <- function(self, ...) fe_method_call("log2", self, list(...), sys.call())

#' @rdname torch-functions
#' @export
torch_log10 <- function(self, ...) fe_method_call("log10", self, list(...), sys.call())

#' @rdname torch-functions
#' @export
torch_sign <- function(self, ...) fe_method_call("sign", self, list(...), sys.call())

#' @rdname torch-functions
#' @export
torch_floor <- function(self, ...) fe_method_call("floor", self, list(...), sys.call())

#' @rdname torch-functions
#' @export
torch_ceil <- function(self, ...) fe_method_call("ceil", self, list(...), sys.call())

#' @rdname torch-functions
#' @export
torch_round <- function(self, ...) fe_method_call("round", self, list(...), sys.call())

#' @rdname torch-functions
#' @export
torch_trunc <- function(self, ...) fe_method_call("trunc", self, list(...), sys.call())

#' @rdname torch-functions
#' @export
torch_neg <- function(self, ...) fe_method_call("neg", self, list(...), sys.call())

#' @rdname torch-functions
#' @export
torch_square <- function(self, ...) fe_method_call("square", self, list(...), sys.call())

#' @rdname torch-functions
#' @export
torch_rsqrt <- function(self, ...) fe_method_call("rsqrt", self, list(...), sys.call())

#' @rdname torch-functions
#' @export
torch_reciprocal <- function(self, ...) fe_method_call("reciprocal", self, list(...), sys.call())

#' @rdname torch-functions
#' @export
torch_sum <- function(self, ...) fe_method_call("sum", self, list(...), sys.call())

#' @rdname torch-functions
#' @export
torch_mean <- function(self, ...) fe_method_call("mean", self, list(...), sys.call())

#' @rdname torch-functions
#' @export
torch_prod <- function(self, ...) fe_method_call("prod", self, list(...), sys.call())

#' @rdname torch-functions
#' @export
torch_std <- function(self, ...) fe_method_call("std", self, list(...), sys.call())

#' @rdname torch-functions
#' @export
torch_var <- function(self, ...) fe_method_call("var", self, list(...), sys.call())

#' @rdname torch-functions
#' @export
torch_amax <- function(self, ...) fe_method_call("amax", self, list(...), sys.call())

#' @rdname torch-functions
#' @export
torch_amin <- function(self, ...) fe_method_call("amin", self, list(...), sys.call())

#' @rdname torch-functions
#' @export
torch_logsumexp <- function(self, ...) fe_method_call("logsumexp", self, list(...), sys.call())

#' @rdname torch-functions
#' @export
torch_median <- function(self, ...) fe_method_call("median", self, list(...), sys.call())

#' @rdname torch-functions
#' @export
torch_mode <- function(self, ...) fe_method_call("mode", self, list(...), sys.call())

#' @rdname torch-functions
#' @export
torch_all <- function(self, ...) fe_method_call("all", self, list(...), sys.call())

#' @rdname torch-functions
#' @export
torch_any <- function(self, ...) fe_method_call("any", self, list(...), sys.call())

#' @rdname torch-functions
#' @export
torch_count_nonzero <- function(self, ...) {
  fe_method_call("count_nonzero", self, list(...), sys.call())
}

#' @rdname torch-functions
#' @export
torch_cumsum <- function(self, ...) fe_method_call("cumsum", self, list(...), sys.call())

#' @rdname torch-functions
#' @export
torch_cumprod <- function(self, ...) fe_method_call("cumprod", self, list(...), sys.call())

#' @rdname torch-functions
#' @export
torch_max <- function(self, ...) fe_method_call("max", self, list(...), sys.call())

#' @rdname torch-functions
#' @export
torch_min <- function(self, ...) fe_method_call("min", self, list(...), sys.call())

#' @rdname torch-functions
#' @export
torch_argmax <- function(self, ...) fe_method_call("argmax", self, list(...), sys.call())

#' @rdname torch-functions
#' @export
torch_argmin <- function(self, ...) fe_method_call("argmin", self, list(...), sys.call())

#' @rdname torch-functions
#' @export
torch_sort <- function(self, ...) fe_method_call("sort", self, list(...), sys.call())

#' @rdname torch-functions
#' @export
torch_topk <- function(self, ...) fe_method_call("topk", self, list(...), sys.call())

#' @rdname torch-functions
#' @export
torch_argsort <- function(self, ...) fe_method_call("argsort", self, list(...), sys.call())

#' @rdname torch-functions
#' @export
torch_kthvalue <- function(self, ...) fe_method_call("kthvalue", self, list(...), sys.call())

#' @rdname torch-functions
#' @export
torch_mm <- function(self, ...) fe_method_call("mm", self, list(...), sys.call())

#' @rdname torch-functions
#' @export
torch_matmul <- function(self, ...) fe_method_call("matmul", self, list(...), sys.call())

#' @rdname torch-functions
#' @export
torch_bmm <- function(self, ...) fe_method_call("bmm", self, list(...), sys.call())

#' @rdname torch-functions
#' @export
torch_dot <- function(self, ...) fe_method_call("dot", self, list(...), sys.call())

#' @rdname torch-functions
#' @export
torch_outer <- function(self, ...) fe_method_call("outer", self, list(...), sys.call())

#' @rdname torch-functions
#' @export
torch_t <- function(self, ...) fe_method_call("t", self, list(...), sys.call())

#' @rdname torch-functions
#' @export
torch_transpose <- function(self, ...) fe_method_call("transpose", self, list(...), sys.call())

#' @rdname torch-functions
#' @export
torch_reshape <- function(self, ...) fe_method_call("reshape", self, list(...), sys.call())

#' @rdname torch-functions
#' @export
torch_squeeze <- function(self, ...) fe_method_call("squeeze", self, list(...), sys.call())

#' @rdname torch-functions
#' @export
torch_unsqueeze <- function(self, ...) fe_method_call("unsqueeze", self, list(...), sys.call())

#' @rdname torch-functions
#' @export
torch_flatten <- function(self, ...) fe_method_call("flatten", self, list(...), sys.call())

#' @rdname torch-functions
#' @export
torch_unflatten <- function(self, ...) fe_method_call("unflatten", self, list(...), sys.call())

#' @rdname torch-functions
#' @export
torch_permute <- function(self, ...) fe_method_call("permute", self, list(...), sys.call())

#' @rdname torch-functions
#' @export
torch_flip <- function(self, ...) fe_method_call("flip", self, list(...), sys.call())

#' @rdname torch-functions
#' @export
torch_clamp <- function(self, ...) fe_method_call("clamp", self, list(...), sys.call())

#' @rdname torch-functions
#' @export
torch_clip <- function(self, ...) fe_method_call("clip", self, list(...), sys.call())

#' @rdname torch-functions
#' @export
torch_softmax <- function(self, ...) fe_method_call("softmax", self, list(...), sys.call())

#' @rdname torch-functions
#' @export
torch_log_softmax <- function(self, ...) fe_method_call("log_softmax", self, list(...), sys.call())

#' @rdname torch-functions
#' @export
torch_add <- function(self, ...) fe_method_call("add", self, list(...), sys.call())

#' @rdname torch-functions
#' @export
torch_sub <- function(self, ...) fe_method_call("sub", self, list(...), sys.call())

#' @rdname torch-functions
#' @export
torch_mul <- function(self, ...) fe_method_call("mul", self, list(...), sys.call())

#' @rdname torch-functions
#' @export
torch_div <- function(self, ...) fe_method_call("div", self, list(...), sys.call())

#' @rdname torch-functions
#' @export
torch_pow <- function(self, ...) fe_method_call("pow", self, list(...), sys.call())

#' @rdname torch-functions
#' @export
torch_remainder <- function(self, ...) fe_method_call("remainder", self, list(...), sys.call())

#' @rdname torch-functions
#' @export
torch_fmod <- function(self, ...) fe_method_call("fmod", self, list(...), sys.call())

#' @rdname torch-functions
#' @export
torch_eq <- function(self, ...) fe_method_call("eq", self, list(...), sys.call())

#' @rdname torch-functions
#' @export
torch_ne <- function(self, ...) fe_method_call("ne", self, list(...), sys.call())

#' @rdname torch-functions
#' @export
torch_lt <- function(self, ...) fe_method_call("lt", self, list(...), sys.call())

#' @rdname torch-functions
#' @export
torch_gt <- function(self, ...) fe_method_call("gt", self, list(...), sys.call())

#' @rdname torch-functions
#' @export
torch_le <- function(self, ...) fe_method_call("le", self, list(...), sys.call())

#' @rdname torch-functions
#' @export
torch_ge <- function(self, ...) fe_method_call("ge", self, list(...), sys.call())

#' @rdname torch-functions
#' @export
torch_maximum <- function(self, ...) fe_method_call("maximum", self, list(...), sys.call())

#' @rdname torch-functions
#' @export
torch_minimum <- function(self, ...) fe_method_call("minimum", self, list(...), sys.call())

#' @rdname torch-functions
#' @export
torch_logical_and <- function(self, ...) fe_method_call("logical_and", self, list(...), sys.call())

#' @rdname torch-functions
#' @export
torch_logical_or <- function(self, ...) fe_method_call("logical_or", self, list(...), sys.call())

#' @rdname torch-functions
#' @export
torch_logical_not <- function(self, ...) fe_method_call("logical_not", self, list(...), sys.call())

#' @rdname torch-functions
#' @export
torch_logical_xor <- function(self, ...) fe_method_call("logical_xor", self, list(...), sys.call())

#' @rdname torch-functions
#' @export
torch_isnan <- function(self, ...) fe_method_call("isnan", self, list(...), sys.call())

#' @rdname torch-functions
#' @export
torch_isinf <- function(self, ...) fe_method_call("isinf", self, list(...), sys.call())

#' @rdname torch-functions
#' @export
torch_isfinite <- function(self, ...) fe_method_call("isfinite", self, list(...), sys.call())

#' @rdname torch-functions
#' @export
torch_equal <- function(self, ...) fe_method_call("equal", self, list(...), sys.call())

#' @rdname torch-functions
#' @export
torch_allclose <- function(self, ...) fe_method_call("allclose", self, list(...), sys.call())

#' @rdname torch-functions
#' @export
torch_index_select <- function(self, ...) {
  fe_method_call("index_select", self, list(...), sys.call())
}

#' @rdname torch-functions
#' @export
torch_gather <- function(self, ...) fe_method_call("gather", self, list(...), sys.call())

#' @rdname torch-functions
#' @export
torch_masked_fill <- function(self, ...) fe_method_call("masked_fill", self, list(...), sys.call())

#' @rdname torch-functions
#' @export
torch_nonzero <- function(self, ...) fe_method_call("nonzero", self, list(...), sys.call())

#' @rdname torch-functions
#' @export
torch_chunk <- function(self, ...) fe_method_call("chunk", self, list(...), sys.call())

#' @rdname torch-functions
#' @export
torch_split <- function(self, ...) fe_method_call("split", self, list(...), sys.call())

#' @rdname torch-functions
#' @export
torch_unbind <- function(self, ...) fe_method_call("unbind", self, list(...), sys.call())

#' @rdname torch-functions
#' @export
torch_diag <- function(self, ...) fe_method_call("diag", self, list(...), sys.call())

#' @rdname torch-functions
#' @export
torch_tril <- function(self, ...) fe_method_call("tril", self, list(...), sys.call())

#' @rdname torch-functions
#' @export
torch_triu <- function(self, ...) fe_method_call("triu", self, list(...), sys.call())

#' @rdname torch-functions
#' @export
torch_norm <- function(self, ...) fe_method_call("norm", self, list(...), sys.call())

#' @rdname torch-functions
#' @export
torch_clone <- function(self, ...) fe_method_call("clone", self, list(...), sys.call())

#' @rdname torch-functions
#' @export
torch_tile <- function(self, ...) fe_method_call("tile", self, list(...), sys.call())

#' @rdname torch-functions
#' @export
torch_repeat_interleave <- function(self, ...) {
  fe_method_call("repeat_interleave", self, list(...), sys.call())
}

#' @rdname torch-functions
#' @export
torch_narrow <- function(self, ...) fe_method_call("narrow", self, list(...), sys.call())

#' @rdname torch-functions
#' @export
torch_select <- function(self, ...) fe_method_call("select", self, list(...), sys.call())

#' @rdname torch-functions
#' @export
torch_erf <- function(self, ...) fe_method_call("erf", self, list(...), sys.call())

#' @rdname torch-functions
#' @export
torch_lerp <- function(self, ...) fe_method_call("lerp", self, list(...), sys.call())

#' @rdname torch-functions
#' @export
torch_addmm <- function(self, ...) fe_method_call("addmm", self, list(...), sys.call())

#' @rdname torch-functions
#' @export
torch_baddbmm <- function(self, ...) fe_method_call("baddbmm", self, list(...), sys.call())

#' @rdname torch-functions
#' @export
torch_cross <- function(self, ...) fe_method_call("cross", self, list(...), sys.call())

#' @rdname torch-functions
#' @export
torch_diff <- function(self, ...) fe_method_call("diff", self, list(...), sys.call())

#' @rdname torch-functions
#' @export
torch_logit <- function(self, ...) fe_method_call("logit", self, list(...), sys.call())

#' @rdname torch-functions
#' @export
torch_bernoulli <- function(self, ...) fe_method_call("bernoulli", self, list(...), sys.call())

#' @rdname torch-functions
#' @export
torch_sinh <- function(self, ...) fe_method_call("sinh", self, list(...), sys.call())

#' @rdname torch-functions
#' @export
torch_cosh <- function(self, ...) fe_method_call("cosh", self, list(...), sys.call())

#' @rdname torch-functions
#' @export
torch_tan <- function(self, ...) fe_method_call("tan", self, list(...), sys.call())

#' @rdname torch-functions
#' @export
torch_asin <- function(self, ...) fe_method_call("asin", self, list(...), sys.call())

#' @rdname torch-functions
#' @export
torch_acos <- function(self, ...) fe_method_call("acos", self, list(...), sys.call())

#' @rdname torch-functions
#' @export
torch_atan <- function(self, ...) fe_method_call("atan", self, list(...), sys.call())

#' @rdname torch-functions
#' @export
torch_atan2 <- function(self, ...) fe_method_call("atan2", self, list(...), sys.call())

#' @rdname torch-functions
#' @export
torch_hypot <- function(self, ...) fe_method_call("hypot", self, list(...), sys.call())

#' @rdname torch-functions
#' @export
torch_frac <- function(self, ...) fe_method_call("frac", self, list(...), sys.call())

#' @rdname torch-functions
#' @export
torch_exp2 <- function(self, ...) fe_method_call("exp2", self, list(...), sys.call())

#' @rdname torch-functions
#' @export
torch_mv <- function(self, ...) fe_method_call("mv", self, list(...), sys.call())

#' @rdname torch-functions
#' @export
torch_kron <- function(self, ...) fe_method_call("kron", self, list(...), sys.call())

#' @rdname torch-functions
#' @export
torch_trace <- function(self, ...) fe_method_call("trace", self, list(...), sys.call())

#' @rdname torch-functions
#' @export
torch_det <- function(self, ...) fe_method_call("det", self, list(...), sys.call())

#' @rdname torch-functions
#' @export
torch_inverse <- function(self, ...) fe_method_call("inverse", self, list(...), sys.call())

#' @rdname torch-functions
#' @export
torch_narrow_copy <- function(self, ...) {
  fe_method_call("narrow_copy", self, list(...), sys.call())
}

#' @rdname torch-functions
#' @param equation `torch_einsum()`'s subscripts, such as `"ij,jk->ik"`.
#' @export
torch_einsum <- function(equation, tensors) {
  call <- sys.call()
  arg_string(equation, "equation", call, example = "such as \"ij,jk->ik\"")
  new_torch_tensor(call_python(torch_fn("einsum")(equation, tensor_list(tensors, call)), call))
}

#' @rdname torch-functions
#' @export
is_torch_tensor <- function(x) inherits(x, "torch_tensor")

# ---- autograd ----------------------------------------------------------------------------------

#' Autograd modes
#'
#' `with_no_grad(code)` runs `code` with autograd off (nothing is recorded,
#' as in parameter updates); `with_enable_grad(code)` with it on. The mode
#' before is restored afterwards, also when `code` fails. `autograd_grad()`
#' computes the gradients of `outputs` with respect to `inputs`
#' (`torch.autograd.grad`).
#' @param code Code to run.
#' @param outputs,inputs A tensor or a list of tensors.
#' @param grad_outputs `NULL` or the gradients of `outputs` (a tensor or list).
#' @param retain_graph,create_graph,allow_unused As in R torch.
#' @return `with_no_grad()`/`with_enable_grad()`: the value of `code`;
#'   `autograd_grad()`: a list of tensors (`NULL` for unused inputs).
#' @export
#' @examples
#' if (ampkit_available()) {
#'   w <- torch_ones(2, requires_grad = TRUE)
#'   y <- with_no_grad(w * 2)
#'   y$requires_grad
#'   loss <- (w * w)$sum()
#'   autograd_grad(loss, list(w))
#'   with_no_grad(w$sub_(0.1))
#' }
with_no_grad <- function(code) {
  with_grad_mode(FALSE, code)
}

#' @rdname with_no_grad
#' @export
with_enable_grad <- function(code) {
  with_grad_mode(TRUE, code)
}

with_grad_mode <- function(enabled, code) {
  torch_py()
  before <- .fe$set_grad_enabled(enabled)
  on.exit(.fe$set_grad_enabled(before))
  force(code)
}

#' @rdname with_no_grad
#' @param .env The environment whose exit restores the mode before.
#' @export
local_no_grad <- function(.env = parent.frame()) {
  local_grad_mode(FALSE, .env)
}

#' @rdname with_no_grad
#' @export
local_enable_grad <- function(.env = parent.frame()) {
  local_grad_mode(TRUE, .env)
}

local_grad_mode <- function(enabled, .env = parent.frame()) {
  torch_py()
  before <- .fe$set_grad_enabled(enabled)
  withr::defer(.fe$set_grad_enabled(before), envir = .env)
}

#' @rdname with_no_grad
#' @export
autograd_grad <- function(outputs, inputs, grad_outputs = NULL, retain_graph = create_graph,
                          create_graph = FALSE, allow_unused = FALSE) {
  call <- sys.call()
  as_list <- function(x) if (is_torch_tensor(x)) list(x) else x
  grads <- call_python(torch_py()$autograd$grad(
    unwrap(as_list(outputs)), unwrap(as_list(inputs)),
    grad_outputs = if (!is.null(grad_outputs)) unwrap(as_list(grad_outputs)),
    retain_graph = arg_flag(retain_graph, "retain_graph", call),
    create_graph = arg_flag(create_graph, "create_graph", call),
    allow_unused = arg_flag(allow_unused, "allow_unused", call)
  ), call)
  wrap(grads)
}

#' @rdname with_no_grad
#' @param tensors A tensor or a list of tensors to differentiate.
#' @param grad_tensors `NULL` or the gradients of `tensors` (a tensor or list).
#' @export
autograd_backward <- function(tensors, grad_tensors = NULL, retain_graph = create_graph,
                              create_graph = FALSE) {
  call <- sys.call()
  as_list <- function(x) if (is_torch_tensor(x)) list(x) else x
  call_python(torch_py()$autograd$backward(
    unwrap(as_list(tensors)),
    grad_tensors = if (!is.null(grad_tensors)) unwrap(as_list(grad_tensors)),
    retain_graph = arg_flag(retain_graph, "retain_graph", call),
    create_graph = arg_flag(create_graph, "create_graph", call)
  ), call)
  invisible(NULL)
}

# ---- saving ------------------------------------------------------------------------------------

#' Save and load tensors
#'
#' `torch_save(obj, path)` writes a tensor, or a (named) list of tensors, with
#' PyTorch's `torch.save`; `torch_load(path)` reads it back (named lists come
#' back as named lists; a partly named list is saved as a dict with the keys
#' `ampkit_r_list`, `names` and `values`, which `torch_load()` turns back into
#' the list). Files are PyTorch's format, readable by Python's
#' `torch.load`; R torch's own files cannot be read (nor these by R torch).
#' Modules' and optimizers' state dicts and the grad scaler have methods of
#' their own.
#' @param obj A tensor or a list of tensors.
#' @param path A file path.
#' @param device Where `torch_load()` puts tensors (`NULL`: where they were).
#' @param ... Unused.
#' @return `torch_save()`: `path`, invisibly. `torch_load()`: the object.
#' @export
#' @examples
#' if (ampkit_available()) {
#'   path <- tempfile(fileext = ".pt")
#'   torch_save(list(a = torch_ones(2), b = torch_tensor(1:3)), path)
#'   torch_load(path)
#' }
torch_save <- function(obj, path, ...) {
  UseMethod("torch_save")
}

#' @export
torch_save.default <- function(obj, path, ...) {
  call <- sys.call()
  arg_string(path, "path", call, example = "(a file path)")
  call_python(torch_fn("save")(save_value(obj), path.expand(path)), call)
  invisible(path)
}

#' @rdname torch_save
#' @param legacy_stream Unused (R torch's option for files of old PyTorch
#'   versions; PyTorch reads them itself).
#' @export
load_state_dict <- function(path, ..., legacy_stream = FALSE) {
  # a state dict saved by Python's torch.save() (R torch's loader of such files)
  out <- torch_load(path)
  if (!is.list(out) || is.null(names(out))) {
    abort(sprintf("`path` must hold a state dict (a dict of tensors), got %s.", describe(out)),
          sys.call(), class = "value_error")
  }
  out
}

# R values as torch.save() takes them: tensors as theirs, plain lists as Python lists (no names)
# or dicts (distinct non-empty names) or, partly named, as a dict {"ampkit_r_list": True,
# "names": [...], "values": [...]} that torch_load() turns back into the R list.
save_value <- function(x) {
  if (!is.list(x) || !is.null(oldClass(x))) {
    return(unwrap(x))
  }
  values <- lapply(unname(x), save_value)
  nms <- names(x)
  if (is.null(nms) || !any(nzchar(nms))) {
    return(values)
  }
  if (all(nzchar(nms)) && !anyDuplicated(nms)) {
    names(values) <- nms
    return(values)
  }
  list(ampkit_r_list = TRUE, names = as.list(nms), values = values)
}

restore_lists <- function(x) {
  if (!is.list(x) || !is.null(oldClass(x))) {
    return(x)
  }
  if (isTRUE(x$ampkit_r_list) && setequal(names(x), c("ampkit_r_list", "names", "values"))) {
    out <- lapply(x$values, restore_lists)
    names(out) <- unlist(x$names)
    return(out)
  }
  x[] <- lapply(x, restore_lists)
  x
}

#' @rdname torch_save
#' @export
torch_load <- function(path, device = NULL) {
  call <- sys.call()
  arg_string(path, "path", call, example = "(a file path)")
  if (!file.exists(path)) {
    abort(sprintf("`path` must be an existing file, got \"%s\".", path), call,
          class = "value_error")
  }
  py <- call_python(torch_fn("load")(path.expand(path), map_location = as_py_device(device),
                                     weights_only = TRUE), call)
  restore_lists(wrap(py))
}
