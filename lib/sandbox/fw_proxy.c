/*
 * fw_proxy.c — the clean room's filtering HTTP/HTTPS proxy (see fw_proxy.h).
 *
 * One thread, one poll loop over every connection.  A connection first
 * collects the request head from the client (at most HEAD_MAX bytes), is
 * judged against the allow list, then either gets a 403 and is closed, or
 * is connected upstream (a non-blocking connect, address after address) and
 * relayed both ways until both sides are done.  Name resolution is the one
 * blocking step.
 */
#include "fw_proxy.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define HEAD_MAX 16384
#define BUF_SIZE 65536
#define MAX_CONNS 128
#define CONNECT_TIMEOUT_S 10

enum { HEAD, DIAL, RELAY };

struct pipebuf {
	char *d;
	size_t len, off;
	int eof;  /* the reading side ended */
	int shut; /* the writing side was shut down */
};

struct conn {
	int c, u; /* client and upstream sockets, -1 when closed */
	int state;
	int tunnel;                   /* CONNECT: answer 200 once connected */
	struct addrinfo *ai, *next;   /* upstream addresses, the one to try */
	double dial_by;               /* CLOCK_MONOTONIC deadline */
	char head[HEAD_MAX];
	size_t hlen;
	struct pipebuf up, down; /* client→upstream, upstream→client */
};

struct fw_proxy {
	int lfd, wake[2];
	char path[108];
	char **allow;
	pthread_t thr;
	pthread_mutex_t mu;
	struct fw_proxy_event *ev;
	size_t nev, capev;
	struct conn *conns[MAX_CONNS];
};

static double mono(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* ---- the allow list ---------------------------------------------------------- */

static int host_match(const char *pat, size_t plen, const char *host)
{
	size_t hl = strlen(host);

	if (plen > 2 && pat[0] == '*' && pat[1] == '.') {
		/* "*.example.com": strictly a subdomain */
		size_t sl = plen - 1; /* ".example.com" */
		return hl > sl && strncasecmp(host + hl - sl, pat + 1, sl) == 0;
	}
	return hl == plen && strncasecmp(host, pat, plen) == 0;
}

int fw_proxy_allowed(const char *const *allow, const char *host, int port)
{
	for (const char *const *a = allow; a && *a; a++) {
		const char *e = *a, *colon;
		size_t hl;

		if (*e == '[') { /* "[::1]:443" */
			const char *rb = strchr(e, ']');
			if (!rb)
				continue;
			colon = rb[1] == ':' ? rb + 1 : NULL;
			if (!host_match(e + 1, (size_t)(rb - e - 1), host))
				continue;
		} else {
			colon = strrchr(e, ':');
			hl = colon ? (size_t)(colon - e) : strlen(e);
			if (!host_match(e, hl, host))
				continue;
		}
		if (!colon) {
			if (port == 80 || port == 443)
				return 1;
		} else if (strcmp(colon + 1, "*") == 0 || atoi(colon + 1) == port) {
			return 1;
		}
	}
	return 0;
}

/* ---- events -------------------------------------------------------------------- */

static void record(struct fw_proxy *p, int allowed, const char *req)
{
	pthread_mutex_lock(&p->mu);
	if (p->nev == p->capev) {
		size_t cap = p->capev ? p->capev * 2 : 16;
		struct fw_proxy_event *ev = realloc(p->ev, cap * sizeof *ev);
		if (!ev)
			goto out;
		p->ev = ev;
		p->capev = cap;
	}
	p->ev[p->nev].request = strndup(req, 200);
	if (!p->ev[p->nev].request)
		goto out;
	p->ev[p->nev].allowed = allowed;
	p->ev[p->nev].at = mono();
	p->nev++;
out:
	pthread_mutex_unlock(&p->mu);
}

int fw_proxy_take_events(struct fw_proxy *p, struct fw_proxy_event **ev, size_t *n)
{
	pthread_mutex_lock(&p->mu);
	*ev = p->ev;
	*n = p->nev;
	p->ev = NULL;
	p->nev = p->capev = 0;
	pthread_mutex_unlock(&p->mu);
	return 0;
}

/* ---- connections ---------------------------------------------------------------- */

static void conn_free(struct conn *c)
{
	if (!c)
		return;
	if (c->c >= 0)
		close(c->c);
	if (c->u >= 0)
		close(c->u);
	if (c->ai)
		freeaddrinfo(c->ai);
	free(c->up.d);
	free(c->down.d);
	free(c);
}

static void reply(int fd, const char *status, const char *msg)
{
	char buf[512];
	int n = snprintf(buf, sizeof buf,
			 "HTTP/1.1 %s\r\nContent-Type: text/plain\r\nContent-Length: %zu\r\n"
			 "Connection: close\r\n\r\n%s",
			 status, strlen(msg), msg);

	if (n > 0)
		(void)!send(fd, buf, (size_t)n < sizeof buf ? (size_t)n : sizeof buf - 1,
			    MSG_NOSIGNAL | MSG_DONTWAIT);
}

static int buf_put(struct pipebuf *b, const char *s, size_t n);

/* Start a non-blocking connect to the next address of c; 0 when one is
 * under way (c->u set), -1 when none is left. */
static int dial_next(struct conn *c)
{
	if (c->u >= 0) {
		close(c->u);
		c->u = -1;
	}
	for (; c->next; c->next = c->next->ai_next) {
		struct addrinfo *ai = c->next;
		int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK,
				ai->ai_protocol);
		if (fd < 0)
			continue;
		if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0 || errno == EINPROGRESS) {
			c->u = fd;
			c->next = ai->ai_next;
			return 0;
		}
		close(fd);
	}
	return -1;
}

