"""`trl.SFTTrainer` whose length-balanced batches follow the recipe's seed.

transformers' ``train_sampling_strategy: batch_rebalance`` draws each optimizer step's rows at random (the
step's composition is that of a random batch) and only splits them into gradient-accumulation micro-batches of
similar lengths, which cuts padding without grouping short rows with short rows across steps. Its
`BatchRebalanceSampler` is built without the training's seed, though (it shuffles with its own default), so two
trainings that differ only in ``seed`` would see one data order. Here the sampler takes ``data_seed``, else
``seed``, as transformers' other samplers do through ``set_seed``.
"""

from __future__ import annotations

from typing import Any

from transformers.trainer_pt_utils import BatchRebalanceSampler
from trl import SFTTrainer

__all__ = ["SeededSFTTrainer", "data_order_seed"]


def data_order_seed(args: Any) -> int:
    """The seed of the training's data order: ``data_seed`` where the recipe gives one, else ``seed``."""
    return args.data_seed if args.data_seed is not None else args.seed


class SeededSFTTrainer(SFTTrainer):
    """`trl.SFTTrainer` with the length-balanced sampler seeded by the recipe (`data_order_seed`)."""

    def _get_train_sampler(self, train_dataset: Any = None) -> Any:
        sampler = super()._get_train_sampler(train_dataset)
        if isinstance(sampler, BatchRebalanceSampler):
            sampler.seed = data_order_seed(self.args)
        return sampler
