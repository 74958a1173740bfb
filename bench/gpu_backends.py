"""Continuation throughput of the HF backend against transformers' own generation, on one GPU.

Builds a model of DeepSeek-R1-Distill-Qwen-1.5B's shape (Qwen2: 28 layers, hidden 1536, 12 query / 2 KV heads,
152k vocabulary) from its config — random weights, nothing to download — in bf16, with the real R1 tokenizer
and chat template. Every backend continues the same token ids: a math question in the R1 chat template and a
reasoning prefix of ``--prefix-tokens`` tokens cut from synthetic R1-like traces (bench/synthetic.py), then
samples ``--new-tokens`` tokens at the continuation decoding (T=0.6, top_p=0.95). Two workloads:

  shared    one prefix, N samples: the protocol's N continuations of one intervened prefix;
  distinct  N different prefixes, one sample each.

Backends, each timed after an untimed warm-up on the same workload:

  generate  transformers' ``model.generate`` (padded batch, ``num_return_sequences`` for the shared case):
            the baseline every ratio is against, measured in this process;
  hf        recovery's `HFGenerator` (one shared prefill per request, its own decode loop and sampler);
  cb        continuous batching, ``model.generate_batch``, where the installed transformers has it
            (transformers 5; forked children share the prefix's cache pages), with a persistent manager warmed
            on the full workload (its paged cache and CUDA graphs are set up once, as across a pipeline's
            batches); reported as unavailable otherwise, or when it fails.

A random model rarely samples EOS, but it may: throughput counts the tokens each backend actually produced.
Prints tokens/s per backend and workload and the ratio to ``generate`` (> 1: faster than the baseline).

Usage:
  python bench/gpu_backends.py            # GPU: bf16, 1.5B shape, N=8, 2048-token prefixes, 512 new tokens
  python bench/gpu_backends.py --smoke    # CPU check of the script: 2 layers, 64-token prefixes, 16 new tokens
  --tokenizer DIR   the R1 tokenizer (default: shared/data/tokenizers/DeepSeek-R1-Distill-Qwen beside the
                    checkout, or inside it: copy that folder along to a machine that has only the checkout)

Run from the checkout with the package importable (installed, or ``PYTHONPATH=src``).
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from synthetic import synthetic_items  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
# The R1 tokenizer in shared/data beside the checkout, or in a shared/ folder inside it (a copy made for a machine
# that has only the checkout).
TOKENIZER_DIRS = [base / "shared" / "data" / "tokenizers" / "DeepSeek-R1-Distill-Qwen" for base in (ROOT / "..", ROOT)]
# DeepSeek-R1-Distill-Qwen-1.5B's config.json (Qwen2ForCausalLM), less the fields a random model ignores.
QWEN2_1_5B = dict(
    vocab_size=151936,
    hidden_size=1536,
    intermediate_size=8960,
    num_hidden_layers=28,
    num_attention_heads=12,
    num_key_value_heads=2,
    max_position_embeddings=131072,
    rope_theta=10000.0,
    rms_norm_eps=1e-6,
    tie_word_embeddings=False,
    bos_token_id=151646,
    eos_token_id=151643,
)
# --smoke: the same architecture and vocabulary, small enough for a CPU in seconds.
SMOKE_SHAPE = dict(
    hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2
)
TEMPERATURE, TOP_P = 0.6, 0.95


@dataclass(frozen=True)
class Timing:
    """One backend on one workload: seconds and tokens produced (None with ``note`` when it could not run)."""

    seconds: float | None
    tokens: int = 0
    note: str = ""

    @property
    def tokens_per_s(self) -> float | None:
        return self.tokens / self.seconds if self.seconds else None


def build_model(smoke: bool, device: str, dtype):
    """A randomly initialised Qwen2 causal LM of the 1.5B distill's shape (or the smoke shape)."""
    import torch
    from transformers import AutoModelForCausalLM, Qwen2Config

    shape = dict(QWEN2_1_5B)
    if smoke:
        shape.update(SMOKE_SHAPE)
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(Qwen2Config(**shape), dtype=dtype, attn_implementation="sdpa")
    model.generation_config.eos_token_id = shape["eos_token_id"]
    model.generation_config.pad_token_id = shape["eos_token_id"]
    return model.to(device).eval()


