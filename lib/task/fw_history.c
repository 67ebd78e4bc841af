/*
 * fw_history.c — tasks from a repository's commits, context bundles and
 * their mounting (see fw_history.h).
 */
#define PCRE2_CODE_UNIT_WIDTH 8

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <git2.h>
#include <jansson.h>
#include <pcre2.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "fw_env.h"
#include "fw_base.h"
#include "fw_history.h"
#include "fw_mutate.h"
#include "fw_store.h"
#include "fw_task.h"
#include "fw_workspace.h"

static const char *gerr(void)
{
	const git_error *e = git_error_last();
	return e && e->message ? e->message : "unknown error";
}

static int is_hex(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!isxdigit((unsigned char)s[i]))
			return 0;
	return 1;
}

/* ---- dates ------------------------------------------------------------------ */

/* Reads exactly k digits at *p (within end); -1 when they are not there. */
static int digits(const char **p, const char *end, int k)
{
	int v = 0;
	for (int i = 0; i < k; i++, (*p)++) {
		if (*p >= end || !isdigit((unsigned char)**p))
			return -1;
		v = v * 10 + (**p - '0');
	}
	return v;
}

int fw_time_parse(const char *s, size_t n, int64_t *t)
{
	const char *p = s, *end = s + n;
	struct tm tm = { 0 };
	int y = digits(&p, end, 4), mo, d, h = 0, mi = 0, sec = 0, off = 0;
	if (y < 0 || p >= end || *p++ != '-' || (mo = digits(&p, end, 2)) < 1 || mo > 12 ||
	    p >= end || *p++ != '-' || (d = digits(&p, end, 2)) < 1 || d > 31)
		return -1;
	if (p < end && (*p == 'T' || *p == ' ')) {
		p++;
		if ((h = digits(&p, end, 2)) < 0 || h > 23 || p >= end || *p++ != ':' ||
		    (mi = digits(&p, end, 2)) < 0 || mi > 59)
			return -1;
		if (p < end && *p == ':') {
			p++;
			if ((sec = digits(&p, end, 2)) < 0 || sec > 60)
				return -1;
			if (p < end && (*p == '.' || *p == ',')) {
				p++;
				if (p >= end || !isdigit((unsigned char)*p))
					return -1;
				while (p < end && isdigit((unsigned char)*p))
					p++;
			}
		}
		if (p < end && *p == 'Z') {
			p++;
		} else if (p < end && (*p == '+' || *p == '-')) {
			int sign = *p++ == '-' ? -1 : 1, oh, om = 0;
			if ((oh = digits(&p, end, 2)) < 0 || oh > 23)
				return -1;
			if (p < end && *p == ':')
				p++;
			if (p < end && (om = digits(&p, end, 2)) < 0)
				return -1;
			off = sign * (oh * 3600 + om * 60);
		}
	}
	if (p != end)
		return -1;
	tm.tm_year = y - 1900;
	tm.tm_mon = mo - 1;
	tm.tm_mday = d;
	tm.tm_hour = h;
	tm.tm_min = mi;
	tm.tm_sec = sec;
	time_t v = timegm(&tm);
	/* timegm normalises 2024-02-30 to March: such a day is no date */
	if (tm.tm_mday != d || tm.tm_mon != mo - 1)
		return -1;
	*t = (int64_t)v - off;
	return 0;
}

void fw_time_format(int64_t t, char *out)
{
	time_t v = (time_t)t;
	struct tm tm;
	if (!gmtime_r(&v, &tm))
		memset(&tm, 0, sizeof tm);
	char b[64];
	snprintf(b, sizeof b, "%04d-%02d-%02dT%02d:%02d:%02dZ", tm.tm_year + 1900, tm.tm_mon + 1,
		 tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec);
	memcpy(out, b, FW_TIME_LEN - 1);
	out[FW_TIME_LEN - 1] = '\0';
}

/* ---- context bundles ------------------------------------------------------------ */

struct bundle {
	char *commit; /* a hex prefix, lowercase */
	struct fw_context_file *f;
	size_t n;
};

struct fw_context_map {
	struct bundle *b;
	size_t n;
};

static void files_free(struct fw_context_file *f, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(f[i].kind);
		free(f[i].name);
		free(f[i].path);
	}
	free(f);
}

void fw_context_free(struct fw_context_map *m)
{
	if (!m)
		return;
	for (size_t i = 0; i < m->n; i++) {
		free(m->b[i].commit);
		files_free(m->b[i].f, m->b[i].n);
	}
	free(m->b);
	free(m);
}

/* A name a context file may have under FW_CONTEXT_DIR. */
static int good_name(const char *s)
{
	return *s && !strchr(s, '/') && strcmp(s, ".") && strcmp(s, "..") && strlen(s) < 256;
}

static int good_kind(const char *s)
{
	if (!*s || strlen(s) > 32)
		return 0;
	for (; *s; s++)
		if (!islower((unsigned char)*s) && !isdigit((unsigned char)*s) && *s != '-')
			return 0;
	return 1;
}

