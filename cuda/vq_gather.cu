/*
 * vq_gather.cu - GPU decode of .qvq image tiles: the codebook gather kernel
 * (vq_gather.h); the backend path around it is vq_decode.cu.
 *
 * The kernel is a copy: each thread takes one patch of one image, reads
 * its index (1 or 2 bytes, little-endian), and copies the codebook entry's
 * pixels that fall inside the image to their places in the row-major RGB
 * output (or in three channel planes, chw), as bytes or as normalised
 * floats (f32: one pass instead of decode, convert, scale and shift);
 * docs/FORMAT.md 6.5 is the definition and
 * wc_qvq_gather() (src/qvq/qvq_decode.c) the CPU reference, so both produce
 * the same bytes by construction.
 */
#include <cuda_runtime.h>
#include <stdlib.h>
#include <string.h>

#include "vq_gather.h"

#define VQ_THREADS 256u
#define VQ_MAX_GRID_Y 65535u

/* Pixel value v of channel c as a float: v * scale[c] + bias[c], rounded
 * after the multiply and after the add (as torch's x.float() * s + b). */
__device__ __forceinline__ float affine(const wcc_vq_image &im, uint8_t v, unsigned c)
{
	return __fadd_rn(__fmul_rn((float)v, im.scale[c]), im.bias[c]);
}

__global__ void vq_gather_kernel(const wcc_vq_image *__restrict__ imgs, uint32_t *status)
{
	const wcc_vq_image im = imgs[blockIdx.y];
	const uint32_t ph = im.ph, pw = im.pw;
	const uint32_t gw = (im.w + pw - 1) / pw, gh = (im.h + ph - 1) / ph;
	const uint32_t np = gw * gh;
	const size_t stride = (size_t)im.w * 3u, plane = (size_t)im.w * im.h;
	for (uint32_t p = blockIdx.x * blockDim.x + threadIdx.x; p < np; p += gridDim.x * blockDim.x) {
		uint32_t k = im.index_bytes == 1 ? (uint32_t)__ldg(im.idx + p)
						 : (uint32_t)__ldg(im.idx + 2 * p) |
							   (uint32_t)__ldg(im.idx + 2 * p + 1) << 8;
		if (k >= im.entries) {
			status[im.job] = 1u;
			continue;
		}
		const uint32_t gy = p / gw, gx = p - gy * gw;
		const uint8_t *e = im.codebook + (size_t)k * ph * pw * 3u;
		const uint32_t y0 = gy * ph, x0 = gx * pw;
		if (im.f32) { /* floats, in either layout */
			float *out = (float *)im.out;
			for (uint32_t dy = 0; dy < ph && y0 + dy < im.h; dy++)
				for (uint32_t dx = 0; dx < pw && x0 + dx < im.w; dx++) {
					const uint8_t *s = e + (dy * pw + dx) * 3u;
					const size_t px = (size_t)(y0 + dy) * im.w + (x0 + dx);
					for (unsigned c = 0; c < 3u; c++)
						out[im.chw ? c * plane + px : 3u * px + c] = affine(im, __ldg(s + c), c);
				}
			continue;
		}
		if (im.chw) { /* three planes: pixel (y, x) channel c at c * w * h + y * w + x */
			for (uint32_t dy = 0; dy < ph && y0 + dy < im.h; dy++)
				for (uint32_t dx = 0; dx < pw && x0 + dx < im.w; dx++) {
					const uint8_t *s = e + (dy * pw + dx) * 3u;
					uint8_t *o = im.out + (size_t)(y0 + dy) * im.w + (x0 + dx);
					o[0] = __ldg(s); o[plane] = __ldg(s + 1); o[2 * plane] = __ldg(s + 2);
				}
			continue;
		}
		if (ph == 2 && pw == 2) {
			/* the common shape: two rows of two RGB pixels */
			uint8_t *r0 = im.out + (size_t)y0 * stride + (size_t)x0 * 3u;
			const int two_x = x0 + 1 < im.w, two_y = y0 + 1 < im.h;
			r0[0] = __ldg(e + 0); r0[1] = __ldg(e + 1); r0[2] = __ldg(e + 2);
			if (two_x) { r0[3] = __ldg(e + 3); r0[4] = __ldg(e + 4); r0[5] = __ldg(e + 5); }
			if (two_y) {
				uint8_t *r1 = r0 + stride;
				r1[0] = __ldg(e + 6); r1[1] = __ldg(e + 7); r1[2] = __ldg(e + 8);
				if (two_x) { r1[3] = __ldg(e + 9); r1[4] = __ldg(e + 10); r1[5] = __ldg(e + 11); }
			}
			continue;
		}
		for (uint32_t dy = 0; dy < ph && y0 + dy < im.h; dy++)
			for (uint32_t dx = 0; dx < pw && x0 + dx < im.w; dx++) {
				const uint8_t *s = e + (dy * pw + dx) * 3u;
				uint8_t *o = im.out + (size_t)(y0 + dy) * stride + (size_t)(x0 + dx) * 3u;
				o[0] = __ldg(s); o[1] = __ldg(s + 1); o[2] = __ldg(s + 2);
			}
	}
}

extern "C" int wcc_vq_preload_kernels(void)
{
	struct cudaFuncAttributes a; /* forces the lazy load, as in wcc_kernels.cu */
	return (int)cudaFuncGetAttributes(&a, (const void *)vq_gather_kernel);
}

extern "C" int wcc_vq_launch_gather(const wcc_vq_image *imgs, uint32_t nimg, uint32_t max_patches,
				     uint32_t *status, void *stream)
{
	if (nimg == 0 || max_patches == 0)
		return 0;
	uint32_t gx = (max_patches + VQ_THREADS - 1) / VQ_THREADS;
	if (gx > 4096)
		gx = 4096; /* the kernel strides over larger grids */
	for (uint32_t first = 0; first < nimg; first += VQ_MAX_GRID_Y) {
		uint32_t cnt = nimg - first < VQ_MAX_GRID_Y ? nimg - first : VQ_MAX_GRID_Y;
		dim3 grid(gx, cnt);
		vq_gather_kernel<<<grid, VQ_THREADS, 0, (cudaStream_t)stream>>>(imgs + first, status);
		cudaError_t e = cudaGetLastError();
		if (e != cudaSuccess)
			return (int)e;
	}
	return 0;
}

