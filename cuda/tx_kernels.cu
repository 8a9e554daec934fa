/*
 * tx_kernels.cu - the kernels of transform-mode .qvq images (tx_decode.h):
 * rANS with a table a plane, escape checks, DC prefix sums, the exact
 * integer inverse DCT and the colour pass. docs/FORMAT.md 6.8 is the
 * definition; src/qvq/qvq_dct.c and qvq_tx.c are the CPU reference, whose
 * arithmetic (int32 products and sums, floor shifts) each step repeats.
 */
#include <cuda_runtime.h>
#include <cub/block/block_scan.cuh>

#include "tx_decode.h"

#define FULL 0xffffffffu
#define MAX_GRID_Y 65535u

__constant__ int16_t B[8][8] = {
	{1448, 1448, 1448, 1448, 1448, 1448, 1448, 1448},
	{2009, 1703, 1138, 400, -400, -1138, -1703, -2009},
	{1892, 784, -784, -1892, -1892, -784, 784, 1892},
	{1703, -400, -2009, -1138, 1138, 2009, 400, -1703},
	{1448, -1448, -1448, 1448, 1448, -1448, -1448, 1448},
	{1138, -2009, 400, 1703, -1703, -400, 2009, -1138},
	{784, -1892, 1892, -784, -784, 1892, -1892, 784},
	{400, -1138, 1703, -2009, 2009, -1703, 1138, -400},
};
/* Zigzag index of each natural position (the inverse of JPEG's scan). */
__constant__ uint8_t ZZ_OF[64] = {
	0,  1,  5,  6,  14, 15, 27, 28, 2,  4,  7,  13, 16, 26, 29, 42, 3,  8,  12, 17, 25, 30,
	41, 43, 9,  11, 18, 24, 31, 40, 44, 53, 10, 19, 23, 32, 39, 45, 52, 54, 20, 22, 33, 38,
	46, 51, 55, 60, 21, 34, 37, 47, 50, 56, 59, 61, 35, 36, 48, 49, 57, 58, 62, 63,
};
__constant__ uint8_t BAND_START[5] = {0, 1, 6, 21, 64};

/* x / 2^b rounded down, for either sign: nvcc's >> of a signed integer is
 * the arithmetic shift (SHF.R.S32), which rounds down. */
__device__ __forceinline__ int32_t fs(int32_t x, unsigned b)
{
	return x >> b;
}

__device__ __forceinline__ int32_t clamp255(int32_t v) { return v < 0 ? 0 : v > 255 ? 255 : v; }

/* ---- 1. rANS: a warp a chunk -------------------------------------------- */

#define RANS_WARPS 8
#define RING 256u /* words of a warp's ring in shared memory: 8 windows of 32 */

/* Asynchronous 4-byte copy into shared memory, zero-filled when !full
 * (PTX cp.async, sm_80 and later; the 75 target's JIT path takes the same). */
__device__ __forceinline__ void copy4(void *smem, const void *gmem, bool full)
{
	const unsigned dst = (unsigned)__cvta_generic_to_shared(smem);
	asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(dst), "l"(gmem), "r"(full ? 4 : 0));
}
__device__ __forceinline__ void copy_commit() { asm volatile("cp.async.commit_group;\n" ::); }
__device__ __forceinline__ void copy_wait6() { asm volatile("cp.async.wait_group 6;\n" ::); }

/* Window k (words [32k, 32k + 32) of the chunk) into its place in the
 * ring, 16 lanes 4 bytes each, as one group of copies. */
__device__ __forceinline__ void window(uint16_t *ring, const uint16_t *w, uint32_t nw, uint32_t k, uint32_t lane)
{
	if (lane < 16) {
		const uint32_t i = 32 * k + 2 * lane; /* words i, i + 1: inside the chunk's words and its pad */
		const bool in = i + 1 < nw + (nw & 1);
		copy4(ring + (i & (RING - 1)), in ? w + i : w, in);
	}
	copy_commit();
}

/* Group > 0 (UNIFORM): the chunks come in groups of `group` sharing their
 * first symbol and length, of images of one size, so the warps of a
 * thread block (one group's) change tables at the same rounds and share
 * each table in shared memory: a warp's 32 lookups at random slots are then
 * one shared access instead of up to 32 L1 lines. Otherwise each warp
 * reads its tables from global memory. The words are copied ahead into a
 * ring in shared memory (6 windows of 32 in flight), so no round waits on
 * global memory: a round's chain is the table lookup, the state update and
 * one shared read. */
