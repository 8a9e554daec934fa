/* freq_normalize.c - histogram -> 12-bit rANS frequency table, and validation. */
#include <math.h>
#include <pthread.h>

#include "codec/rans.h"

static double log2_tab[WC_RANS_PROB_SCALE + 1];
static pthread_once_t log2_once = PTHREAD_ONCE_INIT;

static void log2_init(void)
{
	log2_tab[0] = -INFINITY;
	for (uint32_t f = 1; f <= WC_RANS_PROB_SCALE; f++)
		log2_tab[f] = log2((double)f);
}

const double *wc_log2_freq_table(void)
{
	pthread_once(&log2_once, log2_init);
	return log2_tab;
}

/* Cost change in bits of moving symbol s from frequency f to f+d (d = +-1;
 * f and f+d within [1, 4096]): count * log2(f / (f + d)); negative is a
 * gain. L: wc_log2_freq_table(). */
static double delta_cost(const double *L, uint64_t count, uint32_t f, int d)
{
	return (double)count * (L[f] - L[(int)f + d]);
}

/*
 * The coding cost sum(count[s] * -log2(f[s] / 4096)) is separable and convex
 * in each f[s], so greedy unit moves by smallest marginal cost reach the
 * integer optimum. Start from proportional scaling (floored, at least 1) so
 * only a few hundred moves remain, fix the sum, then exchange units while a
 * move lowers the cost. Ties go to the lowest symbol, so the result is a
 * deterministic function of hist.
 */
wc_err wc_freq_normalize(const uint64_t hist[256], wc_freqtab *out)
{
	double total = 0; /* a double cannot overflow on any count */
	int present = 0;
	for (int s = 0; s < 256; s++) {
		total += (double)hist[s];
		present += hist[s] != 0;
	}
	if (present < 2)
		return wc_fail(WC_E_INVAL, "frequency table needs at least two symbols (%d present)", present);

	uint32_t f[256];
	int32_t sum = 0;
	for (int s = 0; s < 256; s++) {
		f[s] = 0;
		if (!hist[s])
			continue;
		double want = (double)hist[s] * WC_RANS_PROB_SCALE / total;
		uint32_t v = want < 1.0 ? 1u : (uint32_t)want;
		if (v > WC_RANS_PROB_SCALE - 1)
			v = WC_RANS_PROB_SCALE - 1;
		f[s] = v;
		sum += (int32_t)v;
	}

	/* Fix the sum: add where it gains most, take where it costs least. */
	const double *L = wc_log2_freq_table();
	while (sum != (int32_t)WC_RANS_PROB_SCALE) {
		int best = -1;
		double best_c = INFINITY;
		int d = sum < (int32_t)WC_RANS_PROB_SCALE ? 1 : -1;
		for (int s = 0; s < 256; s++) {
			if (!hist[s] || (d < 0 && f[s] <= 1))
				continue;
			double c = delta_cost(L, hist[s], f[s], d);
			if (c < best_c) {
				best_c = c;
				best = s;
			}
		}
		f[best] = (uint32_t)((int)f[best] + d);
		sum += d;
	}

	/* Exchange units while one move up and one move down lower the cost. */
	for (int iter = 0; iter < (int)WC_RANS_PROB_SCALE; iter++) {
		int up = -1, down = -1;
		double up_c = INFINITY, down_c = INFINITY;
		for (int s = 0; s < 256; s++) {
			if (!hist[s])
				continue;
			double cu = delta_cost(L, hist[s], f[s], 1);
			if (cu < up_c) {
				up_c = cu;
				up = s;
			}
			if (f[s] > 1) {
				double cd = delta_cost(L, hist[s], f[s], -1);
				if (cd < down_c) {
					down_c = cd;
					down = s;
				}
			}
		}
		/* A relative margin keeps rounding noise from cycling. */
		if (down < 0 || up == down || up_c + down_c >= -1e-9 * (fabs(up_c) + fabs(down_c)))
			break;
		f[up]++;
		f[down]--;
	}

	for (int s = 0; s < 256; s++)
		out->freq[s] = (uint16_t)f[s];
	return WC_OK;
}

wc_err wc_freq_validate(const wc_freqtab *ft)
{
	uint32_t sum = 0;
	int present = 0;
	for (int s = 0; s < 256; s++) {
		if (ft->freq[s] > WC_RANS_PROB_SCALE - 1)
			return wc_fail(WC_E_FORMAT, "frequency table: symbol %d has frequency %u > 4095",
				       s, ft->freq[s]);
		sum += ft->freq[s];
		present += ft->freq[s] != 0;
	}
	if (sum != WC_RANS_PROB_SCALE)
		return wc_fail(WC_E_FORMAT, "frequency table sums to %u, not 4096", sum);
	if (present < 2)
		return wc_fail(WC_E_FORMAT, "frequency table has %d symbol(s), needs at least 2", present);
	return WC_OK;
}
