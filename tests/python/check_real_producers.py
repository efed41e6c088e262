"""`nvfp4 quantize` against the producers' own code, release by release (not a CTest test: the
producers need torch, ~5 GB; scripts/check_producers.sh installs them and runs this).

test_producer_exact.py compares nvfp4 with producer_recipes.py, a numpy restatement written from
the producers' code. This script removes the restatement from the loop: for every dtype and seed
it quantizes the same adversarial weights (test_producer_exact.adversarial: rounding ties,
all-zero and -0.0 blocks, tiny and huge magnitudes in one block) with
  * nvidia-modelopt's NVFP4QTensor.quantize (the installed release, and each older one given with
    --modelopt DIR; CPU path), against nvfp4's default recipe and --legacy-modelopt,
  * compressed-tensors, each release given with --ct DIR (an unpacked wheel), as llm-compressor
    drives it: generate_gparam, calculate_qparams on the 16-element groups, the scale parameter
    in the dtype that release gives it, then the release's own compressor (CPU path); and, for
    releases with the fused Triton quantize-and-pack kernel (0.20 on), the same compressor with
    the Triton backends forced on and run by Triton's interpreter (TRITON_INTERPRET=1): the path
    a GPU runs,
  * MLX's mx.quantize(mode="nvfp4") (the installed mlx, CPU build: not the Metal kernel nvfp4
    follows; its differences are counted and each must be one docs/format.md names),
and compares packed bytes, scale bytes and the tensor scale with `nvfp4 quantize`'s checkpoint.
Then the other direction (check_consumers): the same libraries load nvfp4's checkpoints and
dequantize them, and must agree with `nvfp4 dequantize` (to 1 ulp: they fold the scales first).
Exit code 0 if every check passes (bit-exact files; consumers within 1 ulp); 1 otherwise; one line per check
and writes a JSON summary (--json).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import ml_dtypes
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import test_producer_exact as tpe  # noqa: E402

DTYPES = {"bfloat16": ml_dtypes.bfloat16, "float16": np.float16, "float32": np.float32}
NAME = "model.layers.0.mlp.down_proj"
SHAPE = (64, 256)


def weights(dtype_name, seed):
    return tpe.adversarial(np.random.default_rng(seed), *SHAPE).astype(DTYPES[dtype_name])


def nvfp4_quantize(cli, w, fmt, extra=()):
    """nvfp4's checkpoint for one weight: {tensor suffix: numpy array}."""
    with tempfile.TemporaryDirectory() as d:
        tpe.st_write(os.path.join(d, "in.safetensors"), {f"{NAME}.weight": w})
        subprocess.run([cli, "quantize", os.path.join(d, "in.safetensors"), os.path.join(d, "out.safetensors"),
                        "--format", fmt, *extra], check=True, capture_output=True)
        from safetensors import deserialize
        with open(os.path.join(d, "out.safetensors"), "rb") as f:
            out = {}
            for n, t in deserialize(f.read()):
                out[n[len(NAME) + 1:]] = np.frombuffer(bytes(t["data"]), dtype=tpe.NP_DTYPE[t["dtype"]]).reshape(t["shape"])
        return out


def same(a, b):
    return np.asarray(a).tobytes() == np.asarray(b).tobytes()


def torch_dtype(name):
    import torch
    return {"bfloat16": torch.bfloat16, "float16": torch.float16, "float32": torch.float32}[name]


def check_modelopt(cli, seeds, modelopt_dir=None):
    """modelopt's NVFP4QTensor.quantize against nvfp4's default recipe and --legacy-modelopt
    (releases before the 2^-9 block-scale clamp). A release passes if it matches one of the two on
    every dtype and seed; the row says which."""
    if modelopt_dir:
        sys.path.insert(0, modelopt_dir)
    import torch
    import modelopt.torch.quantization.qtensor.nvfp4_tensor as nvfp4_tensor
    from modelopt.torch.quantization.qtensor.nvfp4_tensor import NVFP4QTensor
    import modelopt
    # Some releases ask fp4_compatible() (a CUDA query) before their TensorRT-LLM shortcut, which
    # only Blackwell machines with tensorrt_llm take; the PyTorch path below is everyone else's.
    if hasattr(nvfp4_tensor, "fp4_compatible"):
        nvfp4_tensor.fp4_compatible = lambda *a, **k: False
    rows = []
    for dt in DTYPES:
        for seed in seeds:
            w = weights(dt, seed)
            tw = torch.from_numpy(w.astype(np.float32)).to(torch_dtype(dt))
            q, s, s2 = NVFP4QTensor.quantize(tw.clone(), 16)
            matches = []
            for mode, extra in (("default", ()), ("--legacy-modelopt", ("--legacy-modelopt",))):
                ours = nvfp4_quantize(cli, w, "modelopt", extra)
                if (same(q._quantized_data.numpy(), ours["weight"]) and same(s.view(torch.uint8).numpy(), ours["weight_scale"])
                        and same(s2.float().numpy().reshape(()), ours["weight_scale_2"].reshape(()))):
                    matches.append(mode)
            rows.append({"producer": "nvidia-modelopt", "version": modelopt.__version__, "path": "cpu",
                         "dtype": dt, "seed": seed, "matches": "/".join(matches) or "none", "ok": bool(matches)})
    return rows


