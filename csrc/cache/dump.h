/* Program dumps (TORCH_TPU_DUMP_DIR): each program the process builds is
 * written as readable StableHLO under the hash of its cache key, with a
 * comment header naming that key, so a slow compile or a wrong result can
 * be traced to its program. tpu_dump_configure (tpu/runtime.h) turns it
 * on and off. */
#ifndef TPU_CACHE_DUMP_H
#define TPU_CACHE_DUMP_H

#include <stddef.h>

#include "pjrt/pjrt.h"

/* Writes `text` when a dump directory is set; best effort, never fails. */
void dump_program(tpu_pjrt* pjrt, const char* text, size_t size);

#endif
