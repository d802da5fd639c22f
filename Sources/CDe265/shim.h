#ifndef STRATA_CDE265_SHIM_H
#define STRATA_CDE265_SHIM_H
#include <libde265/de265.h>
#endif
