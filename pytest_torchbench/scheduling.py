"""How xdist hands tests to counted workers: all of them up front, in order, in equal shares.

Why not xdist's ``load`` scheduling as it is: it sends each worker a few tests, then more as tests
finish. Each such message wakes execnet's receiver thread in the worker, which then waits for the
GIL and unpacks the message, in Python, whenever the benchmark thread lets the GIL go (every torch
op does). When that falls inside a counted region, Callgrind counts the receiver thread's work too:
the same command, run twice, counted ``RandomAugment(16)`` on a 3x32x32 image 0.70% apart, the
difference in ``take_gil``/``drop_gil`` and Python's own functions (a real library's suite, 16
benchmarks, one worker). Sent up front, the tests need no message during the run: the only one left
is the end-of-run shutdown, sent with them.

It also makes ``-n N`` runs repeat: each worker gets the same tests in the same order every time
(contiguous shares of the collection, as ``load`` begins), where ``load`` decided by timing which
worker ran what, and a heavy benchmark's count depends a little on the tests its worker ran before
it. The cost: no balancing while running. A worker that crashes is replaced and its remaining
tests are then handed out by ``load``'s own rules.
"""
from __future__ import annotations

from xdist.scheduler import LoadScheduling

__all__ = ["UpfrontScheduling"]


class UpfrontScheduling(LoadScheduling):
    """``load`` scheduling whose first distribution sends every test (see the module docstring)."""

    def schedule(self) -> None:
        if getattr(self, "collection", None) is not None or not self._can_send_up_front():
            return super().schedule()  # a replacement worker, or an xdist without these internals
        assert self.collection_is_completed
        if not self._check_nodes_have_same_collection():
            self.log("**Different tests collected, aborting run**")
            return
        collection = next(iter(self.node2collection.values()))
        self.collection = collection
        self.pending[:] = range(len(collection))
        if not collection:
            return
        if getattr(self, "maxschedchunk", None) is None:
            self.maxschedchunk = len(collection)
        nodes = list(self.nodes)
        share, extra = divmod(len(self.pending), len(nodes))
        for index, node in enumerate(nodes):
            self._send_tests(node, share + (1 if index < extra else 0))
        for node in nodes:
            node.shutdown()

    def _can_send_up_front(self) -> bool:
        needed: tuple[str, ...] = ("_check_nodes_have_same_collection", "_send_tests", "maxschedchunk",
                                   "node2collection", "pending")
        return all(hasattr(self, name) for name in needed)

