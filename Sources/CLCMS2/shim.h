#ifndef STRATA_CLCMS2_SHIM_H
#define STRATA_CLCMS2_SHIM_H
#include <lcms2.h>
#endif
