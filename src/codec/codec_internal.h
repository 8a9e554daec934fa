/*
 * codec_internal.h - helpers shared by the codec's source files (not installed).
 *
 * Little-endian loads/stores through memcpy (payloads carry no alignment
 * guarantee), the chunk index of a rANS body, one-chunk rANS decoding, and
 * the per-thread scratch memory of the tile decoder.
 */
#ifndef WC_CODEC_INTERNAL_H
#define WC_CODEC_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "codec/rans.h"
#include "core/wc_error.h"

static inline uint16_t wc_ld16(const uint8_t *p)
{
	uint16_t v;
	memcpy(&v, p, 2);
	return v; /* every supported target is little-endian, as the format */
}

static inline uint32_t wc_ld32(const uint8_t *p)
{
	uint32_t v;
	memcpy(&v, p, 4);
	return v;
}

static inline void wc_st16(uint8_t *p, uint16_t v) { memcpy(p, &v, 2); }
static inline void wc_st32(uint8_t *p, uint32_t v) { memcpy(p, &v, 4); }

#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "wcodec's codec assumes a little-endian host"
#endif

/* Number of chunks of a plane of nsym symbols. */
static inline size_t wc_rans_nchunks(size_t nsym, uint32_t chunk_symbols)
{
	return (nsym + chunk_symbols - 1) / chunk_symbols;
}

static inline int wc_rans_chunk_symbols_ok(uint32_t c)
{
	return c >= WC_RANS_CHUNK_MIN && c <= WC_RANS_CHUNK_MAX && c % WC_RANS_LANES == 0;
}

/* A validated rANS body: chunk k's bytes are data[start(k) .. end[k]) with
 * start(0) = 0 and start(k) = end[k-1]. */
typedef struct wc_rans_body {
	const uint8_t *data;    /* the byte after the chunk_end array */
	const uint8_t *end_arr; /* u32 chunk_end[nchunks], little-endian */
	size_t nchunks;
} wc_rans_body;

/* Check a body's chunk_end array against in_len and nsym (strictly
 * increasing, sizes multiples of 4 within [128, 128 + 2*m + 2], last end at
 * in_len). Errors: WC_E_CORRUPT. */
wc_err wc_rans_body_parse(const uint8_t *in, size_t in_len, size_t nsym,
			  uint32_t chunk_symbols, wc_rans_body *body);

static inline uint32_t wc_rans_chunk_start(const wc_rans_body *b, size_t k)
{
	return k ? wc_ld32(b->end_arr + 4 * (k - 1)) : 0;
}

static inline uint32_t wc_rans_chunk_end(const wc_rans_body *b, size_t k)
{
	return wc_ld32(b->end_arr + 4 * k);
}

/* Decode the m symbols of one chunk of `bytes` bytes (already size-checked by
 * wc_rans_body_parse). Errors: WC_E_CORRUPT (bad initial state, a read past
 * the chunk's words, final states != 2^16, words left over). */
wc_err wc_rans_decode_chunk(const uint8_t *chunk, size_t bytes, const wc_rans_dtab *dt,
			    uint8_t *out, size_t m);

/* One chunk being decoded: 32 lane states, the word cursor, output. */
typedef struct wc_rans_lanes {
	uint32_t x[WC_RANS_LANES];
	const uint8_t *w; /* the chunk's words */
	size_t nw, p;     /* word slots in the chunk (pad included), next word */
	uint8_t *out;
	size_t m, r;      /* symbols in the chunk, rounds decoded */
} wc_rans_lanes;

/* Decode chunks [k0, k1) of a parsed body into out (symbol k0*C first).
 * Errors: WC_E_CORRUPT. */
wc_err wc_rans_decode_chunks(const wc_rans_body *b, size_t k0, size_t k1, const wc_rans_dtab *dt,
			     uint32_t chunk_symbols, size_t nsym, uint8_t *out);

/* AVX2 round loops (rans_decode_avx2.c): full rounds while at least 32 words
 * remain, of one chunk or of two chunks interleaved (until either stops).
 * Call only if wc_rans_have_avx2(). */
void wc_rans_rounds_avx2(wc_rans_lanes *c, const uint32_t *tab);
void wc_rans_rounds2_avx2(wc_rans_lanes *a, wc_rans_lanes *b, const uint32_t *tab);
int wc_rans_have_avx2(void);

/* Testing hook: non-zero forces the portable scalar decoder. */
extern int wc_rans_force_scalar;

/* Re-record the calling thread's failure reason prefixed with a formatted
 * context ("plane 1: <reason>"); returns e. */
wc_err wc_fail_context(wc_err e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Per-thread scratch buffer number `slot` of at least `bytes` bytes, kept
 * between calls (freed at thread exit); NULL if out of memory. */
enum { WC_SCRATCH_PLANES = 0, WC_SCRATCH_STRIPE = 1, WC_SCRATCH_SLOTS = 2 };
void *wc_scratch_get(int slot, size_t bytes);

/* Per-thread decoding table for a frequency table, rebuilt only when the
 * table's contents differ from the cached one. The table must be valid
 * (wc_freq_validate). `which` picks one of a few cache entries. */
const wc_rans_dtab *wc_dtab_cached(const wc_freqtab *ft, unsigned which);
#define WC_DTAB_CACHE_ENTRIES 8

/* Whether l is one of the layouts of planes.h (kind, elem_size, nplanes agree). */
#include "codec/planes.h"
int wc_layout_valid(wc_layout l);

/* zstd level of ZSTD plane bodies: strong enough to matter for integer
 * tensors, fast enough (tens of MB/s) that packing stays practical. */
#define WC_ZSTD_LEVEL 9

/* Per-thread zstd decompression context (NULL if out of memory). */
struct ZSTD_DCtx_s;
struct ZSTD_DCtx_s *wc_zstd_dctx(void);

#endif /* WC_CODEC_INTERNAL_H */
