// kernels/cuda/gemm_nvfp4_sm90_repacked.cu -- the repacked-weight GEMM ("rg") for batched
// decode and small prefill (more than 16 virtual activation rows) on Hopper.
//
// Why a second kernel: the repacked GEMV (gemv_nvfp4_sm90_repacked.cu) holds 16 virtual rows
// per launch, so B sequences read every weight ceil(B / 16) times; at B = 64 that made NVFP4
// decode 0.58x cuBLAS bf16 (docs/perf-cuda.md 19.9). Its activations come from L1/L2 per warp
// (4 bytes of activation loads per weight byte at M = 16, §17), which is why more rows per warp
// did not help there. Here a block stages each 128-k step of 32 or 64 activation rows in shared
// memory once for all its warps, and each warp decodes its weights once for all those rows.
//
// Design (layout: repack_nvfp4_sm90.h; same decode and mma as the rp kernel):
//  * Block = W warps; warp w owns RT row tiles (16 rows each) of the block's 16 RT W rows; every
//    warp runs the block's whole K range, chunk pair (128 k) by chunk pair.
//  * Per chunk pair, a stage in shared memory holds the block's weights (RT W x 1 KB, verbatim
//    from the layout: lane L's 16 bytes at 16 L), scales (RT W x 128 B) and activations (8 NB rows
//    x 256 B, row pitch 272 B: the 16-byte fragment reads of lanes (g, t) at 272 g + 32 t hit 8
//    distinct 4-bank groups per quarter warp, conflict-free). All of it arrives by cp.async
//    (no registers in flight), kStages deep, one __syncthreads per chunk pair.
//  * Per chunk pair and warp: 8 RT weight words decoded (8 integer ops + 4 HMUL2 each), each
//    word's 4 A registers feeding NB mma.sync m16n8k16 (one per n8 tile of activation rows).
//  * K split over blocks (grid z) where the row blocks alone do not fill the GPU: each block
//    writes fp32 partials and finalize_k_split<> sums them in split order, so the result does not depend
//    on timing. (A "last block sums the tile" epilogue was tried first: its one block per tile
//    read k_split x 64 x 256 partials at L2 latency, ~25 us at 64 x 4096 x 4096.)
//  * fp16 activations run the fp16 mma (RpOps, as the rp kernel: docs/perf-cuda.md 48); fp32
//    activations arrive as 3 exact bf16 pieces (matmul_cuda.cu), virtual rows pc * m_rows + m; an
//    m-block holds all pieces of its real rows and sums them in the epilogue.
// Measured (H200, docs/perf-cuda.md 21): 200-270 TFLOP/s at M = 64..256, latency-bound (ncu at
// 64 x 4096 x 4096: 0.50 instructions issued per scheduler per cycle, tensor pipe 26% active).
#include "kernels/cuda/gemm_nvfp4_sm90_repacked.h"

#include <algorithm>
#include <string>

#include "kernels/cuda/gemv_sm90_device.cuh"