template <bool UNIFORM>
__global__ void tx_rans(const wcc_tx_image *__restrict__ imgs, const wcc_tx_chunk *__restrict__ chunks,
			uint32_t nchunks, uint32_t group, const uint32_t *__restrict__ tables, uint32_t *status)
{
	__shared__ uint32_t stab[UNIFORM ? 4096 : 1];
	__shared__ __align__(16) uint16_t rings[RANS_WARPS][RING];
	const uint32_t warp = threadIdx.x / 32, lane = threadIdx.x & 31;
	uint32_t c, c0;
	bool live;
	if (UNIFORM) { /* blocks never straddle groups */
		const uint32_t per = (group + RANS_WARPS - 1) / RANS_WARPS, g = blockIdx.x / per;
		const uint32_t idx = (blockIdx.x - g * per) * RANS_WARPS + warp;
		live = idx < group;
		c = g * group + idx;
		c0 = g * group + (blockIdx.x - g * per) * RANS_WARPS; /* the block's first: exists */
	} else {
		c = blockIdx.x * RANS_WARPS + warp;
		live = c < nchunks;
		c0 = blockIdx.x * RANS_WARPS;
	}
	const wcc_tx_chunk ch = chunks[live ? c : c0];
	const wcc_tx_image *im = &imgs[ch.img];
	uint16_t *ring = rings[warp];
	uint32_t x = live ? ((const uint32_t *)ch.data)[lane] : 65536u;
	const uint16_t *w = (const uint16_t *)(ch.data + 128);
	int bad = x < 65536u;
	uint32_t p = 0, q = 0, seg = 0, loaded = ~0u, seg_end = im->end[0];
	uint8_t *out = im->sym + ch.first;
	const uint32_t rounds = (ch.m + 31) / 32;
	if (live) {
		for (uint32_t k = 0; k < RING / 32; k++)
			window(ring, w, ch.nw, k, lane);
		copy_wait6(); /* windows 0 and 1 are in */
		__syncwarp();
	}
	for (uint32_t r = 0; r < rounds; r++) {
		const uint32_t g = ch.first + 32 * r; /* plane boundaries are round-aligned */
		while (seg < WCC_TX_PLANES - 1 && seg_end <= g)
			seg_end = im->end[++seg];
		const uint32_t *tab = tables + 4096 * seg;
		if (UNIFORM && seg != loaded) { /* the same round in every warp of the block */
			__syncthreads();
			for (uint32_t i = threadIdx.x; i < 4096; i += blockDim.x)
				stab[i] = __ldg(tab + i);
			__syncthreads();
			loaded = seg;
		}
		if (!live)
			continue;
		if (p - q >= 32) { /* window q / 32 is used up: its place takes the window 8 on */
			__syncwarp();
			window(ring, w, ch.nw, q / 32 + RING / 32, lane);
			q += 32;
			copy_wait6(); /* the two windows from q are in */
			__syncwarp();
		}
		const uint32_t j = 32 * r + lane;
		bool need = false;
		if (j < ch.m) {
			const uint32_t t = x & 4095u, e = UNIFORM ? stab[t] : __ldg(tab + t);
			out[j] = (uint8_t)e;
			x = ((e >> 8) & 0xfffu) * (x >> 12) + (e >> 20);
			need = x < 65536u;
		}
		const uint32_t ballot = __ballot_sync(FULL, need);
		if (need) {
			const uint32_t at = p + __popc(ballot & ((1u << lane) - 1u)); /* < q + 64 */
			if (at < ch.nw)
				x = (x << 16) | ring[at & (RING - 1)];
			else
				bad = 1;
		}
		p += __popc(ballot);
	}
	if (!live)
		return;
	bad |= x != 65536u;
	if (lane == 0 && !(p == ch.nw || (p + 1 == ch.nw && (p & 1) && w[p] == 0)))
		bad = 1;
	if (__any_sync(FULL, bad) && lane == 0)
		status[im->job] = 1u;
}

/* ---- symbols to values --------------------------------------------------- */

/* The value symbol idx of an image's stream stands for (6.8), an escape's
 * found by its place; *bad set for symbols 253, 254 and escapes without one. */
