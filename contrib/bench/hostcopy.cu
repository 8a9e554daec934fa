/*
 * hostcopy.cu - how fast the kernel copies 1 MiB out of each kind of host
 * buffer, as a FUSE reply's writev copies a decoded tile into the page
 * cache: pwrite of the buffer into a tmpfs file (/dev/shm), 1 to 8 threads,
 * for anonymous mmap() memory, cudaHostAlloc memory and mmap() memory
 * registered with cudaHostRegister; then the same with a GPU copy into the
 * buffer just before each pwrite (the CUDA backend's path: the tile arrives
 * by DMA, then the reply copies it). A benchmark, not a test
 * (docs/BENCHMARKS.md, "GPU backend through the mount"). Build and run on a GPU machine:
 *   nvcc -O2 -o hostcopy contrib/bench/hostcopy.cu && ./hostcopy
 */
#include <cuda_runtime.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define MIB (1u << 20)
#define NBUF 16   /* buffers per thread, reused round robin */
#define ROUNDS 256 /* 1 MiB copies per thread */

enum kind { K_MMAP, K_HOSTALLOC, K_REGISTER };
static const char *kind_name[] = { "mmap", "cudaHostAlloc", "cudaHostRegister" };
static enum kind kind;
static void *dev_src;

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void die(const char *what)
{
	perror(what);
	exit(1);
}

static char *alloc_buf(void)
{
	void *p = NULL;
	if (kind == K_HOSTALLOC) {
		if (cudaHostAlloc(&p, MIB, cudaHostAllocPortable) != cudaSuccess)
			die("cudaHostAlloc");
		return (char *)p;
	}
	p = mmap(NULL, MIB, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	if (p == MAP_FAILED)
		die("mmap");
	if (kind == K_REGISTER && cudaHostRegister(p, MIB, cudaHostRegisterPortable) != cudaSuccess)
		die("cudaHostRegister");
	return (char *)p;
}

static void free_buf(char *p)
{
	if (kind == K_HOSTALLOC) {
		cudaFreeHost(p);
		return;
	}
	if (kind == K_REGISTER)
		cudaHostUnregister(p);
	munmap(p, MIB);
}

typedef struct worker {
	int id, dma;
	double copy_s, dma_s;
	size_t bytes;
} worker;

static void *run(void *arg)
{
	worker *w = (worker *)arg;
	char path[64];
	snprintf(path, sizeof path, "/dev/shm/hostcopy.%d.%d", (int)getpid(), w->id);
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	if (fd < 0)
		die(path);
	unlink(path);
	char *b[NBUF];
	for (int i = 0; i < NBUF; i++) { /* the file's pages exist before the timed copies */
		b[i] = alloc_buf();
		memset(b[i], 1, MIB);
		if (pwrite(fd, b[i], MIB, (off_t)i * MIB) != (ssize_t)MIB)
			die("pwrite");
	}
	cudaStream_t s;
	if (cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess)
		die("cudaStreamCreate");
	for (int r = 0; r < ROUNDS; r++) {
		int i = r % NBUF;
		double t0 = now();
		if (w->dma) {
			cudaMemcpyAsync(b[i], dev_src, MIB, cudaMemcpyDeviceToHost, s);
			cudaStreamSynchronize(s);
		}
		double t1 = now();
		if (pwrite(fd, b[i], MIB, (off_t)i * MIB) != (ssize_t)MIB)
			die("pwrite");
		double t2 = now();
		w->dma_s += t1 - t0;
		w->copy_s += t2 - t1;
		w->bytes += MIB;
	}
	cudaStreamDestroy(s);
	for (int i = 0; i < NBUF; i++)
		free_buf(b[i]);
	close(fd);
	return NULL;
}

int main(void)
{
	if (cudaMalloc(&dev_src, MIB) != cudaSuccess || cudaMemset(dev_src, 7, MIB) != cudaSuccess) {
		fprintf(stderr, "hostcopy: no usable GPU\n");
		return 1;
	}
	for (int dma = 0; dma < 2; dma++)
		for (int k = K_MMAP; k <= K_REGISTER; k++)
			for (int nt = 1; nt <= 8; nt *= 2) {
				kind = (enum kind)k;
				pthread_t th[8];
				worker w[8];
				memset(w, 0, sizeof w);
				for (int i = 0; i < nt; i++) {
					w[i].id = i;
					w[i].dma = dma;
					if (pthread_create(&th[i], NULL, run, &w[i]) != 0)
						die("pthread_create");
				}
				double copy_s = 0, dma_s = 0;
				size_t bytes = 0;
				for (int i = 0; i < nt; i++) {
					pthread_join(th[i], NULL);
					copy_s += w[i].copy_s;
					dma_s += w[i].dma_s;
					bytes += w[i].bytes;
				}
				printf("%-17s gpu copy first=%d threads=%d: pwrite %.1f GB/s per thread",
				       kind_name[k], dma, nt, (double)bytes / copy_s / 1e9);
				if (dma)
					printf(", gpu copy %.1f GB/s per thread", (double)bytes / dma_s / 1e9);
				printf("\n");
			}
	return 0;
}
