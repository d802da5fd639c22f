#ifndef STRATA_COPENJPEG_SHIM_H
#define STRATA_COPENJPEG_SHIM_H
#include <openjpeg.h>
#endif