/* The upstream socket became writable (or failed): 0 connected, 1 still
 * dialing (the next address), -1 out of addresses. */
static int dial_done(struct conn *c)
{
	int e = 0;
	socklen_t el = sizeof e;

	if (getsockopt(c->u, SOL_SOCKET, SO_ERROR, &e, &el) == 0 && e == 0) {
		static const char ok[] = "HTTP/1.1 200 Connection established\r\n\r\n";
		if (c->tunnel && buf_put(&c->down, ok, sizeof ok - 1))
			return -1;
		c->state = RELAY;
		return 0;
	}
	return dial_next(c) == 0 ? 1 : -1;
}

/* Split "host:port" or "[v6]:port" (port default def); 0 or -1. */
static int split_hostport(const char *s, size_t n, char *host, size_t hostlen,
			  int *port, int def)
{
	const char *colon = NULL, *hs = s, *he;

	if (n && s[0] == '[') {
		const char *rb = memchr(s, ']', n);
		if (!rb)
			return -1;
		hs = s + 1;
		he = rb;
		if ((size_t)(rb + 1 - s) < n) {
			if (rb[1] != ':')
				return -1;
			colon = rb + 1;
		}
	} else {
		colon = memrchr(s, ':', n);
		he = colon ? colon : s + n;
	}
	if (he == hs || (size_t)(he - hs) >= hostlen)
		return -1;
	memcpy(host, hs, (size_t)(he - hs));
	host[he - hs] = 0;
	for (char *h = host; *h; h++)
		if (!isalnum((unsigned char)*h) && !strchr(".-_:", *h))
			return -1;
	if (colon) {
		char num[8];
		size_t pl = (size_t)(s + n - colon - 1);
		if (pl == 0 || pl >= sizeof num)
			return -1;
		memcpy(num, colon + 1, pl);
		num[pl] = 0;
		for (size_t i = 0; i < pl; i++)
			if (!isdigit((unsigned char)num[i]))
				return -1;
		*port = atoi(num);
	} else {
		*port = def;
	}
	return *port >= 1 && *port <= 65535 ? 0 : -1;
}

