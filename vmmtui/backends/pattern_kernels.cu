// The pattern's fill and verify kernels (vmmtui/backends/kernels.py loads them).
// Edit here, then regenerate the shipped PTX: python -m vmmtui.backends.kernel_image --write-ptx
#define PATTERN(i) ((unsigned int)((i) * 2ull + 1337ull) ^ 0xDEADBEEFu)

extern "C" __global__ void fill_pattern(unsigned int* __restrict__ data, unsigned long long count,
                                        unsigned long long first) {
    const unsigned long long stride = (unsigned long long)blockDim.x * gridDim.x;
    const unsigned long long tid = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
    const unsigned long long quads = count / 4;
    uint4* __restrict__ d4 = reinterpret_cast<uint4*>(data);
    for (unsigned long long q = tid; q < quads; q += stride) {
        const unsigned long long i = first + q * 4;
        d4[q] = make_uint4(PATTERN(i), PATTERN(i + 1), PATTERN(i + 2), PATTERN(i + 3));
    }
    for (unsigned long long j = quads * 4 + tid; j < count; j += stride) data[j] = PATTERN(first + j);
}

/* result[0] += mismatches; result[1] = min(result[1], first mismatching index) */
extern "C" __global__ void verify_pattern(const unsigned int* __restrict__ data, unsigned long long count,
                                          unsigned long long first, unsigned long long* result) {
    const unsigned long long stride = (unsigned long long)blockDim.x * gridDim.x;
    const unsigned long long tid = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
    const unsigned long long quads = count / 4;
    const uint4* __restrict__ d4 = reinterpret_cast<const uint4*>(data);
    unsigned long long bad = 0, low = ~0ull;
    unsigned long long q = tid;
    /* four independent 16-byte loads in flight per thread before any compare: memory-level parallelism */
    for (; q + 3 * stride < quads; q += 4 * stride) {
        uint4 v[4];
        #pragma unroll
        for (int u = 0; u < 4; u++) v[u] = d4[q + u * stride];
        #pragma unroll
        for (int u = 0; u < 4; u++) {
            const unsigned long long j = (q + u * stride) * 4, i = first + j;
            if (v[u].x != PATTERN(i))     { bad++; low = min(low, j); }
            if (v[u].y != PATTERN(i + 1)) { bad++; low = min(low, j + 1); }
            if (v[u].z != PATTERN(i + 2)) { bad++; low = min(low, j + 2); }
            if (v[u].w != PATTERN(i + 3)) { bad++; low = min(low, j + 3); }
        }
    }
    for (; q < quads; q += stride) {
        const uint4 v = d4[q];
        const unsigned long long j = q * 4, i = first + j;
        if (v.x != PATTERN(i))     { bad++; low = min(low, j); }
        if (v.y != PATTERN(i + 1)) { bad++; low = min(low, j + 1); }
        if (v.z != PATTERN(i + 2)) { bad++; low = min(low, j + 2); }
        if (v.w != PATTERN(i + 3)) { bad++; low = min(low, j + 3); }
    }
    for (unsigned long long j = quads * 4 + tid; j < count; j += stride)
        if (data[j] != PATTERN(first + j)) { bad++; low = min(low, j); }
    if (bad) {
        atomicAdd(&result[0], bad);
        atomicMin(&result[1], low);
    }
}
