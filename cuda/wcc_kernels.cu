/*
 * wcc_kernels.cu - CUDA kernels of the wcodec GPU decoder: rANS chunk decode
 * (one warp per chunk) and plane merge. docs/FORMAT.md sections 2-4 are the
 * normative definitions these kernels implement bit for bit; wcc_kernels.h
 * describes the descriptors.
 *
 * rANS decode, per warp (FORMAT.md 4): lane l holds state x[l] in a
 * register. Each round every active lane looks its slot (x & 4095) up in the
 * block's packed decoding table (symbol | freq << 8 | (slot - cum) << 20,
 * rans.h), advances x, and the lanes whose x fell under 2^16 read the next
 * 16-bit words in ascending lane order: lane l takes word p + popc(ballot &
 * lanes below l). The words come from a per-warp ring in shared memory that
 * asynchronous copies keep filled ahead of the reads. Rounds run in groups
 * of 16, unrolled: the decoded bytes are staged per warp in shared memory
 * and written 512 at a time as 16-byte stores (or merged with the tile's
 * other planes into tensor bytes).
 */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include "wcc_kernels.h"

#define FULL_MASK 0xffffffffu
#define RANS_THREADS (WCC_RANS_WARPS * 32u)
#define STAGE_BYTES 512u /* 16 rounds of 32 symbols */

/* Build the packed decoding table of freqs (256 entries, sum 4096) into
 * tab[4096]. Needs blockDim.x == 256. cum[] is scratch of 257 entries. */
__device__ static void build_dtab(const uint16_t *__restrict__ freqs, uint32_t *tab, uint32_t *cum)
{
	const unsigned tid = threadIdx.x;
	const unsigned lane = tid & 31u, warp = tid >> 5;
	__shared__ uint32_t warp_sum[8];

	uint32_t f = freqs[tid];
	/* inclusive scan within the warp */
	uint32_t v = f;
	for (unsigned d = 1; d < 32; d <<= 1) {
		uint32_t o = __shfl_up_sync(FULL_MASK, v, d);
		if (lane >= d)
			v += o;
	}
	if (lane == 31)
		warp_sum[warp] = v;
	__syncthreads();
	uint32_t before = 0;
	for (unsigned w = 0; w < warp; w++)
		before += warp_sum[w];
	cum[tid] = before + v - f; /* exclusive prefix */
	if (tid == 255)
		cum[256] = before + v;
	__syncthreads();

	/* Thread tid fills slots [16 tid, 16 tid + 16): binary search for the
	 * first, then walk forward over symbol boundaries. */
	const uint32_t t0 = tid * 16u;
	unsigned lo = 0, hi = 255; /* largest s with cum[s] <= t0 */
	while (lo < hi) {
		unsigned mid = (lo + hi + 1) >> 1;
		if (cum[mid] <= t0)
			lo = mid;
		else
			hi = mid - 1;
	}
	unsigned s = lo;
	for (uint32_t t = t0; t < t0 + 16u; t++) {
		while (s < 255 && cum[s + 1] <= t)
			s++;
		uint32_t fs = cum[s + 1] - cum[s];
		tab[t] = s | ((fs & 0xfffu) << 8) | ((t - cum[s]) << 20);
	}
	__syncthreads();
}

/* ---- merge ---------------------------------------------------------------- */

/* Plane k's bytes i..i+3 (load4) or byte i (load1). Plane `fp` is not in
 * memory: its bytes are `sub` (the fused rANS plane, from the warp's stage).
 * Plane `op`, when not NO_SUB, was loaded ahead by the caller: `osub`. */
#define NO_SUB 0xffu

/* Symbols i..i+3 (i a multiple of 4) of a PACK body of b bits a symbol
 * (docs/FORMAT.md section 3: 8 / b to a byte, lowest bits first), one a
 * byte, symbol i lowest. */