struct fw_context_map *fw_context_load(const char *dir, char *err, size_t errlen)
{
	char path[4200];
	snprintf(path, sizeof path, "%s/context.json", dir);
	json_error_t je;
	json_t *root = json_load_file(path, 0, &je);
	struct fw_context_map *m = NULL;
	if (!root) {
		fw_seterr(err, errlen, "%s: line %d: %s", path, je.line, je.text);
		return NULL;
	}
	if (!json_is_object(root)) {
		fw_seterr(err, errlen, "%s: not an object of commits", path);
		goto fail;
	}
	m = calloc(1, sizeof *m);
	if (!m || !(m->b = calloc(json_object_size(root) + 1, sizeof *m->b)))
		goto nomem;
	const char *key;
	json_t *val;
	json_object_foreach(root, key, val) {
		size_t kl = strlen(key);
		if (kl < 7 || kl > 40 || !is_hex(key, kl)) {
			fw_seterr(err, errlen, "%s: '%s' is no commit id (7 to 40 hex digits)", path, key);
			goto fail;
		}
		if (!json_is_array(val)) {
			fw_seterr(err, errlen, "%s: %s: not an array of files", path, key);
			goto fail;
		}
		struct bundle *b = &m->b[m->n++];
		if (!(b->commit = strdup(key)) ||
		    !(b->f = calloc(json_array_size(val) + 1, sizeof *b->f)))
			goto nomem;
		for (char *c = b->commit; *c; c++)
			*c = (char)tolower((unsigned char)*c);
		size_t i;
		json_t *e;
		json_array_foreach(val, i, e) {
			const char *kind = json_string_value(json_object_get(e, "kind"));
			const char *name = json_string_value(json_object_get(e, "name"));
			const char *rel = json_string_value(json_object_get(e, "path"));
			if (!kind || !name || !good_kind(kind) || !good_name(name)) {
				fw_seterr(err, errlen, "%s: %s: file %zu: want a kind (a lowercase word) "
					      "and a name (no '/')", path, key, i + 1);
				goto fail;
			}
			for (size_t k = 0; k < b->n; k++)
				if (strcmp(b->f[k].name, name) == 0) {
					fw_seterr(err, errlen, "%s: %s: the name '%s' twice", path, key,
					       name);
					goto fail;
				}
			struct fw_context_file *f = &b->f[b->n++];
			char full[8400];
			snprintf(full, sizeof full, "%s/%s", dir, rel ? rel : name);
			if (!(f->kind = strdup(kind)) || !(f->name = strdup(name)) ||
			    !(f->path = strdup(full)))
				goto nomem;
			struct stat st;
			if (stat(full, &st) < 0 || !S_ISREG(st.st_mode) || access(full, R_OK) < 0) {
				fw_seterr(err, errlen, "%s: %s: cannot read '%s'", path, key, full);
				goto fail;
			}
		}
	}
	json_decref(root);
	return m;
nomem:
	fw_seterr(err, errlen, "out of memory");
fail:
	json_decref(root);
	fw_context_free(m);
	return NULL;
}

const struct fw_context_file *fw_context_find(const struct fw_context_map *m,
					      const char *commit_hex, size_t *n)
{
	*n = 0;
	for (size_t i = 0; m && i < m->n; i++)
		if (strncmp(commit_hex, m->b[i].commit, strlen(m->b[i].commit)) == 0) {
			*n = m->b[i].n;
			return m->b[i].f;
		}
	return NULL;
}

static char *mp_strdup(struct fw_mpv m, const char *key)
{
	struct fw_mpv v;
	const char *s;
	size_t n;
	if (fw_mp_get(m, key, &v) != 1 || fw_mp_str(v, &s, &n) < 0)
		return NULL;
	return strndup(s, n);
}

int fw_context_mount(struct fw_context_mount *m, struct fw_store *s, struct fw_mpv task,
		     const char *const *mounts, char *err, size_t errlen)
{
	size_t nm = 0;
	memset(m, 0, sizeof *m);
	while (mounts && mounts[nm])
		nm++;
	if (!(m->binds = calloc(nm + 2, sizeof *m->binds))) {
		fw_seterr(err, errlen, "out of memory");
		return -1;
	}
	for (size_t i = 0; i < nm; i++)
		m->binds[i] = mounts[i];
	struct fw_mpv ctx, e;
	struct fw_mp_iter it;
	if (fw_mp_get(task, "context", &ctx) != 1 || fw_mp_iter_init(&it, ctx) <= 0)
		return 0;
	const char *tmp = getenv("TMPDIR");
	snprintf(m->dir, sizeof m->dir, "%s/fw-context-XXXXXX", tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(m->dir)) {
		fw_seterr(err, errlen, "%s: %s", m->dir, strerror(errno));
		m->dir[0] = '\0';
		return -1;
	}
	git_repository *r = fw_store_repo(s);
	int k;
	while ((k = fw_mp_iter_next(&it, &e)) == 1) {
		char *name = mp_strdup(e, "name"), *blob = mp_strdup(e, "blob");
		git_oid id;
		git_blob *b = NULL;
		int ok = name && blob && good_name(name) && strlen(blob) == 40 &&
			 git_oid_fromstr(&id, blob) == 0;
		if (!ok) {
			fw_seterr(err, errlen, "a context entry without a good name and blob");
		} else if (git_blob_lookup(&b, r, &id) < 0) {
			fw_seterr(err, errlen, "context '%s': no blob %s in the store", name, blob);
			ok = 0;
		} else {
			char p[4400];
			snprintf(p, sizeof p, "%s/%s", m->dir, name);
			FILE *f = fopen(p, "wbx");
			size_t len = (size_t)git_blob_rawsize(b);
			if (!f || fwrite(git_blob_rawcontent(b), 1, len, f) != len || fclose(f)) {
				fw_seterr(err, errlen, "%s: %s", p, strerror(errno));
				ok = 0;
			} else {
				chmod(p, 0444);
			}
		}
		git_blob_free(b);
		free(name);
		free(blob);
		if (!ok)
			return -1;
	}
	if (k < 0) {
		fw_seterr(err, errlen, "a bad context[] array");
		return -1;
	}
	chmod(m->dir, 0555);
	snprintf(m->bind, sizeof m->bind, "%s:%s", m->dir, FW_CONTEXT_DIR);
	m->binds[nm] = m->bind;
	return 0;
}

void fw_context_unmount(struct fw_context_mount *m)
{
	if (m->dir[0]) {
		chmod(m->dir, 0700);
		fw_rmtree(m->dir);
	}
	free(m->binds);
	memset(m, 0, sizeof *m);
}

/* ---- commits ------------------------------------------------------------------------- */

static const char *const reason_names[FW_HIST_NREASONS] = {
	"merge", "root", "filtered", "no-tests", "no-code", "too-large", "broken",
	"build-failed", "timeout", "no-f2p", "flaky", "empty-patch-passes", "leak",
};

const char *fw_history_reason_name(enum fw_history_reason r)
{
	return r < FW_HIST_NREASONS ? reason_names[r] : "kept";
}

/* Documentation: changed with the code, but no code. */
static int is_doc_path(const char *path)
{
	const char *base = strrchr(path, '/');
	base = base ? base + 1 : path;
	static const char *const pre[] = { "README", "CHANGELOG", "CHANGES", "NEWS", "LICENSE",
					   "COPYING", "AUTHORS", "HISTORY", NULL };
	for (size_t i = 0; pre[i]; i++)
		if (strncasecmp(base, pre[i], strlen(pre[i])) == 0)
			return 1;
	static const char *const ext[] = { ".md", ".rst", ".txt", ".adoc", NULL };
	size_t n = strlen(base);
	for (size_t i = 0; ext[i]; i++) {
		size_t k = strlen(ext[i]);
		if (n > k && strcasecmp(base + n - k, ext[i]) == 0)
			return 1;
	}
	return strncmp(path, "docs/", 5) == 0 || strncmp(path, "doc/", 4) == 0;
}

