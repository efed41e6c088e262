"""Independent re-statement of the three producers' NVFP4 weight recipes in numpy.

Written from the producers' published code paths (modelopt NVFP4QTensor, compressed-tensors
generate_gparam/calculate_qparams/_quantize/cast_to_fp4/pack_fp4_to_uint8 and its Triton
quantize-and-pack kernel, MLX fp_quantize), op by op, with numpy float32
(IEEE single, round-to-nearest-even) standing in for torch/Metal fp32 and ml_dtypes for the
bf16/fp16/float8_e4m3fn casts. It shares no code with nvfp4's C++ quantizers: the CLI test
compares nvfp4's checkpoint bytes against what these functions produce.
"""
import ml_dtypes
import numpy as np

F32 = np.float32
E4M3 = ml_dtypes.float8_e4m3fn


def _pack(codes):
    """codes [N, K] uint8 -> [N, K/2], element 2j in the low nibble."""
    c = codes.astype(np.uint8)
    return (c[:, 0::2] | (c[:, 1::2] << 4)).astype(np.uint8)


def _pad16(w):
    k = w.shape[1]
    kp = (k + 15) // 16 * 16
    if kp == k:
        return w
    out = np.zeros((w.shape[0], kp), dtype=w.dtype)
    out[:, :k] = w
    return out


def _e4m3_bytes(x):
    return np.asarray(x, dtype=F32).astype(E4M3).view(np.uint8)


def modelopt(w, amax=None, legacy=False):
    """w: [N, K] array (float32/float16/bfloat16). Returns (packed, scale_bytes, weight_scale_2)."""
    x = _pad16(w).astype(F32)
    if amax is None:
        amax = np.abs(x).max()
    s2 = F32(amax) / F32(6.0 * 448.0)
    blocks = x.reshape(x.shape[0], -1, 16)
    bamax = np.abs(blocks).max(axis=-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        sb = bamax / (F32(6.0) * s2)
    sb[sb == 0] = F32(1.0)
    if not legacy:
        sb = np.clip(sb, F32(2.0**-9), F32(448.0))
    sbytes = _e4m3_bytes(sb)
    eff = sbytes.view(E4M3).astype(F32) * s2
    with np.errstate(divide="ignore", invalid="ignore"):
        y = blocks / eff[..., None]
    # _cast_fp4: sign = y < 0, searchsorted over the bounds, ties 0.75/1.75/3.5 bumped up.
    sign = (y < 0).astype(np.uint8)
    a = np.abs(y)
    bounds = np.array([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0], dtype=F32)
    order = np.searchsorted(bounds, a.ravel(), side="left").reshape(a.shape)
    order = order + np.isin(a, np.array([0.75, 1.75, 3.5], dtype=F32))
    codes = (sign << 3) + order.astype(np.uint8)
    return _pack(codes.reshape(x.shape)), sbytes.reshape(bamax.shape), F32(s2)


def _e2m1_codes(y, sign_rule="signbit"):
    """Threshold form of compressed-tensors' cast_to_fp4 / Triton kernels and MLX's fp4_e2m1.
    sign_rule "signbit" (MLX's Metal kernel): the IEEE sign bit is kept, -0.0 -> 0x8.
    sign_rule "lt0" (compressed-tensors): torch.sign(-0.0) is 0 and the Triton kernels test
    y < 0, so -0.0 -> 0x0 while a negative y that rounds to 0 -> 0x8."""
    a = np.abs(y)
    mag = np.zeros(a.shape, dtype=np.uint8)
    mag[a > 0.25] = 1
    mag[a >= 0.75] = 2
    mag[a > 1.25] = 3
    mag[a >= 1.75] = 4
    mag[a > 2.5] = 5
    mag[a >= 3.5] = 6
    mag[a > 5.0] = 7
    neg = np.signbit(y) if sign_rule == "signbit" else (y < 0)
    return mag | (neg.astype(np.uint8) << 3)


def compressed_tensors(w, amax=None):
    """Returns (packed, scale_bytes, weight_global_scale). Ops on the weight dtype round to it.
    The quotient x / (scale / G) is fp32 (the scale parameter is FP8 or the weight dtype, G is
    fp32) and is rounded once."""
    dt = w.dtype
    wp = _pad16(w)
    if amax is None:
        amax = np.abs(wp).max()  # in the weight dtype (exact)
    with np.errstate(divide="ignore", invalid="ignore"):
        gs = np.asarray(F32(2688.0) / F32(amax)).astype(dt).astype(F32)
    if not np.isfinite(gs):
        gs = F32(1.0)
    gs = F32(gs)
    blocks = wp.reshape(wp.shape[0], -1, 16)
    bamax = np.abs(blocks).max(axis=-1)
    t = (bamax.astype(F32) / F32(6.0)).astype(dt).astype(F32)
    s = np.clip(gs * t, F32(-448.0), F32(448.0))
    sbytes = _e4m3_bytes(s)
    sbytes[sbytes == 0] = 0x20  # 0.125
    eff = sbytes.view(E4M3).astype(F32) / gs
    y = blocks.astype(F32) / eff[..., None]
    y = np.clip(y, F32(-6.0), F32(6.0))
    codes = _e2m1_codes(y, sign_rule="lt0")
    return _pack(codes.reshape(wp.shape)), sbytes.reshape(bamax.shape), gs


def mlx(w, amax=None, global_scale=True):
    """Returns (packed uint8 stream, scale_bytes, global_scale or None)."""
    x = _pad16(w).astype(F32)
    if amax is None:
        amax = np.abs(x).max()
    blocks = x.reshape(x.shape[0], -1, 16)
    bamax = np.abs(blocks).max(axis=-1)
    enc = F32(2688.0) / F32(amax) if global_scale else F32(1.0)
    sd = (bamax / F32(6.0)) * enc
    sbytes = _e4m3_bytes(sd)
    s = sbytes.view(E4M3).astype(F32)
    with np.errstate(divide="ignore"):
        enc_b = np.where(s == 0, F32(0.0), enc / s).astype(F32)
    y = blocks * enc_b[..., None]
    codes = _e2m1_codes(y)
    return _pack(codes.reshape(x.shape)), sbytes.reshape(bamax.shape), (F32(amax) if global_scale else None)
