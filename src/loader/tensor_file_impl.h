/* tensor_file_impl.h - what the loader's parts know of a wc_tensor_file
 * beyond loader.h. Not installed. */
#ifndef WC_TENSOR_FILE_IMPL_H
#define WC_TENSOR_FILE_IMPL_H

#include <stdbool.h>

#include "loader/loader.h"

/* Whether f is read from an object store (its source has a read-ahead:
 * every read waits on a request's latency, not on a CPU), so a load of it
 * keeps more reads in flight than there are CPUs (load_host.c). */
bool wc_tensor_file_remote(const wc_tensor_file *f);

#endif /* WC_TENSOR_FILE_IMPL_H */