__device__ __forceinline__ uint32_t unpack4(const uint8_t *s, uint32_t i, unsigned b)
{
	if (b == 4) {
		const uint32_t x = s[i / 2u] | (uint32_t)s[i / 2u + 1u] << 8;
		return (x & 0xfu) | (x & 0xf0u) << 4 | (x & 0xf00u) << 8 | (x & 0xf000u) << 12;
	}
	if (b == 2) {
		const uint32_t x = s[i / 4u];
		return (x & 0x3u) | (x & 0xcu) << 6 | (x & 0x30u) << 12 | (x & 0xc0u) << 18;
	}
	const uint32_t x = s[i / 8u] >> (i % 8u);
	return (x & 0x1u) | (x & 0x2u) << 7 | (x & 0x4u) << 14 | (x & 0x8u) << 21;
}

__device__ __forceinline__ uint32_t load4(const wcc_merge_tile &t, unsigned k, uint32_t i, unsigned fp,
					  uint32_t sub, unsigned op, uint32_t osub)
{
	if (k == fp)
		return sub;
	if (k == op)
		return osub;
	const uint8_t *s = t.src[k];
	if (s && t.bits[k])
		return unpack4(s, i, t.bits[k]);
	return s ? *(const uint32_t *)(s + i) : 0x01010101u * t.value[k];
}

__device__ __forceinline__ uint8_t load1(const wcc_merge_tile &t, unsigned k, uint32_t i, unsigned fp,
					 uint32_t sub)
{
	if (k == fp)
		return (uint8_t)sub;
	const uint8_t *s = t.src[k];
	if (s && t.bits[k]) {
		const unsigned b = t.bits[k];
		return (uint8_t)(s[i * b / 8u] >> (i * b % 8u) & ((1u << b) - 1u));
	}
	return s ? s[i] : t.value[k];
}

/* 4x4 byte transpose: word i = [a_i, b_i, c_i, d_i] (byte 0 first). */
__device__ __forceinline__ void transpose4(uint32_t a, uint32_t b, uint32_t c, uint32_t d, uint32_t w[4])
{
	const uint32_t t0 = __byte_perm(a, b, 0x5140), t1 = __byte_perm(a, b, 0x7362);
	const uint32_t u0 = __byte_perm(c, d, 0x5140), u1 = __byte_perm(c, d, 0x7362);
	w[0] = __byte_perm(t0, u0, 0x5410);
	w[1] = __byte_perm(t0, u0, 0x7632);
	w[2] = __byte_perm(t1, u1, 0x5410);
	w[3] = __byte_perm(t1, u1, 0x7632);
}

/* Four BF16 elements from their exponent bytes e (plane 0) and sign|mantissa
 * bytes m (plane 1), one element a byte, element 0 lowest. */
__device__ __forceinline__ uint2 bf16_4(uint32_t e, uint32_t m)
{
	const uint32_t e01 = __byte_perm(e, 0, 0x4140), e23 = __byte_perm(e, 0, 0x4342);
	const uint32_t m01 = __byte_perm(m, 0, 0x4140), m23 = __byte_perm(m, 0, 0x4342);
	return make_uint2(((m01 & 0x00800080u) << 8) | (e01 << 7) | (m01 & 0x007f007fu),
			  ((m23 & 0x00800080u) << 8) | (e23 << 7) | (m23 & 0x007f007fu));
}

/* Four 2-byte elements of a byte shuffle from their high (plane 0) and low
 * (plane 1) bytes. */
__device__ __forceinline__ uint2 shuffle16_4(uint32_t hi, uint32_t lo)
{
	return make_uint2(__byte_perm(lo, hi, 0x5140), __byte_perm(lo, hi, 0x7362));
}

