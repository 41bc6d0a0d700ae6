/* The second twin: the same static name, another size. */
__attribute__((noinline)) static int twin(int x)
{
	return x * x * x + 7 * x - 5;
}

int other(int x)
{
	return twin(x) + twin(x + 1);
}