static int under(const char *path, const char *prefix)
{
	size_t k = strlen(prefix);
	while (k && prefix[k - 1] == '/')
		k--;
	return k == 0 || (strncmp(path, prefix, k) == 0 && (path[k] == '\0' || path[k] == '/'));
}

/* One commit to validate. */
struct cand {
	char commit[FW_OID_HEX], parent[FW_OID_HEX];
	char tree[FW_OID_HEX], task_tree[FW_OID_HEX];
	int64_t time;
	char *message, *subject;
	struct fw_buf added;     /* the lines the code change adds, for the audit */
	struct fw_target *targets; /* the code files changed (symbol NULL) */
	size_t ntargets;
	/* results */
	int done;
	enum fw_history_reason reason;
	char detail[512];
	struct fw_buf rec;
};

static void cand_release(struct cand *c)
{
	free(c->message);
	free(c->subject);
	fw_buf_free(&c->added);
	for (size_t i = 0; i < c->ntargets; i++)
		free(c->targets[i].path);
	free(c->targets);
	fw_buf_free(&c->rec);
}

/* What a commit's diff says: its test edits and its code change. */
struct change {
	struct fw_edit *edits; /* test files: new content, or deletion */
	size_t nedits;
	size_t ncode, nlines, nunder, ntests;
	struct cand *c;
	int failed;
};

static int add_target(struct cand *c, const char *path, int start, int end)
{
	struct fw_target *t = realloc(c->targets, (c->ntargets + 1) * sizeof *t);
	if (!t)
		return -1;
	c->targets = t;
	t = &t[c->ntargets];
	if (!(t->path = strdup(path)))
		return -1;
	t->symbol = NULL;
	t->lang = fw_lang_of_path(path);
	t->start = start;
	t->end = end;
	c->ntargets++;
	return 0;
}

/* Reads the diff of one commit.  Returns 0, or -1 with a message in err. */
static int read_change(git_repository *r, git_diff *d, const struct fw_history_opts *o,
		       struct change *ch, char *err, size_t errlen)
{
	size_t nd = git_diff_num_deltas(d);
	if (!(ch->edits = calloc(nd + 1, sizeof *ch->edits))) {
		fw_seterr(err, errlen, "out of memory");
		return -1;
	}
	for (size_t i = 0; i < nd; i++) {
		const git_diff_delta *dl = git_diff_get_delta(d, i);
		int gone = dl->status == GIT_DELTA_DELETED;
		const char *path = gone ? dl->old_file.path : dl->new_file.path;
		if (dl->status == GIT_DELTA_UNMODIFIED)
			continue;
		if (fw_is_test_path(path)) {
			struct fw_edit *e = &ch->edits[ch->nedits];
			e->path = strdup(path);
			if (!e->path)
				goto nomem;
			ch->nedits++;
			ch->ntests += !o->test_paths || !o->test_paths[0];
			for (size_t k = 0; o->test_paths && o->test_paths[k]; k++)
				if (under(path, o->test_paths[k])) {
					ch->ntests++;
					break;
				}
			if (gone)
				continue;
			git_blob *b;
			if (git_blob_lookup(&b, r, &dl->new_file.id) < 0) {
				fw_seterr(err, errlen, "%s: %s", path, gerr());
				return -1;
			}
			size_t len = (size_t)git_blob_rawsize(b);
			char *data = malloc(len + 1);
			if (!data) {
				git_blob_free(b);
				goto nomem;
			}
			memcpy(data, git_blob_rawcontent(b), len);
			data[len] = '\0';
			git_blob_free(b);
			e->data = data;
			e->len = len;
			continue;
		}
		if (is_doc_path(path))
			continue;
		ch->ncode++;
		for (size_t k = 0; o->paths && o->paths[k]; k++)
			if (under(path, o->paths[k]) ||
			    (dl->status == GIT_DELTA_RENAMED && under(dl->old_file.path, o->paths[k]))) {
				ch->nunder++;
				break;
			}
		git_patch *p = NULL;
		if (git_patch_from_diff(&p, d, i) < 0) {
			fw_seterr(err, errlen, "%s: %s", path, gerr());
			return -1;
		}
		int lo = 0, hi = 0;
		size_t nh = p ? git_patch_num_hunks(p) : 0;
		for (size_t h = 0; h < nh; h++) {
			const git_diff_hunk *hk;
			size_t nl;
			if (git_patch_get_hunk(&hk, &nl, p, h) < 0)
				continue;
			int a = gone ? hk->old_start : hk->new_start;
			int b = a + (gone ? hk->old_lines : hk->new_lines) - 1;
			if (!lo || a < lo)
				lo = a;
			if (b > hi)
				hi = b;
			for (size_t l = 0; l < nl; l++) {
				const git_diff_line *ln;
				if (git_patch_get_line_in_hunk(&ln, p, h, l) < 0)
					continue;
				if (ln->origin == GIT_DIFF_LINE_ADDITION ||
				    ln->origin == GIT_DIFF_LINE_DELETION)
					ch->nlines++;
				if (ln->origin == GIT_DIFF_LINE_ADDITION &&
				    fw_buf_append(&ch->c->added, ln->content, ln->content_len) < 0) {
					git_patch_free(p);
					goto nomem;
				}
			}
		}
		git_patch_free(p);
		if (add_target(ch->c, path, lo > 0 ? lo : 1, hi >= lo && hi > 0 ? hi : 1) < 0)
			goto nomem;
	}
	return 0;
nomem:
	fw_seterr(err, errlen, "out of memory");
	return -1;
}

static void change_free(struct change *ch)
{
	for (size_t i = 0; i < ch->nedits; i++) {
		free((char *)ch->edits[i].path);
		free((char *)ch->edits[i].data);
	}
	free(ch->edits);
}

struct job {
	const struct fw_history_opts *o;
	const char *repo;
	struct cand *c;
	size_t nc, cap, next, ndone;
	pthread_mutex_t mu;
	int fatal;
	char fatal_msg[600];
};