/* Elements i .. i+3 (i a multiple of 4) with aligned planes and output. */
__device__ __forceinline__ void merge_vec4(const wcc_merge_tile &t, uint32_t i, unsigned fp = NO_SUB,
					   uint32_t sub = 0, unsigned op = NO_SUB, uint32_t osub = 0)
{
	uint32_t w[4];
	switch (t.kind) {
	case 2: /* bf16 */
		*(uint2 *)(t.out + 2u * i) = bf16_4(load4(t, 0, i, fp, sub, op, osub), load4(t, 1, i, fp, sub, op, osub));
		return;
	case 3: { /* f32: q = p1 | p2 << 8 | p3 << 16 | p0 << 24 */
		transpose4(load4(t, 1, i, fp, sub, op, osub), load4(t, 2, i, fp, sub, op, osub), load4(t, 3, i, fp, sub, op, osub), load4(t, 0, i, fp, sub, op, osub), w);
		uint4 o;
		o.x = (w[0] & 0x007fffffu) | ((w[0] >> 1) & 0x7f800000u) | ((w[0] << 8) & 0x80000000u);
		o.y = (w[1] & 0x007fffffu) | ((w[1] >> 1) & 0x7f800000u) | ((w[1] << 8) & 0x80000000u);
		o.z = (w[2] & 0x007fffffu) | ((w[2] >> 1) & 0x7f800000u) | ((w[2] << 8) & 0x80000000u);
		o.w = (w[3] & 0x007fffffu) | ((w[3] >> 1) & 0x7f800000u) | ((w[3] << 8) & 0x80000000u);
		*(uint4 *)(t.out + 4u * i) = o;
		return;
	}
	case 1: /* shuffle: plane k = byte w-1-k */
		if (t.elem_size == 2) {
			*(uint2 *)(t.out + 2u * i) = shuffle16_4(load4(t, 0, i, fp, sub, op, osub),
								 load4(t, 1, i, fp, sub, op, osub));
		} else if (t.elem_size == 4) {
			transpose4(load4(t, 3, i, fp, sub, op, osub), load4(t, 2, i, fp, sub, op, osub), load4(t, 1, i, fp, sub, op, osub), load4(t, 0, i, fp, sub, op, osub), w);
			*(uint4 *)(t.out + 4u * i) = make_uint4(w[0], w[1], w[2], w[3]);
		} else {
			uint32_t h[4];
			transpose4(load4(t, 7, i, fp, sub, op, osub), load4(t, 6, i, fp, sub, op, osub), load4(t, 5, i, fp, sub, op, osub), load4(t, 4, i, fp, sub, op, osub), w);
			transpose4(load4(t, 3, i, fp, sub, op, osub), load4(t, 2, i, fp, sub, op, osub), load4(t, 1, i, fp, sub, op, osub), load4(t, 0, i, fp, sub, op, osub), h);
			uint4 *o = (uint4 *)(t.out + 8u * i);
			o[0] = make_uint4(w[0], h[0], w[1], h[1]);
			o[1] = make_uint4(w[2], h[2], w[3], h[3]);
		}
		return;
	default: /* bytes */
		*(uint32_t *)(t.out + i) = load4(t, 0, i, fp, sub, op, osub);
		return;
	}
}

/* Elements i .. i+7 (i a multiple of 8) of a fused tile: the rANS plane's
 * bytes in sub, the preloaded plane `op`'s in osub. 2-byte elements go out
 * as one 16-byte store, so that a warp's lanes, 8 elements apart, write 512
 * contiguous bytes per instruction (four 8-byte stores 32 bytes apart sent
 * four times the sectors to L2, which bounded the kernel: docs/BENCHMARKS.md,
 * "GPU decode"). */
__device__ __forceinline__ void merge_vec8(const wcc_merge_tile &t, uint32_t i, unsigned fp, uint2 sub, unsigned op,
					   uint2 osub)
{
	if (t.elem_size == 2 && (t.kind == 2 || t.kind == 1)) {
		const uint32_t a0 = load4(t, 0, i, fp, sub.x, op, osub.x), b0 = load4(t, 1, i, fp, sub.x, op, osub.x);
		const uint32_t a1 = load4(t, 0, i + 4u, fp, sub.y, op, osub.y), b1 = load4(t, 1, i + 4u, fp, sub.y, op, osub.y);
		const uint2 lo = t.kind == 2 ? bf16_4(a0, b0) : shuffle16_4(a0, b0);
		const uint2 hi = t.kind == 2 ? bf16_4(a1, b1) : shuffle16_4(a1, b1);
		*(uint4 *)(t.out + 2u * i) = make_uint4(lo.x, lo.y, hi.x, hi.y);
		return;
	}
	merge_vec4(t, i, fp, sub.x, op, osub.x);
	merge_vec4(t, i + 4u, fp, sub.y, op, osub.y);
}

