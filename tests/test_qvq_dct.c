/* test_qvq_dct.c - the transform mode: its pixel pipeline
 * (src/qvq/qvq_dct.h): the basis table is the formula's; the exact integer
 * decoder agrees with the same mathematics in doubles; encode then decode
 * reaches the quality its step implies, at odd sizes too, writing only the
 * image's bytes; extreme coefficients stay in range; bad sizes and steps
 * are refused. Its coefficient streams (src/qvq/qvq_tx.h): any
 * coefficients come back from the planes and escapes, whose places are
 * ascending escape symbols; bad symbols, an escape without its value and
 * a DC past range are refused (the tile payloads: test_qvq_tx.c). Its step (src/qvq/qvq_dct_rate.h): the quality
 * scale's fitted points and bounds; the step found for a PSNR keeps it
 * and the next step does not; a PSNR past reach is refused. */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check_run.h"
#include "qvq/qvq_dct.h"
#include "qvq/qvq_dct_rate.h"
#include "qvq/qvq_tx.h"

static uint64_t rng_state = 7;
static uint32_t rnd(void)
{
	uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return (uint32_t)((z ^ (z >> 31)) >> 32);
}

/* A photograph-like image: smooth gradients, an edge, a little noise. */
static uint8_t *make_image(uint32_t w, uint32_t h)
{
	uint8_t *p = malloc((size_t)w * h * 3);
	for (uint32_t y = 0; y < h; y++)
		for (uint32_t x = 0; x < w; x++)
			for (int c = 0; c < 3; c++) {
				double v = 90 + 60 * sin(x * 0.07 + c) + 40 * cos(y * 0.05 * (c + 1)) +
					   (x > w / 2 ? 25 : 0) + (int)(rnd() % 7) - 3;
				p[((size_t)y * w + x) * 3 + c] = (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
			}
	return p;
}

static double psnr(const uint8_t *a, const uint8_t *b, size_t n)
{
	double se = 0;
	for (size_t i = 0; i < n; i++)
		se += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
	return se == 0 ? 99.0 : 10 * log10(255.0 * 255.0 * n / se);
}

static const double PI = 3.14159265358979323846;

START_TEST(basis_is_the_formula)
{
	for (int k = 0; k < 8; k++)
		for (int n = 0; n < 8; n++) {
			double a = (k ? sqrt(2.0 / 8.0) : sqrt(1.0 / 8.0)) * cos((2 * n + 1) * k * PI / 16.0);
			ck_assert_int_eq(QVQ_DCT_BASIS[k][n], (int)lround(4096 * a));
		}
}
END_TEST

/* The decoder's steps 1-4 in doubles, rounding where the decoder rounds a
 * sample: the planes, the filtered chroma, the colours. */
static void decode_double(const int16_t *q, uint32_t w, uint32_t h, uint32_t sl, uint32_t sc, uint8_t *rgb)
{
	qvq_dct_geom g;
	qvq_dct_geometry(w, h, &g);
	const size_t pw = 16 * (size_t)g.mw, ph = 16 * (size_t)g.mh, cw = pw / 2, ch = ph / 2;
	double *pl[3] = { malloc(pw * ph * sizeof(double)), malloc(cw * ch * sizeof(double)),
			  malloc(cw * ch * sizeof(double)) };
	for (int c = 0; c < 3; c++) {
		const size_t bw = c ? cw / 8 : pw / 8, bh = c ? ch / 8 : ph / 8, stride = bw * 8;
		const double step = (c ? sc : sl) / 8.0;
		for (size_t by = 0; by < bh; by++)
			for (size_t bx = 0; bx < bw; bx++, q += 64)
				for (int m = 0; m < 8; m++)
					for (int n = 0; n < 8; n++) {
						double s = 0;
						for (int k = 0; k < 8; k++)
							for (int l = 0; l < 8; l++) {
								double ak = (k ? sqrt(0.25) : sqrt(0.125)) * cos((2 * m + 1) * k * PI / 16);
								double al = (l ? sqrt(0.25) : sqrt(0.125)) * cos((2 * n + 1) * l * PI / 16);
								s += ak * al * q[k * 8 + l] * step;
							}
						s = floor(s + 128 + 0.5);
						pl[c][(by * 8 + m) * stride + bx * 8 + n] = s < 0 ? 0 : s > 255 ? 255 : s;
					}
	}
	for (size_t y = 0; y < h; y++)
		for (size_t x = 0; x < w; x++) {
			double cc[2];
			for (int c = 0; c < 2; c++) {
				const double *p = pl[c + 1];
				size_t i = y / 2, j = x / 2;
				size_t io = y % 2 ? (i + 1 < ch ? i + 1 : i) : (i ? i - 1 : 0);
				size_t jo = x % 2 ? (j + 1 < cw ? j + 1 : j) : (j ? j - 1 : 0);
				cc[c] = floor((9 * p[i * cw + j] + 3 * p[io * cw + j] + 3 * p[i * cw + jo] + p[io * cw + jo] + 8) /
					      16) - 128;
			}
			const double l = pl[0][y * pw + x];
			const double v[3] = { l + 1.402 * cc[1], l - 0.344136 * cc[0] - 0.714136 * cc[1], l + 1.772 * cc[0] };
			for (int c = 0; c < 3; c++) {
				double r = floor(v[c] + 0.5);
				rgb[(y * w + x) * 3 + c] = (uint8_t)(r < 0 ? 0 : r > 255 ? 255 : r);
			}
		}
	for (int c = 0; c < 3; c++)
		free(pl[c]);
}

/* docs/FORMAT.md 6.8's decoding steps, as written there, in 64-bit
 * integers with floor division spelled out: the decoder must give these
 * bytes exactly, whatever shortcuts it takes. */
static int64_t floor_div(int64_t x, int64_t d) { return x >= 0 ? x / d : -((-x + d - 1) / d); }
static int32_t clamp8(int64_t v) { return v < 0 ? 0 : v > 255 ? 255 : (int32_t)v; }

static void decode_spec(const int16_t *q, uint32_t w, uint32_t h, uint32_t sl, uint32_t sc, uint8_t *rgb)
{
	qvq_dct_geom g;
	qvq_dct_geometry(w, h, &g);
	const size_t pw = 16 * (size_t)g.mw, ph = 16 * (size_t)g.mh, cw = pw / 2, ch = ph / 2;
	uint8_t *pl[3] = {malloc(pw * ph), malloc(cw * ch), malloc(cw * ch)};
	size_t blk = 0;
	for (int c = 0; c < 3; c++) {
		const size_t bw = c ? cw / 8 : pw / 8, bh = c ? ch / 8 : ph / 8, stride = c ? cw : pw;
		for (size_t by = 0; by < bh; by++)
			for (size_t bx = 0; bx < bw; bx++, blk++) {
				int64_t X[64], t[64];
				for (int i = 0; i < 64; i++) {
					int64_t v = (int64_t)q[64 * blk + i] * (c ? sc : sl);
					X[i] = v > 32767 ? 32767 : v < -32768 ? -32768 : v;
				}
				for (int v = 0; v < 8; v++)
					for (int n = 0; n < 8; n++) {
						int64_t a = 2048;
						for (int k = 0; k < 8; k++)
							a += (int64_t)QVQ_DCT_BASIS[k][n] * X[v * 8 + k];
						t[v * 8 + n] = floor_div(a, 4096);
					}
				for (int m = 0; m < 8; m++)
					for (int n = 0; n < 8; n++) {
						int64_t a = 16384;
						for (int k = 0; k < 8; k++)
							a += (int64_t)QVQ_DCT_BASIS[k][m] * t[k * 8 + n];
						pl[c][(by * 8 + m) * stride + bx * 8 + n] = (uint8_t)clamp8(floor_div(a, 32768) + 128);
					}
			}
	}
	for (size_t y = 0; y < h; y++)
		for (size_t x = 0; x < w; x++) {
			int64_t cc[2];
			for (int c = 1; c < 3; c++) {
				const size_t i = y / 2, o = y % 2 ? (i + 1 < ch ? i + 1 : i) : (i ? i - 1 : 0);
				const size_t j = x / 2, p = x % 2 ? (j + 1 < cw ? j + 1 : j) : (j ? j - 1 : 0);
				const int64_t vj = 3 * pl[c][i * cw + j] + pl[c][o * cw + j];
				const int64_t vp = 3 * pl[c][i * cw + p] + pl[c][o * cw + p];
				cc[c - 1] = floor_div(3 * vj + vp + 8, 16);
			}
			const int64_t Y = pl[0][y * pw + x], b = cc[0] - 128, r = cc[1] - 128;
			uint8_t *o = rgb + (y * w + x) * 3;
			o[0] = (uint8_t)clamp8(Y + floor_div(91881 * r + 32768, 65536));
			o[1] = (uint8_t)clamp8(Y + floor_div(-22554 * b - 46802 * r + 32768, 65536));
			o[2] = (uint8_t)clamp8(Y + floor_div(116130 * b + 32768, 65536));
		}
	for (int c = 0; c < 3; c++)
		free(pl[c]);
}

START_TEST(decoder_is_the_spec_exactly)
{
	/* real images at three steps, then coefficients of any value (sparse,
	 * dense, extreme), at odd sizes */
	const uint32_t sizes[][2] = {{40, 24}, {37, 21}, {1, 1}, {17, 33}};
	for (size_t z = 0; z < 4; z++) {
		const uint32_t w = sizes[z][0], h = sizes[z][1];
		qvq_dct_geom g;
		qvq_dct_geometry(w, h, &g);
		int16_t *q = malloc(g.blocks * 64 * sizeof *q);
		void *scr = malloc(qvq_dct_scratch_bytes(w, h));
		uint8_t *a = malloc((size_t)w * h * 3), *b = malloc((size_t)w * h * 3), *img = make_image(w, h);
		for (int trial = 0; trial < 6; trial++) {
			const uint32_t sl = trial < 3 ? (uint32_t[]){8, 64, 160}[trial] : 1 + rnd() % QVQ_DCT_STEP_MAX;
			const uint32_t sc = trial < 3 ? sl * 3 / 2 : 1 + rnd() % QVQ_DCT_STEP_MAX;
			if (trial < 3) {
				ck_assert_int_eq(qvq_dct_encode(img, w, h, sl, sc, q, scr), WC_OK);
			} else {
				for (size_t i = 0; i < g.blocks * 64; i++) {
					const uint32_t r = rnd() % 16;
					q[i] = (int16_t)(r < 8 ? 0 : r < 12 ? (int)(rnd() % 21) - 10 : r < 15 ? (int)(rnd() % 2001) - 1000
								 : (rnd() & 1 ? 32767 : -32767));
				}
			}
			ck_assert_int_eq(qvq_dct_decode(q, w, h, sl, sc, a, scr), WC_OK);
			decode_spec(q, w, h, sl, sc, b);
			ck_assert_msg(memcmp(a, b, (size_t)w * h * 3) == 0, "%ux%u, trial %d: differs from the spec", w, h,
				      trial);
		}
		free(q);
		free(scr);
		free(a);
		free(b);
		free(img);
	}
}
END_TEST

START_TEST(exact_decoder_follows_the_mathematics)
{
	const uint32_t w = 40, h = 24, steps[][2] = { { 8, 12 }, { 64, 96 }, { 160, 240 } };
	uint8_t *img = make_image(w, h);
	qvq_dct_geom g;
	qvq_dct_geometry(w, h, &g);
	int16_t *q = malloc(g.blocks * 64 * sizeof *q);
	void *scr = malloc(qvq_dct_scratch_bytes(w, h));
	uint8_t *a = malloc((size_t)w * h * 3), *b = malloc((size_t)w * h * 3);
	for (size_t s = 0; s < 3; s++) {
		ck_assert_int_eq(qvq_dct_encode(img, w, h, steps[s][0], steps[s][1], q, scr), WC_OK);
		ck_assert_int_eq(qvq_dct_decode(q, w, h, steps[s][0], steps[s][1], a, scr), WC_OK);
		decode_double(q, w, h, steps[s][0], steps[s][1], b);
		int worst = 0;
		size_t off = 0;
		for (size_t i = 0; i < (size_t)w * h * 3; i++) {
			worst = abs(a[i] - b[i]) > worst ? abs(a[i] - b[i]) : worst;
			off += a[i] != b[i];
		}
		/* the 12-bit basis and the 16-bit colour constants move a plane's
		 * sample across a rounding boundary now and then, and a level of
		 * chroma is up to 1.8 of a colour: 4-6% of the samples differ here,
		 * by up to 3; a decoder off by one level everywhere differs in a
		 * third */
		ck_assert_msg(worst <= 3, "step %u: a sample %d levels from the double decoder", steps[s][0], worst);
		ck_assert_msg(off * 10 < (size_t)w * h * 3, "step %u: %zu of %zu samples differ", steps[s][0], off,
			      (size_t)w * h * 3);
	}
	free(img);
	free(q);
	free(scr);
	free(a);
	free(b);
}
END_TEST

START_TEST(round_trip_quality_by_step_and_odd_sizes)
{
	const uint32_t sizes[][2] = { { 224, 224 }, { 17, 5 }, { 1, 1 }, { 33, 64 } };
	for (size_t z = 0; z < 4; z++) {
		const uint32_t w = sizes[z][0], h = sizes[z][1];
		const size_t n = (size_t)w * h * 3;
		uint8_t *img = make_image(w, h), *out = malloc(n + 64);
		qvq_dct_geom g;
		qvq_dct_geometry(w, h, &g);
		ck_assert_uint_eq(g.blocks, 6 * (size_t)((w + 15) / 16) * ((h + 15) / 16));
		int16_t *q = malloc(g.blocks * 64 * sizeof *q);
		void *scr = malloc(qvq_dct_scratch_bytes(w, h));
		double last = 1e9;
		for (uint32_t step = 4; step <= 256; step *= 4) {
			memset(out + n, 0xa5, 64);
			ck_assert_int_eq(qvq_dct_encode(img, w, h, step, step * 3 / 2, q, scr), WC_OK);
			ck_assert_int_eq(qvq_dct_decode(q, w, h, step, step * 3 / 2, out, scr), WC_OK);
			for (int i = 0; i < 64; i++) /* nothing past the image */
				ck_assert_uint_eq(out[n + i], 0xa5);
			double p = psnr(img, out, n);
			if (w >= 16 && h >= 16 && step == 4)
				ck_assert_msg(p > 40, "%ux%u step %u: %.2f dB", w, h, step, p);
			ck_assert_msg(p <= last + 0.5, "%ux%u: coarser step %u gave %.2f dB, finer %.2f", w, h, step, p,
				      last);
			ck_assert_msg(p > 22, "%ux%u step %u: %.2f dB", w, h, step, p);
			last = p;
		}
		free(img);
		free(out);
		free(q);
		free(scr);
	}
}
END_TEST

START_TEST(extreme_coefficients_stay_in_range)
{
	const uint32_t w = 16, h = 16;
	qvq_dct_geom g;
	qvq_dct_geometry(w, h, &g);
	int16_t *q = malloc(g.blocks * 64 * sizeof *q);
	void *scr = malloc(qvq_dct_scratch_bytes(w, h));
	uint8_t out[16 * 16 * 3];
	for (int pass = 0; pass < 3; pass++) {
		for (size_t i = 0; i < g.blocks * 64; i++)
			q[i] = pass == 0 ? 32767 : pass == 1 ? -32768 : (int16_t)(rnd() & 1 ? 32767 : -32768);
		ck_assert_int_eq(qvq_dct_decode(q, w, h, QVQ_DCT_STEP_MAX, QVQ_DCT_STEP_MAX, out, scr), WC_OK);
	}
	ck_assert_int_eq(qvq_dct_decode(q, w, h, 0, 8, out, scr), WC_E_INVAL);
	ck_assert_int_eq(qvq_dct_decode(q, w, h, 8, QVQ_DCT_STEP_MAX + 1, out, scr), WC_E_INVAL);
	ck_assert_int_eq(qvq_dct_decode(q, 0, h, 8, 8, out, scr), WC_E_INVAL);
	ck_assert_int_eq(qvq_dct_encode(out, w, 16385, 8, 8, q, scr), WC_E_INVAL);
	free(q);
	free(scr);
}
END_TEST

/* Planes of qvq_tx_plane_counts' sizes for n images of w x h, and an escape
 * buffer for every coefficient. */
typedef struct streams {
	uint8_t *plane[QVQ_TX_PLANES];
	size_t len[QVQ_TX_PLANES];
	qvq_tx_escapes esc;
} streams;

static void streams_make(streams *st, uint32_t w, uint32_t h, size_t n)
{
	size_t c[QVQ_TX_PLANES];
	qvq_tx_plane_counts(w, h, c);
	qvq_dct_geom g;
	qvq_dct_geometry(w, h, &g);
	size_t sum = 0;
	for (unsigned p = 0; p < QVQ_TX_PLANES; p++) {
		st->len[p] = n * c[p];
		st->plane[p] = malloc(st->len[p] + 1);
		sum += c[p];
	}
	ck_assert_uint_eq(sum, g.blocks * 64);
	for (unsigned p = 0; p < QVQ_TX_PLANES; p++) {
		st->esc.pos[p] = malloc((st->len[p] + 1) * sizeof *st->esc.pos[p]);
		st->esc.val[p] = malloc((st->len[p] + 1) * sizeof *st->esc.val[p]);
		st->esc.n[p] = 0;
	}
}

static size_t escapes_total(const qvq_tx_escapes *e)
{
	size_t n = 0;
	for (unsigned p = 0; p < QVQ_TX_PLANES; p++)
		n += e->n[p];
	return n;
}

static void streams_free(streams *st)
{
	for (unsigned p = 0; p < QVQ_TX_PLANES; p++) {
		free(st->plane[p]);
		free(st->esc.pos[p]);
		free(st->esc.val[p]);
	}
}

START_TEST(streams_give_back_any_coefficients)
{
	const uint32_t w = 40, h = 20;
	qvq_dct_geom g;
	qvq_dct_geometry(w, h, &g);
	const size_t n = g.blocks * 64;
	int16_t *coef = malloc(3 * n * sizeof *coef), *back = malloc(n * sizeof *back);
	size_t want_esc = 0;
	for (int im = 0; im < 3; im++) {
		int16_t prev[3] = { 0, 0, 0 };
		for (size_t i = 0; i < n; i++) {
			const uint32_t r = rnd();
			int16_t v = (int16_t)(r % 8 == 0 ? (int)(rnd() % 16001) - 8000 : (int)(r % 21) - 10);
			coef[im * n + i] = v;
			const size_t blk = i / 64;
			const int c = blk < g.luma_blocks ? 0 : blk < g.luma_blocks + g.chroma_blocks ? 1 : 2;
			int32_t d = v;
			if (i % 64 == 0) {
				d = v - prev[c];
				prev[c] = v;
			}
			want_esc += d > QVQ_TX_DIRECT || d < -QVQ_TX_DIRECT;
		}
	}
	streams st;
	streams_make(&st, w, h, 3);
	size_t pos[QVQ_TX_PLANES] = { 0 };
	for (int im = 0; im < 3; im++)
		qvq_tx_to_symbols(coef + im * n, w, h, st.plane, pos, &st.esc);
	for (unsigned p = 0; p < QVQ_TX_PLANES; p++) {
		ck_assert_uint_eq(pos[p], st.len[p]);
		for (size_t i = 0; i < st.len[p]; i++)
			ck_assert(st.plane[p][i] <= 2 * QVQ_TX_DIRECT || st.plane[p][i] == QVQ_TX_ESCAPE);
	}
	ck_assert_uint_eq(escapes_total(&st.esc), want_esc);
	for (unsigned p = 0; p < QVQ_TX_PLANES; p++)
		for (size_t k = 0; k < st.esc.n[p]; k++) { /* places: ascending, each an escape symbol */
			ck_assert(k == 0 || st.esc.pos[p][k] > st.esc.pos[p][k - 1]);
			ck_assert_uint_eq(st.plane[p][st.esc.pos[p][k]], QVQ_TX_ESCAPE);
		}
	memset(pos, 0, sizeof pos);
	size_t cursor[QVQ_TX_PLANES] = { 0 };
	for (int im = 0; im < 3; im++) {
		ck_assert_int_eq(qvq_tx_from_symbols((const uint8_t *const *)st.plane, pos, &st.esc, cursor, w, h, back),
				 WC_OK);
		ck_assert_mem_eq(back, coef + im * n, n * sizeof *back);
	}
	for (unsigned p = 0; p < QVQ_TX_PLANES; p++)
		ck_assert_uint_eq(cursor[p], st.esc.n[p]);
	/* damage: a symbol never written, an escape without its value, a DC past range */
	const size_t z = st.len[0] / 2;
	for (int d = 0; d < 3; d++) {
		streams bad = st;
		uint8_t *p0 = malloc(st.len[0] + 1);
		memcpy(p0, st.plane[0], st.len[0]);
		bad.plane[0] = p0;
		uint32_t one_pos = 0;
		int16_t one_val = 32767;
		if (d == 0) {
			p0[z] = 253;
		} else if (d == 1) {
			bad.esc.n[0] = 0, p0[0] = QVQ_TX_ESCAPE;
		} else { /* the first DC escaped as 32767, the next one more */
			p0[0] = QVQ_TX_ESCAPE, p0[1] = 2;
			bad.esc.pos[0] = &one_pos, bad.esc.val[0] = &one_val, bad.esc.n[0] = 1;
		}
		memset(pos, 0, sizeof pos);
		memset(cursor, 0, sizeof cursor);
		wc_err e = WC_OK;
		for (int im = 0; im < 3 && e == WC_OK; im++)
			e = qvq_tx_from_symbols((const uint8_t *const *)bad.plane, pos, &bad.esc, cursor, w, h, back);
		ck_assert_int_eq(e, WC_E_CORRUPT);
		ck_assert_ptr_nonnull(strstr(wc_last_detail(), d == 0 ? "symbol 253" : d == 1 ? "escape" : "DC"));
		free(p0);
	}
	streams_free(&st);
	free(coef);
	free(back);
}
END_TEST

START_TEST(step_for_quality_follows_jpegs_scale)
{
	uint32_t s, prev = UINT32_MAX;
	for (int q = 1; q <= 100; q++) {
		ck_assert_int_eq(qvq_dct_step_for_quality(q, &s), WC_OK);
		ck_assert_uint_le(s, prev); /* finer as the quality rises */
		ck_assert_uint_ge(s, 1);
		ck_assert_uint_le(s, QVQ_DCT_STEP_MAX);
		prev = s;
	}
	ck_assert_int_eq(qvq_dct_step_for_quality(75, &s), WC_OK);
	ck_assert_uint_eq(s, 123); /* 15.4: JPEG q=75's PSNR at step 16 on the study's crops */
	ck_assert_int_eq(qvq_dct_step_for_quality(90, &s), WC_OK);
	ck_assert_uint_eq(s, 66); /* 8.3 against 8.4 measured */
	ck_assert_int_eq(qvq_dct_step_for_quality(100, &s), WC_OK);
	ck_assert_uint_eq(s, 1);
	ck_assert_int_eq(qvq_dct_step_for_quality(1, &s), WC_OK);
	ck_assert_uint_eq(s, QVQ_DCT_STEP_MAX);
	ck_assert_int_eq(qvq_dct_step_for_quality(0, &s), WC_E_INVAL);
	ck_assert_int_eq(qvq_dct_step_for_quality(101, &s), WC_E_INVAL);
	ck_assert_uint_eq(qvq_dct_chroma_step(64), 96);
	ck_assert_uint_eq(qvq_dct_chroma_step(QVQ_DCT_STEP_MAX), QVQ_DCT_STEP_MAX);
}
END_TEST

START_TEST(step_for_psnr_keeps_it)
{
	uint8_t *px[3] = { make_image(48, 32), make_image(31, 17), make_image(64, 64) };
	const qvq_rate_image im[3] = { { px[0], 48, 32 }, { px[1], 31, 17 }, { px[2], 64, 64 } };
	for (double target = 30; target <= 40; target += 5) {
		uint32_t s;
		double db, next;
		ck_assert_int_eq(qvq_dct_step_for_psnr(im, 3, target, &s, &db), WC_OK);
		ck_assert_msg(db >= target, "step %u: %.2f dB < %.2f", s, db, target);
		double again;
		ck_assert_int_eq(qvq_dct_psnr(im, 3, s, &again), WC_OK);
		ck_assert(again == db);
		if (s < QVQ_DCT_STEP_MAX) {
			ck_assert_int_eq(qvq_dct_psnr(im, 3, s + 1, &next), WC_OK);
			ck_assert_msg(next < target, "step %u also keeps %.2f dB (%.2f)", s + 1, target, next);
		}
	}
	uint32_t s;
	double db;
	ck_assert_int_eq(qvq_dct_step_for_psnr(im, 3, 80, &s, &db), WC_E_RANGE); /* 4:2:0 loses the noise */
	ck_assert_int_eq(qvq_dct_psnr(im, 0, 8, &db), WC_E_INVAL);
	for (int i = 0; i < 3; i++)
		free(px[i]);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("qvq_dct");
	TCase *tc = tcase_create("qvq_dct");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, basis_is_the_formula);
	tcase_add_test(tc, decoder_is_the_spec_exactly);
	tcase_add_test(tc, exact_decoder_follows_the_mathematics);
	tcase_add_test(tc, round_trip_quality_by_step_and_odd_sizes);
	tcase_add_test(tc, extreme_coefficients_stay_in_range);
	tcase_add_test(tc, streams_give_back_any_coefficients);
	tcase_add_test(tc, step_for_quality_follows_jpegs_scale);
	tcase_add_test(tc, step_for_psnr_keeps_it);
	suite_add_tcase(s, tc);
	return check_run(s);
}
