# Runs R torch's vignettes (articles) chunk by chunk against the installed ampkit R package, with
# `library(ampkit)` in place of `library(torch)`, and prints each chunk's outcome: the check behind
# rpkg/CONFORMANCE.md's list of R torch's articles that run. Chunks with `eval = FALSE` are left
# out as the article leaves them; a chunk that fails is reported and the next ones still run.
# Usage: Rscript tools/rtorch_tests/vignettes.R VIGNETTE.Rmd [...]
#   (R_LIBS naming the library ampkit is installed in, as tools/rtorch_tests/run.sh)

run_vignette <- function(path) {
  lines <- readLines(path, warn = FALSE)
  starts <- grep("^```\\{r", lines)
  ends <- grep("^```\\s*$", lines)
  env <- new.env(parent = globalenv())
  old <- setwd(dirname(path))
  on.exit(setwd(old))
  ok <- 0L
  run <- 0L
  for (s in starts) {
    e <- ends[ends > s][1]
    header <- lines[s]
    if (grepl("eval\\s*=\\s*(FALSE|F)\\b", header)) next
    code <- lines[seq_len(e - s - 1L) + s]
    code <- gsub("library\\((torch|\"torch\")\\)", "library(ampkit)", code)
    run <- run + 1L
    result <- tryCatch({
      utils::capture.output(eval(parse(text = code), envir = env))
      "ok"
    }, error = function(err) paste("error:", conditionMessage(err)))
    if (identical(result, "ok")) ok <- ok + 1L
    cat(sprintf("  chunk at line %d: %s\n", s, substr(gsub("\n", " ", result), 1, 160)))
  }
  cat(sprintf("%s: %d of %d chunks ran\n", basename(path), ok, run))
}

for (path in commandArgs(trailingOnly = TRUE)) {
  cat("==", path, "\n")
  run_vignette(normalizePath(path))
}
