# contrib_sort_vertices(): R torch's vertex sort for rotated IoU, checked against the rule written
# in R (each polygon's valid points ordered by atan2's angle), its corner cases, and bad input.

# What the sort must give for one polygon: `xy` a points x 2 matrix, `valid` logical; 0-based.
expected_order <- function(xy, valid) {
  angle <- atan2(xy[, 2], xy[, 1]) %% (2 * pi)
  taken <- which(valid)
  first <- taken[order(angle[taken])] - 1L
  pad <- which(!valid[-(1:8)])[1] + 7L
  c(first, first[1], rep(pad, 8L - length(first)))
}

random_polygons <- function(batch, polygons, points) {
  v <- torch_randn(batch, polygons, points, 2)
  m <- torch_rand(batch, polygons, points) > 0.7
  # 3 to 8 valid points a polygon: the first 8 - k points of each, k drawn per polygon
  keep <- torch_randint(0, 6, c(batch, polygons, 1))
  rank <- torch_cumsum(m$to(dtype = torch_int()), dim = 3)
  m <- m & (rank <= 8 - keep)
  m[, , 1:3] <- TRUE
  m <- m & (torch_cumsum(m$to(dtype = torch_int()), dim = 3) <= 8)
  nv <- torch_sum(m$to(dtype = torch_int()), dim = -1)$to(dtype = torch_int())
  list(v = v, m = m, nv = nv)
}

test_that("contrib_sort_vertices orders each polygon's vertices by angle, as R's atan2 does", {
  torch_manual_seed(3)
  p <- random_polygons(2, 50, 24)
  result <- contrib_sort_vertices(p$v, p$m, p$nv)
  expect_identical(result$shape, c(2L, 50L, 9L))
  expect_true(result$dtype == torch_int())
  v <- as_array(p$v)
  m <- as_array(p$m)
  got <- as_array(result)
  expect_true(all(as_array(p$nv) >= 3 & as_array(p$nv) <= 8))
  for (b in 1:2) for (i in 1:50) {
    expect_identical(got[b, i, ], expected_order(v[b, i, , ], m[b, i, ]),
                     label = sprintf("polygon [%d, %d]", b, i))
  }
})

test_that("contrib_sort_vertices pads short polygons, repeats the first vertex, keeps 4 corners", {
  square <- rbind(c(1, 1), c(-1, -1), c(1, -1), c(-1, 1))
  v <- torch_zeros(3, 1, 10, 2)
  m <- torch_zeros(3, 1, 10, dtype = torch_bool())
  # polygon 1: 2 vertices only; polygon 2: the square's corners, every crossing point valid;
  # polygon 3: two identical boxes, the square's corners twice
  v[1, 1, 1:2, ] <- torch_tensor(square[1:2, ])
  m[1, 1, 1:2] <- TRUE
  v[2, 1, 1:4, ] <- torch_tensor(square)
  v[2, 1, 9:10, ] <- torch_tensor(rbind(c(0, 1), c(0, -1)))
  corners_and_crossings <- c(1:4, 9:10)  # `:` inside the brackets makes slices (R torch's)
  m[2, 1, corners_and_crossings] <- TRUE
  v[3, 1, 1:8, ] <- torch_tensor(rbind(square, square))
  m[3, 1, 1:8] <- TRUE
  nv <- torch_tensor(c(2L, 6L, 8L), dtype = torch_int())$unsqueeze(2)
  got <- as_array(contrib_sort_vertices(v, m, nv))
  expect_identical(got[1, 1, ], rep(8L, 9))  # fewer than 3: the first invalid crossing point
  # fewer than 3 where every crossing point is valid: point 0 in every slot
  m[1, 1, 9:10] <- TRUE
  short <- contrib_sort_vertices(v[1:1, , , ], m[1:1, , ],
                                 torch_tensor(matrix(2L), dtype = torch_int()))
  expect_identical(as_array(short)[1, 1, ], rep(0L, 9))
  # the square's corners and (0, 1), (0, -1) in angle order, closed, then the first vertex again
  expect_identical(got[2, 1, ], c(0L, 8L, 3L, 1L, 9L, 2L, 0L, 0L, 0L))
  expect_identical(got[3, 1, ], c(0L, 3L, 1L, 2L, 0L, 8L, 8L, 8L, 8L))
})

test_that("contrib_sort_vertices takes points on the x-axis at angle 0 and pi", {
  v <- torch_zeros(1, 1, 9, 2)
  v[1, 1, 1:4, ] <- torch_tensor(rbind(c(-1, 0), c(0, -1), c(1, 0), c(0, 1)))
  m <- torch_zeros(1, 1, 9, dtype = torch_bool())
  m[1, 1, 1:4] <- TRUE
  got <- contrib_sort_vertices(v, m, torch_tensor(matrix(4L), dtype = torch_int()))
  expect_identical(as_array(got)[1, 1, ], c(2L, 3L, 0L, 1L, 2L, 8L, 8L, 8L, 8L))
})

test_that("contrib_sort_vertices refuses what its kernel would misread, naming the argument", {
  torch_manual_seed(4)
  p <- random_polygons(1, 4, 12)
  expect_error(contrib_sort_vertices(p$v$double(), p$m, p$nv), "`vertices` must be a float32",
               class = "value_error")
  expect_error(contrib_sort_vertices(p$v[, , , 1], p$m, p$nv), "`vertices` must have shape",
               class = "value_error")
  expect_error(contrib_sort_vertices(p$v, p$m$to(dtype = torch_int()), p$nv),
               "`mask` must be a bool tensor", class = "value_error")
  expect_error(contrib_sort_vertices(p$v, p$m[, 1:3, ], p$nv),
               "`mask` must have shape \\(batch, polygons, points\\), got \\(1, 3, 12\\)",
               class = "value_error")
  expect_error(contrib_sort_vertices(p$v, p$m, p$nv$float()), "`num_valid` must be an integer",
               class = "value_error")
  # 9 valid points: the count agrees with the mask, but the kernel has 8 slots for vertices
  nine <- p$m$clone()
  nine[1, 2, 1:9] <- TRUE
  too_many <- p$nv$clone()
  too_many[1, 2] <- 9L
  expect_error(contrib_sort_vertices(p$v, nine, too_many),
               "`num_valid` must be from 0 to 8 .* got 9 for polygon \\[1, 2\\]",
               class = "value_error")
  beyond <- p$nv$clone()
  beyond[1, 3] <- beyond[1, 3] + 1L
  expect_error(contrib_sort_vertices(p$v, p$m, beyond),
               "must be at most the TRUE entries of `mask`, got [4-9] for polygon \\[1, 3\\]",
               class = "value_error")
  expect_error(contrib_sort_vertices(p$v, p$m, as_array(p$nv)), "`num_valid` must be a tensor",
               class = "value_error")
  # an int64 count is taken as it is (R integers make long tensors)
  expect_identical(as_array(contrib_sort_vertices(p$v, p$m, p$nv$long())),
                   as_array(contrib_sort_vertices(p$v, p$m, p$nv)))
})
