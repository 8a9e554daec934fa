/*
 * bench_huff_exponents.c - would a multi-symbol Huffman code decode BF16
 * exponent planes faster than the rANS decoder, and what would it cost in
 * size? A measurement kept for the record (docs/BENCHMARKS.md, "Designs
 * tried and dropped"); nothing in the format or the decoders uses it.
 *
 * Input: 4 Mi exponent bytes of N(0, 0.02) weights rounded to BF16 (the tail
 * below exponent 100 folded into it), as bench_rans_lookup uses. The
 * Huffman code is built from their histogram (Huffman 1952), limited to 11
 * bits (lengths clamped, then the longest codes below the limit lengthened
 * until the Kraft sum is at most 1: simple, not optimal like
 * package-merge), and made canonical. The symbols are cut into 8 equal
 * streams, each written MSB first as bytes. The decoder (the technique of
 * zstd's huff0 and DFloat11's look-up tables) peeks 11 bits, and one
 * 2048-entry table gives up to 4 whole codes at once (symbols, count, bits
 * used); each refill (an unaligned big-endian 8-byte load) feeds 5 look-ups,
 * and the 8 streams are advanced in turn so their look-up chains overlap.
 * Output: order-0 entropy, Huffman bits per symbol, the extra size per BF16
 * element (8 raw sign|mantissa bits + the exponent code), and G symbols/s
 * of thread CPU time for wc_rans_decode of the same bytes (chunks of 65536
 * symbols) and for the Huffman decoder; both outputs are checked.
 *
 *   bench/bench_huff_exponents [-r runs]
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "codec/rans.h"
#include "exponent_input.h"

#define MAX_BITS 11u             /* longest code, and the look-up width */
#define NSTREAMS 8u
#define LOOKUPS_PER_REFILL 5u    /* 5 x 11 bits <= the 57 a refill guarantees */

typedef struct huff_code {
	unsigned len[256];   /* bits; 0 for absent symbols */
	uint32_t code[256];  /* canonical, MSB first */
} huff_code;

/* Huffman code lengths of the symbols present in hist (at least two). */
static void huff_lengths(const uint64_t hist[256], huff_code *hc)
{
	double w[512];
	int parent[512], live[256], sym[256], n = 0;
	for (int s = 0; s < 256; s++) {
		hc->len[s] = 0;
		if (hist[s]) {
			sym[n] = s;
			w[n] = (double)hist[s];
			live[n] = n;
			n++;
		}
	}
	int nlive = n, next = n;
	while (nlive > 1) { /* merge the two lightest live nodes */
		int a = 0, b = 1;
		if (w[live[b]] < w[live[a]])
			a = 1, b = 0;
		for (int i = 2; i < nlive; i++) {
			if (w[live[i]] < w[live[a]])
				b = a, a = i;
			else if (w[live[i]] < w[live[b]])
				b = i;
		}
		w[next] = w[live[a]] + w[live[b]];
		parent[live[a]] = parent[live[b]] = next;
		live[a < b ? a : b] = next++;
		live[a < b ? b : a] = live[--nlive];
	}
	parent[next - 1] = -1;
	for (int i = 0; i < n; i++) {
		unsigned d = 0;
		for (int k = i; parent[k] >= 0; k = parent[k])
			d++;
		hc->len[sym[i]] = d;
	}
	/* Limit to MAX_BITS: clamp, then lengthen the longest codes that are
	 * still below the limit (each step costs the fewest bits) until the
	 * Kraft sum is at most 1. */
	for (;;) {
		double kraft = 0;
		for (int s = 0; s < 256; s++) {
			if (hc->len[s] > MAX_BITS)
				hc->len[s] = MAX_BITS;
			if (hc->len[s])
				kraft += ldexp(1.0, -(int)hc->len[s]);
		}
		if (kraft <= 1.0)
			break;
		int best = -1;
		for (int s = 0; s < 256; s++)
			if (hc->len[s] && hc->len[s] < MAX_BITS &&
			    (best < 0 || hc->len[s] > hc->len[best] ||
			     (hc->len[s] == hc->len[best] && hist[s] < hist[best])))
				best = s;
		hc->len[best]++;
	}
	uint32_t c = 0;
	unsigned prev = 0;
	for (unsigned l = 1; l <= MAX_BITS; l++) {
		for (int s = 0; s < 256; s++) {
			if (hc->len[s] != l)
				continue;
			c <<= l - prev;
			prev = l;
			hc->code[s] = c++;
		}
	}
}

