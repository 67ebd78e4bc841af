/*
 * nccl.cu — the gradient all-reduce between GPUs (NCCL), one GPU per
 * process: a communicator made from an id that rank 0 draws and the
 * caller passes to the others (through MPI in train-step), and an
 * in-place sum of f32 device buffers.
 *
 * Under the CPU emulation (make gpu-emu) there is no NCCL: a communicator
 * of one process is all it offers, where the sum is the identity.
 *
 * Build: make CUDA=1 (nvcc; links libnccl).  Test: tests/gpu/check
 * (check_nccl, two processes on two GPUs; skipped with fewer).
 */
#include <string.h>

#include "common.cuh"

#ifndef FW_CUDA_EMU
#include <nccl.h>

static ncclComm_t comm;

#define NCCL_CHECK(call)                                                   \
	do {                                                               \
		ncclResult_t r_ = (call);                                  \
		if (r_ != ncclSuccess)                                     \
			return fw_cuda_fail(__FILE__, __LINE__, #call,     \
					    ncclGetErrorString(r_));       \
	} while (0)

extern "C" int fw_cuda_nccl_id(unsigned char *id, size_t len)
{
	ncclUniqueId u;

	if (len < sizeof(u.internal))
		return fw_cuda_fail(__FILE__, __LINE__, "fw_cuda_nccl_id",
				    "id buffer too small");
	NCCL_CHECK(ncclGetUniqueId(&u));
	memcpy(id, u.internal, sizeof(u.internal));
	return 0;
}

extern "C" int fw_cuda_nccl_init(const unsigned char *id, size_t len,
				 int nranks, int rank)
{
	ncclUniqueId u;

	if (len < sizeof(u.internal))
		return fw_cuda_fail(__FILE__, __LINE__, "fw_cuda_nccl_init",
				    "id buffer too small");
	memcpy(u.internal, id, sizeof(u.internal));
	NCCL_CHECK(ncclCommInitRank(&comm, nranks, u, rank));
	return 0;
}

extern "C" int fw_cuda_nccl_sum(float *x, long n)
{
	if (!comm)
		return fw_cuda_fail(__FILE__, __LINE__, "fw_cuda_nccl_sum",
				    "no communicator (fw_cuda_nccl_init)");
	/* On the default stream, after the backward that wrote x. */
	NCCL_CHECK(ncclAllReduce(x, x, (size_t)n, ncclFloat, ncclSum, comm, 0));
	CUDA_CHECK(cudaDeviceSynchronize());
	return 0;
}

extern "C" void fw_cuda_nccl_free(void)
{
	if (comm)
		ncclCommDestroy(comm);
	comm = NULL;
}

#else

static int nr;

extern "C" int fw_cuda_nccl_id(unsigned char *id, size_t len)
{
	memset(id, 0x5a, len);
	return 0;
}

extern "C" int fw_cuda_nccl_init(const unsigned char *id, size_t len,
				 int nranks, int rank)
{
	(void)id;
	(void)len;
	if (nranks != 1 || rank != 0)
		return fw_cuda_fail(__FILE__, __LINE__, "fw_cuda_nccl_init",
				    "the CPU emulation has one GPU: communicators "
				    "of one process only");
	nr = 1;
	return 0;
}

extern "C" int fw_cuda_nccl_sum(float *x, long n)
{
	(void)x;
	(void)n;
	if (!nr)
		return fw_cuda_fail(__FILE__, __LINE__, "fw_cuda_nccl_sum",
				    "no communicator (fw_cuda_nccl_init)");
	return 0;
}

extern "C" void fw_cuda_nccl_free(void)
{
	nr = 0;
}

#endif