static int push_cand(struct job *j, struct cand **out)
{
	if (j->nc == j->cap) {
		size_t cap = j->cap ? 2 * j->cap : 32;
		struct cand *c = realloc(j->c, cap * sizeof *c);
		if (!c)
			return -1;
		j->c = c;
		j->cap = cap;
	}
	*out = &j->c[j->nc];
	memset(*out, 0, sizeof **out);
	return 0;
}

static void tell(fw_history_note_fn note, void *ctx, struct fw_history_tally *t,
		 const char *hex, const char *subject, enum fw_history_reason r, const char *detail)
{
	t->why[r]++;
	if (note)
		note(ctx, hex, subject, r, detail);
}

/*
 * Walks the commits and keeps the candidates in j->c, their trees copied
 * into s.  Returns 0 or -1.
 */
static int scan(struct job *j, struct fw_store *s, struct fw_history_tally *t,
		fw_history_note_fn note, void *ctx, char *err, size_t errlen)
{
	const struct fw_history_opts *o = j->o;
	git_repository *r = NULL;
	git_revwalk *w = NULL;
	pcre2_code *re = NULL;
	pcre2_match_data *md = NULL;
	int rc = -1;
	git_oid id;

	if (git_repository_open_ext(&r, j->repo, GIT_REPOSITORY_OPEN_NO_SEARCH, NULL) < 0) {
		fw_seterr(err, errlen, "not a git repository: %s", gerr());
		goto out;
	}
	if (o->grep) {
		int ec;
		PCRE2_SIZE eo;
		re = pcre2_compile((PCRE2_SPTR)o->grep, PCRE2_ZERO_TERMINATED,
				   PCRE2_CASELESS | PCRE2_UTF | PCRE2_MATCH_INVALID_UTF, &ec, &eo, NULL);
		if (!re || !(md = pcre2_match_data_create_from_pattern(re, NULL))) {
			PCRE2_UCHAR msg[256] = "out of memory";
			if (!re)
				pcre2_get_error_message(ec, msg, sizeof msg);
			fw_seterr(err, errlen, "bad pattern '%s': %s", o->grep, (char *)msg);
			goto out;
		}
	}
	const char *rev = o->rev && *o->rev ? o->rev : "HEAD";
	if (git_revwalk_new(&w, r) < 0 ||
	    git_revwalk_sorting(w, GIT_SORT_TOPOLOGICAL | GIT_SORT_TIME) < 0) {
		fw_seterr(err, errlen, "%s", gerr());
		goto out;
	}
	int pushed;
	if (strstr(rev, "..")) {
		pushed = git_revwalk_push_range(w, rev) == 0;
	} else {
		git_object *ob = NULL, *pc = NULL;
		pushed = git_revparse_single(&ob, r, rev) == 0 &&
			 git_object_peel(&pc, ob, GIT_OBJECT_COMMIT) == 0 &&
			 git_revwalk_push(w, git_object_id(pc)) == 0;
		git_object_free(pc);
		git_object_free(ob);
	}
	if (!pushed) {
		fw_seterr(err, errlen, "no revision '%s': %s", rev, gerr());
		goto out;
	}
	while (git_revwalk_next(&id, w) == 0) {
		git_commit *c = NULL, *pc = NULL;
		git_tree *ct = NULL, *pt = NULL;
		git_diff *d = NULL;
		struct change ch = { 0 };
		struct cand tmp = { 0 }, *cd = &tmp;
		char hex[FW_OID_HEX];
		int bad = 0;

		git_oid_tostr(hex, sizeof hex, &id);
		t->scanned++;
		if (git_commit_lookup(&c, r, &id) < 0) {
			fw_seterr(err, errlen, "commit %s: %s", hex, gerr());
			goto out;
		}
		const char *subject = git_commit_summary(c);
		const char *msg = git_commit_message(c);
		int64_t when = (int64_t)git_commit_time(c);
		unsigned np = git_commit_parentcount(c);
		if (np != 1) {
			tell(note, ctx, t, hex, subject, np ? FW_HIST_MERGE : FW_HIST_ROOT,
			     np ? "a merge commit" : "no parent");
			goto next;
		}
		if ((o->since && when < o->since) || (o->until && when > o->until)) {
			tell(note, ctx, t, hex, subject, FW_HIST_FILTERED, "outside --since/--until");
			goto next;
		}
		if (re && pcre2_match(re, (PCRE2_SPTR)(msg ? msg : ""), PCRE2_ZERO_TERMINATED, 0, 0,
				      md, NULL) < 0) {
			tell(note, ctx, t, hex, subject, FW_HIST_FILTERED, "the message does not match");
			goto next;
		}
		if (o->shard_n > 1 && fw_hash64(hex, 40) % o->shard_n != o->shard_k) {
			tell(note, ctx, t, hex, subject, FW_HIST_FILTERED, "another shard");
			goto next;
		}
		git_diff_options dopt;
		git_diff_options_init(&dopt, GIT_DIFF_OPTIONS_VERSION);
		if (git_commit_parent(&pc, c, 0) < 0 || git_commit_tree(&ct, c) < 0 ||
		    git_commit_tree(&pt, pc) < 0 ||
		    git_diff_tree_to_tree(&d, r, pt, ct, &dopt) < 0) {
			fw_seterr(err, errlen, "commit %s: %s", hex, gerr());
			bad = 1;
			goto next;
		}
		ch.c = cd;
		if (read_change(r, d, o, &ch, err, errlen) < 0) {
			bad = 1;
			goto next;
		}
		char why[128];
		if (ch.ntests == 0) {
			tell(note, ctx, t, hex, subject, FW_HIST_NO_TESTS, "no test file changes");
			goto next;
		}
		if (ch.ncode == 0) {
			tell(note, ctx, t, hex, subject, FW_HIST_NO_CODE, "only tests and docs change");
			goto next;
		}
		if (o->paths && o->paths[0] && ch.nunder == 0) {
			tell(note, ctx, t, hex, subject, FW_HIST_FILTERED, "no code below --path");
			goto next;
		}
		if ((o->max_files && ch.ncode > o->max_files) ||
		    (o->max_lines && ch.nlines > o->max_lines)) {
			snprintf(why, sizeof why, "%zu code files, %zu lines changed", ch.ncode,
				 ch.nlines);
			tell(note, ctx, t, hex, subject, FW_HIST_TOO_LARGE, why);
			goto next;
		}
		/* a candidate: both trees into the store, and the task tree */
		char ptree[FW_OID_HEX];
		git_oid_tostr(cd->commit, sizeof cd->commit, &id);
		git_oid_tostr(cd->parent, sizeof cd->parent, git_commit_id(pc));
		if (fw_store_import(s, j->repo, cd->commit, cd->tree, NULL, NULL, err, errlen) < 0 ||
		    fw_store_import(s, j->repo, cd->parent, ptree, NULL, NULL, err, errlen) < 0 ||
		    fw_store_edit(s, ptree, ch.edits, ch.nedits, cd->task_tree, err, errlen) < 0) {
			bad = 1;
			goto next;
		}
		cd->time = when;
		cd->message = strdup(msg ? msg : "");
		cd->subject = strdup(subject ? subject : "");
		struct cand *slot;
		if (!cd->message || !cd->subject || fw_buf_append(&cd->added, "", 1) < 0 ||
		    push_cand(j, &slot) < 0) {
			fw_seterr(err, errlen, "out of memory");
			bad = 1;
			goto next;
		}
		*slot = tmp;
		j->nc++;
		cd = NULL;
next:
		if (cd)
			cand_release(cd);
		change_free(&ch);
		git_diff_free(d);
		git_tree_free(ct);
		git_tree_free(pt);
		git_commit_free(pc);
		git_commit_free(c);
		if (bad)
			goto out;
	}
	rc = 0;
out:
	pcre2_match_data_free(md);
	pcre2_code_free(re);
	git_revwalk_free(w);
	git_repository_free(r);
	return rc;
}

