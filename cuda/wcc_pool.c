/*
 * wcc_pool.c - parallel-for over a fixed set of worker threads.
 *
 * Each wcc_pool_for() call is a task on a list; workers take the next index
 * of the first task that has one left (an index is claimed under the pool
 * mutex: the items are whole tiles, tens of microseconds each, so the lock
 * is not the bottleneck). The caller works on its own task too, then waits
 * until every claimed index has finished.
 */
#include "wcc_pool.h"

#include <pthread.h>
#include <stdlib.h>

typedef struct wcc_task {
	void (*fn)(void *ctx, size_t i);
	void *ctx;
	size_t n, next, done;
	pthread_cond_t finished;
	struct wcc_task *link;
} wcc_task;

struct wcc_pool {
	pthread_mutex_t mu;
	pthread_cond_t work;
	wcc_task *tasks; /* tasks with indices left to claim */
	int stop;
	unsigned nthreads;
	pthread_t *threads;
};

/* Claim an index of the first open task; called with mu held. */
static wcc_task *claim(wcc_pool *p, size_t *idx)
{
	wcc_task *t = p->tasks;
	if (!t)
		return NULL;
	*idx = t->next++;
	if (t->next == t->n)
		p->tasks = t->link; /* fully claimed: off the list */
	return t;
}

static void finish(wcc_task *t)
{
	if (++t->done == t->n)
		pthread_cond_broadcast(&t->finished);
}

static void *worker(void *arg)
{
	wcc_pool *p = arg;
	pthread_mutex_lock(&p->mu);
	for (;;) {
		size_t i;
		wcc_task *t = claim(p, &i);
		if (!t) {
			if (p->stop)
				break;
			pthread_cond_wait(&p->work, &p->mu);
			continue;
		}
		pthread_mutex_unlock(&p->mu);
		t->fn(t->ctx, i);
		pthread_mutex_lock(&p->mu);
		finish(t);
	}
	pthread_mutex_unlock(&p->mu);
	return NULL;
}

wc_err wcc_pool_create(unsigned nthreads, wcc_pool **out)
{
	wcc_pool *p = calloc(1, sizeof(*p));
	if (!p)
		return wc_fail(WC_E_NOMEM, "cuda: thread pool");
	pthread_mutex_init(&p->mu, NULL);
	pthread_cond_init(&p->work, NULL);
	p->threads = calloc(nthreads ? nthreads : 1, sizeof(pthread_t));
	if (!p->threads) {
		free(p);
		return wc_fail(WC_E_NOMEM, "cuda: thread pool");
	}
	for (unsigned i = 0; i < nthreads; i++) {
		if (pthread_create(&p->threads[i], NULL, worker, p) != 0)
			break;
		p->nthreads++;
	}
	*out = p;
	return WC_OK;
}

void wcc_pool_destroy(wcc_pool *p)
{
	if (!p)
		return;
	pthread_mutex_lock(&p->mu);
	p->stop = 1;
	pthread_cond_broadcast(&p->work);
	pthread_mutex_unlock(&p->mu);
	for (unsigned i = 0; i < p->nthreads; i++)
		pthread_join(p->threads[i], NULL);
	pthread_cond_destroy(&p->work);
	pthread_mutex_destroy(&p->mu);
	free(p->threads);
	free(p);
}

void wcc_pool_for(wcc_pool *p, size_t n, void (*fn)(void *ctx, size_t i), void *ctx)
{
	if (n == 0)
		return;
	if (n == 1 || p->nthreads == 0) {
		for (size_t i = 0; i < n; i++)
			fn(ctx, i);
		return;
	}
	wcc_task t = { .fn = fn, .ctx = ctx, .n = n };
	pthread_cond_init(&t.finished, NULL);
	pthread_mutex_lock(&p->mu);
	wcc_task **tail = &p->tasks;
	while (*tail)
		tail = &(*tail)->link;
	*tail = &t;
	/* wake only the workers this task can use (the caller takes an index
	 * too): a broadcast for a task of 2 woke every worker
	 * (docs/BENCHMARKS-GPU.md, section 15) */
	for (size_t k = 1; k < n && k <= p->nthreads; k++)
		pthread_cond_signal(&p->work);
	/* work on our own task until it is fully claimed */
	while (t.next < t.n) {
		size_t i = t.next++;
		if (t.next == t.n) {
			/* unlink: we claimed its last index */
			wcc_task **pp = &p->tasks;
			while (*pp != &t)
				pp = &(*pp)->link;
			*pp = t.link;
		}
		pthread_mutex_unlock(&p->mu);
		fn(ctx, i);
		pthread_mutex_lock(&p->mu);
		finish(&t);
	}
	while (t.done < t.n)
		pthread_cond_wait(&t.finished, &p->mu);
	pthread_mutex_unlock(&p->mu);
	pthread_cond_destroy(&t.finished);
}
