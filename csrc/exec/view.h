/* Strided views of device storage: how a view is read into a program and
 * how a program's result is written through a view into its storage. */
#ifndef TPU_EXEC_VIEW_H
#define TPU_EXEC_VIEW_H

#include "hlo/builder.h"
#include "tpu/runtime.h"

typedef enum view_class {
  VIEW_WHOLE = 0, /* dense, offset 0, covers the storage exactly: no slicing */
  VIEW_SLICE,     /* dense run of elements at a runtime offset */
  VIEW_STRIDED,   /* a permutation of a dense run, or else gathered by index;
                     the strides are compiled in */
  VIEW_BOX,       /* a box in the storage seen as a dense array (nested
                     strides, like q, k and v split out of one qkv tensor):
                     a dynamic slice; the strides are compiled in */
  VIEW_PERMUTED,  /* a permutation of the whole storage at offset 0 (a
                     transposed tensor, or an output laid out like a
                     transposed input): a transpose alone, no offset, and a
                     write needs no old value; the strides are compiled in */
} view_class;

int64_t view_numel(const tpu_tensor* view);
void view_contiguous_strides(int rank, const int64_t* sizes, int64_t* out_strides);
/* Validates rank, sizes and that the view lies inside its storage. */
tpu_status view_check(const tpu_tensor* view, const char* what);
view_class view_class_of(const tpu_tensor* view);
/* Whether a view of this class is found at a runtime offset (a program
 * parameter), and so whether writing it keeps the rest of the storage. */
bool view_class_has_offset(view_class cls);
/* Whether the class's strides are part of a program's signature. */
bool view_class_has_strides(view_class cls);
/* Elements of the view's storage, counted in its storage dtype. */
int64_t view_storage_numel(const tpu_tensor* view);

/* `storage` is the flat storage (tensor<N x storage dtype>), `offset` a 0-d
 * i64 value (ignored where the class has none). Returns the view's logical value. */
hlo_value view_read(hlo_builder* b, hlo_value storage, hlo_value offset, const tpu_tensor* view,
                    view_class cls);
/* Returns the new flat storage with `value` (view's shape and dtype) written
 * through the view. `storage` may be HLO_INVALID where the class has no offset. */
hlo_value view_write(hlo_builder* b, hlo_value storage, hlo_value offset, hlo_value value,
                     const tpu_tensor* view, view_class cls, tpu_dtype storage_dtype,
                     int64_t storage_numel);

#endif
