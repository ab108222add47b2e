# The shipped example scripts run and print what they promise.

test_that("seed_benchmark.R prints the three times of R torch's article", {
  skip_if_no_ampkit()
  script <- system.file("examples", "seed_benchmark.R", package = "ampkit")
  expect_true(nzchar(script))
  out <- system2(file.path(R.home("bin"), "Rscript"), shQuote(script), stdout = TRUE,
                 stderr = TRUE, env = "AMPKIT_BENCH_DEVICE=cpu")
  expect_null(attr(out, "status"))
  for (run in c("fp32:", "autocast:", "autocast + grad scaler:")) {
    expect_true(any(startsWith(out, run)), label = paste("a line for", run))
  }
  expect_identical(sum(grepl("elapsed", out)), 3L)
})