/* ---- the future-object audit ------------------------------------------------------------ */

struct oidset {
	git_oid *v;
	size_t n, cap;
};

static int oidset_add(struct oidset *s, const git_oid *id)
{
	if (s->n == s->cap) {
		size_t cap = s->cap ? 2 * s->cap : 256;
		git_oid *v = realloc(s->v, cap * sizeof *v);
		if (!v)
			return -1;
		s->v = v;
		s->cap = cap;
	}
	git_oid_cpy(&s->v[s->n++], id);
	return 0;
}

static int oid_cmp(const void *a, const void *b)
{
	return git_oid_cmp(a, b);
}

static void oidset_seal(struct oidset *s)
{
	if (s->n > 1)
		qsort(s->v, s->n, sizeof *s->v, oid_cmp);
}

static int oidset_has(const struct oidset *s, const git_oid *id)
{
	return s->n && bsearch(id, s->v, s->n, sizeof *s->v, oid_cmp) != NULL;
}

struct walk_ctx {
	struct oidset *trees, *blobs;
	int failed;
};

static int walk_cb(const char *root, const git_tree_entry *e, void *payload)
{
	struct walk_ctx *w = payload;
	git_object_t ty = git_tree_entry_type(e);
	struct oidset *set = ty == GIT_OBJECT_TREE ? w->trees : ty == GIT_OBJECT_BLOB ? w->blobs
										     : NULL;
	if (set && oidset_add(set, git_tree_entry_id(e)) < 0) {
		w->failed = 1;
		return -1;
	}
	return 0;
}

/* Adds the trees (may be NULL) and blobs of tree id of r. */
static int tree_objects(git_repository *r, const git_oid *id, struct oidset *trees,
			struct oidset *blobs)
{
	git_tree *t = NULL;
	struct walk_ctx w = { trees, blobs, 0 };
	int rc = -1;
	if (git_tree_lookup(&t, r, id) < 0)
		return -1;
	if ((!trees || oidset_add(trees, id) == 0) &&
	    git_tree_walk(t, GIT_TREEWALK_PRE, walk_cb, &w) == 0 && !w.failed)
		rc = 0;
	git_tree_free(t);
	return rc;
}

struct odb_ctx {
	git_odb *odb;
	const struct oidset *trees, *blobs;
	const git_oid *head;
	struct fw_strlist *found;
	size_t n;
	int failed;
};

static int odb_cb(const git_oid *id, void *payload)
{
	struct odb_ctx *c = payload;
	size_t len;
	git_object_t ty;
	char hex[FW_OID_HEX], msg[128];
	if (git_odb_read_header(&len, &ty, c->odb, id) < 0) {
		c->failed = 1;
		return -1;
	}
	int ok = (ty == GIT_OBJECT_COMMIT && git_oid_equal(id, c->head)) ||
		 (ty == GIT_OBJECT_TREE && oidset_has(c->trees, id)) ||
		 (ty == GIT_OBJECT_BLOB && oidset_has(c->blobs, id));
	if (ok)
		return 0;
	git_oid_tostr(hex, sizeof hex, id);
	snprintf(msg, sizeof msg, "object %s: a %s that is not of the task tree", hex,
		 git_object_type2string(ty));
	c->n++;
	if (fw_strlist_add(c->found, msg) < 0) {
		c->failed = 1;
		return -1;
	}
	return 0;
}

/*
 * Every object of the workspace at ws must be its HEAD commit (with no
 * parent), a tree reachable from that commit, or a blob of task tree
 * tree_hex in s.  Appends each other object to found.  Returns their
 * number, or -1 with a message in err.
 */
static int audit_objects(const char *ws, struct fw_store *s, const char *tree_hex,
			 struct fw_strlist *found, char *err, size_t errlen)
{
	git_repository *r = NULL;
	git_commit *head = NULL;
	git_odb *odb = NULL;
	struct oidset trees = { 0 }, blobs = { 0 };
	git_oid tid, hid;
	int rc = -1;
	if (git_oid_fromstr(&tid, tree_hex) < 0 ||
	    tree_objects(fw_store_repo(s), &tid, NULL, &blobs) < 0) {
		fw_seterr(err, errlen, "task tree %s: %s", tree_hex, gerr());
		goto out;
	}
	if (git_repository_open_ext(&r, ws, GIT_REPOSITORY_OPEN_NO_SEARCH, NULL) < 0 ||
	    git_reference_name_to_id(&hid, r, "HEAD") < 0 || git_commit_lookup(&head, r, &hid) < 0 ||
	    tree_objects(r, git_commit_tree_id(head), &trees, NULL) < 0 ||
	    git_repository_odb(&odb, r) < 0) {
		fw_seterr(err, errlen, "workspace %s: %s", ws, gerr());
		goto out;
	}
	oidset_seal(&trees);
	oidset_seal(&blobs);
	if (git_commit_parentcount(head) != 0) {
		fw_strlist_add(found, "the workspace commit has a parent");
		rc = 1;
		goto out;
	}
	struct odb_ctx c = { odb, &trees, &blobs, &hid, found, 0, 0 };
	if (git_odb_foreach(odb, odb_cb, &c) < 0 && c.failed) {
		fw_seterr(err, errlen, "workspace %s: %s", ws, gerr());
		goto out;
	}
	rc = (int)c.n;
out:
	free(trees.v);
	free(blobs.v);
	git_odb_free(odb);
	git_commit_free(head);
	git_repository_free(r);
	return rc;
}