__device__ int32_t value_at(const wcc_tx_image *im, uint32_t idx, int *bad)
{
	const uint32_t s = im->sym[idx];
	if (s < 253u)
		return s & 1u ? -(int32_t)((s + 1) >> 1) : (int32_t)(s >> 1);
	if (s == 255u) {
		uint32_t lo = 0, hi = im->nesc;
		while (lo < hi) {
			const uint32_t mid = (lo + hi) / 2;
			if (im->places[mid] < idx)
				lo = mid + 1;
			else
				hi = mid;
		}
		if (lo < im->nesc && im->places[lo] == idx)
			return im->values[lo];
	}
	*bad = 1;
	return 0;
}

/* ---- 2. every escape's place holds an escape symbol ------------------------ */

__global__ void tx_escapes(const wcc_tx_image *__restrict__ imgs, uint32_t *status)
{
	const wcc_tx_image *im = &imgs[blockIdx.y];
	for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < im->nesc; i += gridDim.x * blockDim.x)
		if (im->sym[im->places[i]] != 255u)
			status[im->job] = 1u;
}

/* ---- 3. DC: a prefix sum an (image, component) ------------------------------ */

#define DC_THREADS 256
__global__ void tx_dc(const wcc_tx_image *__restrict__ imgs, uint32_t *status)
{
	typedef cub::BlockScan<int32_t, DC_THREADS> scan_t;
	__shared__ typename scan_t::TempStorage tmp;
	__shared__ int32_t carry;
	const wcc_tx_image *im = &imgs[blockIdx.y];
	const uint32_t comp = blockIdx.x, nl = 4 * im->mw * im->mh, nc = im->mw * im->mh;
	const uint32_t nb = comp ? nc : nl;
	const uint32_t base = comp == 0 ? im->start[0] : im->start[4] + (comp == 2 ? nc : 0);
	int32_t *dc = im->dc + (comp == 0 ? 0 : comp == 1 ? nl : nl + nc);
	int bad = 0;
	if (threadIdx.x == 0)
		carry = 0;
	__syncthreads();
	for (uint32_t i0 = 0; i0 < nb; i0 += DC_THREADS) {
		const uint32_t i = i0 + threadIdx.x;
		int32_t v = i < nb ? value_at(im, base + i, &bad) : 0, sum;
		scan_t(tmp).InclusiveSum(v, sum);
		sum += carry;
		if (i < nb) {
			if (sum > 32767 || sum < -32767)
				bad = 1;
			dc[i] = sum;
		}
		__syncthreads();
		if (threadIdx.x == DC_THREADS - 1)
			carry = sum;
		__syncthreads();
	}
	if (bad)
		status[im->job] = 1u;
}

/* ---- 4. inverse DCT: a thread a row of a block ------------------------------ */

/* 32 blocks a thread block; thread t takes row t / 32 of block t % 32, so
 * a warp reads one coefficient of 32 neighbouring blocks at once (their
 * symbols lie a band's width apart) and writes one row of 32 blocks, 256
 * contiguous bytes. */
