/* text.c — string helpers that never overflow the caller's buffer. */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "tally.h"

size_t tally_strlcpy(char *buf, const char *src, size_t cap)
{
	size_t len = strlen(src);
	if (cap > 0) {
		size_t k = len < cap - 1 ? len : cap - 1;
		memcpy(buf, src, k);
		buf[k] = '\0';
	}
	return len;
}

void tally_reverse(char *s)
{
	size_t n = strlen(s);
	for (size_t i = 0; i < n / 2; i++) {
		char t = s[i];
		s[i] = s[n - 1 - i];
		s[n - 1 - i] = t;
	}
}

static int is_blank(char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

char *tally_trim(char *s)
{
	while (is_blank(*s))
		s++;
	size_t n = strlen(s);
	while (n > 0 && is_blank(s[n - 1]))
		s[--n] = '\0';
	return s;
}

size_t tally_count_char(const char *s, char c)
{
	size_t k = 0;
	for (; *s; s++)
		k += *s == c;
	return k;
}

int tally_starts_with(const char *s, const char *prefix)
{
	return strncmp(s, prefix, strlen(prefix)) == 0;
}

int tally_ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), m = strlen(suffix);
	return m <= n && memcmp(s + n - m, suffix, m) == 0;
}

void tally_to_upper(char *s)
{
	for (; *s; s++)
		*s = (char)toupper((unsigned char)*s);
}

int tally_parse_int(const char *s, long *out)
{
	char *end;
	errno = 0;
	long v = strtol(s, &end, 10);
	if (end == s || *end != '\0' || errno == ERANGE)
		return -1;
	*out = v;
	return 0;
}

size_t tally_split_count(const char *s, char sep)
{
	if (*s == '\0')
		return 0;
	return tally_count_char(s, sep) + 1;
}

uint32_t tally_fnv1a(const char *s)
{
	uint32_t h = 2166136261u;
	for (; *s; s++) {
		h ^= (unsigned char)*s;
		h *= 16777619u;
	}
	return h;
}