/* Is this header line one that must not pass to the origin? */
static int hop_header(const char *line, size_t n)
{
	static const char *drop[] = { "proxy-connection:", "connection:", "keep-alive:",
				      "proxy-authorization:", NULL };
	for (const char **d = drop; *d; d++) {
		size_t dl = strlen(*d);
		if (n >= dl && strncasecmp(line, *d, dl) == 0)
			return 1;
	}
	return 0;
}

static int buf_put(struct pipebuf *b, const char *s, size_t n)
{
	if (b->len + n > BUF_SIZE)
		return -1;
	memcpy(b->d + b->len, s, n);
	b->len += n;
	return 0;
}

/* Append n bytes to out (cap bytes); -1 when they do not fit. */
static int out_put(char *out, size_t cap, size_t *len, const char *s, size_t n)
{
	if (*len + n > cap)
		return -1;
	memcpy(out + *len, s, n);
	*len += n;
	return 0;
}

int fw_proxy_parse(const char *head, size_t n, struct fw_proxy_req *rq, char *out,
		   size_t cap, size_t *outlen, const char **why)
{
	char line[1024];
	const char *eol = memmem(head, n, "\r\n", 2), *end;
	char *sp1, *sp2;
	size_t ll = eol ? (size_t)(eol - head) : 0;

	memset(rq, 0, sizeof *rq);
	*outlen = 0;
	*why = "bad request line";
	if (n < 4 || memcmp(head + n - 4, "\r\n\r\n", 4) != 0 || !eol || ll >= sizeof line ||
	    memchr(head, 0, ll))
		return -1;
	memcpy(line, head, ll);
	line[ll] = 0;
	sp1 = strchr(line, ' ');
	sp2 = sp1 ? strchr(sp1 + 1, ' ') : NULL;
	if (!sp1 || !sp2 || sp1 == line || strchr(sp2 + 1, ' '))
		return -1;
	*sp1 = 0;
	*sp2 = 0;
	for (const char *m = line; *m; m++)
		if (!isupper((unsigned char)*m))
			return -1;
	if (strcmp(line, "CONNECT") == 0) {
		rq->tunnel = 1;
		*why = "bad CONNECT target";
		if (split_hostport(sp1 + 1, strlen(sp1 + 1), rq->host, sizeof rq->host, &rq->port,
				   443))
			return -1;
		snprintf(rq->desc, sizeof rq->desc, "CONNECT %s:%d", rq->host, rq->port);
		return 0;
	}
	{
		const char *url = sp1 + 1, *auth, *path, *h;
		char rl[1200];
		int k;

		*why = "only CONNECT and absolute http:// URIs";
		if (strncasecmp(url, "http://", 7) != 0)
			return -1;
		auth = url + 7;
		path = auth + strcspn(auth, "/?#");
		*why = "bad URI host";
		if (split_hostport(auth, (size_t)(path - auth), rq->host, sizeof rq->host,
				   &rq->port, 80))
			return -1;
		snprintf(rq->desc, sizeof rq->desc, "%.32s http://%s:%d%.120s", line, rq->host,
			 rq->port, *path ? path : "/");
		/* origin-form request line, hop-by-hop headers dropped, one
		 * request per upstream connection */
		*why = "request head too large";
		k = snprintf(rl, sizeof rl, "%s %s%s %s\r\n", line, *path == '/' ? "" : "/", path,
			     sp2 + 1);
		if (k < 0 || (size_t)k >= sizeof rl || out_put(out, cap, outlen, rl, (size_t)k))
			return -1;
		end = head + n - 2;
		for (h = eol + 2; h < end;) {
			const char *e = memmem(h, (size_t)(end - h), "\r\n", 2);
			size_t hl = e ? (size_t)(e - h) : (size_t)(end - h);
			if (!hop_header(h, hl) &&
			    (out_put(out, cap, outlen, h, hl) || out_put(out, cap, outlen, "\r\n", 2)))
				return -1;
			h += hl + 2;
		}
		if (out_put(out, cap, outlen, "Connection: close\r\n\r\n", 21))
			return -1;
	}
	return 0;
}

