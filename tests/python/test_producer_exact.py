"""End to end: `nvfp4 quantize` writes, byte for byte, what each producer's recipe produces.

A small Llama-shaped checkpoint (bf16, fp16 and fp32 variants, adversarial values: rounding
ties, all-zero blocks, tiny and huge magnitudes in one block, K not a multiple of 16) is written
with the official `safetensors` package; nvfp4 quantizes it in each format; the output is read
back with the official reader and compared with producer_recipes.py (numpy restatement of the
producers' code). Also: q/k/v and gate/up share one tensor scale, embeddings/norms/lm_head are
left untouched, and `nvfp4 dequantize` gives w = e2m1 * e4m3 * tensor_scale in fp32.

Run: python3 tests/python/test_producer_exact.py  (env NVFP4_CLI = path of the nvfp4 binary).
Exit code 77 means skipped (a Python package is missing); CTest maps it to "skipped".
"""
import json
import os
import subprocess
import sys
import tempfile
import unittest

try:
    import ml_dtypes
    import numpy as np
    from safetensors import TensorSpec, deserialize, serialize_file
except ImportError as e:  # pragma: no cover
    print(f"SKIP: python package missing ({e}); install numpy ml_dtypes safetensors")
    sys.exit(77)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import producer_recipes as pr  # noqa: E402

CLI = os.environ.get("NVFP4_CLI", "nvfp4")
SEED = int(os.environ.get("NVFP4_TEST_SEED", "20261130"))
ST_DTYPE = {np.dtype(np.float32): "float32", np.dtype(np.float16): "float16",
            np.dtype(ml_dtypes.bfloat16): "bfloat16", np.dtype(np.uint8): "uint8",
            np.dtype(np.uint32): "uint32", np.dtype(ml_dtypes.float8_e4m3fn): "float8_e4m3fn"}
NP_DTYPE = {"F32": np.float32, "F16": np.float16, "BF16": ml_dtypes.bfloat16, "U8": np.uint8,
            "U32": np.uint32, "F8_E4M3": ml_dtypes.float8_e4m3fn}


def st_write(path, tensors, metadata=None):
    keep = {k: np.ascontiguousarray(v) for k, v in tensors.items()}
    specs = {k: TensorSpec(dtype=ST_DTYPE[v.dtype], shape=list(v.shape), data_ptr=v.ctypes.data, data_len=v.nbytes)
             for k, v in keep.items()}
    serialize_file(specs, path, metadata)


def st_read_dir(folder):
    out = {}
    for f in sorted(os.listdir(folder)):
        if f.endswith(".safetensors"):
            with open(os.path.join(folder, f), "rb") as fh:
                for name, t in deserialize(fh.read()):
                    arr = np.frombuffer(bytes(t["data"]), dtype=NP_DTYPE[t["dtype"]]).reshape(t["shape"])
                    assert name not in out, f"{name} in two shards"
                    out[name] = arr
    return out


def adversarial(rng, n, k):
    w = rng.standard_normal((n, k)).astype(np.float32) * 0.05
    for r in range(n):
        for b in range(0, k, 16):
            mode = rng.integers(0, 8)
            sl = slice(b, min(k, b + 16))
            if mode == 0:
                w[r, sl] = 0.0
            elif mode == 1:
                w[r, sl] *= 1e-4
                w[r, b] = 3.0
            elif mode == 2:  # grid values and exact ties of the block's divisor
                grid = np.array([0, 0.25, 0.5, 0.75, 1, 1.25, 1.5, 1.75, 2, 2.5, 3, 3.5, 4, 5, 6], np.float32)
                w[r, sl] = rng.choice(grid, size=w[r, sl].shape) * rng.choice([-1, 1], size=w[r, sl].shape) * 0.01
            elif mode == 3:
                w[r, sl] *= 1e-7
    return w


def make_model(folder, dtype, rng):
    h, inter, kv, vocab = 48, 80, 16, 64
    shapes = {
        "model.embed_tokens.weight": (vocab, h),
        "model.layers.0.self_attn.q_proj.weight": (h, h),
        "model.layers.0.self_attn.k_proj.weight": (kv, h),
        "model.layers.0.self_attn.v_proj.weight": (kv, h),
        "model.layers.0.self_attn.o_proj.weight": (h, h),
        "model.layers.0.mlp.gate_proj.weight": (inter, h),
        "model.layers.0.mlp.up_proj.weight": (inter, h),
        "model.layers.0.mlp.down_proj.weight": (h, inter),
        "model.layers.0.mlp.odd_proj.weight": (8, 40),  # K = 40: left dense (see docs/format.md)
        "lm_head.weight": (vocab, h),
    }
    t = {k: adversarial(rng, *s).astype(dtype) for k, s in shapes.items()}
    t["model.layers.0.input_layernorm.weight"] = np.ones(h, dtype=dtype)
    st_write(os.path.join(folder, "model.safetensors"), t, {"format": "pt"})
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump({"architectures": ["LlamaForCausalLM"], "hidden_size": h, "torch_dtype": "bfloat16"}, f)
    return t


GROUPS = [["q_proj", "k_proj", "v_proj"], ["gate_proj", "up_proj"]]
QUANTIZED = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


def group_amax(t, name, fmt):
    if fmt == "mlx":  # MLX has no fused-linear scale sharing: one global scale per weight
        return np.abs(t[name].astype(np.float32)).max()
    short = name.split(".")[-2]
    for g in GROUPS:
        if short in g:
            prefix = name.rsplit(".", 2)[0]
            return max(np.abs(t[f"{prefix}.{m}.weight"].astype(np.float32)).max() for m in g)
    return np.abs(t[name].astype(np.float32)).max()


