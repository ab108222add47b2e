# R torch's AMP article, as the vignette rtorch-amp-article.Rmd runs it with ampkit (the
# article's code with library(ampkit) and its device lines changed): extracted with
# knitr::purl() and run here, at the vignette's small CPU sizes.

article_path <- function() {
  testthat::test_path("..", "..", "vignettes", "rtorch-amp-article.Rmd")
}

test_that("R torch's AMP article runs with library(ampkit)", {
  skip_if_no_ampkit()
  skip_if_not(file.exists(article_path()), "the vignette sources are not here (R CMD check)")
  script <- withr::local_tempfile(fileext = ".R")
  knitr::purl(article_path(), output = script, quiet = TRUE)
  withr::local_envvar(AMPKIT_ARTICLE_FULL = "")
  env <- new.env(parent = globalenv())
  # knitr::knit_code holds the chunks only while knitting: hand the "sizes" chunk to the script.
  code <- readLines(article_path())
  start <- grep("^```\\{r sizes, eval = FALSE\\}", code)
  end <- start + which(code[-seq_len(start)] == "```")[[1]]
  sizes <- code[(start + 1):(end - 1)]
  lines <- readLines(script)
  lines <- sub("knitr::knit_code$get(\"sizes\")", "sizes_chunk", lines, fixed = TRUE)
  assign("sizes_chunk", sizes, envir = env)
  out <- utils::capture.output(source(exprs = parse(text = lines), local = env,
                                      print.eval = TRUE))
  # The small sizes, the model and the three trainings of the benchmark ran.
  expect_identical(env$batch_size, 64)
  expect_identical(env$data[[1]]$shape, c(64L, 256L))
  expect_identical(class(env$net), c("nn_sequential", "nn_module"))
  expect_identical(length(env$net), 5L)
  expect_true(env$output$dtype == torch_bfloat16())
  expect_true(env$loss$dtype == torch_float32())
  expect_identical(sum(grepl("elapsed", out)), 3L)
  expect_true(is.finite(env$run(autocast = TRUE, scale = TRUE)))
})
