# Out-of-process R runner: Rscript run_rscript.R <out_dir> <scenario.json>...
# Runs ALL given scenarios in this one R process (see runner.R).
args <- commandArgs(trailingOnly = TRUE)
script <- sub("^--file=", "", grep("^--file=", commandArgs(FALSE), value = TRUE))
Sys.setenv(AMPKIT_PARITY_DIR = normalizePath(dirname(script)))
source(file.path(dirname(script), "runner.R"))
# Rscript run_rscript.R <out_dir> <scenario.json>...            all scenarios
# Rscript run_rscript.R --segment <out> <json> <start> <stop> <resume|-> <save|->
# Rscript run_rscript.R --jobs <jobs.json>                        run_segment() calls
# Rscript run_rscript.R --misuse <out.json>
opt <- function(v) if (identical(v, "-")) NULL else v
if (identical(args[[1]], "--segment")) {
  run_segment(args[[3]], args[[2]], as.integer(args[[4]]), as.integer(args[[5]]),
              opt(args[[6]]), opt(args[[7]]))
} else if (identical(args[[1]], "--jobs")) {
  # a JSON list of run_segment() argument lists, all run in this one process
  jobs <- parity_modules()$pm$load_json(args[[2]])
  for (job in jobs) do.call(run_segment, job)
} else if (identical(args[[1]], "--misuse")) {
  parity_modules()$pm$save_json(args[[2]], run_misuse())
} else {
  run_all(args[-1], args[[1]])
}