/* One element, any alignment. */
__device__ __forceinline__ void merge_one(const wcc_merge_tile &t, uint32_t i, unsigned fp = NO_SUB,
					  uint32_t sub = 0)
{
	const unsigned w = t.elem_size;
	uint8_t *o = t.out + (size_t)w * i;
	switch (t.kind) {
	case 2: {
		const uint32_t e = load1(t, 0, i, fp, sub), m = load1(t, 1, i, fp, sub);
		const uint32_t v = ((m & 0x80u) << 8) | (e << 7) | (m & 0x7fu);
		o[0] = (uint8_t)v;
		o[1] = (uint8_t)(v >> 8);
		return;
	}
	case 3: {
		const uint32_t p0 = load1(t, 0, i, fp, sub), p1 = load1(t, 1, i, fp, sub), p2 = load1(t, 2, i, fp, sub),
			       p3 = load1(t, 3, i, fp, sub);
		const uint32_t u = ((p3 & 0x80u) << 24) | (p0 << 23) | ((p3 & 0x7fu) << 16) | (p2 << 8) | p1;
		o[0] = (uint8_t)u;
		o[1] = (uint8_t)(u >> 8);
		o[2] = (uint8_t)(u >> 16);
		o[3] = (uint8_t)(u >> 24);
		return;
	}
	case 1:
		for (unsigned k = 0; k < w; k++)
			o[w - 1u - k] = load1(t, k, i, fp, sub);
		return;
	default:
		o[0] = load1(t, 0, i, fp, sub);
		return;
	}
}

/* ---- rANS decode ---------------------------------------------------------- */

/* Words of a chunk are staged per warp in a ring of RING_WORDS u16 in
 * shared memory, filled a slice (64 words, 4 bytes per lane) at a time by
 * asynchronous copies (cp.async, sm_80+) two slices ahead of the reads.
 * The ring holds eight slices so that a __syncwarp() always lies between
 * the last read of a slice and the copy that overwrites it.
 * A register window loaded from global memory would stall the warp at the
 * first instruction that touches it (a move the compiler inserts at the
 * loop's end did, once per window: docs/BENCHMARKS.md, "GPU decode"). */
#define RING_WORDS 512u
#define RING_SLICE 64u /* words fetched at once: 4 bytes per lane */

struct rans_lane {
	uint32_t x;     /* this lane's state */
	uint32_t p;     /* words consumed by the warp (absolute index), warp-uniform */
	uint32_t ready; /* words [.., ready) are in the ring and visible, warp-uniform */
	uint32_t fetch; /* next slice to fetch (absolute word index), warp-uniform */
};

/* Lane `lane` copies words [q + 2 lane, q + 2 lane + 2) of the chunk into
 * the ring, zero-filling past the last word (nslots is even, q a multiple
 * of 64), as one commit group. */
__device__ __forceinline__ void ring_fetch(uint16_t *ring, const uint16_t *__restrict__ words, uint32_t nslots,
					   uint32_t q, unsigned lane)
{
	const uint32_t w = q + 2u * lane;
	uint16_t *dst = ring + (w & (RING_WORDS - 1u));
	const bool in = w < nslots;
#if __CUDA_ARCH__ >= 800
	const unsigned dst_s = (unsigned)__cvta_generic_to_shared(dst);
	asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(dst_s), "l"(in ? words + w : words),
		     "r"(in ? 4u : 0u)
		     : "memory");
	asm volatile("cp.async.commit_group;\n" ::: "memory");
