#' The pipe, as R torch re-exports it
#'
#' magrittr's `%>%`, which R torch re-exports and its users' code uses
#' (`x %>% self$fc1() %>% nnf_relu()`). See `magrittr::\link[magrittr:pipe]{\%>\%}`.
#'
#' @name %>%
#' @rdname pipe
#' @export
#' @importFrom magrittr %>%
#' @usage lhs \%>\% rhs
#' @param lhs A value.
#' @param rhs A function call, with `lhs` as its first argument.
#' @return The result of calling `rhs` on `lhs`.
#' @examples
#' torch_tensor(c(-1, 2)) %>% torch_relu() %>% torch_sum()
NULL
