# The shipped example scripts run and print what they promise.

test_that("rtorch_article_benchmark.R prints the three times of R torch's article", {
  skip_if_no_ampkit()
  script <- system.file("examples", "rtorch_article_benchmark.R", package = "ampkit")
  expect_true(nzchar(script))
  # 3 of the article's 50 batches: the script as a whole, not its timings (the benchmark's)
  out <- system2(file.path(R.home("bin"), "Rscript"), shQuote(script), stdout = TRUE,
                 stderr = TRUE, env = c("AMPKIT_BENCH_DEVICE=cpu", "AMPKIT_BENCH_BATCHES=3"))
  expect_null(attr(out, "status"))
  expect_true(any(grepl("width 512, 3 layers, 3 batches x 3 epochs", out, fixed = TRUE)))
  for (run in c("fp32:", "autocast:", "autocast + grad scaler:")) {
    expect_true(any(startsWith(out, run)), label = paste("a line for", run))
  }
  expect_identical(sum(grepl("elapsed", out)), 3L)
})

test_that("when_amp_goes_wrong.R shows the skips, the report, the collapse and the fix", {
  skip_if_no_ampkit()
  script <- system.file("examples", "when_amp_goes_wrong.R", package = "ampkit")
  expect_true(nzchar(script))
  out <- system2(file.path(R.home("bin"), "Rscript"), shQuote(script), stdout = TRUE,
                 stderr = TRUE)
  expect_null(attr(out, "status"))
  fixed_at <- grep("inputs normalised", out, fixed = TRUE)
  located_at <- grep("== where the inf is made", out, fixed = TRUE)
  suggested_at <- grep("== suggest_policy", out, fixed = TRUE)
  raw <- out[seq_len(fixed_at)]
  fixed <- out[seq(fixed_at + 1L, located_at - 1L)]
  located <- out[seq(located_at, suggested_at - 1L)]
  suggested <- out[-seq_len(suggested_at)]
  expect_true(all(grepl("skipped=TRUE", grep("^step \\d+: skipped", raw, value = TRUE))))
  expect_true(any(grepl("overflow: .*2\\.weight \\(\\d+ inf", raw)))
  expect_true(any(grepl("ampkit_scale_collapse: The loss scale collapsed", raw, fixed = TRUE)))
  expect_identical(sum(grepl("skipped=FALSE", fixed)), 6L)
  expect_true(any(grepl("skipped_steps=0", fixed, fixed = TRUE)))
  expect_identical(sum(grepl("forward=none backward=none parameters=4", located, fixed = TRUE)),
                   3L)
  expect_true("locator: 3 host reads for 3 steps" %in% located)
  expect_identical(sub("^keep (\\d) .*", "\\1", grep("^keep ", suggested, value = TRUE)),
                   c("0", "2", "4"))
  expect_identical(sum(grepl("skipped=FALSE", suggested)), 6L)
  expect_true(any(grepl("skipped_steps=0", suggested, fixed = TRUE)))
})