#else
	*(uint32_t *)dst = in ? *(const uint32_t *)(words + w) : 0u;
#endif
}

/* Wait until at most `n` of this lane's newest commit groups are pending,
 * then make every lane's completed copies visible to the warp. */
template <int N>
__device__ __forceinline__ void ring_wait()
{
#if __CUDA_ARCH__ >= 800
	asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
#endif
	__syncwarp();
}

/* One decoding round of FORMAT.md 4 for the warp: every active lane looks
 * its slot up, advances its state, and the lanes whose state fell under
 * 2^16 read the next words in ascending lane order. Returns the decoding
 * table entry (symbol in the low byte). TAIL: some lanes may be inactive
 * (the chunk's last round). The word count is checked once, at the end of
 * the chunk (a stream that reads past its words ends with p > nslots; the
 * ring holds zeros there). */
template <bool TAIL>
__device__ __forceinline__ uint32_t rans_round(rans_lane &s, bool active, const uint32_t *tab, uint16_t *ring,
					       const uint16_t *__restrict__ words, uint32_t nslots, uint32_t lt_mask,
					       unsigned lane)
{
	const uint32_t e = tab[s.x & 4095u];
	const uint32_t xn = ((e >> 8) & 0xfffu) * (s.x >> 12) + (e >> 20);
	if (!TAIL || active)
		s.x = xn;
	const bool need = (!TAIL || active) && s.x < 65536u;
	const uint32_t mask = __ballot_sync(FULL_MASK, need);
	const uint32_t v = ring[(s.p + __popc(mask & lt_mask)) & (RING_WORDS - 1u)];
	if (need)
		s.x = (s.x << 16) | v;
	s.p += __popc(mask);
	if (s.p + 32u > s.ready) { /* warp-uniform */
		ring_fetch(ring, words, nslots, s.fetch, lane);
		s.fetch += RING_SLICE;
		s.ready += RING_SLICE;
		ring_wait<2>();
	}
	return e;
}

/* MINB: blocks of 8 warps per SM the register budget is cut for (8: 32
 * registers and full occupancy, with spills; 4: 4 blocks fit, the default:
 * as fast as 3 and 6 on an H200, 8 slower; docs/BENCHMARKS.md, "GPU
 * decode"). */