namespace nvfp4::cuda {
namespace {

constexpr int kStages = 3;        // cp.async ring depth (chunk pairs); 2 ahead
constexpr int kARowBytes = 272;   // activation row pitch in a stage: 256 + 16 (bank spread)
constexpr int kRedPitch = 16 * 2 + 1;  // epilogue: floats per (warp, slot) row of <= 32 outputs, +1 (banks)

__host__ __device__ constexpr int rg_stage_bytes(int w, int rt, int nb) { return w * rt * (1024 + 128) + 8 * nb * kARowBytes; }
__host__ __device__ constexpr int rg_real_rows_per_mblock(int nb, int pieces) { return pieces == 1 ? 8 * nb : 8 * nb / pieces; }

// Copies chunk pair `cp` of the block's weights (W*RT row tiles), scales and activation rows into
// the stage at shared address `st` (cp.async, this thread's share). wblk/sblk: the block's first
// row tile in the layout; tiles past the last are clamped to it (read, never stored). vr[j]: the
// virtual row behind activation slot row (tid / 16 + j * 2W).
template <int W, int RT, int NB>
__device__ __forceinline__ void rg_issue(const std::uint8_t* wblk, const std::uint8_t* sblk, std::int64_t k, int last_tile,
                                         const std::uint8_t* a, std::int64_t a_row_bytes, const int (&vr)[NB * 128 / (32 * W)],
                                         int cp, std::uint32_t st) {
  constexpr int kThreads = 32 * W, kTiles = W * RT;
  const int tid = threadIdx.x;
#pragma unroll
  for (int j = 0; j < kTiles * 64 / kThreads; ++j) {  // weights: W*RT tiles x 64 segments of 16 B
    const int i = tid + j * kThreads, tl = min(i >> 6, last_tile), seg = i & 63;
    cp_async16(st + i * 16, wblk + static_cast<std::size_t>(tl) * (8 * k) + cp * 1024 + seg * 16, true);
  }
  if (tid < kTiles * 8) {  // scales: W*RT tiles x 8 segments of 16 B
    const int tl = min(tid >> 3, last_tile), seg = tid & 7;
    cp_async16(st + kTiles * 1024 + tid * 16, sblk + static_cast<std::size_t>(tl) * k + cp * 128 + seg * 16, true);
  }
#pragma unroll
  for (int j = 0; j < NB * 128 / kThreads; ++j) {  // activations: 8 NB rows x 16 segments
    const int i = tid + j * kThreads, row = i >> 4, seg = i & 15;
    cp_async16(st + kTiles * 1152 + row * kARowBytes + seg * 16, a + vr[j] * a_row_bytes + cp * 256 + seg * 16, true);
  }
}

// One chunk pair from the stage at `stage` (generic pointer into shared memory) into acc. Per
// half chunk and pair of mma steps: the NB activation fragments first, then the RT row tiles'
// two words decoded, then the HMMAs step-major, so that the two HMMAs into one accumulator are
// RT * NB instructions apart (a warp here has few neighbours to hide its latencies).
template <int W, int RT, int NB, RpOps O>
__device__ __forceinline__ void rg_compute(const std::uint8_t* stage, int warp, int lane, float (&acc)[RT][NB][4]) {
  constexpr bool F16 = rp_f16(O);
  const int g = lane >> 2, t = lane & 3;
  const std::uint8_t* sw = stage + warp * RT * 1024 + lane * 16;                  // + 1024 r + 512 h
  const std::uint8_t* ss = stage + W * RT * 1024 + warp * RT * 128 + lane * 4;   // + 128 r
  const std::uint8_t* sa = stage + W * RT * 1152 + g * kARowBytes + t * 32;      // + 8 b rows, 128 h, 16 jp
  std::uint32_t s[RT];
#pragma unroll
  for (int r = 0; r < RT; ++r) s[r] = *reinterpret_cast<const std::uint32_t*>(ss + 128 * r);
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    uint4 q[RT];
    std::uint32_t sg[RT], sg8[RT];
#pragma unroll
    for (int r = 0; r < RT; ++r) {
      q[r] = *reinterpret_cast<const uint4*>(sw + 1024 * r + 512 * h);
      sg[r] = h ? rp_scale<2, F16>(s[r]) : rp_scale<0, F16>(s[r]);
      sg8[r] = h ? rp_scale<3, F16>(s[r]) : rp_scale<1, F16>(s[r]);
    }
#pragma unroll
    for (int jp = 0; jp < 2; ++jp) {
      // Steps 2 jp and 2 jp + 1 of n8 tile b: the lane's B words (x[16t+4j], x[16t+4j+2]) pairs.
      uint4 xv[NB];
#pragma unroll
      for (int b = 0; b < NB; ++b) xv[b] = *reinterpret_cast<const uint4*>(sa + 8 * b * kARowBytes + 128 * h + 16 * jp);
      std::uint32_t d[RT][2][4];  // [row tile][step 2 jp + jj][A register]
#pragma unroll
      for (int r = 0; r < RT; ++r)
#pragma unroll
        for (int jj = 0; jj < 2; ++jj) {
          const std::uint32_t w = jp == 0 ? (jj == 0 ? q[r].x : q[r].y) : (jj == 0 ? q[r].z : q[r].w);
          rp_decode_scaled<O>(w, sg[r], sg8[r], d[r][jj]);
        }
#pragma unroll
      for (int jj = 0; jj < 2; ++jj)
#pragma unroll
        for (int r = 0; r < RT; ++r)
#pragma unroll
          for (int b = 0; b < NB; ++b)
            mma16816<F16>(acc[r][b], d[r][jj][0], d[r][jj][1], d[r][jj][2], d[r][jj][3], jj ? xv[b].z : xv[b].x,
                            jj ? xv[b].w : xv[b].y);
    }
  }
}

// Resident blocks per SM the register budget is set for: 24 warps (<= 85 registers) with 16
// accumulators per thread (RT * NB = 4), 16 warps (<= 128) with 32.
__host__ __device__ constexpr int rg_min_blocks(int w, int rt, int nb) { return rt * nb <= 4 ? 24 / w : 16 / w; }

// Grid: x = m-block (fastest, so the blocks that share a row block's weights run together and
// the second reads them from L2), y = row block, z = K split.
template <int W, int RT, int NB, RpOps O>
__global__ void __launch_bounds__(32 * W, rg_min_blocks(W, RT, NB)) gemm_nvfp4_rg_kernel(GemvArgs p, int k_split, float* ws) {
  constexpr int kThreads = 32 * W, MB = 8 * NB, kActCopies = NB * 128 / kThreads, kRows = 16 * RT;
  extern __shared__ __align__(16) std::uint8_t rg_smem[];
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int pairs = static_cast<int>(p.k / 128);
  const int per = (pairs + k_split - 1) / k_split;
  const int c_beg = min(pairs, static_cast<int>(blockIdx.z) * per), c_end = min(pairs, c_beg + per);
  const int ntiles = static_cast<int>(p.n / 16);
  const int tile0 = static_cast<int>(blockIdx.y) * W * RT;
  const int mr = rg_real_rows_per_mblock(NB, p.pieces);
  const int m0 = static_cast<int>(blockIdx.x) * mr;
  const int m_here = min(mr, p.m_rows - m0);  // real rows of this m-block

  // Activation slot row -> virtual row (pieces of one real row share the m-block); slots past
  // the real rows read virtual row 0: their mma columns are never stored.
  int vr[kActCopies];
#pragma unroll
  for (int j = 0; j < kActCopies; ++j) {
    const int row = (tid + j * kThreads) >> 4;
    const int pc = row / mr, ml = row % mr;
    vr[j] = (pc < p.pieces && ml < m_here) ? pc * p.m_rows + m0 + ml : 0;
  }

  // Overlapped launch: nothing is read before the previous kernel has completed (as the rp
  // kernel's default launch); a no-op without the PDL attribute.
  pdl_launch_dependents();
  pdl_wait();
  const std::uint8_t* wblk = p.packed + static_cast<std::size_t>(tile0) * (8 * p.k);
  const std::uint8_t* sblk = p.scales + static_cast<std::size_t>(tile0) * p.k;
  const int last_tile = ntiles - 1 - tile0;
  const std::uint8_t* a = static_cast<const std::uint8_t*>(p.a);
  const std::int64_t a_row_bytes = p.a_stride * 2;
  const std::uint32_t smem0 = static_cast<std::uint32_t>(__cvta_generic_to_shared(rg_smem));
  constexpr int kStage = rg_stage_bytes(W, RT, NB);

  float acc[RT][NB][4];
  zero_accumulators(acc);
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (c_beg + s < c_end) rg_issue<W, RT, NB>(wblk, sblk, p.k, last_tile, a, a_row_bytes, vr, c_beg + s, smem0 + s * kStage);
    cp_async_commit();
  }
  int slot = 0;
  for (int cp = c_beg; cp < c_end; ++cp) {
    cp_async_wait<kStages - 2>();
    __syncthreads();  // stage `slot` is complete for every thread; slot - 1 is free again
    const int nxt = cp + kStages - 1;
    const int nslot = slot == 0 ? kStages - 1 : slot - 1;
    if (nxt < c_end) rg_issue<W, RT, NB>(wblk, sblk, p.k, last_tile, a, a_row_bytes, vr, nxt, smem0 + nslot * kStage);
    cp_async_commit();
    rg_compute<W, RT, NB, O>(rg_smem + slot * kStage, warp, lane, acc);
    slot = slot + 1 == kStages ? 0 : slot + 1;
  }
  cp_async_wait<0>();
  __syncthreads();  // every warp is done with the stages: reuse them for the partials

