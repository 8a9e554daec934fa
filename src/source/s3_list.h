/* s3_list.h - one page of a ListObjectsV2 answer (AWS S3 API Reference,
 * "ListObjectsV2": <ListBucketResult> with <Contents><Key/><Size/></Contents>,
 * <IsTruncated/>, <NextContinuationToken/>), parsed with expat. Not
 * installed. */
#ifndef WC_S3_LIST_H
#define WC_S3_LIST_H

#include <stddef.h>
#include <stdint.h>

#include "core/wc_error.h"

/* Parse xml (len bytes): fn(ctx, key, size) for each object, in order
 * (fn returning nonzero stops the listing: *stop is then set); *more says
 * whether the listing continues, its token in token (cap bytes).
 * Errors: WC_E_FORMAT (not a ListBucketResult, malformed XML, a key or
 * token too long). */
wc_err wc_s3_list_parse(const char *xml, size_t len, int (*fn)(void *ctx, const char *key, uint64_t size),
			void *ctx, int *more, char *token, size_t cap, int *stop);

#endif /* WC_S3_LIST_H */
