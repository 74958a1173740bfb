"""A generator that records the requests it is asked for: the way the tests see what a stage, the mini-benchmark
or the training data sent to a real backend."""

from __future__ import annotations


class Recording:
    """The real generator ``inner``, keeping every request it is asked to generate in ``sent``."""

    def __init__(self, inner, sent: list) -> None:
        self.inner, self.sent = inner, sent

    def generate(self, requests):
        requests = list(requests)
        self.sent.extend(requests)
        return self.inner.generate(requests)

    def __getattr__(self, name):
        return getattr(self.inner, name)
