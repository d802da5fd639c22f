#ifndef STRATA_CZLIB_SHIM_H
#define STRATA_CZLIB_SHIM_H
#include <zlib.h>
#endif