  // Accumulators -> red[warp][slot][row] (slot = virtual row of the m-block, row < 16 RT).
  float* red = reinterpret_cast<float*>(rg_smem);
  {
    const int g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int r = 0; r < RT; ++r)
#pragma unroll
      for (int b = 0; b < NB; ++b)
#pragma unroll
        for (int c = 0; c < 4; ++c)
          red[(warp * MB + 8 * b + 2 * t + (c & 1)) * kRedPitch + 16 * r + g + 8 * (c >> 1)] = acc[r][b][c];
  }
  __syncthreads();

  // Output (m0 + ml, n): the pieces summed in order; then stored, or (K split) written as split
  // z's partial for finalize_k_split<>.
  const DType yt = static_cast<DType>(p.y_dtype);
  const float out_scale = 128.0f * p.tensor_scale;  // 2^7: the decode's exponent offset (repack_nvfp4_sm90.h)
  const std::int64_t n_blk = static_cast<std::int64_t>(tile0) * 16;
  for (int o = tid; o < m_here * kRows * W; o += kThreads) {
    const int ml = o / (kRows * W), col = o % (kRows * W);
    const std::int64_t n = n_blk + col;
    if (n >= p.n) continue;
    float sum = 0.0f;
    for (int pc = 0; pc < p.pieces; ++pc) sum += red[((col / kRows) * MB + pc * mr + ml) * kRedPitch + col % kRows];
    if (k_split == 1)
      store_from_f32(p.y, yt, (m0 + ml) * p.y_stride + n, sum * out_scale);
    else
      ws[(static_cast<std::size_t>(blockIdx.z) * p.m_rows + m0 + ml) * p.n + n] = sum;
  }
}

