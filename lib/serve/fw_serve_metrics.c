/*
 * fw_serve_metrics.c — /metrics in the Prometheus text exposition format
 * 0.0.4: HTTP answers by status; per model completions, prompt and drawn
 * tokens, queue depth, running requests, batched steps and their
 * sequences, prefix tokens shared, and a latency histogram.
 */
#include <stdio.h>
#include <string.h>

#include "fw_serve_int.h"

/* Every family has its HELP and TYPE; counters of a model under its
 * lock, read once each. */
int serve_metrics(struct fw_serve *s, struct fw_buf *b)
{
	char line[512];
	int bad = 0;

#define OUT(...) (snprintf(line, sizeof line, __VA_ARGS__), bad |= fw_buf_append(b, line, strlen(line)))
	OUT("# HELP serve_http_requests_total HTTP requests answered, by status.\n"
	    "# TYPE serve_http_requests_total counter\n");
	pthread_mutex_lock(&s->stat_mu);
	for (size_t i = 0; i <= NCODES; i++)
		if (i < NCODES)
			OUT("serve_http_requests_total{code=\"%u\"} %llu\n", fw_serve_codes[i], s->by_code[i]);
		else
			OUT("serve_http_requests_total{code=\"other\"} %llu\n", s->by_code[i]);
	pthread_mutex_unlock(&s->stat_mu);
	static const char *const help[][3] = {
		{ "serve_requests_total", "counter", "Completions decoded, by model." },
		{ "serve_prompt_tokens_total", "counter", "Prompt tokens of completions." },
		{ "serve_generation_tokens_total", "counter", "Tokens drawn." },
		{ "serve_requests_waiting", "gauge", "Requests queued for a free sequence." },
		{ "serve_requests_running", "gauge", "Requests being decoded." },
		{ "serve_decode_steps_total", "counter", "Batched decoding steps." },
		{ "serve_decode_step_sequences_total", "counter",
		  "Sequences over all decoding steps (divided by the steps: the batch)." },
		{ "serve_prefix_shared_tokens_total", "counter",
		  "Prompt tokens taken from the cache of a request being decoded." },
	};
	for (size_t h = 0; h < sizeof help / sizeof help[0]; h++) {
		OUT("# HELP %s %s\n# TYPE %s %s\n", help[h][0], help[h][2], help[h][0], help[h][1]);
		for (int i = 0; i < s->narms; i++) {
			struct arm *a = &s->arms[i];
			unsigned long long v;
			pthread_mutex_lock(&a->mu);
			v = h == 0 ? a->ok : h == 1 ? a->prompt_tokens : h == 2 ? a->gen_tokens
			    : h == 3 ? (unsigned long long)a->nq : h == 4 ? (unsigned long long)a->nrun
			    : h == 5 ? a->steps : h == 6 ? a->step_seqs : a->shared;
			pthread_mutex_unlock(&a->mu);
			OUT("%s{model=\"%s\"} %llu\n", help[h][0], a->name, v);
		}
	}
	OUT("# HELP serve_request_duration_seconds Time from a completion's arrival to its "
	    "last token.\n# TYPE serve_request_duration_seconds histogram\n");
	for (int i = 0; i < s->narms; i++) {
		struct arm *a = &s->arms[i];
		unsigned long long cum = 0;
		pthread_mutex_lock(&a->mu);
		for (int k = 0; k <= NBUCKET; k++) {
			cum += a->hist[k];
			if (k < NBUCKET)
				OUT("serve_request_duration_seconds_bucket{model=\"%s\",le=\"%g\"} %llu\n",
				    a->name, fw_serve_buckets[k], cum);
			else
				OUT("serve_request_duration_seconds_bucket{model=\"%s\",le=\"+Inf\"} %llu\n",
				    a->name, cum);
		}
		OUT("serve_request_duration_seconds_sum{model=\"%s\"} %.6f\n", a->name, a->lat_sum);
		OUT("serve_request_duration_seconds_count{model=\"%s\"} %llu\n", a->name, cum);
		pthread_mutex_unlock(&a->mu);
	}
#undef OUT
	return bad ? -1 : 0;
}

