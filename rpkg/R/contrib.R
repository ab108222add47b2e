#' Contrib sort vertices
#'
#' Sorts the vertices of the polygons where pairs of rotated boxes intersect, for the shoelace
#' formula of their area (rotated IoU): R torch's function of the same name, after the kernel of
#' [Rotated_IoU](https://github.com/lilanxiao/Rotated_IoU). Each polygon has `points` candidate
#' vertices centred on (0, 0): the first 8 are the two boxes' corners, the rest the crossings of
#' their edges; `mask` says which are vertices of the intersection.
#'
#' @note This function does not make part of the official torch API.
#' @details R torch runs it on CUDA tensors only. Here it runs on any device: the sort is a loop
#'   on the CPU, and CUDA tensors go through host memory and back. The result has 9 slots per
#'   polygon: the valid vertices by angle from the positive x-axis, anticlockwise, then the first
#'   again, then an invalid crossing point (one the caller zeroes, which adds no area) or, where
#'   every crossing point is valid, the first vertex again. Vertices within 1e-8 of one another
#'   are taken once, and a point exactly on the x-axis is at angle 0 or pi (the kernel leaves it
#'   undefined). Points at one angle from the centre, which a convex polygon around it does not
#'   have, fall as in the kernel (above the x-axis, only the first is taken). A polygon of fewer
#'   than 3 vertices gets one point in all 9 slots. Where two boxes are the same, their 8 corners
#'   are 4 points twice, and the 4 are kept once.
#'
#'   Positions are 0-based, as R torch's are (the kernel's own numbering): add 1 before indexing
#'   from R (`torch_gather()`, `[`).
#'
#' @param vertices A float32 tensor of shape (batch, polygons, points, 2): each point's x and y.
#' @param mask A bool tensor of shape (batch, polygons, points): which points are vertices.
#' @param num_valid An integer tensor of shape (batch, polygons): how many points each polygon
#'   has (at most 8, and at most its `TRUE` entries of `mask`; more is a `value_error`: the
#'   kernel would write past the 9 slots, or fill them with point 0).
#' @return An int32 tensor of shape (batch, polygons, 9), on `vertices`' device.
#'
#' @examples
#' # one polygon, the unit square's corners given out of order (the other points invalid)
#' v <- torch_zeros(1, 1, 24, 2)
#' v[1, 1, 1:4, ] <- torch_tensor(rbind(c(1, 1), c(-1, -1), c(1, -1), c(-1, 1)))
#' m <- torch_zeros(1, 1, 24, dtype = torch_bool())
#' m[1, 1, 1:4] <- TRUE
#' nv <- torch_sum(m$to(dtype = torch_int()), dim = -1)$to(dtype = torch_int())
#' contrib_sort_vertices(v, m, nv) # corners 0, 3, 1, 2 anticlockwise, 0 again, then point 8
#' @export
contrib_sort_vertices <- function(vertices, mask, num_valid) {
  .Call(C_contrib_sort_vertices, vertices, mask, num_valid)
}