/* The request head is complete: judge it and set up the relay.  Returns 0
 * to go on relaying, -1 to drop the connection (a reply was sent). */
static int start(struct fw_proxy *p, struct conn *c, size_t headlen)
{
	struct fw_proxy_req rq;
	const char *why;
	size_t outlen;
	char msg[400];

	if (fw_proxy_parse(c->head, headlen, &rq, c->up.d, BUF_SIZE, &outlen, &why) != 0) {
		snprintf(msg, sizeof msg, "fw-proxy: %s\n", why);
		reply(c->c, "400 Bad Request", msg);
		return -1;
	}
	if (!fw_proxy_allowed((const char *const *)p->allow, rq.host, rq.port)) {
		record(p, 0, rq.desc);
		snprintf(msg, sizeof msg, "fw-proxy: host not allowed: %s:%d\n", rq.host, rq.port);
		reply(c->c, "403 Forbidden", msg);
		return -1;
	}
	record(p, 1, rq.desc);
	{
		struct addrinfo hints = { 0 };
		char ps[16];
		hints.ai_socktype = SOCK_STREAM;
		snprintf(ps, sizeof ps, "%d", rq.port);
		if (getaddrinfo(rq.host, ps, &hints, &c->ai) != 0) {
			c->ai = NULL;
			reply(c->c, "502 Bad Gateway", "fw-proxy: cannot resolve upstream\n");
			return -1;
		}
		c->next = c->ai;
		if (dial_next(c) != 0) {
			reply(c->c, "502 Bad Gateway", "fw-proxy: cannot connect upstream\n");
			return -1;
		}
		c->dial_by = mono() + CONNECT_TIMEOUT_S;
	}
	c->tunnel = rq.tunnel;
	c->up.len = outlen;
	/* bytes the client sent after the head (a body, or TLS after CONNECT) */
	if (buf_put(&c->up, c->head + headlen, c->hlen - headlen))
		return -1;
	c->state = DIAL;
	return 0;
}

/* Move bytes from fd into b; 0 ok, -1 on error. */
static int pump_in(int fd, struct pipebuf *b)
{
	ssize_t n;

	/* a full buffer must not read as EOF (recv of 0 bytes returns 0) */
	if (b->len == BUF_SIZE)
		return 0;
	n = recv(fd, b->d + b->len, BUF_SIZE - b->len, MSG_DONTWAIT);

	if (n > 0)
		b->len += (size_t)n;
	else if (n == 0)
		b->eof = 1;
	else if (errno != EAGAIN && errno != EINTR)
		return -1;
	return 0;
}

static int pump_out(int fd, struct pipebuf *b)
{
	ssize_t n = send(fd, b->d + b->off, b->len - b->off, MSG_NOSIGNAL | MSG_DONTWAIT);

	if (n > 0) {
		b->off += (size_t)n;
		if (b->off == b->len)
			b->off = b->len = 0;
	} else if (n < 0 && errno != EAGAIN && errno != EINTR) {
		return -1;
	}
	return 0;
}