/* Entry v of the table: the whole codes at the start of the MAX_BITS-bit
 * window v, at most 4. */
typedef struct huff_entry {
	uint8_t sym[4];
	uint8_t n, bits;
	uint16_t pad; /* 8 bytes: the look-up's index scales by a shift */
} huff_entry;

static void huff_table(const huff_code *hc, huff_entry *tab)
{
	static uint8_t one_sym[1u << MAX_BITS], one_len[1u << MAX_BITS];
	for (int s = 0; s < 256; s++) {
		unsigned l = hc->len[s];
		if (!l)
			continue;
		for (uint32_t v = hc->code[s] << (MAX_BITS - l); v < (hc->code[s] + 1) << (MAX_BITS - l); v++)
			one_sym[v] = (uint8_t)s, one_len[v] = (uint8_t)l;
	}
	for (uint32_t v = 0; v < 1u << MAX_BITS; v++) {
		huff_entry e = {{0, 0, 0, 0}, 0, 0, 0};
		unsigned used = 0;
		while (e.n < 4) {
			uint32_t peek = (v << used) & ((1u << MAX_BITS) - 1);
			if (used + one_len[peek] > MAX_BITS)
				break;
			e.sym[e.n++] = one_sym[peek];
			used += one_len[peek];
		}
		e.bits = (uint8_t)used;
		tab[v] = e;
	}
}

/* Write n symbols MSB first into out (8 bytes of slack after the end);
 * returns the bytes used. */
static size_t huff_encode(const huff_code *hc, const uint8_t *sym, size_t n, uint8_t *out)
{
	uint64_t acc = 0;
	unsigned nb = 0;
	size_t o = 0;
	for (size_t i = 0; i < n; i++) {
		acc = acc << hc->len[sym[i]] | hc->code[sym[i]];
		nb += hc->len[sym[i]];
		while (nb >= 8) {
			nb -= 8;
			out[o++] = (uint8_t)(acc >> nb);
		}
	}
	if (nb)
		out[o++] = (uint8_t)(acc << (8 - nb));
	memset(out + o, 0, 8);
	return o;
}

static inline uint64_t load_be64(const uint8_t *p)
{
	uint64_t v;
	memcpy(&v, p, 8);
	return __builtin_bswap64(v);
}

/* Decode NSTREAMS streams of q symbols each into out + k * q (4 bytes of
 * slack after each stream's part). */
static void huff_decode(const huff_entry *tab, const huff_code *hc, const uint8_t *const in[NSTREAMS],
			size_t q, uint8_t *out)
{
	uint64_t bit[NSTREAMS];
	uint8_t *o[NSTREAMS];
	for (unsigned k = 0; k < NSTREAMS; k++)
		bit[k] = 0, o[k] = out + k * q;
	/* A round writes at most LOOKUPS_PER_REFILL * 4 symbols a stream: run
	 * as many rounds as the fullest stream has room for, unchecked, then
	 * look again. */
	const size_t per_round = LOOKUPS_PER_REFILL * 4;
	for (;;) {
		size_t rounds = SIZE_MAX;
		for (unsigned k = 0; k < NSTREAMS; k++) {
			size_t left = (size_t)(out + (k + 1) * q - o[k]);
			size_t r = left >= per_round + 4 ? (left - 4) / per_round : 0;
			rounds = r < rounds ? r : rounds;
		}
		if (rounds == 0)
			break;
		while (rounds--) {
#pragma GCC unroll 8
			for (unsigned k = 0; k < NSTREAMS; k++) {
				uint64_t win = load_be64(in[k] + (bit[k] >> 3)) << (bit[k] & 7);
				unsigned used = 0;
#pragma GCC unroll 8
				for (unsigned j = 0; j < LOOKUPS_PER_REFILL; j++) {
					huff_entry e = tab[(win << used) >> (64 - MAX_BITS)];
					memcpy(o[k], e.sym, 4);
					o[k] += e.n;
					used += e.bits;
				}
				bit[k] += used;
			}
		}
	}
	for (unsigned k = 0; k < NSTREAMS; k++) { /* the tails, a code at a time */
		uint8_t *end = out + (k + 1) * q;
		while (o[k] < end) {
			uint64_t win = load_be64(in[k] + (bit[k] >> 3)) << (bit[k] & 7);
			uint8_t s = tab[win >> (64 - MAX_BITS)].sym[0];
			*o[k]++ = s;
			bit[k] += hc->len[s];
		}
	}
}