/* ---- validation ---------------------------------------------------------------------------- */

static enum fw_history_reason reject(struct cand *c, enum fw_history_reason r, const char *fmt,
				     const char *a)
{
	snprintf(c->detail, sizeof c->detail, fmt, a);
	return r;
}

/* The problem statement: the commit message, the context files, the tests. */
static char *history_prompt(const struct cand *c, const struct fw_context_file *cf, size_t ncf,
			    const struct fw_strlist *f2p)
{
	struct fw_buf b = { 0 };
	fw_buf_puts(&b, "A change to this repository is described by its commit message:\n\n");
	const char *p = c->message;
	size_t n = strlen(p);
	while (n && isspace((unsigned char)p[n - 1]))
		n--;
	while (n) {
		const char *nl = memchr(p, '\n', n);
		size_t k = nl ? (size_t)(nl - p) : n;
		fw_buf_printf(&b, k ? "    %.*s\n" : "\n", (int)k, p);
		p += k + (nl != NULL);
		n -= k + (nl != NULL);
	}
	fw_buf_puts(&b, "\nMake that change.\n");
	if (ncf) {
		fw_buf_puts(&b, "\nWhat the engineers had at hand is in " FW_CONTEXT_DIR
				" (read-only):\n");
		for (size_t i = 0; i < ncf; i++)
			fw_buf_printf(&b, "- " FW_CONTEXT_DIR "/%s (%s)\n", cf[i].name, cf[i].kind);
	}
	fw_buf_puts(&b, "\nThese tests fail now and must pass:\n");
	for (size_t i = 0; i < f2p->n; i++)
		fw_buf_printf(&b, "- %s\n", f2p->v[i]);
	fw_buf_puts(&b, "\nThe tests that pass now must keep passing. Do not change the tests.\n");
	if (fw_buf_append(&b, "", 1) < 0) {
		fw_buf_free(&b);
		return NULL;
	}
	return (char *)b.p;
}

/*
 * Writes the bundle's files into s as blobs (their ids into blobs, ncf
 * entries of FW_OID_HEX) and keeps a tree of them under context/ID.
 * Checks each against the audit: a file that holds the solution is a
 * leak (returns 1 with its name in found).  Returns 0, 1, or -1 with a
 * message in err.
 */
static int store_context(struct fw_store *s, struct fw_audit *audit, const char *id,
			 const struct fw_context_file *cf, size_t ncf, char (*blobs)[FW_OID_HEX],
			 uint64_t *sizes, struct fw_strlist *found, char *err, size_t errlen)
{
	git_repository *r = fw_store_repo(s);
	git_treebuilder *tb = NULL;
	int rc = -1;
	if (git_treebuilder_new(&tb, r, NULL) < 0) {
		fw_seterr(err, errlen, "%s", gerr());
		return -1;
	}
	for (size_t i = 0; i < ncf; i++) {
		size_t len;
		char *data = fw_read_file(cf[i].path, 0, &len), name[300];
		git_oid bid;
		if (!data) {
			fw_seterr(err, errlen, "%s: %s", cf[i].path, strerror(errno));
			goto out;
		}
		snprintf(name, sizeof name, "context %s", cf[i].name);
		int k = fw_audit_check(audit, name, data, len, found);
		if (k == 0 && (git_blob_create_from_buffer(&bid, r, data, len) < 0 ||
			       git_treebuilder_insert(NULL, tb, cf[i].name, &bid,
						      GIT_FILEMODE_BLOB) < 0))
			k = -2;
		free(data);
		if (k == 1) {
			rc = 1;
			goto out;
		}
		if (k < 0) {
			fw_seterr(err, errlen, "%s: %s", cf[i].path, k == -2 ? gerr() : "out of memory");
			goto out;
		}
		git_oid_tostr(blobs[i], FW_OID_HEX, &bid);
		sizes[i] = len;
	}
	git_oid tid;
	char thex[FW_OID_HEX], ref[64];
	if (git_treebuilder_write(&tid, tb) < 0) {
		fw_seterr(err, errlen, "%s", gerr());
		goto out;
	}
	git_oid_tostr(thex, sizeof thex, &tid);
	snprintf(ref, sizeof ref, "context/%s", id);
	if (fw_store_keep(s, ref, thex, err, errlen) < 0)
		goto out;
	rc = 0;
out:
	git_treebuilder_free(tb);
	return rc;
}

/* Runs the suite twice on ws.  Returns an fw_suite_status of the first run
 * that was not OK (detail says why), FW_SUITE_OK, or -1 (err). */
static int run_twice(const struct fw_history_opts *o, const char *ws, struct fw_report *a,
		     struct fw_report *b, char *detail, size_t detlen, char *err, size_t errlen)
{
	for (int i = 0; i < 2; i++) {
		int k = fw_suite_run_env(ws, o->test_cmd, o->fmt, o->timeout_s, o->env, i ? b : a,
					 detail, detlen, NULL, 0, err, errlen);
		if (k != FW_SUITE_OK)
			return k;
	}
	return FW_SUITE_OK;
}

static enum fw_history_reason validate(struct job *j, struct fw_store *s, size_t idx)
{
	const struct fw_history_opts *o = j->o;
	struct cand *c = &j->c[idx];
	struct fw_report *c1 = fw_report_new(), *c2 = fw_report_new();
	struct fw_report *m1 = fw_report_new(), *m2 = fw_report_new();
	struct fw_strlist f2p = { 0 }, p2p = { 0 }, xfail = { 0 }, leaks = { 0 };
	struct fw_audit *audit = NULL;
	char err[512] = "", detail[512] = "", ws[4200], wsc[4200];
	char *patch = NULL, *prompt = NULL;
	char (*blobs)[FW_OID_HEX] = NULL;
	uint64_t *sizes = NULL;
	enum fw_history_reason r = FW_HIST_NREASONS + 1; /* an error: stops the run */
	int k;

