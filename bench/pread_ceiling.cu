/*
 * pread_ceiling.cu - the host-to-GPU ceiling of a checkpoint load: THREADS
 * threads pread the files in 16 MiB pieces (in file order, taken from one
 * counter) into page-locked buffers of their own (two each, alternating)
 * and cudaMemcpyAsync each piece to the GPU on a stream of their own. No
 * parsing, no checks, no decoding: what any loader of these bytes can at
 * best reach on this machine (docs/BENCHMARKS.md, "Loading from
 * Python"). A benchmark, not a test. Build and run on a GPU machine:
 *   nvcc -O2 -o pread_ceiling bench/pread_ceiling.cu -lpthread
 *   ./pread_ceiling THREADS FILE...      # prints bytes, seconds, GB/s
 */
#include <cuda_runtime.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define PIECE (16u << 20)

static int nfiles, *fds;
static long long *sizes, total_pieces, *first_piece;
static long long next_piece;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_barrier_t ready; /* buffers allocated before the clock starts */

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void *worker(void *arg)
{
	(void)arg;
	unsigned char *h[2], *d;
	cudaStream_t s;
	cudaEvent_t ev[2];
	if (cudaHostAlloc((void **)&h[0], PIECE, 0) || cudaHostAlloc((void **)&h[1], PIECE, 0) ||
	    cudaMalloc((void **)&d, 2 * (size_t)PIECE) || cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) ||
	    cudaEventCreate(&ev[0]) || cudaEventCreate(&ev[1])) {
		fprintf(stderr, "cuda setup failed\n");
		exit(1);
	}
	pthread_barrier_wait(&ready);
	int used[2] = { 0, 0 };
	for (int k = 0;; k ^= 1) {
		pthread_mutex_lock(&mu);
		long long p = next_piece++;
		pthread_mutex_unlock(&mu);
		if (p >= total_pieces)
			break;
		int f = 0;
		while (f + 1 < nfiles && first_piece[f + 1] <= p)
			f++;
		long long off = (p - first_piece[f]) * PIECE;
		size_t n = sizes[f] - off < PIECE ? (size_t)(sizes[f] - off) : PIECE;
		if (used[k])
			cudaEventSynchronize(ev[k]);
		for (size_t got = 0; got < n;) {
			ssize_t r = pread(fds[f], h[k] + got, n - got, off + (long long)got);
			if (r <= 0) {
				perror("pread");
				exit(1);
			}
			got += (size_t)r;
		}
		cudaMemcpyAsync(d + (size_t)k * PIECE, h[k], n, cudaMemcpyHostToDevice, s);
		cudaEventRecord(ev[k], s);
		used[k] = 1;
	}
	cudaStreamSynchronize(s);
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: %s THREADS FILE...\n", argv[0]);
		return 2;
	}
	int threads = atoi(argv[1]);
	nfiles = argc - 2;
	fds = (int *)calloc(nfiles, sizeof *fds);
	sizes = (long long *)calloc(nfiles, sizeof *sizes);
	first_piece = (long long *)calloc(nfiles, sizeof *first_piece);
	long long bytes = 0;
	for (int i = 0; i < nfiles; i++) {
		struct stat st;
		fds[i] = open(argv[i + 2], O_RDONLY);
		if (fds[i] < 0 || fstat(fds[i], &st)) {
			perror(argv[i + 2]);
			return 1;
		}
		sizes[i] = st.st_size;
		first_piece[i] = total_pieces;
		total_pieces += (st.st_size + PIECE - 1) / PIECE;
		bytes += st.st_size;
	}
	cudaFree(0);
	pthread_t *t = (pthread_t *)calloc(threads, sizeof *t);
	pthread_barrier_init(&ready, NULL, (unsigned)threads + 1);
	for (int i = 0; i < threads; i++)
		pthread_create(&t[i], NULL, worker, NULL);
	pthread_barrier_wait(&ready);
	double t0 = now();
	for (int i = 0; i < threads; i++)
		pthread_join(t[i], NULL);
	double dt = now() - t0;
	printf("%lld bytes %.3f s %.2f GB/s\n", bytes, dt, bytes / dt / 1e9);
	return 0;
}
