/*
 * cpu.h - what the CPU the process runs on can do, for the code paths that
 * pick an instruction set at run time (rANS round loops, XXH3, the qvq
 * codebook gather).
 */
#ifndef WC_CPU_H
#define WC_CPU_H

enum {
	WC_CPU_AVX2 = 1u << 0,    /* AVX2 (with POPCNT, which every AVX2 CPU has) */
	WC_CPU_AVX512F = 1u << 1, /* AVX-512 Foundation */
	WC_CPU_AVX512VBMI = 1u << 2, /* AVX-512 F, BW, VL and VBMI (byte permutes) */
};

/* The WC_CPU_* bits this CPU supports, from CPUID (checked once; cheap
 * after). 0 on non-x86 builds. Thread-safe. */
unsigned wc_cpu_features(void);

#endif /* WC_CPU_H */