	snprintf(wsc, sizeof wsc, "%s/h%zu-commit", o->tmp, idx);
	snprintf(ws, sizeof ws, "%s/h%zu", o->tmp, idx);
	if (!c1 || !c2 || !m1 || !m2) {
		reject(c, r, "%s", "out of memory");
		goto out;
	}

	/* The commit itself: what passes there, twice. */
	if (fw_workspace_create(s, c->tree, wsc, NULL, NULL, err, sizeof err) < 0) {
		reject(c, r, "%s", err);
		goto out;
	}
	k = run_twice(o, wsc, c1, c2, detail, sizeof detail, err, sizeof err);
	fw_rmtree(wsc);
	if (k < 0) {
		reject(c, r, "%s", err);
		goto out;
	}
	if (k == FW_SUITE_TIMEOUT) {
		r = reject(c, FW_HIST_TIMEOUT, "at the commit: %s", detail);
		goto out;
	}
	if (k == FW_SUITE_NO_REPORT || fw_report_count(c1, FW_PASS) == 0) {
		r = reject(c, FW_HIST_BROKEN, "at the commit: %s",
			   k ? detail : "no test passes");
		goto out;
	}

	/* The task tree: audited, then run twice. */
	audit = fw_audit_new();
	if (!audit || fw_audit_removed(audit, (const char *)c->added.p, c->added.n - 1) < 0 ||
	    fw_audit_kept_tree(audit, s, c->task_tree, err, sizeof err) < 0) {
		reject(c, r, "%s", err[0] ? err : "out of memory");
		goto out;
	}
	if (fw_workspace_create(s, c->task_tree, ws, NULL, NULL, err, sizeof err) < 0) {
		reject(c, r, "%s", err);
		goto out;
	}
	k = fw_audit_workspace(audit, ws, &leaks, err, sizeof err);
	if (k == 0)
		k = audit_objects(ws, s, c->task_tree, &leaks, err, sizeof err);
	if (k != 0) {
		r = k < 0 ? reject(c, r, "%s", err) : reject(c, FW_HIST_LEAK, "%s", leaks.v[0]);
		goto out;
	}
	k = fw_suite_run_env(ws, o->test_cmd, o->fmt, o->timeout_s, o->env, m1, detail,
			     sizeof detail, NULL, 0, err, sizeof err);
	if (k < 0) {
		reject(c, r, "%s", err);
		goto out;
	}
	if (k == FW_SUITE_TIMEOUT) {
		r = reject(c, FW_HIST_TIMEOUT, "on the task tree: %s", detail);
		goto out;
	}
	if (k == FW_SUITE_NO_REPORT || fw_report_count(m1, FW_PASS) == 0) {
		r = reject(c, FW_HIST_BUILD_FAILED, "on the task tree: %s",
			   k ? detail : "no test passes");
		goto out;
	}
	/* f2p candidates: stable passes at the commit that fail now; tests
	 * that differ between the commit's two runs are flaky */
	size_t nf = 0, nflaky = 0;
	for (size_t i = 0; i < c1->n; i++) {
		const char *id = c1->tests[i].id;
		int stable = fw_report_is(c2, id, c1->tests[i].outcome);
		if (c1->tests[i].outcome == FW_PASS && fw_report_failing(m1, id))
			stable ? nf++ : nflaky++;
	}
	if (nf == 0) {
		r = nflaky ? reject(c, FW_HIST_FLAKY, "%s", "only tests that differ between runs fail")
			   : reject(c, FW_HIST_NO_F2P, "%s",
				    "no test passing at the commit fails on the task tree");
		goto out;
	}
	/* Run 2: grading an empty patch must fail the same tests. */
	k = fw_suite_run_env(ws, o->test_cmd, o->fmt, o->timeout_s, o->env, m2, detail,
			     sizeof detail, NULL, 0, err, sizeof err);
	if (k < 0) {
		reject(c, r, "%s", err);
		goto out;
	}
	if (k != FW_SUITE_OK) {
		r = reject(c, k == FW_SUITE_TIMEOUT ? FW_HIST_TIMEOUT : FW_HIST_BUILD_FAILED,
			   "on the task tree: %s", detail);
		goto out;
	}
	for (size_t i = 0; i < c1->n; i++) {
		const char *id = c1->tests[i].id;
		enum fw_outcome oc = c1->tests[i].outcome;
		if (!fw_report_is(c2, id, oc))
			continue;
		if (oc == FW_XFAIL) {
			if (fw_report_is(m1, id, FW_XFAIL) && fw_report_is(m2, id, FW_XFAIL)) {
				fw_strlist_add(&p2p, id);
				fw_strlist_add(&xfail, id);
			}
		} else if (oc == FW_PASS && fw_report_failing(m1, id) && fw_report_failing(m2, id)) {
			fw_strlist_add(&f2p, id);
		} else if (oc == FW_PASS && fw_report_is(m1, id, FW_PASS) && fw_report_is(m2, id, FW_PASS)) {
			fw_strlist_add(&p2p, id);
		}
	}
	if (f2p.n == 0) {
		r = reject(c, FW_HIST_EMPTY_PATCH, "%s", "the failing tests pass when run again");
		goto out;
	}
	if (fw_store_diff(s, c->task_tree, c->tree, &patch, err, sizeof err) < 0) {
		reject(c, r, "%s", err);
		goto out;
	}

