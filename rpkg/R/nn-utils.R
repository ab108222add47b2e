# R torch's nn_init_* (in-place initialization of a tensor, from torch's generator) and
# nn_utils_clip_grad_norm_() / nn_utils_clip_grad_value_(), over torch.nn.init and
# torch.nn.utils.

nn_init_call <- function(name, tensor, ...) {
  py <- tensor_arg(tensor, "tensor", null_ok = FALSE)
  f <- do.call("$", list(torch_nn()$init, name))
  call_python(f(py, ...), call = NULL)
  invisible(tensor)
}

#' Initialize a tensor in place
#'
#' R torch's `nn_init_*` functions: fill `tensor` in place (without recording
#' gradients), from torch's generator, and return it invisibly; typically on a
#' module's parameters in `initialize`.
#'
#' @param tensor A tensor (often a parameter).
#' @param mean,std Normal distribution's mean and standard deviation.
#' @param a,b Uniform distribution's bounds (`nn_init_uniform_()`); the
#'   negative slope of the rectifier after the layer (`nn_init_kaiming_*`).
#' @param val The constant.
#' @param gain A scaling factor.
#' @param mode `"fan_in"` or `"fan_out"`.
#' @param nonlinearity The nonlinearity after the layer (`"relu"`,
#'   `"leaky_relu"`, ...).
#' @return `tensor`, invisibly.
#' @name nn_init
#' @examples
#' if (ampkit_available()) {
#'   fc <- nn_linear(4, 2)
#'   nn_init_xavier_uniform_(fc$weight)
#'   nn_init_zeros_(fc$bias)
#'   fc$bias
#' }
NULL

#' @rdname nn_init
#' @export
nn_init_normal_ <- function(tensor, mean = 0, std = 1) {
  nn_init_call("normal_", tensor, mean = arg_number(mean, "mean"), std = arg_number(std, "std"))
}

#' @rdname nn_init
#' @export
nn_init_uniform_ <- function(tensor, a = 0, b = 1) {
  nn_init_call("uniform_", tensor, a = arg_number(a, "a"), b = arg_number(b, "b"))
}

#' @rdname nn_init
#' @export
nn_init_constant_ <- function(tensor, val) {
  nn_init_call("constant_", tensor, arg_number(val, "val"))
}

#' @rdname nn_init
#' @export
nn_init_zeros_ <- function(tensor) nn_init_call("zeros_", tensor)

#' @rdname nn_init
#' @export
nn_init_ones_ <- function(tensor) nn_init_call("ones_", tensor)

#' @rdname nn_init
#' @export
nn_init_xavier_uniform_ <- function(tensor, gain = 1) {
  nn_init_call("xavier_uniform_", tensor, gain = arg_number(gain, "gain"))
}

#' @rdname nn_init
#' @export
nn_init_xavier_normal_ <- function(tensor, gain = 1) {
  nn_init_call("xavier_normal_", tensor, gain = arg_number(gain, "gain"))
}

#' @rdname nn_init
#' @export
nn_init_kaiming_uniform_ <- function(tensor, a = 0, mode = "fan_in",
                                     nonlinearity = "leaky_relu") {
  nn_init_call("kaiming_uniform_", tensor, a = arg_number(a, "a"),
               mode = arg_string(mode, "mode", example = "such as \"fan_in\""),
               nonlinearity = arg_string(nonlinearity, "nonlinearity",
                                         example = "such as \"relu\""))
}

#' @rdname nn_init
#' @export
nn_init_kaiming_normal_ <- function(tensor, a = 0, mode = "fan_in",
                                    nonlinearity = "leaky_relu") {
  nn_init_call("kaiming_normal_", tensor, a = arg_number(a, "a"),
               mode = arg_string(mode, "mode", example = "such as \"fan_in\""),
               nonlinearity = arg_string(nonlinearity, "nonlinearity",
                                         example = "such as \"relu\""))
}

# A tensor or a list of tensors (`net$parameters`) as a Python list.
parameters_arg <- function(parameters) {
  if (is_torch_tensor(parameters)) {
    parameters <- list(parameters)
  }
  if (!is.list(parameters) || !all(vapply(parameters, is_torch_tensor, logical(1)))) {
    abort(sprintf(paste0("`parameters` must be a tensor or a list of tensors (such as ",
                         "`net$parameters`), got %s."),
                  describe(parameters)), class = "value_error")
  }
  reticulate::r_to_py(lapply(unname(parameters), unwrap), convert = FALSE)
}

#' Clip gradients
#'
#' R torch's `nn_utils_clip_grad_norm_()` scales the gradients of `parameters`
#' in place so that their total norm is at most `max_norm`, and returns the
#' total norm before clipping (a tensor); `nn_utils_clip_grad_value_()` clamps
#' each gradient element to `[-clip_value, clip_value]`. With a grad scaler,
#' call `scaler$unscale_(opt)` first (see [amp_grad_scaler()]).
#'
#' @param parameters A tensor or a list of tensors (`net$parameters`).
#' @param max_norm The largest total norm.
#' @param norm_type The norm's order (`Inf` for the largest absolute value).
#' @param clip_value The largest absolute value of a gradient element.
#' @return `nn_utils_clip_grad_norm_()`: the total norm, a tensor.
#'   `nn_utils_clip_grad_value_()`: `NULL`, invisibly.
#' @name nn_utils_clip
#' @examples
#' if (ampkit_available()) {
#'   net <- nn_linear(3, 1)
#'   nnf_mse_loss(net(torch_randn(4, 3)), torch_ones(4, 1) * 100)$backward()
#'   nn_utils_clip_grad_norm_(net$parameters, max_norm = 1)
#'   nn_utils_clip_grad_value_(net$parameters, 0.1)
#' }
NULL

#' @rdname nn_utils_clip
#' @export
nn_utils_clip_grad_norm_ <- function(parameters, max_norm, norm_type = 2) {
  wrap(call_python(torch_nn()$utils$clip_grad_norm_(
    parameters_arg(parameters), arg_number(max_norm, "max_norm"),
    norm_type = arg_number(norm_type, "norm_type")), call = NULL))
}

#' @rdname nn_utils_clip
#' @export
nn_utils_clip_grad_value_ <- function(parameters, clip_value) {
  call_python(torch_nn()$utils$clip_grad_value_(
    parameters_arg(parameters), arg_number(clip_value, "clip_value")), call = NULL)
  invisible(NULL)
}
