# lintr over the R package (its configuration: rpkg/.lintr), with the package's files shared out
# between the cores. lintr::lint_package() lints one file after another, and its defaults are
# slow: over 5 minutes of CI on 2 cores (cyclocomp_linter, 60% of it, is left out). Each worker
# is lint_package() itself, told to exclude the files of the other workers, so the files, the
# settings and the output are lint_package()'s. Exits 1 if there is any lint.
# Usage: Rscript tools/lint_r.R [PACKAGE_DIR] [WORKERS]   (default: rpkg, the number of cores)
# once, before the workers fork; and print() finds lintr's method for lints
invisible(loadNamespace("lintr"))
args <- commandArgs(trailingOnly = TRUE)
pkg <- normalizePath(if (length(args) >= 1L) args[[1L]] else "rpkg")
workers <- if (length(args) >= 2L) as.integer(args[[2L]]) else parallel::detectCores()

# The files lint_package() reads: its directories and lint_dir()'s pattern (.R, .Rmd, .Rnw, ...).
dirs <- file.path(pkg, c("R", "tests", "inst", "vignettes", "data-raw", "demo"))
files <- list.files(dirs, pattern = "\\.[Rr](html|md|nw|rst|tex|txt)?$", recursive = TRUE,
                    full.names = TRUE)
# Less the ones .lintr excludes (the generated op surface: a third of the bytes), which no worker
# lints; then the largest first, each to the least loaded worker: the shares take about as long.
excluded <- eval(str2lang(read.dcf(file.path(pkg, ".lintr"), fields = "exclusions")[[1L]]))
files <- setdiff(files, file.path(pkg, unlist(excluded)))
sizes <- file.size(files)
largest_first <- order(sizes, decreasing = TRUE)
files <- files[largest_first]
sizes <- sizes[largest_first]
share <- integer(length(files))
load <- numeric(workers)
for (i in seq_along(files)) {
  share[[i]] <- which.min(load)
  load[[share[[i]]]] <- load[[share[[i]]]] + sizes[[i]]
}

lint_share <- function(k) {
  others <- as.list(substring(files[share != k], nchar(pkg) + 2L))
  lintr::lint_package(pkg, exclusions = others)
}
results <- if (workers > 1L) {
  parallel::mclapply(seq_len(workers), lint_share, mc.cores = workers, mc.preschedule = FALSE)
} else {
  list(lint_share(1L))
}
failed <- vapply(results, inherits, logical(1), "try-error")
if (any(failed)) {
  cat(unlist(results[failed]), sep = "\n")
  quit(status = 2L)
}
# in lint_package()'s order (by file, then line); unique(): a file these shares missed (none should)
# would have been linted by every worker
lints <- unique(do.call(c, lapply(results, unclass)))
where <- function(field) vapply(lints, function(lint) as.character(lint[[field]]), "")
lints <- structure(lints[order(where("filename"), as.integer(where("line_number")))],
                   class = "lints")
print(lints)
quit(status = as.integer(length(lints) > 0L))
