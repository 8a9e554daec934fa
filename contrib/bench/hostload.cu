/*
 * hostload.cu - a steady host-memory load beside a benchmark, to test whether
 * the CUDA backend's readers lose time to the host memory its DMA uses
 * (docs/BENCHMARKS.md, "GPU backend through the mount"). Modes:
 *   dma GBPS: page-locked buffers copied to the GPU and back, 2 bytes down
 *     for every 1.4 up (a cold 4-reader read of BF16 weights: payloads up,
 *     decoded tiles down), throttled to GBPS of DMA in all;
 *   cpu GBPS: one thread memcpy()s between two 256 MiB buffers, throttled so
 *     the bytes read plus written are GBPS;
 * until SIGTERM, then prints the rate reached. A benchmark tool, not a test. Build and run on a GPU machine:
 *   nvcc -O2 -o hostload contrib/bench/hostload.cu && ./hostload dma 12 &
 */
#include <cuda_runtime.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CHUNK (4u << 20)
#define CPU_BUF (256u << 20)

static volatile sig_atomic_t stop;
static void on_term(int sig) { (void)sig; stop = 1; }

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Sleep until `bytes` moved since t0 match the rate `gbps`. */
static void throttle(double t0, double bytes, double gbps)
{
	double due = t0 + bytes / (gbps * 1e9), t = now();
	if (due > t) {
		struct timespec s = { (time_t)(due - t), (long)((due - t - (double)(time_t)(due - t)) * 1e9) };
		nanosleep(&s, NULL);
	}
}

int main(int argc, char **argv)
{
	if (argc != 3 || (strcmp(argv[1], "dma") && strcmp(argv[1], "cpu"))) {
		fprintf(stderr, "usage: hostload dma|cpu GBPS\n");
		return 2;
	}
	signal(SIGTERM, on_term);
	double gbps = atof(argv[2]), moved = 0, t0 = now();
	if (!strcmp(argv[1], "cpu")) {
		char *a = (char *)malloc(CPU_BUF), *b = (char *)malloc(CPU_BUF);
		if (!a || !b)
			return 1;
		memset(a, 1, CPU_BUF);
		memset(b, 2, CPU_BUF);
		t0 = now();
		for (size_t off = 0; !stop; off = (off + CHUNK) % CPU_BUF) {
			memcpy(b + off, a + off, CHUNK);
			moved += 2.0 * CHUNK;
			throttle(t0, moved, gbps);
		}
		printf("hostload cpu: %.1f GB/s for %.2f s\n", moved / (now() - t0) / 1e9, now() - t0);
		return 0;
	}
	void *h_up, *h_down, *d_buf;
	cudaStream_t st;
	if (cudaHostAlloc(&h_up, 16 * CHUNK, cudaHostAllocDefault) != cudaSuccess ||
	    cudaHostAlloc(&h_down, 16 * CHUNK, cudaHostAllocDefault) != cudaSuccess ||
	    cudaMalloc(&d_buf, 16 * CHUNK) != cudaSuccess || cudaStreamCreate(&st) != cudaSuccess) {
		fprintf(stderr, "hostload: no usable GPU\n");
		return 1;
	}
	memset(h_up, 1, 16 * CHUNK);
	t0 = now();
	for (unsigned i = 0; !stop; i = (i + 1) % 16) {
		/* 1.4 MiB up for every 2 MiB down, in 4 MiB pieces */
		size_t up = (size_t)(CHUNK * 0.7);
		cudaMemcpyAsync(d_buf, (char *)h_up + (size_t)i * CHUNK, up, cudaMemcpyHostToDevice, st);
		cudaMemcpyAsync((char *)h_down + (size_t)i * CHUNK, d_buf, CHUNK, cudaMemcpyDeviceToHost, st);
		cudaStreamSynchronize(st);
		moved += (double)(up + CHUNK);
		throttle(t0, moved, gbps);
	}
	printf("hostload %s: %.1f GB/s for %.2f s\n", argv[1], moved / (now() - t0) / 1e9, now() - t0);
	return 0;
}