template <int MINB>
__global__ void __launch_bounds__(RANS_THREADS, MINB)
wcc_rans_kernel(const wcc_rans_block *__restrict__ blocks, const wcc_chunk *__restrict__ chunks,
		const uint16_t *__restrict__ freqs, const wcc_merge_tile *__restrict__ tiles,
		uint32_t *__restrict__ status)
{
	__shared__ uint32_t tab[4096];
	__shared__ uint32_t cum[257];
	__shared__ __align__(16) uint8_t stage_all[WCC_RANS_WARPS][STAGE_BYTES];
	__shared__ __align__(16) uint16_t ring_all[WCC_RANS_WARPS][RING_WORDS];
	__shared__ wcc_merge_tile tile_all[WCC_RANS_WARPS];

	const wcc_rans_block blk = blocks[blockIdx.x];
	build_dtab(freqs + (size_t)blk.table * 256u, tab, cum);

	const unsigned lane = threadIdx.x & 31u, warp = threadIdx.x >> 5;
	if (warp >= blk.count)
		return;
	uint8_t *stage = stage_all[warp];
	uint16_t *ring = ring_all[warp];
	const uint32_t lt_mask = (1u << lane) - 1u;
	const wcc_chunk ch = chunks[blk.first + warp];

	const uint32_t m = ch.nsym;
	const uint32_t nslots = (ch.in_bytes - 128u) / 2u; /* u16 words incl. pad; even */
	const uint16_t *__restrict__ words = (const uint16_t *)(ch.in + 128);
	for (uint32_t q = 0; q < 4u * RING_SLICE; q += RING_SLICE)
		ring_fetch(ring, words, nslots, q, lane);
	rans_lane s;
	s.x = ((const uint32_t *)ch.in)[lane];
	s.p = 0;
	s.ready = 2u * RING_SLICE;
	s.fetch = 4u * RING_SLICE;
	const bool bad = s.x < 65536u;

	/* fused: this warp writes tensor bytes itself (see wcc_chunk.fuse) */
	const uint32_t fuse = ch.fuse;
	const unsigned fp = fuse >> 28;
	wcc_merge_tile &mt = tile_all[warp];
	uint32_t e0 = 0; /* element index of the chunk's symbol 0 */
	if (fuse) {
		if (lane < sizeof(wcc_merge_tile) / 4u)
			((uint32_t *)&mt)[lane] = ((const uint32_t *)&tiles[(fuse & 0x0fffffffu) - 1u])[lane];
		__syncwarp();
		e0 = (uint32_t)((size_t)(ch.out - mt.out) / mt.elem_size);
	}
	ring_wait<2>();

	const uint32_t rounds = (m + 31u) / 32u;
	const uint32_t groups = m / STAGE_BYTES; /* of 16 full rounds */
	uint8_t *out = ch.out;

	/* A fused tile of two planes whose other plane is RAW (BF16, F16 and
	 * 2-byte tensors): each lane loads its 16 bytes of that plane at the
	 * start of a group, so the merge 16 rounds later does not wait on
	 * global memory (it did for 14% of a one-tile batch's time). */
	const unsigned op = fuse && mt.nplanes == 2u && mt.src[fp ^ 1u] ? fp ^ 1u : NO_SUB;
	/* The group's elements in two halves of 256, lane l taking elements
	 * [8 l, 8 l + 8) of each: the preloaded plane read and the tensor bytes
	 * written contiguously across the warp. */
	const bool op8 = op != NO_SUB && (((uintptr_t)mt.src[op] + e0) & 7u) == 0;
	for (uint32_t g = 0; g < groups; g++) {
		uint2 oa = make_uint2(0, 0), ob = make_uint2(0, 0);
		if (op != NO_SUB) {
			const uint8_t *src = mt.src[op] + e0 + g * STAGE_BYTES + 8u * lane;
			if (op8) {
				oa = *(const uint2 *)src;
				ob = *(const uint2 *)(src + STAGE_BYTES / 2u);
			} else { /* bodies start 4-byte aligned (docs/FORMAT.md, tile payload) */
				oa = make_uint2(((const uint32_t *)src)[0], ((const uint32_t *)src)[1]);
				ob = make_uint2(((const uint32_t *)(src + STAGE_BYTES / 2u))[0],
						((const uint32_t *)(src + STAGE_BYTES / 2u))[1]);
			}
		}
#pragma unroll
		for (unsigned j = 0; j < 16u; j++)
			stage[j * 32u + lane] = (uint8_t)rans_round<false>(s, true, tab, ring, words, nslots, lt_mask, lane);
		__syncwarp();
		if (!fuse) {
			((uint4 *)(out + g * STAGE_BYTES))[lane] = ((const uint4 *)stage)[lane];
		} else {
			const uint32_t i = e0 + g * STAGE_BYTES + 8u * lane;
			merge_vec8(mt, i, fp, ((const uint2 *)stage)[lane], op, oa);
			merge_vec8(mt, i + STAGE_BYTES / 2u, fp, ((const uint2 *)stage)[32u + lane], op, ob);
		}
		__syncwarp();
	}
	/* the last, partial group: at most 16 rounds, the last one partial */
	for (uint32_t r = groups * 16u; r < rounds; r++) {
		const uint32_t e = rans_round<true>(s, r * 32u + lane < m, tab, ring, words, nslots, lt_mask, lane);
		stage[(r & 15u) * 32u + lane] = (uint8_t)e;
	}
	__syncwarp();
	const uint32_t done = groups * STAGE_BYTES;
	for (uint32_t i = lane; done + i < m; i += 32u) {
		if (!fuse)
			out[done + i] = stage[i];
		else
			merge_one(mt, e0 + done + i, fp, stage[i]);
	}
	ring_wait<0>(); /* no copy may land after the block exits */

	/* Validation (FORMAT.md 4): every state back at 2^16, every word read,
	 * the optional pad word present only to make the count even and zero. */
	const uint32_t p = s.p;
	const bool words_ok = p == nslots || (p + 1u == nslots && (p & 1u) && words[p] == 0u);
	if (__any_sync(FULL_MASK, bad || s.x != 65536u) || !words_ok) {
		if (lane == 0)
			status[ch.job] = 1u;
	}
}

