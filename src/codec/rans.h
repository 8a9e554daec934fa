/*
 * rans.h - interleaved rANS over bytes, the entropy coder of wcodec planes.
 *
 * Algorithm: range ANS (J. Duda, "Asymmetric numeral systems: entropy coding
 * combining speed of Huffman coding with compression rate of arithmetic
 * coding", arXiv:1311.2540, 2013), in the interleaved form of F. Giesen
 * ("Interleaved entropy coders", arXiv:1402.3392, 2014) with one state per
 * lane of a 32-wide CUDA warp, as in dietgpu (Meta, github.com/facebookresearch/dietgpu).
 * docs/FORMAT.md section "rANS chunk" is the normative description; this
 * header restates the constants.
 *
 * Parameters (fixed by the format):
 *   32 states (lanes), 32-bit state, state interval [2^16, 2^32),
 *   16-bit renormalisation words, 12-bit probabilities (frequencies sum to 4096).
 * Symbol j of a chunk belongs to lane j % 32, round j / 32. Decoding one
 * symbol consumes at most one 16-bit word, and the words a round consumes are
 * stored consecutively in ascending lane order, so a warp decodes a round with
 * one ballot + popc, and a scalar CPU loop decodes lanes in order with ptr++.
 *
 * A plane of n symbols is cut into chunks of `chunk_symbols` symbols (the
 * file's chunk size, a multiple of 32; the last chunk may be shorter). Each
 * chunk is independent: a GPU warp decodes one chunk.
 */
#ifndef WC_RANS_H
#define WC_RANS_H

#include <stddef.h>
#include <stdint.h>

#include "core/wc_error.h"

