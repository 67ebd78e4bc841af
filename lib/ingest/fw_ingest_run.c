/*
 * fw_ingest_run.c — what fb-ingest does around the converters: a
 * trajectory finished for output, and the summary of a run (fw_ingest.h).
 */
#include <stdio.h>

#include "fw_ingest.h"
#include "fw_mp.h"

int fw_ingest_finish(json_t *traj, const char *file, long line, const char *model, json_t *meta)
{
	json_t *m = json_object_get(traj, "meta"), *v;
	const char *k;
	int e = 0;

	if (!json_is_object(m)) {
		if (!(m = json_object()) || json_object_set_new(traj, "meta", m))
			return -1;
	}
	e |= json_object_set_new(m, "file", json_string(file));
	e |= json_object_set_new(m, "line", json_integer(line));
	json_object_foreach(meta, k, v)
		if (!json_object_get(m, k))
			e |= json_object_set(m, k, v);
	if (model && !json_string_length(json_object_get(traj, "model"))) {
		/* the model is part of the content id: a record that had one
		 * gets it again */
		e |= json_object_set_new(traj, "model", json_string(model));
		e |= json_object_set_new(traj, "id", json_string(""));
	}
	if (e || (!json_string_length(json_object_get(traj, "id")) && fw_ingest_set_id(traj)))
		return -1;
	return 0;
}

int fw_ingest_summary(struct fw_buf *out, const char *prog, const struct fw_ingest_tally *t,
		      const struct fw_feedback *fb, json_t *scales, long orphans, int redact)
{
	struct fw_feedback_stats fs;
	char line[1024];
	size_t n = 0, i;
	unsigned long total = 0;
	json_t *sc;
	int e = 0;

	for (int f = 1; f < FW_FMT_N; f++) {
		if (!t->files[f] && !t->bad[f])
			continue;
		e |= fw_buf_printf(out, "%s: %s: %lu %s from %lu file%s, %lu duplicates dropped, "
				   "%lu skipped\n", prog, fw_fmt_name(f), t->recs[f],
				   t->recs[f] == 1 ? "trajectory" : "trajectories", t->files[f],
				   t->files[f] == 1 ? "" : "s", t->dups[f], t->bad[f]);
	}
	fw_feedback_stats(fb, &fs);
	json_array_foreach(scales, i, sc)
		e |= fw_buf_printf(out, "%s: feedback: %s\n", prog, json_string_value(sc));
	e |= fw_buf_printf(out, "%s: feedback: %lu events, %lu joined, %ld orphaned, "
			   "%lu superseded, %lu neutral, %lu skipped\n", prog, fs.events, fs.joined,
			   orphans, fs.superseded, fs.neutral, t->fb_bad);
	for (int r = 0; r < FW_RD_NRULES; r++) {
		if (!t->red.n[r])
			continue;
		total += t->red.n[r];
		n += (size_t)snprintf(line + n, n < sizeof line ? sizeof line - n : 0, "%s%s %lu",
				      n ? ", " : "", fw_redact_rule_name(r), t->red.n[r]);
	}
	if (redact)
		e |= fw_buf_printf(out, "%s: redactions: %lu%s%s%s\n", prog, total,
				   total ? " (" : "", total ? line : "", total ? ")" : "");
	else
		e |= fw_buf_printf(out, "%s: redaction off\n", prog);
	return e ? -1 : 0;
}
