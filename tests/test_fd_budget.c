/* test_fd_budget.c - the descriptor budget (core/fd_budget.h): idle
 * descriptors beyond the limit are closed least recently used first, a
 * closed slot is opened again on acquire and reads the same file, a slot in
 * use is never closed, and a file replaced meanwhile is an error. */
#include <check.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check_run.h"
#include "core/fd_budget.h"

enum { NSLOTS = 6 };

static char dir[] = "/tmp/wc_fd_budget.XXXXXX";

static void path_of(int i, char *buf, size_t cap) { snprintf(buf, cap, "%s/f%d", dir, i); }

static void make_files(void)
{
	ck_assert_ptr_nonnull(mkdtemp(dir));
	for (int i = 0; i < NSLOTS; i++) {
		char p[256];
		path_of(i, p, sizeof p);
		FILE *f = fopen(p, "w");
		ck_assert_ptr_nonnull(f);
		fprintf(f, "file %d", i);
		fclose(f);
	}
}

static void remove_files(void)
{
	for (int i = 0; i < NSLOTS; i++) {
		char p[256];
		path_of(i, p, sizeof p);
		unlink(p);
	}
	rmdir(dir);
}

/* The first bytes read through slot s are "file i". */
static void reads_file(wc_fd_slot *s, int i)
{
	int fd;
	ck_assert_int_eq(wc_fd_slot_acquire(s, &fd), WC_OK);
	char buf[32] = {0}, want[32];
	snprintf(want, sizeof want, "file %d", i);
	ck_assert_int_eq(pread(fd, buf, sizeof buf - 1, 0), (ssize_t)strlen(want));
	ck_assert_str_eq(buf, want);
	wc_fd_slot_release(s);
}

START_TEST(idle_descriptors_stay_under_the_limit)
{
	make_files();
	wc_fd_budget_set_limit(2);
	wc_fd_slot s[NSLOTS];
	for (int i = 0; i < NSLOTS; i++) {
		char p[256];
		path_of(i, p, sizeof p);
		int fd = open(p, O_RDONLY | O_CLOEXEC);
		ck_assert_int_ge(fd, 0);
		ck_assert_int_eq(wc_fd_slot_init(&s[i], fd, p), WC_OK);
		ck_assert_uint_le(wc_fd_budget_open(), 2);
	}
	/* the most recent two are open, the others closed */
	ck_assert_int_lt(s[0].fd, 0);
	ck_assert_int_ge(s[NSLOTS - 1].fd, 0);
	/* every slot reads its own file, opened again where closed */
	for (int r = 0; r < 2; r++)
		for (int i = 0; i < NSLOTS; i++) {
			reads_file(&s[i], i);
			ck_assert_uint_le(wc_fd_budget_open(), 2);
		}
	/* slots in use keep their descriptors past the limit */
	int fds[3];
	for (int i = 0; i < 3; i++)
		ck_assert_int_eq(wc_fd_slot_acquire(&s[i], &fds[i]), WC_OK);
	ck_assert_uint_eq(wc_fd_budget_open(), 3);
	for (int i = 0; i < 3; i++) {
		char c;
		ck_assert_int_eq(pread(fds[i], &c, 1, 0), 1);
		wc_fd_slot_release(&s[i]);
	}
	ck_assert_uint_le(wc_fd_budget_open(), 2);
	/* a file replaced while its slot was closed: an error naming it */
	ck_assert_int_lt(s[0].fd, 0);
	char p[256], tmp[300];
	path_of(0, p, sizeof p);
	snprintf(tmp, sizeof tmp, "%s.new", p);
	FILE *f = fopen(tmp, "w");
	ck_assert_ptr_nonnull(f);
	fprintf(f, "file 0");
	fclose(f);
	ck_assert_int_eq(rename(tmp, p), 0);
	int fd;
	ck_assert_int_eq(wc_fd_slot_acquire(&s[0], &fd), WC_E_IO);
	ck_assert_msg(strstr(wc_last_detail(), "changed"), "%s", wc_last_detail());
	for (int i = 0; i < NSLOTS; i++)
		wc_fd_slot_destroy(&s[i]);
	ck_assert_uint_eq(wc_fd_budget_open(), 0);
	wc_fd_budget_set_limit(0);
	remove_files();
}
END_TEST

int main(void)
{
	Suite *s = suite_create("fd_budget");
	TCase *tc = tcase_create("core");
	tcase_add_test(tc, idle_descriptors_stay_under_the_limit);
	suite_add_tcase(s, tc);
	return check_run(s);
}