/* One poll round for a connection; returns -1 when it is finished. */
static int conn_step(struct fw_proxy *p, struct conn *c, short crev, short urev)
{
	if (c->state == HEAD) {
		ssize_t n;
		char *end;
		if (!(crev & (POLLIN | POLLHUP | POLLERR)))
			return 0;
		n = recv(c->c, c->head + c->hlen, sizeof c->head - c->hlen, MSG_DONTWAIT);
		if (n <= 0)
			return (n < 0 && (errno == EAGAIN || errno == EINTR)) ? 0 : -1;
		c->hlen += (size_t)n;
		end = memmem(c->head, c->hlen, "\r\n\r\n", 4);
		if (!end) {
			if (c->hlen == sizeof c->head) {
				reply(c->c, "431 Request Header Fields Too Large", "fw-proxy: head too large\n");
				return -1;
			}
			return 0;
		}
		return start(p, c, (size_t)(end + 4 - c->head));
	}
	if (c->state == DIAL) {
		int r;
		if (crev & (POLLHUP | POLLERR))
			return -1; /* the client gave up */
		if (!urev)
			return 0;
		r = dial_done(c);
		if (r < 0) {
			reply(c->c, "502 Bad Gateway", "fw-proxy: cannot connect upstream\n");
			return -1;
		}
		if (r > 0)
			return 0; /* trying the next address */
	}
	if ((crev & POLLIN) || (crev & POLLHUP && !c->up.eof))
		if (pump_in(c->c, &c->up))
			return -1;
	if ((urev & POLLIN) || (urev & POLLHUP && !c->down.eof))
		if (pump_in(c->u, &c->down))
			return -1;
	if (c->up.len > c->up.off && pump_out(c->u, &c->up))
		return -1;
	if (c->down.len > c->down.off && pump_out(c->c, &c->down))
		return -1;
	if ((crev | urev) & POLLERR)
		return -1;
	if (c->up.eof && c->up.len == 0 && !c->up.shut) {
		shutdown(c->u, SHUT_WR);
		c->up.shut = 1;
	}
	if (c->down.eof && c->down.len == 0 && !c->down.shut) {
		shutdown(c->c, SHUT_WR);
		c->down.shut = 1;
	}
	return c->up.shut && c->down.shut ? -1 : 0;
}