#define IDCT_BLOCKS 32
#define TPAD (8 * 9 + 1) /* a block's rows padded: 9 words a row, 73 a block, no bank conflicts */
__global__ void tx_idct(const wcc_tx_image *__restrict__ imgs, uint32_t *status)
{
	/* The basis and zigzag in shared memory (constant memory would
	 * serialise the threads' different zigzag places). */
	__shared__ int32_t sB[64];
	__shared__ uint8_t sZ[64];
	__shared__ int32_t T[IDCT_BLOCKS * TPAD];
	const wcc_tx_image *im = &imgs[blockIdx.y];
	if (threadIdx.x < 64) {
		sB[threadIdx.x] = B[threadIdx.x / 8][threadIdx.x % 8];
		sZ[threadIdx.x] = ZZ_OF[threadIdx.x];
	}
	__syncthreads();
	const uint32_t mw = im->mw, nl = 4 * mw * im->mh, nc = mw * im->mh, nb = nl + 2 * nc;
	const uint32_t sub = threadIdx.x % IDCT_BLOCKS, r = threadIdx.x / IDCT_BLOCKS;
	const uint32_t kb = blockIdx.x * IDCT_BLOCKS + sub;
	const bool live = kb < nb;
	const uint32_t comp = kb < nl ? 0 : kb < nl + nc ? 1 : 2;
	const uint32_t k = comp == 0 ? kb : comp == 1 ? kb - nl : kb - nl - nc; /* in its component */
	int32_t *t = T + sub * TPAD;
	int bad = 0;
	if (live) { /* row r: its 8 coefficients, then the row pass (horizontal frequencies) */
		const uint32_t kc = comp == 2 ? nc + k : k; /* Cb's blocks then Cr's in the chroma planes */
		const int32_t step = (int32_t)(comp ? im->step_chroma : im->step_luma);
		const uint32_t *start = im->start + (comp ? 4 : 0);
		int32_t X[8];
#pragma unroll
		for (int u = 0; u < 8; u++) {
			const uint32_t z = sZ[r * 8 + u];
			int32_t v;
			if (z == 0) {
				v = im->dc[kb];
			} else {
				const uint32_t b = z < 6 ? 1 : z < 21 ? 2 : 3, first = b == 1 ? 1 : b == 2 ? 6 : 21;
				const uint32_t width = b == 1 ? 5 : b == 2 ? 15 : 43;
				v = value_at(im, start[b] + kc * width + (z - first), &bad);
			}
			const int32_t x = v * step;
			X[u] = x > 32767 ? 32767 : x < -32768 ? -32768 : x;
		}
#pragma unroll
		for (int n = 0; n < 8; n++) {
			int32_t s = 1 << 11;
#pragma unroll
			for (int u = 0; u < 8; u++)
				s += sB[u * 8 + n] * X[u];
			t[r * 9 + n] = fs(s, 12);
		}
	}
	__syncthreads();
	if (live) { /* output row m = r: the column pass (vertical frequencies) */
		uint32_t lo = 0, hi = 0;
#pragma unroll
		for (int n = 0; n < 8; n++) {
			int32_t s = 1 << 14;
#pragma unroll
			for (int q = 0; q < 8; q++)
				s += sB[q * 8 + r] * t[q * 9 + n];
			const uint32_t v = (uint32_t)clamp255(fs(s, 15) + 128);
			if (n < 4)
				lo |= v << (8 * n);
			else
				hi |= v << (8 * (n - 4));
		}
		const uint32_t pw = 16 * mw, cw = 8 * mw;
		uint8_t *row;
		if (comp == 0) {
			const uint32_t bx = k % (2 * mw), by = k / (2 * mw);
			row = im->planes + (size_t)(by * 8 + r) * pw + bx * 8;
		} else {
			const uint32_t bx = k % mw, by = k / mw;
			row = im->planes + (size_t)pw * 16 * im->mh + (comp == 2 ? (size_t)cw * 8 * im->mh : 0) +
			      (size_t)(by * 8 + r) * cw + bx * 8;
		}
		*(uint2 *)row = make_uint2(lo, hi); /* planes 16-byte aligned, rows a multiple of 8 */
	}
	if (bad)
		status[im->job] = 1u;
}

/* ---- 5. colour: a thread a pixel ------------------------------------------- */

/* The vertical filter of chroma row pair (i, o) at column j (6.8 step 3). */
__device__ __forceinline__ int32_t vfilt(const uint8_t *c, uint32_t cw, uint32_t i, uint32_t o, uint32_t j)
{
	return 3 * c[i * cw + j] + c[o * cw + j];
}

/* Chroma of pixels x0..x0+3 (x0 a multiple of 4) of row y, from a plane of
 * cw x ch samples: columns j0 - 1 .. j0 + 2 filtered once for the four. */
__device__ __forceinline__ void chroma4(const uint8_t *c, uint32_t cw, uint32_t ch, uint32_t y, uint32_t x0,
					int32_t out[4])
{
	const uint32_t i = y / 2, o = y & 1 ? (i + 1 < ch ? i + 1 : i) : (i > 0 ? i - 1 : 0);
	const uint32_t j0 = x0 / 2; /* j0 + 1 < cw: the planes cover the macroblocks */
	const int32_t vm = vfilt(c, cw, i, o, j0 > 0 ? j0 - 1 : 0), v0 = vfilt(c, cw, i, o, j0),
		      v1 = vfilt(c, cw, i, o, j0 + 1), v2 = vfilt(c, cw, i, o, j0 + 2 < cw ? j0 + 2 : j0 + 1);
	out[0] = fs(3 * v0 + vm + 8, 4);
	out[1] = fs(3 * v0 + v1 + 8, 4);
	out[2] = fs(3 * v1 + v0 + 8, 4);
	out[3] = fs(3 * v1 + v2 + 8, 4);
}