def check_ct_one(cli, ct_dir, seeds, triton):
    """Runs in a child process (one release per process: the package is imported from ct_dir)."""
    if triton:
        os.environ["TRITON_INTERPRET"] = "1"
    sys.path.insert(0, ct_dir)
    import torch
    import compressed_tensors as ct
    from compressed_tensors.quantization import preset_name_to_scheme
    from compressed_tensors.quantization.utils.helpers import calculate_qparams, generate_gparam
    scheme = preset_name_to_scheme("NVFP4A16", ["Linear"])
    args = scheme.weights
    try:  # 0.15 on: a per-module state-dict compressor
        from compressed_tensors.compressors.nvfp4.base import NVFP4PackedCompressor
        new_api = True
    except ImportError:  # 0.10-0.14: compress_weight on a compressor instance
        try:
            from compressed_tensors.compressors.quantized_compressors.fp4_quantized import NVFP4PackedCompressor
        except ImportError:
            from compressed_tensors.compressors.quantized_compressors.nvfp4_quantized import NVFP4PackedCompressor
        new_api = False
    if triton:  # the GPU path: every registered Triton backend made available, in priority order
        # Only releases with the fused quantize-and-pack kernel (0.20 on). 0.18.0 registered its
        # Triton cast disabled (a GPU ran the torch code); 0.19.0's Triton _quantize kernel gave,
        # under the interpreter, codes that disagree with its own CPU path on ~58% of bf16 / fp32
        # weights (fp16 agreed) -- an interpreter artifact not pinned down, so not counted; read
        # by hand, its arithmetic is the CPU path's (div_rn in fp32, the same thresholds, x < 0).
        try:
            from compressed_tensors.utils.impl_backend import ImplBackend
            from compressed_tensors.compressors.nvfp4 import helpers
        except ImportError:
            return []
        if not hasattr(helpers, "quantize_and_pack_fp4_triton"):
            return []
        for name, entries in ImplBackend._backends.items():
            forced = [(fn, (lambda *a, **k: True), p) for fn, _, p in entries if fn.__name__.endswith("_triton")]
            ImplBackend._backends[name] = forced + [e for e in entries if not e[0].__name__.endswith("_triton")]
    if triton:  # the kernels enter torch.cuda.device(x.device); the interpreter runs on the CPU
        import contextlib
        torch.cuda.device = lambda *a, **k: contextlib.nullcontext()
    # The dtype of llm-compressor's weight_scale parameter: FP8 E4M3 in releases whose
    # initialize_qparams says so for FP4 (0.10-0.12), the weight's dtype after that.
    import inspect
    from compressed_tensors.quantization.lifecycle import initialize
    fp8_param = "scale_dtype = zp_dtype = FP8_E4M3_DATA.dtype" in inspect.getsource(initialize)
    rows = []
    for dt in DTYPES:
        for seed in seeds:
            w = weights(dt, seed)
            tw = torch.from_numpy(w.astype(np.float32)).to(torch_dtype(dt))
            g = generate_gparam(tw.min(), tw.max())
            blocks = tw.view(SHAPE[0], SHAPE[1] // 16, 16)
            scale, zp = calculate_qparams(blocks.amin(-1), blocks.amax(-1), args, global_scale=g)
            scale = scale.to(torch.float8_e4m3fn if fp8_param else tw.dtype)
            if new_api:
                sd = {"weight": tw, "weight_scale": scale, "weight_global_scale": g, "weight_zero_point": zp}
                out = NVFP4PackedCompressor.compress(sd, scheme)
            else:
                out = NVFP4PackedCompressor().compress_weight(weight=tw, scale=scale, global_scale=g,
                                                             quantization_args=args, zero_point=zp)
                out.setdefault("weight_scale", scale)  # 0.10-0.12 save the FP8 parameter as it is
            ours = nvfp4_quantize(cli, w, "compressed-tensors")
            ok = (same(out["weight_packed"].numpy(), ours["weight_packed"])
                  and same(out["weight_scale"].view(torch.uint8).numpy(), ours["weight_scale"])
                  and same(g.float().numpy().reshape(()), ours["weight_global_scale"].reshape(())))
            rows.append({"producer": "compressed-tensors", "version": ct.__version__,
                         "path": "triton (interpreter)" if triton else "cpu", "dtype": dt, "seed": seed,
                         "ok": ok})
    return rows


def check_mlx(cli, seeds):
    """MLX's CPU build against nvfp4 (which follows the Metal kernel). Differences are allowed only
    where docs/format.md says the CPU fallback differs: it computes block_amax / 6 and x * enc_b in
    the weight's dtype (so some bf16 scale bytes differ, and the codes of those blocks), sends ties
    of that product to the odd code, and writes +0 for negatives that round to zero."""
    import mlx.core as mx
    rows = []
    mdt = {"bfloat16": mx.bfloat16, "float16": mx.float16, "float32": mx.float32}
    for gs in (False, True):  # nvfp4's default (mlx-lm's layout, no global scale), --mlx-global-scale
        for dt in DTYPES:
            for seed in seeds:
                w = weights(dt, seed)
                x = w.astype(np.float32)
                amax = np.float32(np.abs(x).max())
                if gs:
                    q, s = mx.quantize(mx.array(x).astype(mdt[dt]), mode="nvfp4", global_scale=mx.array(amax))
                else:
                    q, s = mx.quantize(mx.array(x).astype(mdt[dt]), mode="nvfp4")
                q, s = np.array(q).view(np.uint8), np.array(s)
                ours = nvfp4_quantize(cli, w, "mlx", ("--mlx-global-scale",) if gs else ())
                op, osc = ours["weight"].view(np.uint8).reshape(q.shape), ours["scales"].reshape(s.shape)
                codes = lambda p: np.stack([p & 15, p >> 4], -1).reshape(p.shape[0], -1)
                cm, co = codes(q), codes(op)
                # our quotient, as the Metal kernel computes it: x * (enc / float(s))
                sv = osc.view(ml_dtypes.float8_e4m3fn).astype(np.float32)
                enc = np.float32(2688.0) / amax if gs else np.float32(1.0)
                with np.errstate(divide="ignore"):
                    enc_b = np.where(sv == 0, np.float32(0), enc / sv).astype(np.float32)
                y = (x * np.repeat(enc_b, 16, axis=1)).astype(DTYPES[dt]).astype(np.float32)  # in the weight dtype
                sdiff = s != osc
                # the fallback's scale: block_amax / 6 rounded to the weight dtype, then * enc in fp32
                bamax = np.abs(x).reshape(s.shape[0], s.shape[1], 16).max(-1)
                s_dt = ((bamax / np.float32(6)).astype(DTYPES[dt]).astype(np.float32) * enc).astype(ml_dtypes.float8_e4m3fn)
                scale_rule_ok = same(s_dt.view(np.uint8), s)
                in_sdiff = np.repeat(sdiff, 16, axis=1)
                diff = (cm != co) & ~in_sdiff
                tie = np.isin(np.abs(y), np.array([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0], np.float32))
                neg_zero = ((cm & 7) == 0) & ((co & 7) == 0)
                unexplained = int((diff & ~tie & ~neg_zero).sum())
                tensor_scale_ok = (same(ours["global_scale"].reshape(()), amax) if gs else "global_scale" not in ours)
                rows.append({"producer": "mlx (CPU build)", "version": mx.__version__,
                             "path": "cpu, global_scale=amax" if gs else "cpu, no global scale", "dtype": dt,
                             "seed": seed, "scale_bytes_differing": int(sdiff.sum()),
                             "scales_follow_the_dtype_rule": scale_rule_ok,
                             "code_diffs_ties": int((diff & tie).sum()),
                             "code_diffs_negative_zero": int((diff & neg_zero & ~tie).sum()),
                             "code_diffs_unexplained": unexplained,
                             "ok": scale_rule_ok and unexplained == 0 and tensor_scale_ok})
    return rows


def ulps_f32(a, b):
    """|a - b| in fp32 units in the last place (ordered-integer distance), elementwise."""
    def key(x):
        i = np.asarray(x, np.float32).view(np.int32).astype(np.int64)
        return np.where(i < 0, -(i & 0x7FFFFFFF), i)
    return np.abs(key(a) - key(b))


def check_consumers(cli, seeds, formats=("compressed-tensors", "modelopt", "mlx")):
    """The other direction: the producers' own loaders read nvfp4's checkpoints. A small Llama-shaped
    bf16 model (test_producer_exact.make_model) is quantized by `nvfp4 quantize` in each format; each
    library parses what it needs (compressed-tensors: the quantization_config through its pydantic
    model, then its compressor's decompress; modelopt: NVFP4QTensor.dequantize; MLX: mx.load and
    mx.dequantize) and its dequantized weights are compared with `nvfp4 dequantize`. All three
    libraries fold the scales first, (s * tensor_scale) * e2m1, where nvfp4's oracle rounds once,
    fl(e2m1 * s * tensor_scale); so agreement is required to 1 ulp (fp32; bf16 for compressed-
    tensors, which returns bf16), and exact agreement where e2m1 is 0 or a power of two."""
    if "mlx" not in formats or len(formats) > 1:
        import torch
    rows = []
    for seed in seeds:
        with tempfile.TemporaryDirectory() as d:
            src = os.path.join(d, "in")
            os.mkdir(src)
            tpe.make_model(src, ml_dtypes.bfloat16, np.random.default_rng(seed))
            for fmt in formats:
                q, deq = os.path.join(d, fmt), os.path.join(d, fmt + "-deq")
                subprocess.run([cli, "quantize", src, q, "--format", fmt], check=True, capture_output=True)
                subprocess.run([cli, "dequantize", q, deq, "--dtype", "f32"], check=True, capture_output=True)
                ours, packed = tpe.st_read_dir(deq), tpe.st_read_dir(q)
                cfg = json.load(open(os.path.join(q, "config.json")))
                worst, n_exact_needed_bad, n = 0, 0, 0
                for mod in tpe.QUANTIZED:
                    prefix = next(k for k in packed if f".{mod}." in k).rsplit(".", 1)[0]
                    want = ours[prefix + ".weight"]
                    if fmt == "compressed-tensors":
                        from compressed_tensors.compressors.nvfp4.base import NVFP4PackedCompressor
                        from compressed_tensors.quantization import QuantizationConfig
                        qc = QuantizationConfig.model_validate(cfg["quantization_config"])
                        scheme = next(iter(qc.config_groups.values()))
                        sd = {"weight_packed": torch.from_numpy(packed[prefix + ".weight_packed"].copy()),
                              "weight_scale": torch.from_numpy(packed[prefix + ".weight_scale"].view(np.uint8).copy()).view(torch.float8_e4m3fn),
                              "weight_global_scale": torch.from_numpy(packed[prefix + ".weight_global_scale"].copy())}
                        got = NVFP4PackedCompressor.decompress(sd, scheme)["weight"]
                        assert got.dtype == torch.bfloat16
                        got = got.float().numpy()
                        want = want.astype(ml_dtypes.bfloat16).astype(np.float32)
                        u = ulps_f32(got, want) >> 16  # bf16 ulps (bf16 values are fp32 with 16 zero bits)
                        codes_p = packed[prefix + ".weight_packed"]
                    elif fmt == "modelopt":
                        from modelopt.torch.quantization.qtensor.nvfp4_tensor import NVFP4QTensor
                        p = packed[prefix + ".weight"]
                        qt = NVFP4QTensor(torch.Size(want.shape), torch.float32, torch.from_numpy(p.copy()))
                        got = qt.dequantize(dtype=torch.float32,
                                            scale=torch.from_numpy(packed[prefix + ".weight_scale"].view(np.uint8).copy()).view(torch.float8_e4m3fn),
                                            double_scale=torch.from_numpy(packed[prefix + ".weight_scale_2"].copy()),
                                            block_sizes={-1: 16}).numpy()
                        u = ulps_f32(got, want)
                        codes_p = p
                    else:
                        import mlx.core as mx
                        arrs = mx.load(os.path.join(q, "model.safetensors"))
                        got = np.array(mx.dequantize(arrs[prefix + ".weight"], arrs[prefix + ".scales"], mode="nvfp4",
                                                     global_scale=arrs.get(prefix + ".global_scale"), dtype=mx.float32))
                        u = ulps_f32(got, want)
                        codes_p = packed[prefix + ".weight"].view(np.uint8)
                    c = np.stack([codes_p & 7, (codes_p >> 4) & 7], -1).reshape(want.shape)
                    pow2 = np.isin(c, [0, 1, 2, 4, 6])  # e2m1 magnitudes 0, 0.5, 1, 2, 4
                    worst = max(worst, int(u.max()))
                    n_exact_needed_bad += int((u[pow2] != 0).sum())
                    n += want.size
                import importlib.metadata as md
                lib = {"compressed-tensors": "compressed-tensors", "modelopt": "nvidia-modelopt", "mlx": "mlx"}[fmt]
                rows.append({"producer": f"{lib} (reads nvfp4's file)", "version": md.version(lib), "path": "cpu",
                             "dtype": "bfloat16", "seed": seed, "weights": n, "max_ulp": worst,
                             "power_of_two_codes_not_exact": n_exact_needed_bad,
                             "ok": worst <= 1 and n_exact_needed_bad == 0})
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cli", default=os.environ.get("NVFP4_CLI", "nvfp4"))
    ap.add_argument("--ct", action="append", default=[], help="an unpacked compressed-tensors wheel")
    ap.add_argument("--seeds", default="20261201,7,11")
    ap.add_argument("--json")
    ap.add_argument("--mlx-only", action="store_true",
                    help="only MLX (CTest runs this: mlx[cpu] is small, torch is not); exit 77 without mlx")
    ap.add_argument("--modelopt", action="append", default=[], help="an unpacked nvidia-modelopt wheel")
    ap.add_argument("--one-ct", help=argparse.SUPPRESS)
    ap.add_argument("--one-modelopt", help=argparse.SUPPRESS)
    ap.add_argument("--triton", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    seeds = [int(s) for s in a.seeds.split(",")]
    if a.one_ct:
        print(json.dumps(check_ct_one(a.cli, a.one_ct, seeds, a.triton)))
        return 0
    if a.one_modelopt:
        print(json.dumps(check_modelopt(a.cli, seeds, a.one_modelopt)))
        return 0
    print(f"real-producer check: seeds={seeds} shape={SHAPE} cli={a.cli}")
    if a.mlx_only:
        try:
            import mlx.core  # noqa: F401
        except ImportError as e:
            print(f"SKIP: mlx not installed ({e}); pip install 'mlx[cpu]'")
            return 77
        rows = check_mlx(a.cli, seeds) + check_consumers(a.cli, seeds, formats=("mlx",))
        for r in rows:
            print(r)
        bad = [r for r in rows if not r["ok"]]
        print(f"{len(rows) - len(bad)} of {len(rows)} checks passed")
        return 1 if bad else 0
    def child(producer, version, path, extra):
        """One release per process (its package is imported from an unpacked wheel): its rows, or
        one failed row carrying the error."""
        p = subprocess.run([sys.executable, __file__, "--cli", a.cli, "--seeds", a.seeds, *extra],
                           capture_output=True, text=True)
        if p.returncode == 0:
            return json.loads(p.stdout.strip().splitlines()[-1])
        print(p.stderr[-2000:])
        return [{"producer": producer, "version": version, "path": path,
                 "error": p.stderr.strip().splitlines()[-1] if p.stderr.strip() else "failed", "ok": False}]

    rows = check_modelopt(a.cli, seeds)
    for d in a.modelopt:  # older releases
        rows += child("nvidia-modelopt", os.path.basename(d), "cpu", ["--one-modelopt", d])
    for d in a.ct:
        for triton in (False, True):
            rows += child("compressed-tensors", os.path.basename(d), "triton" if triton else "cpu",
                          ["--one-ct", d] + (["--triton"] if triton else []))
    try:
        rows += check_mlx(a.cli, seeds)
    except ImportError as e:
        print(f"mlx not installed, skipped ({e})")
    rows += check_consumers(a.cli, seeds)
    for r in rows:
        extra = {k: v for k, v in r.items() if k not in ("producer", "version", "path", "dtype", "seed", "ok")}
        print(f"{r['producer']:20s} {r['version']:10s} {r['path']:21s} {r.get('dtype', '-'):9s} "
              f"seed={r.get('seed', '-')!s:9s} {'OK' if r['ok'] else 'MISMATCH'} {extra if extra else ''}")
    if a.json:
        import datetime
        import platform
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=HERE, capture_output=True, text=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=HERE, capture_output=True, text=True).stdout.strip()
        meta = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                "commit": commit + ("+uncommitted" if dirty else ""), "machine": platform.platform(),
                "command": "scripts/check_producers.sh (" + " ".join(sys.argv) + ")"}
        with open(a.json, "w") as f:
            json.dump({**meta, "seeds": seeds, "shape": SHAPE, "rows": rows}, f, indent=1)
    bad = [r for r in rows if not r["ok"]]
    print(f"{len(rows) - len(bad)} of {len(rows)} checks passed")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
