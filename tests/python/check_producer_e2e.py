"""The producers' own end-to-end tools against `nvfp4 quantize` (not CTest tests: each producer
pins its own torch, ~5 GB with CUDA libraries; scripts/check_llmcompressor.sh and
scripts/check_producers.sh make the venvs and run this).

check_real_producers.py drives the producers' quantizer functions. This runs what a user runs:
a tiny Llama model with adversarial bf16 weights (test_producer_exact.adversarial: ties,
all-zero and -0.0 blocks, tiny and huge values in one block) is saved with transformers, then
  * --producer llmcompressor: `oneshot` with QuantizationModifier(scheme="NVFP4A16") -- the
    weight-only NVFP4 recipe, which needs no calibration data -- and save_pretrained(
    save_compressed=True); against `nvfp4 quantize --format compressed-tensors`;
  * --producer modelopt: mtq.quantize with W4A16_NVFP4_CFG (a forward pass calibrates nothing
    that weight-only export uses) and export_hf_checkpoint; against `nvfp4 quantize --format
    modelopt`;
  * --producer transformers: the consumer side only: transformers with compressed-tensors loads
    `nvfp4 quantize --format compressed-tensors` and its bf16 logits must equal those of the
    dense model `nvfp4 dequantize` makes of it;
  * --producer mlx-lm: the consumer side only (MLX's own quantizer runs on the CPU build in
    check_real_producers.py): mlx-lm loads `nvfp4 quantize --format mlx` and its logits must
    match the dense model `nvfp4 dequantize` makes of it.
The same saved model goes through nvfp4. Every tensor of the two checkpoints (names, dtypes,
shapes, bytes) must be identical -- including the q/k/v and gate/up tensor scales the producers
fuse -- and the quantization configs must name the same scheme. Prints the seed; exit 0 when
identical.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import test_producer_exact as tpe  # noqa: E402


def tiny_llama(folder, seed):
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM
    cfg = LlamaConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                      num_key_value_heads=2, vocab_size=128, max_position_embeddings=64, torch_dtype="bfloat16")
    model = LlamaForCausalLM(cfg).to(torch.bfloat16)
    rng = np.random.default_rng(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.ndim == 2:
                w = tpe.adversarial(rng, p.shape[0], p.shape[1])
                p.copy_(torch.from_numpy(w).to(torch.bfloat16))
    model.save_pretrained(folder, safe_serialization=True)
    # oneshot reads the config from the model's path, as when a user loads a model by name
    from transformers import AutoModelForCausalLM
    return AutoModelForCausalLM.from_pretrained(folder, dtype=torch.bfloat16)


def compare_tensors(theirs, ours):
    t, o = tpe.st_read_dir(theirs), tpe.st_read_dir(ours)
    bad = []
    for n in sorted(set(t) | set(o)):
        if n not in o:
            bad.append(f"{n}: only in the producer's checkpoint")
        elif n not in t:
            bad.append(f"{n}: only in nvfp4's checkpoint")
        elif t[n].dtype != o[n].dtype or t[n].shape != o[n].shape:
            bad.append(f"{n}: {t[n].dtype}{list(t[n].shape)} vs nvfp4 {o[n].dtype}{list(o[n].shape)}")
        elif t[n].tobytes() != o[n].tobytes():
            diff = int((t[n].view(np.uint8) != o[n].view(np.uint8)).sum())
            bad.append(f"{n}: {diff} of {t[n].nbytes} bytes differ")
    return t, bad


def run_llmcompressor(cli, seed, d):
    import llmcompressor
    from llmcompressor import oneshot
    from llmcompressor.modifiers.quantization import QuantizationModifier
    print(f"llm-compressor e2e: llmcompressor {llmcompressor.__version__}, seed={seed}, cli={cli}")
    src, theirs, ours = (os.path.join(d, x) for x in ("src", "llmcompressor", "nvfp4"))
    model = tiny_llama(src, seed)
    subprocess.run([cli, "quantize", src, ours, "--format", "compressed-tensors"], check=True)
    oneshot(model=model, recipe=QuantizationModifier(targets="Linear", scheme="NVFP4A16", ignore=["lm_head"]))
    model.save_pretrained(theirs, save_compressed=True)
    t, bad = compare_tensors(theirs, ours)
    quantized = [n for n in t if n.endswith(".weight_packed")]
    qt = json.load(open(os.path.join(theirs, "config.json")))["quantization_config"]
    qo = json.load(open(os.path.join(ours, "config.json")))["quantization_config"]
    for k in ("quant_method", "format"):
        if qt.get(k) != qo.get(k):
            bad.append(f"quantization_config.{k}: {qt.get(k)!r} vs nvfp4 {qo.get(k)!r}")
    wt = next(iter(qt["config_groups"].values()))["weights"]
    wo = next(iter(qo["config_groups"].values()))["weights"]
    for k in ("num_bits", "type", "strategy", "group_size", "symmetric", "dynamic"):
        if wt.get(k) != wo.get(k):
            bad.append(f"weights.{k}: {wt.get(k)!r} vs nvfp4 {wo.get(k)!r}")
    print(f"{len(t)} tensors ({len(quantized)} quantized linears) compared")
    return bad


def run_modelopt(cli, seed, d):
    import torch
    import modelopt
    import modelopt.torch.quantization as mtq
    from modelopt.torch.export import export_hf_checkpoint
    print(f"modelopt e2e: nvidia-modelopt {modelopt.__version__}, seed={seed}, cli={cli}")
    src, theirs, ours = (os.path.join(d, x) for x in ("src", "modelopt", "nvfp4"))
    model = tiny_llama(src, seed)
    subprocess.run([cli, "quantize", src, ours, "--format", "modelopt"], check=True)
    ids = torch.randint(0, model.config.vocab_size, (1, 16), generator=torch.Generator().manual_seed(seed))
    mtq.quantize(model, mtq.W4A16_NVFP4_CFG, forward_loop=lambda m: m(ids))
    export_hf_checkpoint(model, export_dir=theirs)
    t, bad = compare_tensors(theirs, ours)
    qt = json.load(open(os.path.join(theirs, "hf_quant_config.json")))["quantization"]
    qo = json.load(open(os.path.join(ours, "hf_quant_config.json")))["quantization"]
    for k in ("quant_algo", "group_size", "kv_cache_quant_algo"):
        if qt.get(k) != qo.get(k):
            bad.append(f"hf_quant_config quantization.{k}: {qt.get(k)!r} vs nvfp4 {qo.get(k)!r}")
    # modelopt also lists the embedding; nvfp4 lists only linear layers it left dense.
    if not set(qo.get("exclude_modules", [])) <= set(qt.get("exclude_modules", [])):
        bad.append(f"exclude_modules: {qt.get('exclude_modules')} vs nvfp4 {qo.get('exclude_modules')}")
    quantized = [n for n in t if n.endswith(".weight_scale_2")]
    print(f"{len(t)} tensors ({len(quantized)} quantized linears) compared")
    return bad


def run_mlx_lm(cli, seed, d):
    """mlx-lm (the MLX consumer) loads `nvfp4 quantize --format mlx` and runs it. Its logits are
    compared with mlx-lm's on the dense model `nvfp4 dequantize` makes of the same checkpoint, run
    in fp32: a misread layout or scale gives errors of order 1, while bf16 arithmetic on these
    adversarial weights gives a few percent (the dense bf16 model's error is printed beside it)."""
    import pathlib
    import mlx.core as mx
    import mlx_lm
    from mlx_lm.utils import load_model
    print(f"mlx-lm e2e: mlx-lm {mlx_lm.__version__}, mlx {mx.__version__}, seed={seed}, cli={cli}")
    src, q = os.path.join(d, "src"), os.path.join(d, "mlx")
    tiny_llama(src, seed)
    subprocess.run([cli, "quantize", src, q, "--format", "mlx"], check=True)
    for dt in ("bf16", "f32"):
        subprocess.run([cli, "dequantize", q, q + "-" + dt, "--dtype", dt], check=True)
    ids = mx.array(np.random.default_rng(seed).integers(0, 128, (1, 12)))
    logits = {}
    for k in ("", "-bf16", "-f32"):
        try:
            m, _ = load_model(pathlib.Path(q + k))
        except Exception as e:  # noqa: BLE001 -- the message is the finding
            return [f"mlx-lm could not load {'nvfp4' if not k else 'the dequantized'} checkpoint: "
                    f"{type(e).__name__}: {str(e)[:300]}"]
        if k == "-f32":
            m.set_dtype(mx.float32)
        logits[k] = np.array(m(ids).astype(mx.float32))
    ref = logits["-f32"]
    scale = max(float(np.abs(ref).max()), 1e-30)
    err_q = float(np.abs(logits[""] - ref).max()) / scale
    err_bf = float(np.abs(logits["-bf16"] - ref).max()) / scale
    print(f"logits {list(ref.shape)}, max error / max |logit| against fp32: nvfp4 checkpoint {err_q:.2e}, "
          f"dense bf16 {err_bf:.2e}")
    if not np.all(np.isfinite(logits[""])) or err_q > 0.1:
        return [f"logits of nvfp4's checkpoint are off: {err_q:.2e}"]
    return []


def run_transformers(cli, seed, d):
    """Hugging Face transformers (with compressed-tensors installed) loads `nvfp4 quantize --format
    compressed-tensors` and runs it in bf16: it decompresses each linear to bf16 with
    compressed-tensors' own code, which rounds (s / G) * e2m1 exactly as nvfp4's oracle rounds
    e2m1 * s * (1/G) to bf16 here, so its logits must equal, bit for bit, those of the dense bf16
    model that `nvfp4 dequantize` makes of the same checkpoint."""
    import torch
    import transformers
    from transformers import AutoModelForCausalLM
    print(f"transformers e2e: transformers {transformers.__version__}, seed={seed}, cli={cli}")
    src, q, deq = (os.path.join(d, x) for x in ("src", "ct", "ct-bf16"))
    tiny_llama(src, seed)
    subprocess.run([cli, "quantize", src, q, "--format", "compressed-tensors"], check=True)
    subprocess.run([cli, "dequantize", q, deq, "--dtype", "bf16"], check=True)
    ids = torch.tensor(np.random.default_rng(seed).integers(0, 128, (1, 12)))
    try:
        mq = AutoModelForCausalLM.from_pretrained(q, dtype=torch.bfloat16)
        md = AutoModelForCausalLM.from_pretrained(deq, dtype=torch.bfloat16)
    except Exception as e:  # noqa: BLE001 -- the message is the finding
        return [f"transformers could not load: {type(e).__name__}: {str(e)[:300]}"]
    with torch.no_grad():
        yq, yd = mq(ids).logits.float(), md(ids).logits.float()
    n = int((yq != yd).sum())
    print(f"logits {list(yq.shape)}: {n} differ from the dense bf16 model's")
    return [f"{n} logits differ"] if n else []


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cli", default=os.environ.get("NVFP4_CLI", "nvfp4"))
    ap.add_argument("--producer", choices=("llmcompressor", "modelopt", "mlx-lm", "transformers"), required=True)
    ap.add_argument("--seed", type=int, default=20261201)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        run = {"llmcompressor": run_llmcompressor, "modelopt": run_modelopt, "mlx-lm": run_mlx_lm,
               "transformers": run_transformers}[a.producer]
        bad = run(a.cli, a.seed, d)
    for b in bad:
        print("MISMATCH", b)
    print(("identical" if a.producer in ("llmcompressor", "modelopt") else "passed") if not bad
          else f"{len(bad)} differences")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
