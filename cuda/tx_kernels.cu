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

/* sum_u B[u][n] x[u] for n = 0..7, B the integer basis of 6.8 step 2,
 * through its even and odd halves (B[u][7 - n] = (-1)^u B[u][n]): 22 products where the plain sum
 * takes 64, and the same integers, since int32 sums of these products
 * never overflow (|x| <= 86,600 in the column pass: at most 937,000,000). */
__device__ __forceinline__ void idct8(const int32_t x[8], int32_t y[8])
{
	const int32_t a = 1448 * (x[0] + x[4]), b = 1448 * (x[0] - x[4]);
	const int32_t c = 1892 * x[2] + 784 * x[6], d = 784 * x[2] - 1892 * x[6];
	const int32_t e[4] = {a + c, b + d, b - d, a - c};
	const int32_t o[4] = {
		2009 * x[1] + 1703 * x[3] + 1138 * x[5] + 400 * x[7],
		1703 * x[1] - 400 * x[3] - 2009 * x[5] - 1138 * x[7],
		1138 * x[1] - 2009 * x[3] + 400 * x[5] + 1703 * x[7],
		400 * x[1] - 1138 * x[3] + 1703 * x[5] - 2009 * x[7],
	};
#pragma unroll
	for (int n = 0; n < 4; n++) {
		y[n] = e[n] + o[n];
		y[7 - n] = e[n] - o[n];
	}
}

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
__global__ void __launch_bounds__(32 * RANS_WARPS)
	tx_rans(const wcc_tx_image *__restrict__ imgs, const wcc_tx_chunk *__restrict__ chunks, uint32_t nchunks,
		uint32_t group, const uint32_t *__restrict__ tables, uint32_t *status)
{
	__shared__ uint32_t stab[UNIFORM ? 4096 : 1];
	__shared__ __align__(16) uint16_t rings[RANS_WARPS][RING];
	const uint32_t warp = threadIdx.x / 32, lane = threadIdx.x & 31, below = (1u << lane) - 1u;
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
	uint32_t bad = x < 65536u;
	uint32_t p = 0, q = 0, r = 0;
	uint8_t *out = im->sym + ch.first;
	const uint32_t rounds = ch.m / 32; /* m: a multiple of 32 (whole planes, chunks of 32k symbols) */
	if (live) {
		for (uint32_t k = 0; k < RING / 32; k++)
			window(ring, w, ch.nw, k, lane);
		copy_wait6(); /* windows 0 and 1 are in */
		__syncwarp();
	}
	/* A plane at a time: its rounds share one table (plane boundaries are
	 * round-aligned), so a round is the chain alone: the lookup, the state
	 * update, the ballot and one shared read, without branches. */
	for (uint32_t seg = 0; seg < WCC_TX_PLANES && r < rounds; seg++) {
		const uint32_t seg_end = im->end[seg];
		uint32_t r_end = seg_end <= ch.first ? 0 : (seg_end - ch.first + 31) / 32;
		r_end = r_end < rounds ? r_end : rounds;
		if (r >= r_end) /* the same in every warp of a block (UNIFORM) */
			continue;
		const uint32_t *tab = tables + 4096 * seg;
		if (UNIFORM) {
			__syncthreads();
			for (uint32_t i = threadIdx.x; i < 4096; i += blockDim.x)
				stab[i] = __ldg(tab + i);
			__syncthreads();
		}
		if (!live) {
			r = r_end;
			continue;
		}
		for (; r < r_end; r++) {
			if (p - q >= 32) { /* window q / 32 is used up: its place takes the window 8 on */
				__syncwarp();
				window(ring, w, ch.nw, q / 32 + RING / 32, lane);
				q += 32;
				copy_wait6(); /* the two windows from q are in */
				__syncwarp();
			}
			const uint32_t t = x & 4095u, e = UNIFORM ? stab[t] : __ldg(tab + t);
			out[32 * r + lane] = (uint8_t)e;
			const uint32_t y = ((e >> 8) & 0xfffu) * (x >> 12) + (e >> 20);
			const bool need = y < 65536u;
			const uint32_t ballot = __ballot_sync(FULL, need);
			const uint32_t at = p + __popc(ballot & below); /* < q + 64 */
			const uint32_t word = ring[at & (RING - 1)];
			bad |= need & (at >= ch.nw);
			x = need ? (y << 16) | word : y;
			p += __popc(ballot);
		}
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

/* ---- 4. inverse DCT: 32 blocks a thread block ------------------------------ */

/* Thread t takes block t % 32 of the thread block's 32: first its row
 * t / 32 (8 coefficients read from the symbols, the row pass), then its
 * column t / 32 (the column pass), then its row of output bytes. A warp's
 * row (or column) number is the same in all its lanes, so the zigzag
 * tables are read from constant memory at one address a warp, and it
 * writes one row of 32 blocks: 256 contiguous bytes. */
#define IDCT_BLOCKS 32
#define TPAD (8 * 9 + 1) /* a block's rows padded: 9 words a row, 73 a block, no bank conflicts */
#define OPAD 72          /* a block's output bytes: 8 rows of 8, blocks 72 bytes apart */
/* For natural position k: its band (0 DC, 1, 2, 3) in bits 8-9, its place
 * in that band (zigzag index - the band's first) in bits 0-7. */
__constant__ uint16_t BAND_OF[64] = {
	0x000, 0x100, 0x104, 0x200, 0x208, 0x209, 0x306, 0x307, 0x101, 0x103, 0x201, 0x207, 0x20a, 0x305, 0x308, 0x315,
	0x102, 0x202, 0x206, 0x20b, 0x304, 0x309, 0x314, 0x316, 0x203, 0x205, 0x20c, 0x303, 0x30a, 0x313, 0x317, 0x320,
	0x204, 0x20d, 0x302, 0x30b, 0x312, 0x318, 0x31f, 0x321, 0x20e, 0x301, 0x30c, 0x311, 0x319, 0x31e, 0x322, 0x327,
	0x300, 0x30d, 0x310, 0x31a, 0x31d, 0x323, 0x326, 0x328, 0x30e, 0x30f, 0x31b, 0x31c, 0x324, 0x325, 0x329, 0x32a,
};
__global__ void __launch_bounds__(8 * IDCT_BLOCKS) tx_idct(const wcc_tx_image *__restrict__ imgs, uint32_t *status)
{
	__shared__ int32_t T[IDCT_BLOCKS * TPAD];
	__shared__ __align__(8) uint8_t O[IDCT_BLOCKS * OPAD];
	const wcc_tx_image *im = &imgs[blockIdx.y];
	const uint32_t mw = im->mw, nl = 4 * mw * im->mh, nc = mw * im->mh, nb = nl + 2 * nc;
	const uint32_t sub = threadIdx.x % IDCT_BLOCKS, r = threadIdx.x / IDCT_BLOCKS;
	const uint32_t kb = blockIdx.x * IDCT_BLOCKS + sub;
	const bool live = kb < nb;
	const uint32_t comp = kb < nl ? 0 : kb < nl + nc ? 1 : 2;
	const uint32_t kc = comp == 0 ? kb : kb - nl; /* Cb's blocks then Cr's in the chroma planes */
	int32_t *t = T + sub * TPAD;
	int bad = 0;
	{ /* row r: its 8 coefficients times the step, then the row pass (horizontal frequencies) */
		const int32_t step = (int32_t)(comp ? im->step_chroma : im->step_luma);
		const uint32_t *start = im->start + (comp ? 4 : 0);
		const uint32_t b1 = start[1] + kc * 5, b2 = start[2] + kc * 15, b3 = start[3] + kc * 43;
		uint32_t raw[8], at[8];
#pragma unroll
		for (int u = 0; u < 8; u++) {
			const uint32_t info = BAND_OF[r * 8 + u], band = info >> 8;
			at[u] = (band == 1 ? b1 : band == 2 ? b2 : b3) + (info & 255u);
			raw[u] = !live ? 0u : band == 0 ? (uint32_t)im->dc[kb] : (uint32_t)im->sym[at[u]];
		}
		int32_t X[8], any = 0;
#pragma unroll
		for (int u = 0; u < 8; u++) {
			int32_t v;
			if (!live || (BAND_OF[r * 8 + u] >> 8) == 0)
				v = (int32_t)raw[u];
			else if (raw[u] < 253u)
				v = raw[u] & 1u ? -(int32_t)((raw[u] + 1) >> 1) : (int32_t)(raw[u] >> 1);
			else
				v = value_at(im, at[u], &bad); /* an escape, or a bad symbol */
			const int32_t x = v * step;
			X[u] = x > 32767 ? 32767 : x < -32768 ? -32768 : x;
			any |= X[u];
		}
		int32_t Y[8] = {0, 0, 0, 0, 0, 0, 0, 0};
		if (any)
			idct8(X, Y);
#pragma unroll
		for (int n = 0; n < 8; n++)
			t[r * 9 + n] = fs(Y[n] + (1 << 11), 12);
	}
	__syncthreads();
	{ /* column n = r: the column pass (vertical frequencies), bytes into O */
		const uint32_t n = r;
		int32_t C[8];
#pragma unroll
		for (int q = 0; q < 8; q++)
			C[q] = t[q * 9 + n];
		int32_t Y[8];
		idct8(C, Y);
		uint8_t *ob = O + sub * OPAD + n;
#pragma unroll
		for (int m = 0; m < 8; m++)
			ob[m * 8] = (uint8_t)clamp255(fs(Y[m] + (1 << 14), 15) + 128);
	}
	__syncthreads();
	if (live) { /* output row r of block sub */
		const uint32_t k = comp == 0 ? kb : comp == 1 ? kb - nl : kb - nl - nc; /* in its component */
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
		*(uint2 *)row = *(const uint2 *)(O + sub * OPAD + r * 8); /* planes 16-byte aligned, rows a multiple of 8 */
	}
	if (bad)
		status[im->job] = 1u;
}

/* ---- 5. colour: a thread 8 pixels ------------------------------------------ */

/* Chroma of pixels x0..x0+7 of a row (x0 = 2 j0, j0 a multiple of 4) from
 * chroma rows i and o of a plane cw samples wide (6.8 step 3): columns
 * j0..j0+3 of each row read as one word, their neighbours j0 - 1 and j0 + 4
 * (clamped to the plane) as bytes; each column filtered vertically once. */
__device__ __forceinline__ void chroma8(const uint8_t *c, uint32_t cw, uint32_t i, uint32_t o, uint32_t j0,
					int32_t out[8])
{
	const uint8_t *ri = c + (size_t)i * cw, *ro = c + (size_t)o * cw;
	const uint32_t a = *(const uint32_t *)(ri + j0), b = *(const uint32_t *)(ro + j0);
	const uint32_t jl = j0 > 0 ? j0 - 1 : 0, jr = j0 + 4 < cw ? j0 + 4 : cw - 1;
	int32_t v[6];
	v[0] = 3 * ri[jl] + ro[jl];
#pragma unroll
	for (int m = 0; m < 4; m++)
		v[m + 1] = 3 * (int32_t)((a >> (8 * m)) & 255u) + (int32_t)((b >> (8 * m)) & 255u);
	v[5] = 3 * ri[jr] + ro[jr];
#pragma unroll
	for (int m = 0; m < 4; m++) {
		out[2 * m] = fs(3 * v[m + 1] + v[m] + 8, 4);
		out[2 * m + 1] = fs(3 * v[m + 1] + v[m + 2] + 8, 4);
	}
}

/* A thread 8 pixels of a row (6.8 steps 3-4): the luma as 8 bytes, the
 * chroma as above, stored as 8-byte words where the layout allows (bytes,
 * widths a multiple of 8), else a value at a time. */
#define COLOUR_THREADS 256
__global__ void __launch_bounds__(COLOUR_THREADS) tx_colour(const wcc_tx_image *__restrict__ imgs)
{
	const wcc_tx_image *im = &imgs[blockIdx.y];
	const uint32_t w = im->w, h = im->h, npix = w * h, pw = 16 * im->mw, cw = 8 * im->mw, ch = 8 * im->mh;
	const uint8_t *Y = im->planes, *cb = Y + (size_t)pw * 16 * im->mh, *cr = cb + (size_t)cw * ch;
	const uint32_t per = (w + 7) / 8;
	const bool words = !im->f32 && w % 8 == 0 && (uintptr_t)im->out % 8 == 0;
	for (uint32_t q = blockIdx.x * blockDim.x + threadIdx.x; q < per * h; q += gridDim.x * blockDim.x) {
		const uint32_t y = q / per, x0 = (q - y * per) * 8, px0 = y * w + x0;
		const uint2 ly = *(const uint2 *)(Y + (size_t)y * pw + x0); /* rows of the Y plane: 16-aligned */
		const uint32_t i = y / 2, o = y & 1 ? (i + 1 < ch ? i + 1 : i) : (i > 0 ? i - 1 : 0);
		int32_t b[8], r[8];
		chroma8(cb, cw, i, o, x0 / 2, b);
		chroma8(cr, cw, i, o, x0 / 2, r);
		uint32_t v[3][2] = {{0, 0}, {0, 0}, {0, 0}}; /* the 8 pixels' R, G, B bytes */
#pragma unroll
		for (int k = 0; k < 8; k++) {
			const int32_t l = ((k < 4 ? ly.x : ly.y) >> (8 * (k % 4))) & 255, bb = b[k] - 128, rr = r[k] - 128;
			const int s = 8 * (k % 4);
			v[0][k / 4] |= (uint32_t)clamp255(l + fs(91881 * rr + (1 << 15), 16)) << s;
			v[1][k / 4] |= (uint32_t)clamp255(l + fs(-22554 * bb - 46802 * rr + (1 << 15), 16)) << s;
			v[2][k / 4] |= (uint32_t)clamp255(l + fs(116130 * bb + (1 << 15), 16)) << s;
		}
		if (words && im->chw) {
#pragma unroll
			for (int c = 0; c < 3; c++)
				*(uint2 *)(im->out + (size_t)c * npix + px0) = make_uint2(v[c][0], v[c][1]);
		} else if (words) { /* RGBRGB...: 24 bytes as three 8-byte words */
			uint32_t o6[6] = {0, 0, 0, 0, 0, 0};
#pragma unroll
			for (int k = 0; k < 8; k++)
#pragma unroll
				for (int c = 0; c < 3; c++)
					o6[(3 * k + c) / 4] |= ((v[c][k / 4] >> (8 * (k % 4))) & 255u) << (8 * ((3 * k + c) % 4));
			uint2 *d = (uint2 *)(im->out + (size_t)3 * px0);
			d[0] = make_uint2(o6[0], o6[1]);
			d[1] = make_uint2(o6[2], o6[3]);
			d[2] = make_uint2(o6[4], o6[5]);
		} else {
			for (uint32_t k = 0; k < 8 && x0 + k < w; k++)
				for (unsigned c = 0; c < 3; c++) {
					const uint32_t byte = (v[c][k / 4] >> (8 * (k % 4))) & 255, px = px0 + k;
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
		const uint32_t gp = (max_pixels / 8 + max_pixels / 64 + COLOUR_THREADS) / COLOUR_THREADS; /* 8 pixels a thread */
		tx_colour<<<dim3(gp < 4096 ? gp : 4096, cnt), COLOUR_THREADS, 0, st>>>(im);
		cudaError_t e = cudaGetLastError();
		if (e != cudaSuccess)
			return (int)e;
	}
	return 0;
}