/* A thread 4 pixels of a row (6.8 steps 3-4), stored as words where the
 * row and the layout allow. */
#define COLOUR_THREADS 256
__global__ void tx_colour(const wcc_tx_image *__restrict__ imgs)
{
	const wcc_tx_image *im = &imgs[blockIdx.y];
	const uint32_t w = im->w, h = im->h, npix = w * h, pw = 16 * im->mw, cw = 8 * im->mw, ch = 8 * im->mh;
	const uint8_t *Y = im->planes, *cb = Y + (size_t)pw * 16 * im->mh, *cr = cb + (size_t)cw * ch;
	const uint32_t quads = (w + 3) / 4;
	for (uint32_t q = blockIdx.x * blockDim.x + threadIdx.x; q < quads * h; q += gridDim.x * blockDim.x) {
		const uint32_t y = q / quads, x0 = (q - y * quads) * 4, px0 = y * w + x0;
		const uint32_t ly = *(const uint32_t *)(Y + (size_t)y * pw + x0); /* rows of the Y plane: 16-aligned */
		int32_t b[4], r[4];
		chroma4(cb, cw, ch, y, x0, b);
		chroma4(cr, cw, ch, y, x0, r);
		uint32_t v[3] = {0, 0, 0}; /* the 4 pixels' R, G, B bytes */
		for (unsigned k = 0; k < 4; k++) {
			const int32_t l = (ly >> (8 * k)) & 255, bb = b[k] - 128, rr = r[k] - 128;
			v[0] |= (uint32_t)clamp255(l + fs(91881 * rr + (1 << 15), 16)) << (8 * k);
			v[1] |= (uint32_t)clamp255(l + fs(-22554 * bb - 46802 * rr + (1 << 15), 16)) << (8 * k);
			v[2] |= (uint32_t)clamp255(l + fs(116130 * bb + (1 << 15), 16)) << (8 * k);
		}
		const bool whole = x0 + 4 <= w && px0 % 4 == 0 && !im->f32 && (uintptr_t)im->out % 4 == 0;
		if (whole && im->chw && npix % 4 == 0) {
			for (unsigned c = 0; c < 3; c++)
				*(uint32_t *)(im->out + (size_t)c * npix + px0) = v[c];
		} else if (whole && !im->chw) { /* RGBRGBRGBRGB as three words */
			uint32_t *o = (uint32_t *)(im->out + (size_t)3 * px0);
			const uint32_t p0 = v[0] & 255, g0 = v[1] & 255, b0 = v[2] & 255;
			o[0] = p0 | g0 << 8 | b0 << 16 | (v[0] >> 8 & 255) << 24;
			o[1] = (v[1] >> 8 & 255) | (v[2] >> 8 & 255) << 8 | (v[0] >> 16 & 255) << 16 | (v[1] >> 16 & 255) << 24;
			o[2] = (v[2] >> 16 & 255) | (v[0] >> 24) << 8 | (v[1] >> 24) << 16 | (v[2] >> 24) << 24;
		} else {
			for (uint32_t k = 0; k < 4 && x0 + k < w; k++)
				for (unsigned c = 0; c < 3; c++) {
					const uint32_t byte = (v[c] >> (8 * k)) & 255, px = px0 + k;
					const size_t at = im->chw ? (size_t)c * npix + px : (size_t)3 * px + c;
					if (im->f32) /* rounded after the multiply and after the add, as torch's x.float() * s + b */
						((float *)im->out)[at] = __fadd_rn(__fmul_rn((float)byte, im->scale[c]), im->bias[c]);
					else
						im->out[at] = (uint8_t)byte;
				}
		}
	}
}

/* ---- resident archives: a batch's descriptors from image numbers ------------ */

