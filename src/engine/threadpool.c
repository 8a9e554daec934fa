/* threadpool.c - worker threads serving parallel loops (threadpool.h). */
#include "engine/threadpool.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* One wc_threadpool_run() call. Lives on its caller's stack; workers touch
 * it only under the pool lock, and the caller returns only once done == n
 * (checked under that lock), so no worker can see it after it is gone. */
typedef struct pool_loop {
	wc_pool_fn fn;
	void *ctx;
	size_t n;
	size_t next; /* next iteration to hand out */
	size_t done; /* iterations finished */
	struct pool_loop *link; /* next loop with iterations left to hand out */
} pool_loop;

struct wc_threadpool {
	pthread_mutex_t lock;
	pthread_cond_t work;     /* a loop was queued, or stop */
	pthread_cond_t finished; /* some loop's iterations all finished */
	pool_loop *head, *tail;  /* loops with iterations left to hand out, FIFO */
	int stop;
	unsigned nthreads;
	pthread_t *threads;
};

/* Claim the next iteration of the oldest loop; unlinks a loop once its last
 * iteration is handed out. Called with the lock held and head != NULL. */
static size_t claim(wc_threadpool *p, pool_loop **loop)
{
	pool_loop *l = p->head;
	size_t i = l->next++;
	if (l->next == l->n) {
		p->head = l->link;
		if (!p->head)
			p->tail = NULL;
	}
	*loop = l;
	return i;
}

/* Run iteration i of l without the lock, then count it (lock held again). */
static void run_one(wc_threadpool *p, pool_loop *l, size_t i)
{
	pthread_mutex_unlock(&p->lock);
	l->fn(l->ctx, i);
	pthread_mutex_lock(&p->lock);
	if (++l->done == l->n)
		pthread_cond_broadcast(&p->finished);
}

static void *worker(void *arg)
{
	wc_threadpool *p = arg;
	/* Named, so that top -H, perf and /proc/PID/task/TID tell the library's
	 * threads from a host program's (a distributed load's test counts their
	 * file reads apart from the transport's socket reads this way). */
	pthread_setname_np(pthread_self(), "wcodec-worker");
	pthread_mutex_lock(&p->lock);
	for (;;) {
		while (!p->head && !p->stop)
			pthread_cond_wait(&p->work, &p->lock);
		if (!p->head)
			break;
		pool_loop *l;
		size_t i = claim(p, &l);
		run_one(p, l, i);
	}
	pthread_mutex_unlock(&p->lock);
	return NULL;
}

wc_err wc_threadpool_create(unsigned nthreads, wc_threadpool **out)
{
	*out = NULL;
	wc_threadpool *p = calloc(1, sizeof *p);
	if (!p)
		return wc_fail(WC_E_NOMEM, "thread pool");
	p->threads = calloc(nthreads ? nthreads : 1, sizeof *p->threads);
	if (!p->threads) {
		free(p);
		return wc_fail(WC_E_NOMEM, "thread pool");
	}
	pthread_mutex_init(&p->lock, NULL);
	pthread_cond_init(&p->work, NULL);
	pthread_cond_init(&p->finished, NULL);
	for (unsigned t = 0; t < nthreads; t++) {
		int rc = pthread_create(&p->threads[t], NULL, worker, p);
		if (rc != 0) {
			p->nthreads = t;
			wc_threadpool_destroy(p);
			return wc_fail(WC_E_IO, "starting decode thread %u of %u: %s", t + 1,
				       nthreads, strerror(rc));
		}
	}
	p->nthreads = nthreads;
	*out = p;
	return WC_OK;
}

void wc_threadpool_destroy(wc_threadpool *p)
{
	if (!p)
		return;
	pthread_mutex_lock(&p->lock);
	p->stop = 1;
	pthread_cond_broadcast(&p->work);
	pthread_mutex_unlock(&p->lock);
	for (unsigned t = 0; t < p->nthreads; t++)
		pthread_join(p->threads[t], NULL);
	pthread_cond_destroy(&p->finished);
	pthread_cond_destroy(&p->work);
	pthread_mutex_destroy(&p->lock);
	free(p->threads);
	free(p);
}

unsigned wc_threadpool_threads(const wc_threadpool *p) { return p->nthreads; }

void wc_threadpool_run(wc_threadpool *p, wc_pool_fn fn, void *ctx, size_t n)
{
	if (n == 0)
		return;
	if (n == 1) { /* nothing to spread: skip the hand-off */
		fn(ctx, 0);
		return;
	}
	pool_loop loop = { .fn = fn, .ctx = ctx, .n = n };
	pthread_mutex_lock(&p->lock);
	if (p->tail)
		p->tail->link = &loop;
	else
		p->head = &loop;
	p->tail = &loop;
	/* Wake only the workers this loop can use (the caller runs iterations
	 * too): a broadcast woke every worker for a loop of 2, and the CPU
	 * backend's context switches for four readers on 16 cores fell from
	 * about 17,000 to 12,000 without it (docs/BENCHMARKS.md, "GPU backend through the mount"). */
	for (size_t k = 1; k < n && k <= p->nthreads; k++)
		pthread_cond_signal(&p->work);
	/* The caller works on its own loop only, so its latency does not depend
	 * on loops queued before it. */
	while (loop.next < loop.n) {
		size_t i = loop.next++;
		if (loop.next == loop.n) { /* unlink: it may sit anywhere in the list */
			pool_loop **pp = &p->head, *prev = NULL;
			while (*pp != &loop) {
				prev = *pp;
				pp = &(*pp)->link;
			}
			*pp = loop.link;
			if (p->tail == &loop)
				p->tail = prev;
		}
		run_one(p, &loop, i);
	}
	while (loop.done < loop.n)
		pthread_cond_wait(&p->finished, &p->lock);
	pthread_mutex_unlock(&p->lock);
}
