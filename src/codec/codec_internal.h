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

/* One chunk being decoded: 32 lane states, the word cursor, and where
 * decoded rounds go (round r is written at out + (r - rbase) * 32, so a
 * caller can decode a chunk in blocks of rounds into a small buffer). */
typedef struct wc_rans_lanes {
	uint32_t x[WC_RANS_LANES];
	const uint8_t *w; /* the chunk's words */
	size_t nw, p;     /* word slots in the chunk (pad included), next word */
	size_t m, r;      /* symbols in the chunk, rounds decoded */
	uint8_t *out;
	size_t rbase;
	size_t k;         /* chunk index, for error reasons */
} wc_rans_lanes;

/* Start decoding chunk k of a parsed body (checks the initial states). The
 * caller sets out and rbase. Errors: WC_E_CORRUPT. */
wc_err wc_rans_lanes_init(wc_rans_lanes *c, const wc_rans_body *b, size_t k, uint32_t chunk_symbols,
			 size_t nsym);

/* Decode a chunk up to round rend (at most ceil(m / 32); the last round may
 * be partial). Errors: WC_E_CORRUPT when a lane needs a word past its chunk. */
wc_err wc_rans_lanes_decode(wc_rans_lanes *c, const wc_rans_dtab *dt, size_t rend);

/* Take two chunks (rounds decoded equal: a->r == b->r) towards rounds
 * rend_a and rend_b together, interleaved where the CPU allows: about as
 * fast as one chunk alone on a core that would otherwise wait on that
 * chunk's dependency chain. Cannot fail: it stops at the first round either
 * chunk would need bounds-checked, and wc_rans_lanes_decode() on each
 * finishes the job. */
void wc_rans_lanes_advance2(wc_rans_lanes *a, const wc_rans_dtab *da, size_t rend_a, wc_rans_lanes *b,
			    const wc_rans_dtab *db, size_t rend_b);

/* After the last round: every state 2^16, every word consumed (one zero pad
 * word allowed). Errors: WC_E_CORRUPT. */
wc_err wc_rans_lanes_end(const wc_rans_lanes *c);

/* SIMD round loops (rans_decode_avx2.c, rans_decode_avx512.c): full rounds
 * up to rend while at least 32 words remain. Call only if wc_rans_isa()
 * allows them. */
void wc_rans_rounds_avx2(wc_rans_lanes *c, const uint32_t *tab, size_t rend);
void wc_rans_rounds_avx512(wc_rans_lanes *c, const uint32_t *tab, size_t rend);
/* Both chunks' full rounds together (a->r == b->r), while each has 32 words
 * left; a->r and b->r stay equal. */
void wc_rans_rounds2_avx512(wc_rans_lanes *a, const uint32_t *ta, wc_rans_lanes *b, const uint32_t *tb,
			    size_t rend);

/* The BF16 plane merge (planes.c) with AVX2 (planes_avx2.c): elements
 * [0, returned) of out from planes p0 and p1, a multiple of 32 (0 on
 * non-x86 builds); the caller merges the rest. Call only if wc_rans_isa()
 * allows AVX2, which also lets tests and fuzz targets choose the merge. */
size_t wc_merge_bf16_avx2(const uint8_t *p0, const uint8_t *p1, size_t n, uint8_t *out);
/* The same for the F32 layout's four planes: a multiple of 8 elements. */
size_t wc_merge_f32_avx2(const uint8_t *const pl[], size_t n, uint8_t *out);

/* The rANS decoder implementations, in order of speed. */
enum { WC_RANS_ISA_SCALAR = 1, WC_RANS_ISA_AVX2 = 2, WC_RANS_ISA_AVX512 = 3 };
/* The best one the CPU runs (checked once, at run time). */
int wc_rans_cpu_isa(void);
/* The one in use: the CPU's best, capped by wc_rans_isa_limit if non-zero
 * (a hook for tests and benchmarks). */
int wc_rans_isa(void);
extern int wc_rans_isa_limit;
const char *wc_rans_isa_name(int isa);

/* Per-thread scratch buffer number `slot` of at least `bytes` bytes, kept
 * between calls (freed at thread exit); NULL if out of memory. */
enum { WC_SCRATCH_PLANES = 0, WC_SCRATCH_BLOCKS = 1, WC_SCRATCH_SLOTS = 2 };
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

/* ---- PACK planes (bitpack.c; docs/FORMAT.md section 3) ------------------ */

/* Bytes of a PACK body of n symbols of b bits (b = 1, 2 or 4). */
static inline size_t wc_pack_bytes(size_t n, unsigned b) { return (n * b + 7) / 8; }

/* The fewest bits (1, 2 or 4) that hold every one of n symbols; 0 if one of
 * them is 16 or more (no PACK body then). */
unsigned wc_pack_bits_for(const uint8_t *sym, size_t n);

/* Pack n symbols, each below 2^b, into wc_pack_bytes(n, b) bytes at out:
 * symbol i in byte i / (8 / b), at bit (i % (8 / b)) * b; the last byte's
 * unused high bits 0. */
void wc_pack_bits(const uint8_t *sym, size_t n, unsigned b, uint8_t *out);

/* Unpack symbols [0, n) of a PACK body of b-bit symbols starting at in
 * (byte-aligned: the caller's first symbol is a multiple of 8 / b) into n
 * bytes at out. Reads wc_pack_bytes(n, b) bytes. */
void wc_unpack_bits(const uint8_t *in, unsigned b, size_t n, uint8_t *out);

#endif /* WC_CODEC_INTERNAL_H */
