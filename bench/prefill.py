"""Prompt tokens prefilled per continuation: the pipeline's scheduling vs one request per continuation.

Builds a toy benchmark (tiny reasoner, toy problems, the seven toy interventions at five timesteps), takes
its continuation requests in the pipeline's order, and measures with the real HF backend:

  naive     one request per continuation (n=1 each): every sample prefills its whole prompt;
  pipeline  one request per chain with n=N samples sharing one prefill (HF backend, measured);
  + cache   the pipeline order replayed through an ideal prefix cache (what vLLM's automatic prefix
            caching can reuse across chains of the same trace; simulated on the real token ids).

Target: pipeline ≤ 1/N of naive. Usage: python bench/prefill.py [--problems 8] [--n 8]
"""

from __future__ import annotations

import argparse
import tempfile
import time

from recovery.run_dir import open_run


class PrefixCache:
    """An unbounded token trie: how many tokens of a prompt were already seen as some prompt's prefix."""

    def __init__(self) -> None:
        self.root: dict = {}

    def insert(self, ids: list[int]) -> int:
        """Insert ``ids``; return how many of its tokens were NOT cached (must be prefilled)."""
        node, hit = self.root, 0
        for i, token in enumerate(ids):
            if token in node:
                node = node[token]
                hit = i + 1
            else:
                for rest in ids[i:]:
                    node = node.setdefault(rest, {})
                break
        return len(ids) - hit


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--problems", type=int, default=8)
    parser.add_argument("--n", type=int, default=8)
    args = parser.parse_args()

    from recovery.backends.hf import HFGenerator
    from recovery.demo import TOY_INTERVENTIONS
    from recovery.models import get_spec
    from recovery.pipeline import (
        DatasetConfig,
        InterventionsConfig,
        RunConfig,
        SamplingConfig,
        TracesConfig,
        run_pipeline,
    )
    from recovery.pipeline.continuation_work import continuation_order
    from recovery.plan import continuation_request, plan_for
    from recovery.toy import load_tiny_reasoner

    model, tokenizer = load_tiny_reasoner()
    spec = get_spec("tiny-reasoner")
    with tempfile.TemporaryDirectory() as tmp:
        config = RunConfig(
            run_dir=tmp,
            dataset=DatasetConfig(name="toy", limit=args.problems),
            traces=TracesConfig(sampling=SamplingConfig(n=1, temperature=0.0, top_p=1.0, max_new_tokens=320)),
            interventions=InterventionsConfig(names=list(TOY_INTERVENTIONS)),
            continuation=SamplingConfig(n=args.n, max_new_tokens=1),
        )
        factory = lambda m: HFGenerator(model, tokenizer, spec=spec, seed=0)  # noqa: E731
        run_pipeline(config, stages=["problems", "traces", "filter", "chains"], make_generator=factory, progress=False)
        run = open_run(tmp)
        problems = run.problems()
        rows = sorted(run.chain_rows(), key=continuation_order)
        requests = [continuation_request(plan_for(config), problems[r["problem_id"]], r) for r in rows]

    shared = HFGenerator(model, tokenizer, spec=spec, seed=0, share_prefill=True)
    naive = HFGenerator(model, tokenizer, spec=spec, seed=0, share_prefill=False)
    start = time.perf_counter()
    pipeline_prefilled = sum(r.prefilled_tokens for r in shared.generate(requests))
    pipeline_s = time.perf_counter() - start
    start = time.perf_counter()
    naive_prefilled = sum(r.prefilled_tokens for r in naive.generate(requests))
    naive_s = time.perf_counter() - start

    cache = PrefixCache()
    cached_prefilled = sum(cache.insert(shared.prompt_ids(r)) for r in requests)
    continuations = len(requests) * args.n
    print(f"{len(requests)} chains × N={args.n} = {continuations} continuations")
    print(
        f"naive (one request per continuation): {naive_prefilled / continuations:8.1f} prompt tokens prefilled per continuation ({naive_s:.1f} s)"
    )
    print(
        f"pipeline (N samples share a prefill): {pipeline_prefilled / continuations:8.1f} per continuation ({pipeline_s:.1f} s) "
        f"→ ratio {pipeline_prefilled / naive_prefilled:.4f} (target ≤ 1/N = {1 / args.n:.4f})"
    )
    print(
        f"pipeline order + prefix cache (sim.):  {cached_prefilled / continuations:8.1f} per continuation "
        f"→ ratio {cached_prefilled / naive_prefilled:.4f}"
    )


if __name__ == "__main__":
    main()