struct RgGrid {
  std::int64_t row_blocks = 0, m_blocks = 0;
};

constexpr int kWarps = 8, kRowTiles = 1;  // the compiled block shape (RgemmTile)

RgGrid rg_grid(const GemvArgs& a, const RgemmTile& t) {
  const int mr = rg_real_rows_per_mblock(t.nb, a.pieces);
  const std::int64_t rows = 16 * kRowTiles * kWarps;
  return {(a.n + rows - 1) / rows, (a.m_rows + mr - 1) / mr};
}

template <int W, int RT, int NB, RpOps O>
cudaError_t launch_rg(const GemvArgs& a, const RgemmTile& t, void* workspace, cudaStream_t stream) {
  const RgGrid gr = rg_grid(a, t);
  const std::size_t smem = std::max<std::size_t>(static_cast<std::size_t>(kStages) * rg_stage_bytes(W, RT, NB),
                                                 static_cast<std::size_t>(W) * 8 * NB * kRedPitch * sizeof(float));
  return launch_split_k_gemm(reinterpret_cast<const void*>(gemm_nvfp4_rg_kernel<W, RT, NB, O>),
                             dim3(static_cast<unsigned>(gr.m_blocks), static_cast<unsigned>(gr.row_blocks),
                                  static_cast<unsigned>(t.k_split)),
                             dim3(32 * W), smem, a, t.k_split, workspace, stream);
}

}  // namespace

bool rgemm_tile_valid(const RgemmTile& t) { return (t.nb == 4 || t.nb == 8) && t.k_split >= 1 && t.k_split <= 64; }

// Measured on H200 (docs/perf-cuda.md 21; bench/results/cuda-2026-12-01-h200-rgemm-sweep.json.gz,
// five block shapes x K splits at M = 32..256): 8 warps of 16 rows (80 registers, 24 warps per
// SM) won or came within 3% of the best at every shape; 64 activation rows per block where the
// row blocks x m-blocks of 64 already fill half the SMs (M = 64: the lm_head 257.7 against 292.8
// us, 14336 x 4096 42.80 against 45.88), else 32 (64 x 4096 x 4096: 15.65 against 17.33 us,
// 128 x 4096 x 4096 25.27 against 26.16); and a K split that brings the grid
// to ~256 blocks (two per SM; a power of two, as measured), with at least 4 chunk pairs per split.
RgemmTile rgemm_pick_tile(int sms, std::int64_t n, std::int64_t k, std::int64_t vrows) {
  RgemmTile t;
  const std::int64_t row_blocks = (n + 16 * kRowTiles * kWarps - 1) / (16 * kRowTiles * kWarps);
  const std::int64_t want = 2 * std::max(sms, 1);
  t.nb = vrows > 32 && 2 * row_blocks * ((vrows + 63) / 64) >= std::max(sms, 1) ? 8 : 4;
  const std::int64_t blocks = row_blocks * ((vrows + 8 * t.nb - 1) / (8 * t.nb));
  const std::int64_t pairs = k / 128;
  const std::int64_t need = (want + blocks - 1) / blocks;
  std::int64_t ks = 1;
  while (ks * 2 <= need && ks * 2 * 4 <= pairs && ks < 64) ks *= 2;  // a power of two, >= 4 pairs each
  t.k_split = static_cast<int>(ks);
  return t;
}

std::size_t rgemm_workspace_bytes(const GemvArgs& a, const RgemmTile& t) {
  return t.k_split <= 1 ? 0 : static_cast<std::size_t>(t.k_split) * a.m_rows * a.n * sizeof(float);
}

cudaError_t gemm_nvfp4_sm90_repacked(const GemvArgs& a, const RgemmTile& t, void* workspace, cudaStream_t stream) {
  return with_rp_ops(a, [&](auto ops) {
    constexpr RpOps O = decltype(ops)::value;
    return t.nb == 4 ? launch_rg<kWarps, kRowTiles, 4, O>(a, t, workspace, stream)
                     : launch_rg<kWarps, kRowTiles, 8, O>(a, t, workspace, stream);
  });
}

std::string gemm_nvfp4_sm90_repacked_name(const RgemmTile& t) {
  return "gemm_nvfp4_sm90_rg_r" + std::to_string(16 * kRowTiles * kWarps) + "_m" + std::to_string(8 * t.nb);
}

}  // namespace nvfp4::cuda
