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

/* x / 2^b rounded down, for either sign. */
__device__ __forceinline__ int32_t fs(int32_t x, unsigned b)
{
	return x >= 0 ? x >> b : -((-x + (1 << b) - 1) >> b);
}

__device__ __forceinline__ int32_t clamp255(int32_t v) { return v < 0 ? 0 : v > 255 ? 255 : v; }

/* ---- 1. rANS: a warp a chunk -------------------------------------------- */

#define RANS_WARPS 8
/* UNIFORM: every chunk of the launch has the same first symbol, length and
 * plane boundaries (images of one size, the loaders' case), so the warps of
 * a thread block change tables at the same rounds and share each table in
 * shared memory: a warp's 32 lookups at random slots are then one shared
 * access instead of up to 32 L1 lines. Otherwise each warp reads its
 * tables from global memory. The words a round may take (at most 32) are
 * loaded together at its start, before the lookups, one a lane, and handed
 * out by shuffle, so no load waits on the state. */
template <bool UNIFORM>
__global__ void tx_rans(const wcc_tx_image *__restrict__ imgs, const wcc_tx_chunk *__restrict__ chunks,
			uint32_t nchunks, const uint32_t *__restrict__ tables, uint32_t *status)
{
	__shared__ uint32_t stab[UNIFORM ? 4096 : 1];
	const uint32_t warp = threadIdx.x / 32, lane = threadIdx.x & 31;
	const uint32_t c = blockIdx.x * RANS_WARPS + warp;
	const bool live = c < nchunks;
	const wcc_tx_chunk ch = chunks[live ? c : blockIdx.x * RANS_WARPS]; /* the block's first exists */
	const wcc_tx_image *im = &imgs[ch.img];
	uint32_t x = live ? ((const uint32_t *)ch.data)[lane] : 65536u;
	const uint16_t *w = (const uint16_t *)(ch.data + 128);
	int bad = x < 65536u;
	uint32_t p = 0, seg = 0, loaded = ~0u;
	uint8_t *out = im->sym + ch.first;
	const uint32_t rounds = (ch.m + 31) / 32;
	for (uint32_t r = 0; r < rounds; r++) {
		const uint32_t g = ch.first + 32 * r; /* plane boundaries are round-aligned */
		while (seg < WCC_TX_PLANES - 1 && im->end[seg] <= g)
			seg++;
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
		const uint16_t wv = p + lane < ch.nw ? w[p + lane] : 0;
		const uint32_t j = 32 * r + lane;
		bool need = false;
		if (j < ch.m) {
			const uint32_t t = x & 4095u, e = UNIFORM ? stab[t] : __ldg(tab + t);
			out[j] = (uint8_t)e;
			x = ((e >> 8) & 0xfffu) * (x >> 12) + (e >> 20);
			need = x < 65536u;
		}
		const uint32_t ballot = __ballot_sync(FULL, need);
		const uint32_t rank = __popc(ballot & ((1u << lane) - 1u));
		const uint16_t word = __shfl_sync(FULL, wv, need ? rank : 0);
		if (need) {
			if (p + rank < ch.nw)
				x = (x << 16) | word;
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

/* ---- 4. inverse DCT: 64 threads a block ------------------------------------ */

#define IDCT_BLOCKS 8  /* 8x8 blocks a thread block, 64 threads each */
#define IDCT_ROUNDS 4  /* groups of IDCT_BLOCKS a thread block takes in turn */
__global__ void tx_idct(const wcc_tx_image *__restrict__ imgs, uint32_t *status)
{
	/* The basis and zigzag in shared memory: threads of a warp index them
	 * at different places, which constant memory would serialise. */
	__shared__ int32_t sB[64];
	__shared__ uint8_t sZ[64];
	__shared__ int32_t X[IDCT_BLOCKS][64], T[IDCT_BLOCKS][64];
	const wcc_tx_image *im = &imgs[blockIdx.y];
	if (threadIdx.x < 64) {
		sB[threadIdx.x] = B[threadIdx.x / 8][threadIdx.x % 8];
		sZ[threadIdx.x] = ZZ_OF[threadIdx.x];
	}
	const uint32_t mw = im->mw, nl = 4 * mw * im->mh, nc = mw * im->mh, nb = nl + 2 * nc;
	const uint32_t sub = threadIdx.x / 64, pos = threadIdx.x & 63, r = pos >> 3, n = pos & 7;
	const uint32_t pw = 16 * mw, cw = 8 * mw;
	uint8_t *const cb = im->planes + (size_t)pw * 16 * im->mh;
	int bad = 0;
	__syncthreads();
	for (uint32_t round = 0; round < IDCT_ROUNDS; round++) {
		const uint32_t kb = (blockIdx.x * IDCT_ROUNDS + round) * IDCT_BLOCKS + sub;
		const bool live = kb < nb;
		const uint32_t comp = kb < nl ? 0 : kb < nl + nc ? 1 : 2;
		const uint32_t k = comp == 0 ? kb : comp == 1 ? kb - nl : kb - nl - nc; /* in its component */
		if (live) {
			const uint32_t z = sZ[pos];
			int32_t v;
			if (z == 0) {
				v = im->dc[kb];
			} else {
				const uint32_t b = z < 6 ? 1 : z < 21 ? 2 : 3, first = b == 1 ? 1 : b == 2 ? 6 : 21;
				const uint32_t width = b == 1 ? 5 : b == 2 ? 15 : 43;
				const uint32_t kc = comp == 2 ? nc + k : k; /* Cb's blocks then Cr's in the chroma planes */
				v = value_at(im, im->start[(comp ? 4 : 0) + b] + kc * width + (z - first), &bad);
			}
			const int32_t x = v * (int32_t)(comp ? im->step_chroma : im->step_luma);
			X[sub][pos] = x > 32767 ? 32767 : x < -32768 ? -32768 : x;
		}
		__syncthreads();
		if (live) { /* rows: horizontal frequencies */
			int32_t s = 1 << 11;
#pragma unroll
			for (int q = 0; q < 8; q++)
				s += sB[q * 8 + n] * X[sub][r * 8 + q];
			T[sub][pos] = fs(s, 12);
		}
		__syncthreads();
		if (live) { /* columns: vertical frequencies; r is the row m of the block */
			int32_t s = 1 << 14;
#pragma unroll
			for (int q = 0; q < 8; q++)
				s += sB[q * 8 + r] * T[sub][q * 8 + n];
			const uint8_t out = (uint8_t)clamp255(fs(s, 15) + 128);
			if (comp == 0) {
				const uint32_t bx = k % (2 * mw), by = k / (2 * mw);
				im->planes[(size_t)(by * 8 + r) * pw + bx * 8 + n] = out;
			} else {
				const uint32_t bx = k % mw, by = k / mw;
				(cb + (comp == 2 ? (size_t)cw * 8 * im->mh : 0))[(size_t)(by * 8 + r) * cw + bx * 8 + n] = out;
			}
		}
	}
	if (bad)
		status[im->job] = 1u;
}

/* ---- 5. colour: a thread a pixel ------------------------------------------- */

/* Chroma at pixel (y, x) from a plane of cw x ch samples (6.8 step 3). */
__device__ __forceinline__ int32_t chroma(const uint8_t *c, uint32_t cw, uint32_t ch, uint32_t y, uint32_t x)
{
	const uint32_t i = y / 2, o = y & 1 ? (i + 1 < ch ? i + 1 : i) : (i > 0 ? i - 1 : 0);
	const uint32_t j = x / 2, p = x & 1 ? (j + 1 < cw ? j + 1 : j) : (j > 0 ? j - 1 : 0);
	const int32_t vj = 3 * c[i * cw + j] + c[o * cw + j], vp = 3 * c[i * cw + p] + c[o * cw + p];
	return fs(3 * vj + vp + 8, 4);
}

/* A thread 4 pixels of a row: blockIdx.x the group of rows, threads along
 * them; no division by the width. */
#define COLOUR_THREADS 256
__global__ void tx_colour(const wcc_tx_image *__restrict__ imgs)
{
	const wcc_tx_image *im = &imgs[blockIdx.y];
	const uint32_t w = im->w, h = im->h, npix = w * h, pw = 16 * im->mw, cw = 8 * im->mw, ch = 8 * im->mh;
	const uint8_t *Y = im->planes, *cb = Y + (size_t)pw * 16 * im->mh, *cr = cb + (size_t)cw * ch;
	const uint32_t quads = (w + 3) / 4;
	for (uint32_t q = blockIdx.x * blockDim.x + threadIdx.x; q < quads * h; q += gridDim.x * blockDim.x) {
		const uint32_t y = q / quads, x0 = (q - y * quads) * 4;
		for (uint32_t x = x0; x < x0 + 4 && x < w; x++) {
			const uint32_t px = y * w + x;
			const int32_t l = Y[(size_t)y * pw + x];
			const int32_t b = chroma(cb, cw, ch, y, x) - 128, r = chroma(cr, cw, ch, y, x) - 128;
			const int32_t rgb[3] = {clamp255(l + fs(91881 * r + (1 << 15), 16)),
						clamp255(l + fs(-22554 * b - 46802 * r + (1 << 15), 16)),
						clamp255(l + fs(116130 * b + (1 << 15), 16))};
			for (unsigned c = 0; c < 3; c++) {
				const size_t at = im->chw ? (size_t)c * npix + px : (size_t)3 * px + c;
				if (im->f32) /* rounded after the multiply and after the add, as torch's x.float() * s + b */
					((float *)im->out)[at] = __fadd_rn(__fmul_rn((float)rgb[c], im->scale[c]), im->bias[c]);
				else
					im->out[at] = (uint8_t)rgb[c];
			}
		}
	}
}

extern "C" int wcc_tx_launch(const wcc_tx_image *imgs, uint32_t nimg, const wcc_tx_chunk *chunks, uint32_t nchunks,
			     int uniform, const uint32_t *tables, uint32_t max_blocks, uint32_t max_pixels,
			     uint32_t max_escapes, uint32_t *status, void *stream)
{
	cudaStream_t st = (cudaStream_t)stream;
	if (nimg == 0)
		return 0;
	if (nchunks && uniform)
		tx_rans<true><<<(nchunks + RANS_WARPS - 1) / RANS_WARPS, 32 * RANS_WARPS, 0, st>>>(imgs, chunks, nchunks,
												  tables, status);
	else if (nchunks)
		tx_rans<false><<<(nchunks + RANS_WARPS - 1) / RANS_WARPS, 32 * RANS_WARPS, 0, st>>>(imgs, chunks, nchunks,
												   tables, status);
	for (uint32_t first = 0; first < nimg; first += MAX_GRID_Y) {
		const uint32_t cnt = nimg - first < MAX_GRID_Y ? nimg - first : MAX_GRID_Y;
		const wcc_tx_image *im = imgs + first;
		if (max_escapes)
			tx_escapes<<<dim3((max_escapes + 127) / 128 < 64 ? (max_escapes + 127) / 128 : 64, cnt), 128, 0, st>>>(
				im, status);
		tx_dc<<<dim3(3, cnt), DC_THREADS, 0, st>>>(im, status);
		/* grid.x (up to 2^31 - 1) covers the 1.5 M blocks of a 16384 x 16384 image */
		const uint32_t per = IDCT_BLOCKS * IDCT_ROUNDS;
		tx_idct<<<dim3((max_blocks + per - 1) / per, cnt), 64 * IDCT_BLOCKS, 0, st>>>(im, status);
		const uint32_t gp = (max_pixels / 4 + max_pixels / 64 + COLOUR_THREADS) / COLOUR_THREADS; /* quads, odd rows */
		tx_colour<<<dim3(gp < 4096 ? gp : 4096, cnt), COLOUR_THREADS, 0, st>>>(im);
		cudaError_t e = cudaGetLastError();
		if (e != cudaSuccess)
			return (int)e;
	}
	return 0;
}