int main(int argc, char **argv)
{
	int runs = 7, opt;
	while ((opt = getopt(argc, argv, "r:")) != -1) {
		if (opt != 'r' || (runs = atoi(optarg)) < 1) {
			fprintf(stderr, "usage: bench_huff_exponents [-r runs]\n");
			return 2;
		}
	}
	const size_t n = (size_t)1 << 22, q = n / NSTREAMS;
	const uint32_t chunk = 65536;
	uint8_t *sym = malloc(n), *out = malloc(n + 64), *hbuf = malloc(n * MAX_BITS / 8 + 16 * NSTREAMS + 64);
	size_t rcap = wc_rans_bound(n, chunk), rlen = 0;
	uint8_t *rbuf = malloc(rcap);
	wc_rans_dtab *dt = malloc(sizeof *dt);
	static huff_entry tab[1u << MAX_BITS];
	if (!sym || !out || !hbuf || !rbuf || !dt) {
		fprintf(stderr, "bench_huff_exponents: out of memory\n");
		return 1;
	}
	uint64_t hist[256];
	bench_exponent_bytes(sym, n, hist);
	huff_code hc;
	huff_lengths(hist, &hc);
	huff_table(&hc, tab);
	double bits = 0;
	for (int s = 0; s < 256; s++)
		bits += (double)hist[s] * hc.len[s];
	bits /= (double)n;
	double ent = wc_entropy_bits(hist);
	const uint8_t *in[NSTREAMS];
	size_t off = 0;
	for (unsigned k = 0; k < NSTREAMS; k++) {
		in[k] = hbuf + off;
		off += huff_encode(&hc, sym + k * q, q, hbuf + off) + 8;
	}
	wc_freqtab ft;
	if (wc_freq_normalize(hist, &ft) != WC_OK || wc_rans_encode(sym, n, &ft, chunk, rbuf, rcap, &rlen) != WC_OK) {
		fprintf(stderr, "bench_huff_exponents: rANS encode: %s\n", wc_last_detail());
		return 1;
	}
	wc_rans_dtab_build(&ft, dt);
	printf("%zu exponent bytes: entropy %.4f bits, Huffman (<= %u bits) %.4f bits (+%.2f%%), rANS %.4f bits;\n"
	       "per BF16 element with a raw sign|mantissa byte: Huffman +%.2f%%, rANS +%.2f%% over the entropy\n",
	       n, ent, MAX_BITS, bits, 100.0 * (bits / ent - 1.0), 8.0 * (double)rlen / (double)n,
	       100.0 * (bits - ent) / (8.0 + ent), 100.0 * (8.0 * (double)rlen / (double)n - ent) / (8.0 + ent));
	for (int r = 0; r < runs; r++) {
		memset(out, 0, n);
		double t0 = bench_cpu_now();
		wc_err e = wc_rans_decode(rbuf, rlen, dt, chunk, out, n);
		double t1 = bench_cpu_now();
		if (e != WC_OK || memcmp(out, sym, n)) {
			fprintf(stderr, "bench_huff_exponents: the rANS decode differs from the input\n");
			return 1;
		}
		memset(out, 0, n);
		double t2 = bench_cpu_now();
		huff_decode(tab, &hc, in, q, out);
		double t3 = bench_cpu_now();
		if (memcmp(out, sym, n)) {
			fprintf(stderr, "bench_huff_exponents: the Huffman decode differs from the input\n");
			return 1;
		}
		printf("rANS %.3f G symbols/s, Huffman %.3f G symbols/s\n", (double)n / (t1 - t0) / 1e9,
		       (double)n / (t3 - t2) / 1e9);
	}
	free(sym), free(out), free(hbuf), free(rbuf), free(dt);
	return 0;
}