__global__ void tx_prepare(const wcc_tx_image *__restrict__ all, uint32_t nall, const wcc_tx_chunk *__restrict__ chunks,
			   uint32_t per, const int64_t *__restrict__ idx, uint32_t n, wcc_tx_batch b,
			   wcc_tx_image *batch, wcc_tx_chunk *bchunks, uint32_t *status)
{
	const uint32_t k = blockIdx.x * blockDim.x + threadIdx.x;
	if (k >= n)
		return;
	int64_t i = idx[k];
	uint32_t st = 0;
	if (i < 0 || i >= (int64_t)nall) { /* decoded as image 0, reported */
		i = 0;
		st = 2;
	}
	wcc_tx_image d = all[i];
	uint8_t *base = b.scratch + (size_t)k * (b.sym_bytes + b.dc_bytes + b.plane_bytes);
	d.sym = base;
	d.dc = (int32_t *)(base + b.sym_bytes);
	d.planes = base + b.sym_bytes + b.dc_bytes;
	d.out = b.out + (size_t)k * b.out_stride;
	d.chw = b.chw;
	d.f32 = b.f32;
	for (unsigned c = 0; c < 3; c++) {
		d.scale[c] = b.scale[c];
		d.bias[c] = b.bias[c];
	}
	d.job = k;
	batch[k] = d;
	for (uint32_t c = 0; c < per; c++) { /* chunk index first, as the rANS step's groups want them */
		wcc_tx_chunk ch = chunks[(size_t)i * per + c];
		ch.img = k;
		bchunks[(size_t)c * n + k] = ch;
	}
	status[k] = st;
}

extern "C" int wcc_tx_launch_prepare(const wcc_tx_image *all, uint32_t nall, const wcc_tx_chunk *chunks, uint32_t per,
				     const int64_t *idx, uint32_t n, const wcc_tx_batch *b, wcc_tx_image *batch,
				     wcc_tx_chunk *bchunks, uint32_t *status, void *stream)
{
	if (n == 0)
		return 0;
	tx_prepare<<<(n + 127) / 128, 128, 0, (cudaStream_t)stream>>>(all, nall, chunks, per, idx, n, *b, batch, bchunks,
									 status);
	return (int)cudaGetLastError();
}

extern "C" int wcc_tx_launch(const wcc_tx_image *imgs, uint32_t nimg, const wcc_tx_chunk *chunks, uint32_t nchunks,
			     uint32_t group, const uint32_t *tables, uint32_t max_blocks, uint32_t max_pixels,
			     uint32_t max_escapes, uint32_t *status, void *stream)
{
	cudaStream_t st = (cudaStream_t)stream;
	if (nimg == 0)
		return 0;
	if (nchunks && group) /* blocks a group: ceil(group / 8) of them for each of the nchunks / group groups */
		tx_rans<true><<<(group + RANS_WARPS - 1) / RANS_WARPS * (nchunks / group), 32 * RANS_WARPS, 0, st>>>(
			imgs, chunks, nchunks, group, tables, status);
	else if (nchunks)
		tx_rans<false><<<(nchunks + RANS_WARPS - 1) / RANS_WARPS, 32 * RANS_WARPS, 0, st>>>(imgs, chunks, nchunks, 0,
												   tables, status);
	for (uint32_t first = 0; first < nimg; first += MAX_GRID_Y) {
		const uint32_t cnt = nimg - first < MAX_GRID_Y ? nimg - first : MAX_GRID_Y;
		const wcc_tx_image *im = imgs + first;
		if (max_escapes)
			tx_escapes<<<dim3((max_escapes + 127) / 128 < 64 ? (max_escapes + 127) / 128 : 64, cnt), 128, 0, st>>>(
				im, status);
		tx_dc<<<dim3(3, cnt), DC_THREADS, 0, st>>>(im, status);
		/* grid.x (up to 2^31 - 1) covers the 1.5 M blocks of a 16384 x 16384 image */
		tx_idct<<<dim3((max_blocks + IDCT_BLOCKS - 1) / IDCT_BLOCKS, cnt), 8 * IDCT_BLOCKS, 0, st>>>(im, status);
		const uint32_t gp = (max_pixels / 4 + max_pixels / 64 + COLOUR_THREADS) / COLOUR_THREADS; /* quads, odd rows */
		tx_colour<<<dim3(gp < 4096 ? gp : 4096, cnt), COLOUR_THREADS, 0, st>>>(im);
		cudaError_t e = cudaGetLastError();
		if (e != cudaSuccess)
			return (int)e;
	}
	return 0;
}
