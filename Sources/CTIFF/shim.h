#ifndef STRATA_CTIFF_SHIM_H
#define STRATA_CTIFF_SHIM_H
#include <tiffio.h>
#endif
