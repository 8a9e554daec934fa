/* wcodec_resign.h - make a modified .wcodec file image's header check right
 * again, so that the reader's structural validation, not the checksum, is
 * what must catch a modified field (test_container, tests/fuzz/fuzz_wcodec). */
#ifndef WC_TESTS_WCODEC_RESIGN_H
#define WC_TESTS_WCODEC_RESIGN_H

#include <stdint.h>
#include <xxhash.h>

#include "container/format.h"

/* b holds a whole file image whose sections lie where h says: the check
 * (docs/FORMAT.md 1.2: XXH3-64 of header[0..152) | prefix | tables | dicts |
 * index | metadata) is computed from it and stored at offset 152. */
static inline void tu_wcodec_fix_check(uint8_t *b, const wc_file_header *h)
{
	XXH3_state_t *s = XXH3_createState();
	if (!s)
		return;
	XXH3_64bits_reset(s);
	XXH3_64bits_update(s, b, WC_HEADER_HASH_OFF);
	XXH3_64bits_update(s, b + h->prefix_off, h->prefix_len);
	XXH3_64bits_update(s, b + h->tables_off, h->tables_len);
	XXH3_64bits_update(s, b + h->dicts_off, h->dicts_len);
	XXH3_64bits_update(s, b + h->index_off, h->index_len);
	XXH3_64bits_update(s, b + h->meta_off, h->meta_len);
	wc_put_u64(b + WC_HEADER_HASH_OFF, XXH3_64bits_digest(s));
	XXH3_freeState(s);
}

#endif /* WC_TESTS_WCODEC_RESIGN_H */