/* A lossy element's place: channel c, position k in it, group g, place kg
 * in the group; next() walks to the following element as src/codec/lossy.c
 * does. */
struct lossy_walk {
	uint32_t c, k, g, kg;

	__device__ __forceinline__ void at(const wcc_lossy_tile &q, uint32_t e)
	{
		if (q.axis == 0) {
			c = e / q.per;
			k = e - c * q.per;
		} else {
			k = e / q.channels;
			c = e - k * q.channels;
		}
		g = k / q.group;
		kg = k - g * q.group;
	}

	__device__ __forceinline__ void next(const wcc_lossy_tile &q)
	{
		if (q.axis == 0 || ++c == q.channels) {
			if (q.axis)
				c = 0;
			k++;
			if (++kg == q.group) {
				kg = 0;
				g++;
			}
			if (q.axis == 0 && k == q.per) {
				k = kg = g = 0;
				c++;
			}
		}
	}

	__device__ __forceinline__ float scale(const wcc_lossy_tile &q) const
	{
		return q.scales[c * q.groups + g - q.scale_base];
	}
};

/* One binary32 multiply (no contraction) and a conversion rounding to
 * nearest even: the CPU's arithmetic (src/codec/lossy.c), bit for bit. */
__device__ __forceinline__ uint32_t lossy_bits(const wcc_lossy_tile &q, int8_t code, float s)
{
	const float v = __fmul_rn((float)code, s);
	if (q.dtype == 1)
		return __bfloat16_as_ushort(__float2bfloat16_rn(v));
	if (q.dtype == 2)
		return __half_as_ushort(__float2half_rn(v));
	return __float_as_uint(v);
}

/* Elements [begin, end) of a lossy tile. Aligned: 8 consecutive elements a
 * thread, codes read as 8 bytes and 16-bit outputs stored 16 bytes at a
 * time; else one element a thread. */
__device__ static void dequant(const wcc_lossy_tile &q, uint8_t *out, uint32_t begin, uint32_t end)
{
	const bool vec = q.dtype != 0 && ((uintptr_t)q.codes & 7u) == 0 && ((uintptr_t)out & 15u) == 0 &&
			 (begin & 7u) == 0;
	uint32_t i = begin;
	if (vec) {
		const uint32_t vend = begin + ((end - begin) & ~7u);
		for (uint32_t j = begin + 8u * threadIdx.x; j < vend; j += 8u * blockDim.x) {
			const uint2 cw = *(const uint2 *)(q.codes + j);
			lossy_walk w;
			w.at(q, q.first + j);
			uint32_t o[4];
#pragma unroll
			for (unsigned h = 0; h < 8; h++) {
				const int8_t code = (int8_t)(((h < 4 ? cw.x : cw.y) >> (8u * (h & 3u))) & 0xffu);
				const uint32_t b = lossy_bits(q, code, w.scale(q));
				if (h & 1u)
					o[h >> 1] |= b << 16;
				else
					o[h >> 1] = b;
				w.next(q);
			}
			*(uint4 *)(out + 2u * j) = make_uint4(o[0], o[1], o[2], o[3]);
		}
		i = vend;
	}
	for (uint32_t j = i + threadIdx.x; j < end; j += blockDim.x) {
		lossy_walk w;
		w.at(q, q.first + j);
		const uint32_t b = lossy_bits(q, q.codes[j], w.scale(q));
		if (q.dtype == 0)
			((uint32_t *)out)[j] = b;
		else
			((uint16_t *)out)[j] = (uint16_t)b;
	}
}

