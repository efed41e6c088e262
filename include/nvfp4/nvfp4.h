// nvfp4/nvfp4.h -- the whole public API.
#pragma once

#include "nvfp4/dtype.h"
#include "nvfp4/error.h"
#include "nvfp4/format.h"
#include "nvfp4/ops.h"
#include "nvfp4/quantize.h"
#include "nvfp4/tensor.h"