class ProducerExact(unittest.TestCase):
    def run_cli(self, *args):
        p = subprocess.run([CLI, *args], capture_output=True, text=True)
        self.assertEqual(p.returncode, 0, f"nvfp4 {' '.join(args)} failed: {p.stderr}")

    def check(self, dtype, fmt, extra=()):
        rng = np.random.default_rng(SEED)
        with tempfile.TemporaryDirectory() as d:
            src, dst, deq = (os.path.join(d, x) for x in ("in", "out", "deq"))
            os.mkdir(src)
            t = make_model(src, dtype, rng)
            self.run_cli("quantize", src, dst, "--format", fmt, *extra)
            no_gs = "--mlx-global-scale" not in extra  # mlx-lm's layout is the CLI default
            out = st_read_dir(dst)
            for name, w in t.items():
                prefix = name[: -len(".weight")]
                if not any(f".{q}." in name for q in QUANTIZED):
                    self.assertIn(name, out, f"unquantized tensor {name} missing")
                    self.assertEqual(out[name].dtype, w.dtype, name)
                    self.assertEqual(out[name].tobytes(), w.tobytes(), f"{name} changed")
                    continue
                amax = group_amax(t, name, fmt)
                if fmt == "modelopt":
                    packed, scales, s2 = pr.modelopt(w, amax=np.float32(amax))
                    got_p, got_s, got_g = out[f"{prefix}.weight"], out[f"{prefix}.weight_scale"], out[f"{prefix}.weight_scale_2"]
                    self.assertEqual(got_g.shape, (), name)
                    want_g = s2
                elif fmt == "compressed-tensors":
                    packed, scales, gs = pr.compressed_tensors(w, amax=w.dtype.type(amax))
                    got_p, got_s, got_g = out[f"{prefix}.weight_packed"], out[f"{prefix}.weight_scale"], out[f"{prefix}.weight_global_scale"]
                    self.assertEqual(got_g.shape, (1,), name)
                    want_g = gs
                else:
                    packed, scales, gsc = pr.mlx(w, amax=np.float32(amax), global_scale=not no_gs)
                    got_p, got_s = out[f"{prefix}.weight"], out[f"{prefix}.scales"]
                    self.assertEqual(got_p.dtype, np.uint32, name)
                    if no_gs:  # mlx-lm layout: no global scale tensor at all
                        self.assertNotIn(f"{prefix}.global_scale", out)
                    got_g = out.get(f"{prefix}.global_scale", np.float32(1.0))
                    want_g = gsc if gsc is not None else np.float32(1.0)
                seed_note = f"seed={SEED} dtype={np.dtype(dtype).name} format={fmt} tensor={name}"
                self.assertEqual(got_p.view(np.uint8).reshape(packed.shape).tobytes(), packed.tobytes(), f"packed differs: {seed_note}")
                self.assertEqual(got_s.view(np.uint8).reshape(scales.shape).tobytes(), scales.tobytes(), f"scales differ: {seed_note}")
                self.assertEqual(np.float32(got_g.reshape(())).tobytes(), np.float32(want_g).tobytes(), f"tensor scale differs: {seed_note}")
            # Dequantize to fp32: w = fl(fl(e2m1 * e4m3) * tensor_scale).
            self.run_cli("dequantize", dst, deq, "--dtype", "f32")
            back = st_read_dir(deq)
            name = "model.layers.0.mlp.down_proj.weight"
            self.assertEqual(back[name].dtype, np.float32)
            prefix = name[: -len(".weight")]
            if fmt == "modelopt":
                p, s, ts = out[f"{prefix}.weight"], out[f"{prefix}.weight_scale"], np.float32(out[f"{prefix}.weight_scale_2"])
            elif fmt == "compressed-tensors":
                p, s = out[f"{prefix}.weight_packed"], out[f"{prefix}.weight_scale"]
                ts = np.float32(1.0) / np.float32(out[f"{prefix}.weight_global_scale"][0])
            else:
                p, s = out[f"{prefix}.weight"].view(np.uint8), out[f"{prefix}.scales"]
                ts = (np.float32(1.0) if no_gs else
                      np.float32(out[f"{prefix}.global_scale"]) / np.float32(2688.0))
            p = p.view(np.uint8).reshape(p.shape[0], -1)
            codes = np.stack([p & 15, p >> 4], axis=-1).reshape(p.shape[0], -1)
            lut = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -0.5, -1, -1.5, -2, -3, -4, -6], np.float32)
            sv = s.view(ml_dtypes.float8_e4m3fn).astype(np.float32)
            want = (lut[codes] * np.repeat(sv, 16, axis=1)) * ts
            self.assertTrue(np.array_equal(back[name].reshape(want.shape)[:, : want.shape[1]], want),
                            f"dequantize differs (seed={SEED}, {fmt})")

    def test_modelopt(self):
        for dt in (ml_dtypes.bfloat16, np.float16, np.float32):
            with self.subTest(dtype=np.dtype(dt).name):
                self.check(dt, "modelopt")

    def test_compressed_tensors(self):
        for dt in (ml_dtypes.bfloat16, np.float16, np.float32):
            with self.subTest(dtype=np.dtype(dt).name):
                self.check(dt, "compressed-tensors")

    def test_mlx(self):
        for dt in (ml_dtypes.bfloat16, np.float16, np.float32):
            with self.subTest(dtype=np.dtype(dt).name):
                self.check(dt, "mlx")
                self.check(dt, "mlx", ("--mlx-global-scale",))


if __name__ == "__main__":
    print(f"producer-exact test: seed={SEED} cli={CLI}")
    unittest.main()
