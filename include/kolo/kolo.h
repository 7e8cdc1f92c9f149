// kolo/kolo.h — everything a training program needs from kolo.
#pragma once

#include "kolo/collectives.h"
#include "kolo/handle.h"
#include "kolo/memory.h"
#include "kolo/process_set.h"
#include "kolo/runtime.h"
#include "kolo/status.h"
#include "kolo/tensor.h"
#include "kolo/types.h"