static void *serve(void *arg)
{
	struct fw_proxy *p = arg;
	struct pollfd pf[2 + 2 * MAX_CONNS];
	int idx[MAX_CONNS][2];

	for (;;) {
		int nf = 0;
		pf[nf++] = (struct pollfd){ p->wake[0], POLLIN, 0 };
		pf[nf++] = (struct pollfd){ p->lfd, POLLIN, 0 };
		for (int i = 0; i < MAX_CONNS; i++) {
			struct conn *c = p->conns[i];
			idx[i][0] = idx[i][1] = -1;
			if (!c)
				continue;
			if (c->state == HEAD) {
				idx[i][0] = nf;
				pf[nf++] = (struct pollfd){ c->c, POLLIN, 0 };
				continue;
			}
			if (c->state == DIAL) {
				idx[i][0] = nf;
				pf[nf++] = (struct pollfd){ c->c, 0, 0 };
				idx[i][1] = nf;
				pf[nf++] = (struct pollfd){ c->u, POLLOUT, 0 };
				continue;
			}
			short ce = 0, ue = 0;
			if (!c->up.eof && c->up.len < BUF_SIZE)
				ce |= POLLIN;
			if (c->down.len > c->down.off)
				ce |= POLLOUT;
			if (!c->down.eof && c->down.len < BUF_SIZE)
				ue |= POLLIN;
			if (c->up.len > c->up.off)
				ue |= POLLOUT;
			idx[i][0] = nf;
			pf[nf++] = (struct pollfd){ c->c, ce, 0 };
			idx[i][1] = nf;
			pf[nf++] = (struct pollfd){ c->u, ue, 0 };
		}
		/* wake every second to time out slow dials */
		if (poll(pf, (nfds_t)nf, 1000) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (pf[0].revents)
			break;
		for (int i = 0; i < MAX_CONNS; i++) {
			struct conn *c = p->conns[i];
			short cr, ur;
			if (!c || idx[i][0] < 0)
				continue;
			cr = pf[idx[i][0]].revents;
			ur = idx[i][1] >= 0 ? pf[idx[i][1]].revents : 0;
			if (!cr && !ur && c->state == DIAL && mono() > c->dial_by) {
				reply(c->c, "504 Gateway Timeout", "fw-proxy: upstream connect timed out\n");
				conn_free(c);
				p->conns[i] = NULL;
				continue;
			}
			if (!cr && !ur && c->state != RELAY)
				continue;
			if (conn_step(p, c, cr, ur) != 0) {
				conn_free(c);
				p->conns[i] = NULL;
			}
		}
		if (pf[1].revents & POLLIN) {
			int fd = accept4(p->lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
			int slot = -1;
			struct conn *c;
			if (fd < 0)
				continue;
			for (int i = 0; i < MAX_CONNS && slot < 0; i++)
				if (!p->conns[i])
					slot = i;
			c = slot >= 0 ? calloc(1, sizeof *c) : NULL;
			if (c) {
				c->up.d = malloc(BUF_SIZE);
				c->down.d = malloc(BUF_SIZE);
			}
			if (!c || !c->up.d || !c->down.d) {
				reply(fd, "503 Service Unavailable", "fw-proxy: too many connections\n");
				close(fd);
				if (c) {
					c->c = c->u = -1;
					conn_free(c);
				}
				continue;
			}
			c->c = fd;
			c->u = -1;
			p->conns[slot] = c;
		}
	}
	return NULL;
}

struct fw_proxy *fw_proxy_new(const char *sock_path, const char *const *allow,
			      char *err, size_t errlen)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct fw_proxy *p;
	size_t n = 0;

	if (strlen(sock_path) >= sizeof sa.sun_path) {
		snprintf(err, errlen, "socket path too long: %s", sock_path);
		return NULL;
	}
	p = calloc(1, sizeof *p);
	if (!p)
		goto oom;
	p->lfd = p->wake[0] = p->wake[1] = -1;
	pthread_mutex_init(&p->mu, NULL);
	while (allow && allow[n])
		n++;
	p->allow = calloc(n + 1, sizeof *p->allow);
	if (!p->allow)
		goto oom;
	for (size_t i = 0; i < n; i++)
		if (!(p->allow[i] = strdup(allow[i])))
			goto oom;
	snprintf(p->path, sizeof p->path, "%s", sock_path);
	memcpy(sa.sun_path, sock_path, strlen(sock_path));
	p->lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (p->lfd < 0 || bind(p->lfd, (struct sockaddr *)&sa, sizeof sa) != 0 ||
	    listen(p->lfd, 64) != 0) {
		snprintf(err, errlen, "proxy socket %s: %s", sock_path, strerror(errno));
		p->path[0] = 0;
		fw_proxy_free(p);
		return NULL;
	}
	if (pipe2(p->wake, O_CLOEXEC) != 0 || pthread_create(&p->thr, NULL, serve, p) != 0) {
		snprintf(err, errlen, "proxy thread: %s", strerror(errno));
		if (p->wake[0] >= 0) {
			close(p->wake[0]);
			close(p->wake[1]);
		}
		p->wake[0] = p->wake[1] = -1;
		fw_proxy_free(p);
		return NULL;
	}
	return p;
oom:
	snprintf(err, errlen, "out of memory");
	fw_proxy_free(p);
	return NULL;
}

void fw_proxy_free(struct fw_proxy *p)
{
	if (!p)
		return;
	if (p->wake[1] >= 0) {
		(void)!write(p->wake[1], "x", 1);
		pthread_join(p->thr, NULL);
		close(p->wake[0]);
		close(p->wake[1]);
	}
	for (int i = 0; i < MAX_CONNS; i++)
		conn_free(p->conns[i]);
	if (p->lfd >= 0)
		close(p->lfd);
	if (p->path[0])
		unlink(p->path);
	for (size_t i = 0; p->allow && p->allow[i]; i++)
		free(p->allow[i]);
	free(p->allow);
	for (size_t i = 0; i < p->nev; i++)
		free(p->ev[i].request);
	free(p->ev);
	pthread_mutex_destroy(&p->mu);
	free(p);
}
