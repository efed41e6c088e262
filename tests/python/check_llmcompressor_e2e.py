"""llm-compressor end to end against `nvfp4 quantize --format compressed-tensors` (not a CTest
test: llm-compressor pins its own torch and transformers; scripts/check_llmcompressor.sh makes
a venv for it and runs this).

check_real_producers.py drives compressed-tensors' functions the way llm-compressor does. This
runs llm-compressor itself: a tiny Llama model with adversarial bf16 weights (test_producer_exact.
adversarial: ties, all-zero and -0.0 blocks, tiny and huge values in one block) is saved with
transformers, quantized by `oneshot` with QuantizationModifier(scheme="NVFP4A16") -- the
weight-only NVFP4 recipe, which needs no calibration data -- and saved compressed. The same
saved model goes through `nvfp4 quantize --format compressed-tensors`. Every tensor of the two
checkpoints (names, dtypes, shapes, bytes) must be identical, including the q/k/v and gate/up
global scales that llm-compressor fuses, and the quantization_config must agree on the scheme.
Prints the seed; exit 0 when identical.
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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cli", default=os.environ.get("NVFP4_CLI", "nvfp4"))
    ap.add_argument("--seed", type=int, default=20261201)
    a = ap.parse_args()
    import llmcompressor
    from llmcompressor import oneshot
    from llmcompressor.modifiers.quantization import QuantizationModifier
    print(f"llm-compressor e2e: llmcompressor {llmcompressor.__version__}, seed={a.seed}, cli={a.cli}")
    with tempfile.TemporaryDirectory() as d:
        src, theirs, ours = (os.path.join(d, x) for x in ("src", "llmcompressor", "nvfp4"))
        model = tiny_llama(src, a.seed)
        subprocess.run([a.cli, "quantize", src, ours, "--format", "compressed-tensors"], check=True)
        oneshot(model=model, recipe=QuantizationModifier(targets="Linear", scheme="NVFP4A16", ignore=["lm_head"]))
        model.save_pretrained(theirs, save_compressed=True)
        t, o = tpe.st_read_dir(theirs), tpe.st_read_dir(ours)
        bad = []
        for n in sorted(set(t) | set(o)):
            if n not in o:
                bad.append(f"{n}: only in llm-compressor's checkpoint")
            elif n not in t:
                bad.append(f"{n}: only in nvfp4's checkpoint")
            elif t[n].dtype != o[n].dtype or t[n].shape != o[n].shape:
                bad.append(f"{n}: {t[n].dtype}{list(t[n].shape)} vs nvfp4 {o[n].dtype}{list(o[n].shape)}")
            elif t[n].tobytes() != o[n].tobytes():
                diff = int((t[n].view(np.uint8) != o[n].view(np.uint8)).sum())
                bad.append(f"{n}: {diff} of {t[n].nbytes} bytes differ")
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
        for b in bad:
            print("MISMATCH", b)
        print("identical" if not bad else f"{len(bad)} differences")
        return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
