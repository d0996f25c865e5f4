/* conv lowerings. */
#include "ops/families.h"

static const tpu_op_entry entries[] = {
};

TPU_OP_FAMILY(tpu_ops_conv, entries);