def workloads(tokenizer, n: int, prefix_tokens: int):
    """``{"shared": [request], "distinct": [n requests]}``: R1-templated questions with reasoning prefixes of
    ``prefix_tokens`` tokens (cut at token level from concatenated synthetic traces, then decoded)."""
    from recovery.generation import GenerationRequest, Message, SamplingParams

    def prefix(index: int) -> tuple[str, str]:
        text, question = "", ""
        for problem, response in synthetic_items(64, seed=index):
            question = question or problem.question
            text += response.split("</think>")[0]
            ids = tokenizer.encode(text, add_special_tokens=False)
            if len(ids) >= prefix_tokens:
                return question, tokenizer.decode(ids[:prefix_tokens])
        raise ValueError(f"synthetic traces too short for {prefix_tokens} tokens")

    def request(index: int, samples: int) -> GenerationRequest:
        question, reasoning = prefix(index)
        sampling = SamplingParams(n=samples, temperature=TEMPERATURE, top_p=TOP_P, max_new_tokens=1, seed=index)
        return GenerationRequest(
            f"r{index}", sampling=sampling, messages=(Message("user", question),), prefill=reasoning
        )

    return {"shared": [request(0, n)], "distinct": [request(i, 1) for i in range(n)]}


def with_new_tokens(requests, new_tokens: int):
    """The requests with ``max_new_tokens`` set (the workloads are built once, their length chosen per run)."""
    from dataclasses import replace

    return [replace(r, sampling=replace(r.sampling, max_new_tokens=new_tokens)) for r in requests]


def synchronize(device: str) -> None:
    import torch

    if device == "cuda":
        torch.cuda.synchronize()


def run_hf(generator, requests, new_tokens: int, device: str) -> int:
    results = list(generator.generate(with_new_tokens(requests, new_tokens)))
    synchronize(device)
    errors = [r.error for r in results if r.error]
    if errors:
        raise RuntimeError(errors[0])
    return sum(s.n_tokens for r in results for s in r.samples)


def run_generate(model, prompts: list[list[int]], samples: int, new_tokens: int, pad_id: int, device: str) -> int:
    """transformers' ``generate`` on the left-padded prompts, ``samples`` sequences each; tokens produced."""
    import torch

    width = max(len(p) for p in prompts)
    ids = torch.full((len(prompts), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(prompts), width), dtype=torch.long)
    for row, prompt in enumerate(prompts):
        ids[row, width - len(prompt) :] = torch.tensor(prompt)
        mask[row, width - len(prompt) :] = 1
    with torch.inference_mode():
        out = model.generate(
            input_ids=ids.to(device),
            attention_mask=mask.to(device),
            do_sample=True,
            temperature=TEMPERATURE,
            top_p=TOP_P,
            top_k=None,
            max_new_tokens=new_tokens,
            num_return_sequences=samples,
            pad_token_id=pad_id,
        )
    synchronize(device)
    new = out[:, width:]
    # Rows that stopped early are padded after their EOS: count up to and including the first EOS.
    produced = 0
    for row in new.tolist():
        produced += row.index(pad_id) + 1 if pad_id in row else len(row)
    return produced


def run_continuous(model, prompts: list[list[int]], samples: int, new_tokens: int, device: str) -> int:
    """``model.generate_batch`` (continuous batching) on the prompts, ``samples`` sequences each."""
    from transformers import GenerationConfig

    config = GenerationConfig(
        do_sample=True,
        temperature=TEMPERATURE,
        top_p=TOP_P,
        top_k=None,
        max_new_tokens=new_tokens,
        num_return_sequences=samples,
        eos_token_id=model.generation_config.eos_token_id,
        pad_token_id=model.generation_config.pad_token_id,
    )
    # A persistent manager: the timed call reuses the paged cache and CUDA graphs the warm-up call set up for
    # this same workload, as a pipeline would across its batches (dropped before the next workload). Its warning
    # that a kept manager is sized for these requests is what is wanted here: only errors are shown.
    logging.getLogger("ContinuousBatchingLogger").setLevel(logging.ERROR)
    outputs = model.generate_batch(
        inputs=prompts, generation_config=config, max_new_tokens=new_tokens, persistent_manager=True
    )
    synchronize(device)
    errors = [o.error for o in outputs.values() if o.error]
    if errors or len(outputs) != len(prompts) * samples:
        raise RuntimeError(errors[0] if errors else f"{len(outputs)} of {len(prompts) * samples} results")
    return sum(len(o.generated_tokens) for o in outputs.values())


