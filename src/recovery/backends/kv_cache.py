"""A KV cache for `HFGenerator`'s decode loop that writes each new token in place.

transformers' ``DynamicCache`` appends a token to each layer's keys and values with ``torch.cat``, which copies
the whole cache at every step: decoding L tokens copies O(L²) values, and on a CPU with a small model those
copies take more of a decode step than the model does. `reserved_cache` makes the same cache with every plain
``DynamicLayer`` replaced by a `ReservedLayer`, whose keys and values live in a buffer allocated once for the
longest sequence the batch can reach (prompt + new tokens): a step writes one position and the attention reads
a view of the filled part. Dropping the rows that finished copies the filled part of the rows kept back into
the same buffer. The values the model sees are the same; only where they are stored differs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from transformers.cache_utils import DynamicLayer


class ReservedLayer(DynamicLayer):
    """A ``DynamicLayer`` whose keys and values are views of buffers of ``capacity`` positions, filled in place;
    it grows them (doubling) only if a sequence outgrows the reservation."""

    def __init__(self, capacity: int, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.capacity = capacity
        self._keys: torch.Tensor | None = None
        self._values: torch.Tensor | None = None

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args: Any, **kwargs: Any):
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        start = self.get_seq_length()
        end = start + key_states.shape[-2]
        if self._keys is None or end > self._keys.shape[-2]:
            self._reserve(key_states, value_states, max(end, self.capacity, 2 * start))
        self._keys[..., start:end, :] = key_states
        self._values[..., start:end, :] = value_states
        self.keys, self.values = self._keys[..., :end, :], self._values[..., :end, :]
        return self.keys, self.values

    def _reserve(self, key_states: torch.Tensor, value_states: torch.Tensor, capacity: int) -> None:
        """Buffers of ``capacity`` positions holding what is cached so far."""
        length = self.get_seq_length()
        keys = key_states.new_empty((*key_states.shape[:-2], capacity, key_states.shape[-1]))
        values = value_states.new_empty((*value_states.shape[:-2], capacity, value_states.shape[-1]))
        if length:
            keys[..., :length, :] = self.keys
            values[..., :length, :] = self.values
        self._keys, self._values = keys, values

    def batch_select_indices(self, indices: torch.Tensor) -> None:
        self._keep_rows(lambda filled: filled[indices])

    def batch_repeat_interleave(self, repeats: int) -> None:
        self._keep_rows(lambda filled: filled.repeat_interleave(repeats, dim=0))

    def _keep_rows(self, rows_of: Callable[[torch.Tensor], torch.Tensor]) -> None:
        """The buffers hold ``rows_of`` the cached positions: only what is cached is copied, back into the
        buffers' first rows when they are fewer (rows dropped as they finish), else into larger buffers of the
        same capacity (rows replicated)."""
        length = self.get_seq_length()
        if length == 0:
            return
        keys, values = rows_of(self.keys), rows_of(self.values)
        rows = keys.shape[0]
        if rows > self._keys.shape[0]:
            self._keys = keys.new_empty((rows, *self._keys.shape[1:]))
            self._values = values.new_empty((rows, *self._values.shape[1:]))
        else:
            self._keys, self._values = self._keys[:rows], self._values[:rows]
        self._keys[..., :length, :] = keys
        self._values[..., :length, :] = values
        self.keys, self.values = self._keys[..., :length, :], self._values[..., :length, :]

    def crop(self, tokens_to_remove: int) -> None:
        super().crop(tokens_to_remove)  # the views shrink; the buffers keep their room

    def reset(self) -> None:
        self._keys = self._values = None
        super().reset()


def reserved_cache(config: Any, capacity: int):
    """A ``DynamicCache`` for ``config`` whose plain dynamic layers reserve ``capacity`` positions
    (`ReservedLayer`); other layer kinds (sliding windows, …) are kept as transformers builds them."""
    from transformers import DynamicCache

    cache = DynamicCache(config=config)
    cache.layers = [ReservedLayer(capacity) if type(layer) is DynamicLayer else layer for layer in cache.layers]
    return cache


__all__ = ["ReservedLayer", "reserved_cache"]
