/* Debug mode's index bounds check (see index_check.c). */
#ifndef TPU_EXEC_INDEX_CHECK_H
#define TPU_EXEC_INDEX_CHECK_H

#include "tpu/runtime.h"

/* NULL if `call` indexes nothing or every index is in range; otherwise a
 * TPU_OUT_OF_RANGE (PyTorch's IndexError) or TPU_INVALID_ARGUMENT error, as
 * the CPU raises for that op, naming the index, dimension and size. Reads
 * the indices back from the device (a sync). */
tpu_status index_check(const tpu_op_call* call);

#endif
