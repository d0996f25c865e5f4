/* Inside exec/: why an op compiled again. Each op (name and overload)
 * remembers the signature of its latest plan; a new plan for the same op
 * is a recompilation, and the first difference between the two signatures
 * becomes its reason ("aten::add.Tensor: input 0 dim 1 changed 128 ->
 * 256"), kept in a bounded list of recent reasons (tpu_recompile_reason). */
#ifndef TPU_EXEC_RECOMPILE_H
#define TPU_EXEC_RECOMPILE_H

#include "tpu/runtime.h"

/* Records `call`'s signature for its op; notes a reason when the op had a
 * plan with another signature. Best effort: out of memory drops the note.
 * Runtime lock held. */
void recompile_note(const tpu_op_call* call);

#endif