#ifdef __cplusplus
extern "C" {
#endif

#define WC_RANS_LANES 32u
#define WC_RANS_PROB_BITS 12u
#define WC_RANS_PROB_SCALE (1u << WC_RANS_PROB_BITS)
#define WC_RANS_STATE_LOW (1u << 16)
/* Chunk size limits (symbols); the default suits both a warp and a CPU core. */
#define WC_RANS_CHUNK_MIN 32u
#define WC_RANS_CHUNK_MAX (1u << 20)
#define WC_RANS_CHUNK_DEFAULT 16384u

/* A normalised frequency table: freq[s] is symbol s's share of 4096.
 * Valid for rANS: the sum is exactly 4096 and every entry is <= 4095 (a
 * single-symbol plane is stored CONST, never rANS). */
typedef struct wc_freqtab {
	uint16_t freq[256];
} wc_freqtab;

/* Decoding table: entry[slot] for slot in [0, 4096) packs
 *   bits 0..7   symbol s,
 *   bits 8..19  freq[s] (1..4095),
 *   bits 20..31 slot - cum[s]  (cum = exclusive prefix sum of freq),
 * so a decode step is  e = entry[x & 4095];  x = freq * (x >> 12) + (e >> 20).
 * The CUDA kernels build the same table in shared memory. */
typedef struct wc_rans_dtab {
	uint32_t entry[WC_RANS_PROB_SCALE];
} wc_rans_dtab;

/* Normalise a histogram (counts per byte value over `hist`, at least two
 * distinct symbols present) to a table summing to 4096 in integer arithmetic:
 * every present symbol gets freq >= 1, absent ones 0, and the result is a
 * deterministic function of hist. Errors: WC_E_INVAL if fewer than two
 * symbols are present. */
wc_err wc_freq_normalize(const uint64_t hist[256], wc_freqtab *out);

/* log2(f) for f in [0, 4096] (entry 0 is -INFINITY), the values log2()
 * returns, from a table built on first use (thread-safe): the packer's cost
 * estimates take the log2 of frequencies per symbol and per move
 * (wc_freq_normalize, the writer's coded sizes), and log2() itself was 17%
 * of `wcodec pack`'s CPU time (docs/BENCHMARKS.md).
 * Returns WC_RANS_PROB_SCALE + 1 entries. */
const double *wc_log2_freq_table(void);

/* Check a table read from a file: sum 4096, each entry <= 4095, at least two
 * non-zero entries. Errors: WC_E_FORMAT with a reason. */
wc_err wc_freq_validate(const wc_freqtab *ft);

/* Build the decoding table of a valid frequency table. */
void wc_rans_dtab_build(const wc_freqtab *ft, wc_rans_dtab *out);

/* Upper bound in bytes of wc_rans_encode()'s output for n symbols. */
size_t wc_rans_bound(size_t nsym, uint32_t chunk_symbols);

/* Encode n symbols (bytes) with table ft into the chunked layout of
 * docs/FORMAT.md: u32 chunk_end[nchunks], then the chunks.
 * Errors: WC_E_INVAL if a symbol has frequency 0 or chunk_symbols is not a
 * multiple of 32 within limits; WC_E_RANGE if cap < needed (cap >=
 * wc_rans_bound() always suffices). *out_len receives bytes written. */
wc_err wc_rans_encode(const uint8_t *sym, size_t nsym, const wc_freqtab *ft,
		      uint32_t chunk_symbols, uint8_t *out, size_t cap, size_t *out_len);

/* Decode n symbols from a chunked rANS body of in_len bytes (as written by
 * wc_rans_encode). Validates everything it reads: chunk_end monotonic and in
 * bounds, chunk sizes, every read inside its chunk, every lane's final state
 * equal to 2^16 and every word consumed (the stream's free integrity check).
 * Errors: WC_E_CORRUPT with a reason; `out` may then hold partial data. */
wc_err wc_rans_decode(const uint8_t *in, size_t in_len, const wc_rans_dtab *dt,
		      uint32_t chunk_symbols, uint8_t *out, size_t nsym);

/* A stream whose frequency table changes along it (docs/FORMAT.md 6.8):
 * segment g covers symbols [end[g - 1], end[g]) (end[-1] = 0) and uses
 * table ft[g] (encoder) or dt[g] (decoder). Every end but the last is a
 * multiple of 32 (a round of the 32 lanes has one table), ends do not
 * decrease, and end[n - 1] is the stream's symbol count. The chunk layout
 * and decoding rule are section 4's, with symbol j's table that of its
 * segment. */
typedef struct wc_rans_segs {
	uint32_t n;                      /* segments, >= 1 */
	const size_t *end;
	const wc_freqtab *const *ft;     /* n tables (encoding) */
	const wc_rans_dtab *const *dt;   /* n decoding tables (decoding) */
} wc_rans_segs;

/* Check a segment list for nsym symbols. Errors: WC_E_INVAL. */
wc_err wc_rans_segs_check(const wc_rans_segs *sg, size_t nsym);

/* wc_rans_encode with a table per segment; wc_rans_encode is the case of
 * one segment. Errors as wc_rans_encode, WC_E_NOMEM. */
wc_err wc_rans_encode_segs(const uint8_t *sym, size_t nsym, const wc_rans_segs *sg, uint32_t chunk_symbols,
			   uint8_t *out, size_t cap, size_t *out_len);

/* wc_rans_decode with a table per segment, with the same checks (dt of
 * valid tables); wc_rans_decode is the case of one segment. Errors:
 * WC_E_INVAL (segments), WC_E_CORRUPT. */
wc_err wc_rans_decode_segs(const uint8_t *in, size_t in_len, const wc_rans_segs *sg, uint32_t chunk_symbols,
			   uint8_t *out, size_t nsym);

/* Order-0 entropy in bits per symbol of a histogram (0 for an empty one). */
double wc_entropy_bits(const uint64_t hist[256]);

/* Exact size in bytes that wc_rans_encode() would produce, without writing:
 * used by the packer to pick RAW or rANS per plane. Same errors as encode. */
wc_err wc_rans_encoded_size(const uint8_t *sym, size_t nsym, const wc_freqtab *ft,
			    uint32_t chunk_symbols, size_t *out_len);

#ifdef __cplusplus
}
#endif

#endif /* WC_RANS_H */
