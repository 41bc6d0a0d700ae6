/* A program the symbolizer's tests build with gcc -g -O2: an inlined
 * helper two levels deep, and a static function whose name b.c has too. */
#include <stdlib.h>

struct conn { int refs; int *buf; };

static inline int put_buf(struct conn *c)
{
	free(c->buf);
	return --c->refs;
}

static inline void release(struct conn *c)
{
	if (put_buf(c) == 0)
		free(c);
}

__attribute__((noinline)) static int twin(int x)
{
	return x * 3 + 1;
}

__attribute__((noinline)) void conn_free(struct conn *c)
{
	release(c);
	c->refs = twin(c->refs);
}

int other(int);

int main(int argc, char **argv)
{
	struct conn *c = malloc(sizeof(*c));
	c->refs = argc;
	c->buf = malloc(16);
	conn_free(c);
	return other(argc) + twin(argc);
}