def timed(fn, *, warmup) -> Timing:
    """``fn()`` once untimed (``warmup()``: compile, allocator, caches), then once timed; a failure is a note."""
    try:
        warmup()
        start = time.perf_counter()
        tokens = fn()
        return Timing(time.perf_counter() - start, tokens)
    except Exception as exc:  # noqa: BLE001 — a backend that cannot run here is reported, not fatal
        return Timing(None, note=f"{type(exc).__name__}: {str(exc).splitlines()[0][:100] if str(exc) else ''}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--smoke", action="store_true", help="tiny sizes on CPU, to check the script runs")
    parser.add_argument("--tokenizer", default=None, help="the R1 tokenizer folder (default: shared/data's)")
    parser.add_argument("--n", type=int, default=8)
    parser.add_argument("--prefix-tokens", type=int, default=None, help="default 2048 (smoke: 64)")
    parser.add_argument("--new-tokens", type=int, default=None, help="default 512 (smoke: 16)")
    parser.add_argument("--max-batch-rows", type=int, default=64, help="HFGenerator's max_batch_rows")
    args = parser.parse_args()

    import torch
    import transformers
    from transformers import AutoTokenizer

    from recovery.backends.hf import HFGenerator
    from recovery.models import get_spec

    prefix_tokens = args.prefix_tokens or (64 if args.smoke else 2048)
    new_tokens = args.new_tokens or (16 if args.smoke else 512)
    if args.smoke:
        device, dtype = "cpu", torch.float32
    elif torch.cuda.is_available():
        device, dtype = "cuda", torch.bfloat16
    else:
        raise SystemExit("no GPU: run with --smoke for the CPU check")
    found = [Path(args.tokenizer)] if args.tokenizer else [d for d in TOKENIZER_DIRS if d.is_dir()]
    if not found or not found[0].is_dir():
        raise SystemExit(f"tokenizer folder not found: {args.tokenizer or TOKENIZER_DIRS} (pass --tokenizer)")

    tokenizer = AutoTokenizer.from_pretrained(str(found[0]), padding_side="left")
    model = build_model(args.smoke, device, dtype)
    params = sum(p.numel() for p in model.parameters()) / 1e6
    where = torch.cuda.get_device_name() if device == "cuda" else "CPU"
    print(
        f"transformers {transformers.__version__}, torch {torch.__version__}, {where}, {str(dtype)[6:]}; "
        f"Qwen2 {model.config.num_hidden_layers} layers, {params:.0f}M params (random weights)"
    )
    print(
        f"N={args.n}, {prefix_tokens}-token reasoning prefixes, {new_tokens} new tokens, T={TEMPERATURE}, top_p={TOP_P}"
    )

    generator = HFGenerator(
        model, tokenizer, spec=get_spec("DeepSeek-R1-Distill-Qwen-1.5B"), seed=0, max_batch_rows=args.max_batch_rows
    )
    pad_id = model.generation_config.pad_token_id
    has_cb = hasattr(model, "generate_batch")
    warm = min(new_tokens, 8)
    print(
        f"\n{'workload':<9} {'prompt':>7} {'backend':<9} {'seconds':>8} {'tokens':>7} {'tok/s':>9} {'vs generate':>12}"
    )
    for name, requests in workloads(tokenizer, args.n, prefix_tokens).items():
        prompts = [generator.prompt_ids(r) for r in requests]  # the same ids for every backend
        samples = requests[0].sampling.n
        runs = {
            "generate": timed(
                lambda p=prompts, s=samples: run_generate(model, p, s, new_tokens, pad_id, device),
                warmup=lambda p=prompts, s=samples: run_generate(model, p, s, warm, pad_id, device),
            ),
            "hf": timed(
                lambda r=requests: run_hf(generator, r, new_tokens, device),
                warmup=lambda r=requests: run_hf(generator, r, warm, device),
            ),
        }
        if has_cb:
            runs["cb"] = timed(  # warmed on the full workload: the manager is sized and captured for it
                lambda p=prompts, s=samples: run_continuous(model, p, s, new_tokens, device),
                warmup=lambda p=prompts, s=samples: run_continuous(model, p, s, new_tokens, device),
            )
            getattr(model, "destroy_cached_continuous_batching_manager", lambda: None)()
        else:
            runs["cb"] = Timing(None, note=f"no model.generate_batch in transformers {transformers.__version__}")
        base = runs["generate"].tokens_per_s
        for backend, timing in runs.items():
            rate = timing.tokens_per_s
            if rate is None:
                print(
                    f"{name:<9} {max(map(len, prompts)):>7} {backend:<9} {'—':>8} {'—':>7} {'—':>9} {'':>12}  {timing.note}"
                )
                continue
            ratio = f"{rate / base:.2f}x" if base else "—"
            print(
                f"{name:<9} {max(map(len, prompts)):>7} {backend:<9} {timing.seconds:>8.2f} {timing.tokens:>7} "
                f"{rate:>9.1f} {ratio:>12}"
            )
    if device == "cuda":
        print(f"\npeak GPU memory {torch.cuda.max_memory_allocated() / 2**30:.1f} GiB")


if __name__ == "__main__":
    main()
