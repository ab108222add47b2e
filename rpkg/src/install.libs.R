# R CMD INSTALL runs this in src/ instead of copying the one library: the package's library and
# its loader (Makevars.in) both go to libs/.
files <- paste0(c("ampkit", "ampkit_loader"), SHLIB_EXT)
dest <- file.path(R_PACKAGE_DIR, paste0("libs", R_ARCH))
dir.create(dest, recursive = TRUE, showWarnings = FALSE)
stopifnot(all(file.copy(files, dest, overwrite = TRUE)))
