/*
 * check_nccl.c — the gradient all-reduce between two GPUs (NCCL through
 * kernels_dev.h, as train-step uses it), two processes, one GPU each.
 *
 * The parent forks two ranks and touches no GPU itself (a CUDA context
 * does not survive fork).  Rank 0 draws the NCCL id and passes it to rank
 * 1 through a pipe (train-step passes it over MPI); each fills a device
 * buffer with values of its own, sums it in place with fw_dev_comm_sum,
 * and checks every element against the sum worked out on the host.  The
 * values are small integers, exact in f32, so the check is bitwise.  Two
 * sizes: one below NCCL's chunk, one of several chunks.
 *
 * Exit status: 0 both ranks agree, 1 a mismatch or an NCCL/CUDA error, 77
 * fewer than two GPUs (skipped, with the reason printed).  Build: make
 * CUDA=1 build/gpu/check_nccl; run: tests/gpu/check.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kernels_cuda.h"
#include "kernels_dev.h"

static int pfd[2];

/* Rank 0 writes the id into the pipe, rank 1 reads it. */
static int bcast(unsigned char *buf, int n, void *ctx)
{
	int rank = *(int *)ctx;
	ssize_t k = 0, r;

	if (rank == 0)
		return write(pfd[1], buf, n) == n ? 0 : -1;
	while (k < n && (r = read(pfd[0], buf + k, n - k)) > 0)
		k += r;
	return k == n ? 0 : -1;
}

static int rank_main(int rank)
{
	char err[512], spec[16];
	long sizes[2] = { 1000, 3 << 20 };
	int count = fw_cuda_device_count();

	if (count < 2) {
		if (rank == 0)
			printf("check_nccl: %d CUDA device%s here, the two-rank test needs 2: "
		       "skipped, nothing checked\n", count, count == 1 ? "" : "s");
		return 77;
	}
	snprintf(spec, sizeof(spec), "cuda:%d", rank);
	if (fw_dev_select(spec, err, sizeof(err)) < 0 ||
	    fw_dev_comm_init(rank, 2, bcast, &rank, err, sizeof(err))) {
		printf("FAIL nccl rank %d: %s\n", rank, err);
		return 1;
	}
	for (int s = 0; s < 2; s++) {
		long n = sizes[s], bad = 0;
		float *h = malloc(sizeof(float) * n);
		float *d = fw_dev_alloc(FW_DEV_CUDA, sizeof(float) * n);

		if (!h || !d) {
			printf("FAIL nccl rank %d: out of memory\n", rank);
			return 1;
		}
		for (long i = 0; i < n; i++)
			h[i] = (float)((i % 1000) * (rank + 1) - 7 * rank);
		fw_dev_h2d(FW_DEV_CUDA, d, h, sizeof(float) * n);
		if (fw_dev_comm_sum(d, n, NULL) || fw_dev_check(FW_DEV_CUDA, err, sizeof(err))) {
			printf("FAIL nccl rank %d: n=%ld: %s\n", rank, n,
			       *err ? err : fw_cuda_error());
			return 1;
		}
		fw_dev_d2h(FW_DEV_CUDA, h, d, sizeof(float) * n);
		if (fw_dev_check(FW_DEV_CUDA, err, sizeof(err))) {
			printf("FAIL nccl rank %d: %s\n", rank, err);
			return 1;
		}
		/* rank 0 gives i%1000, rank 1 gives 2 (i%1000) - 7 */
		for (long i = 0; i < n; i++)
			bad += h[i] != (float)(3 * (i % 1000) - 7);
		printf("%-4s nccl_sum     rank %d of 2, n=%ld floats: %ld wrong (tol bitwise)\n",
		       bad ? "FAIL" : "ok", rank, n, bad);
		fw_dev_free(FW_DEV_CUDA, d);
		free(h);
		if (bad)
			return 1;
	}
	fw_dev_comm_free();
	return 0;
}

int main(void)
{
	pid_t pid[2];
	int st, rc = 0, skipped = 0;

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (pipe(pfd)) {
		perror("check_nccl: pipe");
		return 1;
	}
	for (int r = 0; r < 2; r++) {
		if ((pid[r] = fork()) < 0) {
			perror("check_nccl: fork");
			return 1;
		}
		if (pid[r] == 0) {
			fflush(stdout);
			_exit(rank_main(r));
		}
	}
	close(pfd[0]);
	close(pfd[1]);
	for (int r = 0; r < 2; r++) {
		if (waitpid(pid[r], &st, 0) < 0 || !WIFEXITED(st))
			rc = 1;
		else if (WEXITSTATUS(st) == 77)
			skipped++;
		else if (WEXITSTATUS(st))
			rc = 1;
	}
	if (skipped == 2 && rc == 0)
		return 77;
	if (skipped)
		rc = 1;
	printf("check_nccl: %s\n", rc ? "FAILED" : "both ranks agree");
	return rc;
}
