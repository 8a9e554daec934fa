/* fd_budget.c - a process-wide LRU of idle file descriptors under a limit
 * (fd_budget.h). */
#include "core/fd_budget.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned max_idle;           /* 0: no limit */
static unsigned nopen;              /* slots holding a descriptor */
static wc_fd_slot *lru_head, *lru_tail; /* idle open slots, least recent first */

static void lru_remove(wc_fd_slot *s)
{
	if (!s->on_lru)
		return;
	if (s->prev)
		s->prev->next = s->next;
	else
		lru_head = s->next;
	if (s->next)
		s->next->prev = s->prev;
	else
		lru_tail = s->prev;
	s->prev = s->next = NULL;
	s->on_lru = false;
}

static void lru_append(wc_fd_slot *s)
{
	s->prev = lru_tail;
	s->next = NULL;
	if (lru_tail)
		lru_tail->next = s;
	else
		lru_head = s;
	lru_tail = s;
	s->on_lru = true;
}

/* Close idle descriptors, least recent first, until `room` more fit under
 * the limit (or none is idle). Lock held. */
static void make_room(unsigned room)
{
	while (max_idle && nopen + room > max_idle && lru_head) {
		wc_fd_slot *s = lru_head;
		lru_remove(s);
		close(s->fd);
		s->fd = -1;
		nopen--;
	}
}

void wc_fd_budget_set_limit(unsigned limit)
{
	pthread_mutex_lock(&lock);
	max_idle = limit;
	make_room(0);
	pthread_mutex_unlock(&lock);
}

unsigned wc_fd_budget_open(void)
{
	pthread_mutex_lock(&lock);
	unsigned n = nopen;
	pthread_mutex_unlock(&lock);
	return n;
}

wc_err wc_fd_slot_init(wc_fd_slot *s, int fd, const char *path)
{
	memset(s, 0, sizeof *s);
	s->fd = -1;
	struct stat st;
	if (fstat(fd, &st) != 0)
		return wc_fail(WC_E_IO, "%s: %s", path, strerror(errno));
	if (!(s->path = strdup(path)))
		return wc_fail(WC_E_NOMEM, "out of memory");
	s->dev = st.st_dev;
	s->ino = st.st_ino;
	s->size = st.st_size;
	s->mtime = st.st_mtim;
	pthread_mutex_lock(&lock);
	make_room(1);
	s->fd = fd;
	nopen++;
	lru_append(s);
	pthread_mutex_unlock(&lock);
	return WC_OK;
}

wc_err wc_fd_slot_set_path(wc_fd_slot *s, const char *path)
{
	char *p = strdup(path);
	if (!p)
		return wc_fail(WC_E_NOMEM, "out of memory");
	pthread_mutex_lock(&lock);
	free(s->path);
	s->path = p;
	pthread_mutex_unlock(&lock);
	return WC_OK;
}

/* Open s->path again and check it is the file s had. Lock held: opening
 * a local file takes microseconds, and two readers of one slot must not
 * both open it. */
static wc_err reopen(wc_fd_slot *s)
{
	int fd = open(s->path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0)
		return wc_fail(WC_E_IO, "%s: reopening: %s", s->path, strerror(errno));
	struct stat st;
	if (fstat(fd, &st) != 0 || st.st_dev != s->dev || st.st_ino != s->ino || st.st_size != s->size ||
	    st.st_mtim.tv_sec != s->mtime.tv_sec || st.st_mtim.tv_nsec != s->mtime.tv_nsec) {
		close(fd);
		return wc_fail(WC_E_IO, "%s: the file changed since it was opened", s->path);
	}
	s->fd = fd;
	return WC_OK;
}

wc_err wc_fd_slot_acquire(wc_fd_slot *s, int *fd)
{
	wc_err e = WC_OK;
	pthread_mutex_lock(&lock);
	if (s->fd >= 0) {
		lru_remove(s);
	} else {
		make_room(1);
		if (!(e = reopen(s)))
			nopen++;
	}
	if (!e) {
		s->users++;
		*fd = s->fd;
	}
	pthread_mutex_unlock(&lock);
	return e;
}

void wc_fd_slot_release(wc_fd_slot *s)
{
	pthread_mutex_lock(&lock);
	if (--s->users == 0 && s->fd >= 0) {
		lru_append(s);
		make_room(0);
	}
	pthread_mutex_unlock(&lock);
}

void wc_fd_slot_destroy(wc_fd_slot *s)
{
	pthread_mutex_lock(&lock);
	lru_remove(s);
	if (s->fd >= 0) {
		close(s->fd);
		s->fd = -1;
		nopen--;
	}
	pthread_mutex_unlock(&lock);
	free(s->path);
	s->path = NULL;
}