	/* The id names the commit and the task tree. */
	char key[200], id[17], ref[64], created[FW_TIME_LEN];
	snprintf(key, sizeof key, "history\n%s\n%s", c->commit, c->task_tree);
	snprintf(id, sizeof id, "%016llx", (unsigned long long)fw_hash64(key, strlen(key)));
	size_t ncf;
	const struct fw_context_file *cf = fw_context_find(o->context, c->commit, &ncf);
	if (ncf && (!(blobs = calloc(ncf, sizeof *blobs)) || !(sizes = calloc(ncf, sizeof *sizes)))) {
		reject(c, r, "%s", "out of memory");
		goto out;
	}
	k = ncf ? store_context(s, audit, id, cf, ncf, blobs, sizes, &leaks, err, sizeof err) : 0;
	if (k != 0) {
		r = k < 0 ? reject(c, r, "%s", err) : reject(c, FW_HIST_LEAK, "%s", leaks.v[0]);
		goto out;
	}
	if (!(prompt = history_prompt(c, cf, ncf, &f2p))) {
		reject(c, r, "%s", "out of memory");
		goto out;
	}
	snprintf(ref, sizeof ref, "tasks/%s", id);
	if (fw_store_keep(s, ref, c->task_tree, err, sizeof err) < 0) {
		reject(c, r, "%s", err);
		goto out;
	}
	snprintf(ref, sizeof ref, "base/%s", c->tree);
	if (fw_store_keep(s, ref, c->tree, err, sizeof err) < 0) {
		reject(c, r, "%s", err);
		goto out;
	}
	fw_time_format(c->time, created);

	struct fw_task_context *ctx = ncf ? calloc(ncf, sizeof *ctx) : NULL;
	if (ncf && !ctx) {
		reject(c, r, "%s", "out of memory");
		goto out;
	}
	for (size_t i = 0; i < ncf; i++)
		ctx[i] = (struct fw_task_context){ cf[i].kind, cf[i].name, blobs[i], sizes[i] };
	struct fw_task t = {
		.id = id, .repo = j->repo, .base = c->parent, .store = o->store_abs,
		.orig_tree = c->tree, .tree = c->task_tree, .strategy = "history",
		.targets = c->targets, .ntargets = c->ntargets, .prompt = prompt,
		.test_cmd = o->test_cmd, .fmt = o->fmt, .f2p = &f2p, .p2p = &p2p,
		.xfail = &xfail, .solution = patch, .split = fw_task_split(o->split, id),
		.lang = c->ntargets ? c->targets[0].lang : FW_LANG_UNKNOWN,
		.created = created, .commit = c->commit, .env = o->env ? o->env->id : NULL,
		.with_context = 1, .context = ctx, .ncontext = ncf,
	};
	msgpack_packer pk;
	fw_buf_packer(&pk, &c->rec);
	k = fw_task_pack(&pk, &t);
	free(ctx);
	if (k < 0) {
		reject(c, r, "%s", "out of memory");
		goto out;
	}
	r = FW_HIST_KEPT;
out:
	fw_rmtree(ws);
	fw_rmtree(wsc);
	free(patch);
	free(prompt);
	free(blobs);
	free(sizes);
	fw_strlist_release(&f2p);
	fw_strlist_release(&p2p);
	fw_strlist_release(&xfail);
	fw_strlist_release(&leaks);
	fw_report_free(c1);
	fw_report_free(c2);
	fw_report_free(m1);
	fw_report_free(m2);
	fw_audit_free(audit);
	return r;
}

static uint64_t kept_prefix(const struct job *j)
{
	uint64_t v = 0;
	for (size_t i = 0; i < j->nc && j->c[i].done; i++)
		v += j->c[i].reason == FW_HIST_KEPT;
	return v;
}

static void *worker(void *arg)
{
	struct job *j = arg;
	char err[512];
	struct fw_store *s = fw_store_open(j->o->store, 0, err, sizeof err);
	for (;;) {
		pthread_mutex_lock(&j->mu);
		if (!s && !j->fatal) {
			j->fatal = 1;
			snprintf(j->fatal_msg, sizeof j->fatal_msg, "%s", err);
		}
		if (j->fatal || j->next >= j->nc || (j->o->max && kept_prefix(j) >= j->o->max)) {
			pthread_mutex_unlock(&j->mu);
			break;
		}
		size_t i = j->next++;
		pthread_mutex_unlock(&j->mu);
		enum fw_history_reason r = validate(j, s, i);
		pthread_mutex_lock(&j->mu);
		if (r > FW_HIST_KEPT && !j->fatal) {
			j->fatal = 1;
			snprintf(j->fatal_msg, sizeof j->fatal_msg, "commit %.12s: %s", j->c[i].commit,
				 j->c[i].detail);
		}
		j->c[i].reason = r;
		j->c[i].done = 1;
		j->ndone++;
		pthread_mutex_unlock(&j->mu);
	}
	fw_store_free(s);
	return NULL;
}

int fw_history_run(const struct fw_history_opts *o, const char *repo, fw_history_emit_fn emit,
		   fw_history_note_fn note, void *ctx, struct fw_history_tally *t,
		   char *err, size_t errlen)
{
	struct job j;
	int rc = -1;
	memset(&j, 0, sizeof j);
	j.o = o;
	j.repo = repo;
	pthread_mutex_init(&j.mu, NULL);
	struct fw_store *s = fw_store_open(o->store, 1, err, errlen);
	if (!s)
		goto out;
	int k = scan(&j, s, t, note, ctx, err, errlen);
	fw_store_free(s);
	if (k < 0)
		goto out;

	size_t nt = o->jobs ? o->jobs : 1, started = 0;
	pthread_t th[64];
	if (nt > 64)
		nt = 64;
	for (; started < nt; started++)
		if (pthread_create(&th[started], NULL, worker, &j) != 0)
			break;
	if (started == 0)
		worker(&j);
	for (size_t i = 0; i < started; i++)
		pthread_join(th[i], NULL);

	/* In commit order, up to o->max; the counts follow the same prefix,
	 * so they do not depend on o->jobs. */
	uint64_t kept = 0;
	for (size_t i = 0; i < j.nc && j.c[i].done; i++) {
		struct cand *c = &j.c[i];
		if (o->max && kept >= o->max)
			break;
		if (c->reason > FW_HIST_KEPT)
			break;
		t->candidates++;
		if (c->reason == FW_HIST_KEPT) {
			if (emit(ctx, c->rec.p, c->rec.n) < 0) {
				fw_seterr(err, errlen, "cannot write a task");
				goto out;
			}
			kept++;
			t->kept++;
			continue;
		}
		tell(note, ctx, t, c->commit, c->subject, c->reason, c->detail);
	}
	if (j.fatal) {
		fw_seterr(err, errlen, "%s", j.fatal_msg);
		goto out;
	}
	rc = 0;
out:
	for (size_t i = 0; i < j.nc; i++)
		cand_release(&j.c[i]);
	free(j.c);
	pthread_mutex_destroy(&j.mu);
	return rc;
}
