/* entropy.c - order-0 (Shannon) entropy of a byte histogram. */
#include <math.h>

#include "codec/rans.h"

double wc_entropy_bits(const uint64_t hist[256])
{
	uint64_t total = 0;
	for (int s = 0; s < 256; s++)
		total += hist[s];
	if (!total)
		return 0.0;
	double h = 0.0;
	for (int s = 0; s < 256; s++) {
		if (!hist[s])
			continue;
		double p = (double)hist[s] / (double)total;
		h -= p * log2(p);
	}
	return h;
}
