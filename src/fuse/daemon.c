/* daemon.c - daemonize with a readiness pipe (daemon.h). */
#include "fuse/daemon.h"

#include "config.h"
#ifdef WC_SYSTEMD
#include <systemd/sd-daemon.h>
#endif

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

#include "core/wc_error.h"
#include "fuse/options.h"

static int status_fd = -1; /* the child's write end, -1 in the foreground */

int wcfs_daemonize(void)
{
	int p[2];
	if (pipe2(p, O_CLOEXEC) != 0)
		return -1;
	pid_t pid = fork();
	if (pid < 0) {
		close(p[0]);
		close(p[1]);
		return -1;
	}
	if (pid == 0) {
		close(p[0]);
		status_fd = p[1];
		setsid();
		if (chdir("/") != 0) {
			/* "/" always exists; nothing relies on the cwd anyway */
		}
		return 0;
	}
	close(p[1]);
	unsigned char rec[1 + 1024];
	size_t got = 0;
	for (;;) {
		ssize_t k = read(p[0], rec + got, sizeof rec - 1 - got);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			break;
		got += (size_t)k;
		if (got == sizeof rec - 1)
			break;
	}
	if (got == 0) {
		int st = 0;
		waitpid(pid, &st, 0);
		fprintf(stderr, "wcodecfs: the daemon exited before mounting (%s %d)\n",
			WIFSIGNALED(st) ? "signal" : "status",
			WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
		_exit(WCFS_EXIT_MOUNT);
	}
	rec[got] = '\0';
	if (rec[0] != WCFS_EXIT_OK) {
		fprintf(stderr, "wcodecfs: %s\n", (char *)rec + 1);
		waitpid(pid, NULL, 0);
	}
	_exit(rec[0]);
}

void wcfs_daemon_fail(int status, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	if (status_fd < 0) {
		fprintf(stderr, "wcodecfs: %s\n", msg);
		return;
	}
	unsigned char rec[1 + sizeof msg];
	rec[0] = (unsigned char)status;
	size_t n = strlen(msg);
	memcpy(rec + 1, msg, n);
	ssize_t k = write(status_fd, rec, 1 + n);
	(void)k;
	close(status_fd);
	status_fd = -1;
}

static void syslog_sink(int level, const char *msg, void *ctx)
{
	(void)ctx;
	syslog(level, "%s", msg);
}

static void fuse_syslog(enum fuse_log_level level, const char *fmt, va_list ap)
{
	vsyslog((int)level, fmt, ap);
}

/* -o log=FILE: every message appended to it, one line each, with the time
 * and the pid. */
static FILE *log_file;

static void file_line(const char *level, const char *msg)
{
	char when[32];
	time_t now = time(NULL);
	struct tm tm;
	strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&now, &tm));
	flockfile(log_file);
	fprintf(log_file, "%s wcodecfs[%ld]: %s: %s\n", when, (long)getpid(), level, msg);
	fflush(log_file);
	funlockfile(log_file);
}

static const char *level_name(int level)
{
	return level <= WC_LOG_ERR ? "error" : level == WC_LOG_WARN ? "warning" : level == WC_LOG_INFO ? "info" : "debug";
}

static void file_sink(int level, const char *msg, void *ctx)
{
	(void)ctx;
	file_line(level_name(level), msg);
}

static void fuse_file_log(enum fuse_log_level level, const char *fmt, va_list ap)
{
	char msg[1024];
	vsnprintf(msg, sizeof msg, fmt, ap);
	size_t n = strlen(msg);
	if (n && msg[n - 1] == '\n')
		msg[n - 1] = '\0';
	file_line(level_name((int)level), msg);
}

int wcfs_log_to_file(const char *path)
{
	int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0640);
	if (fd < 0)
		return errno;
	if (!(log_file = fdopen(fd, "a"))) {
		int err = errno;
		close(fd);
		return err;
	}
	wc_log_set_sink(file_sink, NULL);
	fuse_set_log_func(fuse_file_log);
	return 0;
}

void wcfs_notify(const char *state)
{
#ifdef WC_SYSTEMD
	sd_notify(0, state);
#else
	(void)state;
#endif
}

void wcfs_daemon_ready(void)
{
	if (status_fd < 0)
		return;
	if (!log_file) {
		openlog("wcodecfs", LOG_PID, LOG_DAEMON);
		wc_log_set_sink(syslog_sink, NULL);
		fuse_set_log_func(fuse_syslog);
	}
	unsigned char ok = WCFS_EXIT_OK;
	ssize_t k = write(status_fd, &ok, 1);
	(void)k;
	close(status_fd);
	status_fd = -1;
	int nul = open("/dev/null", O_RDWR);
	if (nul >= 0) {
		dup2(nul, 0);
		dup2(nul, 1);
		dup2(nul, 2);
		if (nul > 2)
			close(nul);
	}
}
