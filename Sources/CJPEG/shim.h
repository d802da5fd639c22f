#ifndef STRATA_CJPEG_SHIM_H
#define STRATA_CJPEG_SHIM_H
// jpeglib.h needs FILE and size_t declared first.
#include <stddef.h>
#include <stdio.h>
#include <jpeglib.h>
#endif
