/*
 * lossy.h - int8 and int4 codes of float tensors with scales per output
 * channel (docs/FORMAT.md 2.2, layouts `int8` and `int4`): the encoder's
 * quantizer and the reference dequantizer every decoder must match bit for
 * bit.
 *
 * A tensor of N elements is a matrix of C output channels: its first axis
 * (axis 0: channel c holds elements [c * N/C, (c+1) * N/C), as PyTorch and
 * ONNX store weights) or its last (axis 1: element e is in channel e % C, as
 * TensorFlow stores them). Element e at position k of its channel c has the
 * scale scales[c * G + k / group] (group 0: one scale per channel, G = 1;
 * else G = ceil((N / C) / group)) and decodes to
 *     v = (float)code[e] * scale                 (binary32, one rounding)
 * then to the tensor's dtype, rounding to nearest even (F32: v itself).
 */
#ifndef WC_LOSSY_H
#define WC_LOSSY_H

#include <stddef.h>
#include <stdint.h>

#include "core/wc_error.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum wc_lossy_dtype {
	WC_LOSSY_F32 = 0,
	WC_LOSSY_BF16 = 1,
	WC_LOSSY_F16 = 2,
} wc_lossy_dtype;

/* The quantity a lossy tensor's decoding needs. */
typedef struct wc_lossy_params {
	uint8_t dtype;        /* wc_lossy_dtype */
	uint8_t bits;         /* 8 (codes in [-127, 127]) or 4 ([-7, 7]); decoding takes any int8 */
	uint8_t axis;         /* 0: channels are the first axis; 1: the last */
	uint32_t channels;    /* C >= 1, dividing elems */
	uint32_t group;       /* 0: a scale per channel; else per group of this many of a channel's elements (at most 32768) */
	uint64_t elems;       /* N, the tensor's elements */
	const float *scales;  /* wc_lossy_nscales() finite scales >= 0 */
} wc_lossy_params;

/* The error of the decoded tensor against the original, for `wcodec info`. */
typedef struct wc_lossy_stats {
	double snr_db;        /* 10 log10(sum x^2 / sum (x - x')^2); 999 if exact */
	double max_abs_err;   /* max |x - x'| */
	double mean_abs_err;  /* mean |x - x'| */
	double rel_frobenius; /* ||x - x'|| / ||x|| (0 for an all-zero tensor) */
} wc_lossy_stats;

/* Bytes per element of a dtype (4 or 2), and the dtype of a safetensors
 * dtype name ("F32", "BF16", "F16"), -1 for any other. */
unsigned wc_lossy_dtype_size(wc_lossy_dtype dt);
int wc_lossy_dtype_of(const char *st_dtype);

/* Scales of a tensor p describes: C, or C * ceil((N / C) / group). */
uint64_t wc_lossy_nscales(const wc_lossy_params *p);

/* Room for the scales of either axis of a tensor of this shape (>= 1). */
uint64_t wc_lossy_scales_room(const uint64_t *shape, unsigned ndim, uint32_t group);

/* Quantize the tensor `in` (N elements of dtype dt, little-endian, shape
 * shape[0..ndim), ndim >= 2) to codes of `bits` bits (8: in [-127, 127];
 * 4: in [-7, 7]) with a scale per output channel (group 0) or per group of
 * `group` of a channel's elements.
 * Each scale is chosen for the least squared error of its elements: the
 * clipping level among 26 from 0.50 to 1.00 of their largest magnitude
 * (all zeros: scale 0). The channel axis is the first or the last: of
 * those with at least 32 elements per channel, the one with the smaller
 * total squared error (bench/lossy_study.py measured both conventions on
 * real weights); when neither has, the one with fewer channels. Writes N
 * codes, the scales (room: wc_lossy_scales_room), *p (scales = the array
 * given) and the error of the decoded values. Errors: WC_E_INVAL (shape,
 * dtype, bits and group, a non-finite input), WC_E_NOMEM. */
wc_err wc_lossy_quantize(const uint8_t *in, wc_lossy_dtype dt, const uint64_t *shape, unsigned ndim, unsigned bits,
			 uint32_t group, int8_t *codes, float *scales, wc_lossy_params *p, wc_lossy_stats *st);

/* Decode n codes of elements [first, first + n) of the tensor p describes
 * into out (n * dtype size bytes), as the header above defines. The caller
 * guarantees first + n <= p->elems. */
void wc_lossy_dequant(const wc_lossy_params *p, const int8_t *codes, uint64_t first, size_t n, uint8_t *out);

/* Binary32 to BF16 and to F16 bits, rounding to nearest even (IEEE 754;
 * F16 overflow gives infinity, tiny values subnormals or zero). */
uint16_t wc_f32_to_bf16(float f);
uint16_t wc_f32_to_f16(float f);

#ifdef __cplusplus
}
#endif

#endif /* WC_LOSSY_H */