__global__ void __launch_bounds__(256)
wcc_merge_kernel(const wcc_merge_seg *__restrict__ segs, const wcc_merge_tile *__restrict__ tiles)
{
	/* the tile descriptor in shared memory: plane pointers are indexed by
	 * run-time plane numbers, which would put a register copy in local memory */
	__shared__ wcc_merge_tile t;
	const wcc_merge_seg sg = segs[blockIdx.x];
	if (threadIdx.x == 0)
		t = tiles[sg.tile];
	__syncthreads();
	const uint32_t end = sg.begin + sg.count;
	if (t.kind == WCC_KIND_LOSSY) {
		dequant(t.lossy, t.out, sg.begin, end);
		return;
	}

	bool vec = (sg.begin & 3u) == 0;
	const unsigned oalign = t.elem_size >= 4 ? 16u : 4u * t.elem_size;
	vec = vec && ((uintptr_t)t.out & (oalign - 1u)) == 0;
	for (unsigned k = 0; k < t.nplanes; k++)
		vec = vec && ((uintptr_t)t.src[k] & 3u) == 0;

	uint32_t i = sg.begin;
	if (vec) {
		const uint32_t vend = sg.begin + (sg.count & ~3u);
		for (uint32_t j = sg.begin + 4u * threadIdx.x; j < vend; j += 4u * blockDim.x)
			merge_vec4(t, j);
		i = vend;
	}
	for (uint32_t j = i + threadIdx.x; j < end; j += blockDim.x)
		merge_one(t, j);
}

/* ---- launchers ---------------------------------------------------------- */

static int g_variant = 0;

/* Load a kernel's code on the current device now (cudaFuncGetAttributes
 * forces a lazily loaded function to load: CUDA C++ Programming Guide,
 * "Lazy Loading", possible issues). Returns 0 or a cudaError_t value. */
static int preload(const void *fn)
{
	struct cudaFuncAttributes a;
	return (int)cudaFuncGetAttributes(&a, fn);
}

extern "C" int wcc_preload_kernels(void)
{
	/* the default build of the rANS kernel; the other builds are for
	 * benchmarks (wcc_set_variant) and load at their first launch */
	int e = preload((const void *)wcc_rans_kernel<4>);
	return e ? e : preload((const void *)wcc_merge_kernel);
}

extern "C" void wcc_set_variant(int v)
{
	g_variant = v;
}

extern "C" int wcc_launch_rans(const wcc_rans_block *blocks, uint32_t nblocks, const wcc_chunk *chunks,
			       const uint16_t *freqs, const wcc_merge_tile *tiles, uint32_t *status, void *stream)
{
	if (nblocks == 0)
		return 0;
	const cudaStream_t st = (cudaStream_t)stream;
	switch (g_variant) {
	case 1: wcc_rans_kernel<8><<<nblocks, RANS_THREADS, 0, st>>>(blocks, chunks, freqs, tiles, status); break;
	case 2: wcc_rans_kernel<6><<<nblocks, RANS_THREADS, 0, st>>>(blocks, chunks, freqs, tiles, status); break;
	case 3: wcc_rans_kernel<3><<<nblocks, RANS_THREADS, 0, st>>>(blocks, chunks, freqs, tiles, status); break;
		default: wcc_rans_kernel<4><<<nblocks, RANS_THREADS, 0, st>>>(blocks, chunks, freqs, tiles, status); break;
	}
	return (int)cudaGetLastError();
}

extern "C" int wcc_launch_merge(const wcc_merge_seg *segs, uint32_t nsegs, const wcc_merge_tile *tiles,
				void *stream)
{
	if (nsegs == 0)
		return 0;
	wcc_merge_kernel<<<nsegs, 256, 0, (cudaStream_t)stream>>>(segs, tiles);
	return (int)cudaGetLastError();
}
