/* node/site: reading the last run's notes (site_read_rel) and what the
 * alias map's merge does when they cannot be read: an absent file is an
 * empty start, a file that cannot be read is an error, never taken for
 * an empty one (the map would lose every record not rendered this run). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "site_int.h"
#include "test_util.h"

/* A fresh directory in dir and a run's state s over it. */
static void setup(char dir[64], site_t *s)
{
	snprintf(dir, 64, "/tmp/test_site_read.XXXXXX");
	if (!mkdtemp(dir))
		dir[0] = 0;
	memset(s, 0, sizeof(*s));
	snprintf(s->dir, sizeof(s->dir), "%s", dir);
}

static void put_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "wb");
	if (f) {
		fputs(text, f);
		fclose(f);
	}
}

TEST(read_rel, "reads a file, says absent for a missing one and fails on one it cannot read")
{
	char dir[64], path[256];
	site_t s;
	setup(dir, &s);
	CHECK(dir[0] != 0);
	pith_buf_t b = PITH_BUF_INIT;
	snprintf(path, sizeof(path), "%s/f", dir);
	put_file(path, "hello\n");
	CHECK_INT_EQ(site_read_rel(&s, "f", &b), 0);
	CHECK_INT_EQ((long long)b.len, 6);
	CHECK_INT_EQ(site_read_rel(&s, "missing", &b), 1);
	CHECK_INT_EQ((long long)b.len, 0);
	/* a directory opens but does not read (EISDIR): an error, not empty */
	snprintf(path, sizeof(path), "%s/d", dir);
	CHECK(!mkdir(path, 0755));
	CHECK_INT_EQ(site_read_rel(&s, "d", &b), -1);
	rmdir(path);
	snprintf(path, sizeof(path), "%s/f", dir);
	unlink(path);
	rmdir(dir);
	pith_buf_release(&b);
}

TEST(aliases_unreadable, "the alias map's merge fails, writing nothing, when the last run's map cannot be read")
{
	char dir[64], path[256];
	site_t s;
	setup(dir, &s);
	CHECK(dir[0] != 0);
	pith_err_t err = {0};
	s.err = &err;
	s.changed = idmap_new();
	CHECK(s.changed != NULL);
	snprintf(path, sizeof(path), "%s/" SITE_META_DIR, dir);
	CHECK(!mkdir(path, 0755));
	/* the last run's claims list, and a map that cannot be read */
	snprintf(path, sizeof(path), "%s/" SITE_META_DIR "/claims", dir);
	put_file(path, "AAAAAAAAAAAAAAAAAAAAAAAAAA k1\nBBBBBBBBBBBBBBBBBBBBBBBBBB k1\n");
	snprintf(path, sizeof(path), "%s/" SITE_ALIAS_MAP, dir);
	CHECK(!mkdir(path, 0755));
	CHECK(site_aliases_export(&s) != 0);
	CHECK(strstr(err.msg, "cannot read") != NULL);
	CHECK_INT_EQ((long long)s.s.written, 0);
	rmdir(path);
	snprintf(path, sizeof(path), "%s/" SITE_META_DIR "/claims", dir);
	unlink(path);
	snprintf(path, sizeof(path), "%s/" SITE_META_DIR, dir);
	rmdir(path);
	rmdir(dir);
	idmap_free(s.changed);
	pith_buf_release(&s.gz);
	pith_buf_release(&s.old);
}

int main(void)
{
	RUN(read_rel);
	RUN(aliases_unreadable);
	return test_done();
}
